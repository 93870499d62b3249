"""SageMaker HyperPod in the emulated world: clusters and nodes kept in moto's own SageMaker
backend (so moto's DescribeCluster / DescribeClusterNode / ListClusterNodes see them), plus the
node actions moto lacks, BatchRebootClusterNodes and BatchReplaceClusterNodes, and what moto's
answers leave out: DescribeCluster's NodeRecovery, NodeProvisioningMode, Orchestrator and the instance
groups' SlurmConfig; the nodes' NodeLogicalId; ResourceNotFound for an instance no longer in the cluster."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from moto.sagemaker.models import Cluster, ClusterNode, sagemaker_backends

from sim.faults import error_response, raw_response

INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8}([0-9a-f]{9})?$")
NODE_ID_PATTERN = re.compile(r"i-[a-f0-9]{8}(?:[a-f0-9]{9})?")  # ClusterNodeId in the service model
LOGICAL_ID_PATTERN = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9\-]*[a-zA-Z0-9]")  # ClusterNodeLogicalId, 1..128
NODE_RECOVERY = ("Automatic", "None")  # ClusterNodeRecovery
# ClusterNodeProvisioningMode has one value, Continuous; a cluster in the default mode has no such member.
PROVISIONING = ("Continuous", "OnDemand")
# The emulated repair: how long a node stays in its repair status before it is Running again.
REPAIR = {"reboot": ("SystemUpdating", timedelta(minutes=10)), "replace": ("Pending", timedelta(minutes=30))}
# The emulated time from an accepted repair to its node going down (its jobs then end, or wait for auto-resume):
# long enough for the agent to drain the node and list its jobs first, as on a cluster, where terminating or
# rebooting an instance takes that long (not documented by AWS: an emulation choice).
GOING_DOWN = timedelta(minutes=1)
IN_REPAIR = frozenset({"ShuttingDown", "Pending", "SystemUpdating"})
# HyperPod's own repair on a cluster with NodeRecovery Automatic: "SageMaker HyperPod will automatically reboot or
# replace faulty nodes when issues are detected" (API reference, CreateCluster NodeRecovery). Which one follows the
# fault: a node that "requires a reboot ... will be automatically rebooted", one that "requires a replacement ... will
# be automatically replaced" ("Resilience-related Kubernetes labels by SageMaker HyperPod", UnschedulablePendingReboot
# / UnschedulablePendingReplacement, docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-
# labels.html); the health event's HealthStatusReason names the fault type HMA found (<Device>Error<Reboot|Terminate|
# Replace>, the samples in events/). Assumptions (no AWS source says): the repair starts a minute after the health
# event, and is then the same as the Batch* call's (SystemUpdating 10 min; a new instance under the same
# NodeLogicalId, Pending 30 min); a reason naming no fault type gets no repair.
AUTO_REPAIR_START = timedelta(minutes=1)
TRAINING_PLAN_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}")  # TrainingPlanName in the service model
HMA_FAULT_TYPE = re.compile(r"\b[A-Z][A-Za-z]*?Error(Reboot|Terminate|Replace)\b")
LIFECYCLE = {"SourceS3Uri": "s3://sagemaker-medic-sim-lifecycle/", "OnCreate": "on_create.sh"}
WORKER_TYPE, CONTROLLER_TYPE = "ml.p5.48xlarge", "ml.m5.2xlarge"
DEFAULT_WORKERS = 16


def instance_id(*parts: str) -> str:
    """A stable, syntactically valid EC2 instance id for an emulated node."""
    return "i-0" + hashlib.sha256("/".join(parts).encode()).hexdigest()[:16]


@dataclass
class Repair:
    cluster: str
    node_id: str
    until: datetime


@dataclass
class ClusterSettings:
    """What DescribeCluster says beyond moto: the cluster's truth a scenario can set."""

    orchestrator: str = "slurm"  # slurm | eks
    node_recovery: str = "None"  # Automatic | None
    provisioning: str = "OnDemand"  # Continuous | OnDemand (no NodeProvisioningMode member)
    logical_ids: dict[str, str] = field(default_factory=dict)  # instance id -> NodeLogicalId
    plans: dict[str, str] = field(default_factory=dict)  # instance group -> TrainingPlanArn


def logical_id(*parts: str) -> str:
    """A stable NodeLogicalId for an emulated node (its shape is the model's pattern; AWS documents no format)."""
    return "node-" + hashlib.sha256("/".join(parts).encode()).hexdigest()[:20]


def slurm_node_type(group: str) -> str:
    """ClusterSlurmNodeType (Controller | Login | Compute) of an emulated Slurm group, from its name."""
    return "Controller" if "controller" in group else "Login" if "login" in group else "Compute"


class HyperPodWorld:
    def __init__(self, account: str, region: str, execution_role: str) -> None:
        self.account = account
        self.region = region
        self.execution_role = execution_role
        self.cluster_ids: dict[str, str] = {}  # configured cluster id -> name (real ARNs carry the id)
        self.repairs: dict[tuple[str, str], Repair] = {}
        self.actions: list[dict] = []  # every Batch* call that reached the service, with its answer
        self.settings: dict[str, ClusterSettings] = {}  # by cluster name
        self.terminated: set[tuple[str, str]] = set()  # (cluster, instance id) replaced away: never re-created
        self._include_logical_ids = False  # the ListClusterNodes call being answered asked for them
        # Told of every accepted repair's node going down (cluster, instance id, its id after the call, verb, when)
        # and of every node back Running (cluster, instance id): the fake Slurm's jobs on the node follow
        # (sim/slurm.py).
        self.on_repair: list[Any] = []
        self.on_back: list[Any] = []
        self._going_down: list[tuple[datetime, tuple[str, str, str, str]]] = []  # repairs whose node is not down yet
        # HyperPod's own repairs due (when, cluster, node, verb), and those started
        self._recoveries: list[tuple[datetime, str, str, str]] = []
        self.recoveries: list[dict] = []  # HyperPod's own repairs (automatic node recovery), as they started
        self.training_plans: dict[str, int] = {}  # training plan name -> AvailableInstanceCount

    @contextlib.contextmanager
    def patched(self) -> Iterator[None]:
        """moto's DescribeCluster / DescribeClusterNode / ListClusterNodes answers, with the members moto lacks."""
        world = self
        cluster_describe, node_describe, node_summary = Cluster.describe, ClusterNode.describe, ClusterNode.summary

        def describe_cluster(cluster: Any) -> dict:
            answer = cluster_describe(cluster)
            settings = world.settings.get(cluster.cluster_name)
            if settings is None:
                return answer
            answer["NodeRecovery"] = settings.node_recovery
            if settings.provisioning == "Continuous":
                answer["NodeProvisioningMode"] = "Continuous"
            if settings.plans:  # ClusterInstanceGroupDetails' TrainingPlanArn (botocore's model), which moto lacks
                answer["InstanceGroups"] = [
                    {**group, "TrainingPlanArn": settings.plans[group["InstanceGroupName"]]}
                    if group["InstanceGroupName"] in settings.plans else group for group in answer["InstanceGroups"]]
            if settings.orchestrator == "slurm":
                answer["Orchestrator"] = {"Slurm": {"SlurmConfigStrategy": "Managed"}}
                answer["InstanceGroups"] = [
                    {**group, "SlurmConfig": {"NodeType": slurm_node_type(group["InstanceGroupName"])}}
                    for group in answer["InstanceGroups"]]
            return answer

        def describe_node(node: Any) -> dict:
            answer = node_describe(node)
            logical = world.logical_id_of(node.cluster_name, node.instance_id)
            ip = world.private_ip(node.cluster_name, node.instance_id)
            # DescribeClusterNode's PrivatePrimaryIp and PrivateDnsHostname (botocore's model:
            # ip-<a>-<b>-<c>-<d>.<domain>), which moto leaves out; the node's Slurm name is the hostname's first label.
            answer = {**answer, "PrivatePrimaryIp": ip,
                      "PrivateDnsHostname": f"ip-{ip.replace('.', '-')}.{world.region}.compute.internal"}
            return {**answer, "NodeLogicalId": logical} if logical else answer

        def summarize_node(node: Any) -> dict:
            answer = node_summary(node)
            logical = world.logical_id_of(node.cluster_name, node.instance_id)
            # ClusterNodeSummary's PrivateDnsHostname (botocore's model), which moto leaves out: the same as
            # DescribeClusterNode's.
            ip = world.private_ip(node.cluster_name, node.instance_id)
            answer = {**answer, "PrivateDnsHostname": f"ip-{ip.replace('.', '-')}.{world.region}.compute.internal"}
            # ListClusterNodes returns NodeLogicalId only when IncludeNodeLogicalIds is True (botocore's model).
            return {**answer, "NodeLogicalId": logical} if logical and world._include_logical_ids else answer

        with mock.patch.object(Cluster, "describe", describe_cluster), \
                mock.patch.object(ClusterNode, "describe", describe_node), \
                mock.patch.object(ClusterNode, "summary", summarize_node):
            yield

    def private_ip(self, cluster_name: str, node_id: str) -> str:
        """The node's private IP, stable per NodeLogicalId: a replacement keeps its predecessor's IP and so its Slurm
        node name, as AWS's HyperPod samples show (not documented: Medic handles a new name too)."""
        lineage = self.logical_id_of(cluster_name, node_id) or node_id
        seed = hashlib.sha256(f"{cluster_name}/{lineage}".encode()).digest()
        return f"10.1.{1 + seed[0] % 250}.{1 + seed[1] % 254}"  # 10.1.0.x: the head nodes (sim/slurm.py)

    def slurm_node_name(self, cluster_name: str, node_id: str) -> str:
        return "ip-" + self.private_ip(cluster_name, node_id).replace(".", "-")

    def logical_id_of(self, cluster_name: str, node_id: str) -> str | None:
        settings = self.settings.get(cluster_name)
        return settings.logical_ids.get(node_id) if settings else None

    def configure(self, cluster_name: str, *, orchestrator: str | None = None, node_recovery: str | None = None,
                  provisioning: str | None = None) -> None:
        settings = self.settings.setdefault(cluster_name, ClusterSettings())
        if orchestrator is not None:
            settings.orchestrator = orchestrator
        if node_recovery is not None:
            settings.node_recovery = node_recovery
        if provisioning is not None:
            settings.provisioning = provisioning

    def set_training_plan(self, cluster_name: str, group: str, name: str, available: int) -> None:
        """The group runs on training plan ``name``, with ``available`` instances to serve a replacement."""
        arn = f"arn:aws:sagemaker:{self.region}:{self.account}:training-plan/{name}"
        self.settings.setdefault(cluster_name, ClusterSettings()).plans[group] = arn
        self.training_plans[name] = available

    def describe_training_plan(self, request: AWSPreparedRequest) -> AWSResponse:
        """DescribeTrainingPlan, which moto lacks: the members botocore's model requires (TrainingPlanArn,
        TrainingPlanName, Status) and AvailableInstanceCount, "the number of instances currently available for use in
        this training plan" (API reference, DescribeTrainingPlan). A plan by name or ARN; an unknown one is
        ResourceNotFound (the operation's one declared error)."""
        asked = str(json.loads(request.body or b"{}").get("TrainingPlanName", ""))
        name = asked.rsplit("/", 1)[-1]
        if name not in self.training_plans:
            return error_response(request.url, "json", "ResourceNotFound", 400, f"Training plan {asked} not found.")
        body = {"TrainingPlanArn": f"arn:aws:sagemaker:{self.region}:{self.account}:training-plan/{name}",
                "TrainingPlanName": name, "Status": "Active", "AvailableInstanceCount": self.training_plans[name]}
        return raw_response(request.url, 200, {"Content-Type": "application/x-amz-json-1.1",
                                               "x-amzn-RequestId": str(uuid.uuid4())}, json.dumps(body).encode())

    def set_logical_id(self, cluster_name: str, node_id: str, logical: str) -> None:
        self.settings.setdefault(cluster_name, ClusterSettings()).logical_ids[node_id] = logical

    @property
    def backend(self) -> Any:
        return sagemaker_backends[self.account][self.region]

    # clusters and nodes
    def has_cluster(self, name: str) -> bool:
        return name in self.backend.clusters

    def create_cluster(self, client: Any, name: str, groups: dict[str, int]) -> None:
        """CreateCluster through moto, then give the nodes valid instance ids (moto names them <group>-<i>)."""
        client.create_cluster(ClusterName=name, InstanceGroups=[
            {"InstanceGroupName": group, "InstanceCount": count, "ThreadsPerCore": 1,
             "InstanceType": CONTROLLER_TYPE if "controller" in group or "login" in group else WORKER_TYPE,
             "LifeCycleConfig": dict(LIFECYCLE), "ExecutionRole": self.execution_role}
            for group, count in groups.items()])
        cluster = self.backend.clusters[name]
        # A real cluster ARN ends in the cluster's 12-character id, not its name (ClusterArn's pattern in the
        # service model: cluster/[a-z0-9]{12}); moto puts the name there.
        cluster_id = next((cid for cid, known in self.cluster_ids.items() if known == name), None)
        cluster_id = cluster_id or hashlib.sha256(f"cluster/{name}".encode()).hexdigest()[:12]
        self.cluster_ids.setdefault(cluster_id, name)
        cluster.arn = f"arn:aws:sagemaker:{self.region}:{self.account}:cluster/{cluster_id}"
        renamed = {}
        for node in cluster.nodes.values():
            group, index = node.instance_id.rsplit("-", 1)
            node.instance_id = instance_id(name, group, index)
            renamed[node.instance_id] = node
            self.set_logical_id(name, node.instance_id, logical_id(name, node.instance_id))
        cluster.nodes = renamed

    def groups(self, cluster_name: str) -> list[str]:
        return [group["InstanceGroupName"] for group in self.backend.clusters[cluster_name].instance_groups]

    def node(self, cluster_name: str, node_id: str) -> Any:
        return self.backend.clusters[cluster_name].nodes.get(node_id)

    def put_node(self, cluster_name: str, node_id: str, group: str, status: str | None = None) -> None:
        """Add the node to the group (creating the group if needed) or move it there; counts stay in sync."""
        cluster = self.backend.clusters[cluster_name]
        spec = self._group(cluster, group)
        existing = cluster.nodes.get(node_id)
        if existing is not None and existing.instance_group_name != group:
            self._count(cluster, existing.instance_group_name, -1)
            existing = None
            del cluster.nodes[node_id]
        if existing is None:
            cluster.nodes[node_id] = ClusterNode(
                region_name=self.region, account_id=self.account, cluster_name=cluster_name,
                instance_group_name=group, instance_type=spec["InstanceType"],
                life_cycle_config=spec["LifeCycleConfig"], execution_role=spec["ExecutionRole"],
                node_id=node_id, threads_per_core=spec.get("ThreadsPerCore", 1))
            self._count(cluster, group, +1)
            if self.logical_id_of(cluster_name, node_id) is None:
                self.set_logical_id(cluster_name, node_id, logical_id(cluster_name, node_id))
        if status is not None:
            cluster.nodes[node_id].status = status
            self.repairs.pop((cluster_name, node_id), None)

    def _group(self, cluster: Any, group: str) -> dict:
        for spec in cluster.instance_groups:
            if spec["InstanceGroupName"] == group:
                return spec
        spec = {"InstanceGroupName": group, "ThreadsPerCore": 1, "CurrentCount": 0, "TargetCount": 0,
                "InstanceType": CONTROLLER_TYPE if "controller" in group or "login" in group else WORKER_TYPE,
                "LifeCycleConfig": dict(LIFECYCLE), "ExecutionRole": self.execution_role}
        cluster.instance_groups.append(spec)
        return spec

    @staticmethod
    def _count(cluster: Any, group: str, delta: int) -> None:
        for spec in cluster.instance_groups:
            if spec["InstanceGroupName"] == group:
                spec["CurrentCount"] = max(0, int(spec.get("CurrentCount", 0)) + delta)
                spec["TargetCount"] = max(0, int(spec.get("TargetCount", 0)) + delta)

    def fault_reported(self, cluster_name: str, node_id: str, reason: str, now: datetime) -> None:
        """HMA reported the node unhealthy (a node health event): on a cluster with NodeRecovery Automatic, HyperPod
        repairs it by itself (AUTO_REPAIR_START later), a reboot or a replacement as the fault type says."""
        settings = self.settings.get(cluster_name)
        match = HMA_FAULT_TYPE.search(reason)
        if settings is None or settings.node_recovery != "Automatic" or match is None:
            return
        verb = "reboot" if match.group(1) == "Reboot" else "replace"
        self._recoveries.append((now + AUTO_REPAIR_START, cluster_name, node_id, verb))

    def _recover(self, now: datetime) -> None:
        """HyperPod's own repairs due by now start (a node gone or already in repair is left as it is)."""
        due = [entry for entry in self._recoveries if entry[0] <= now]
        self._recoveries = [entry for entry in self._recoveries if entry[0] > now]
        for at, cluster_name, node_id, verb in due:
            node = self.node(cluster_name, node_id) if self.has_cluster(cluster_name) else None
            if node is None or node.status in IN_REPAIR:
                continue
            successor = self._start_repair(cluster_name, node, verb, at)
            self.recoveries.append({"action": verb, "cluster": cluster_name, "node_id": node_id, "at": at.isoformat(),
                                    **({"replacement": successor} if successor != node_id else {})})

    def _start_repair(self, cluster_name: str, node: Any, verb: str, now: datetime) -> str:
        """A reboot or a replacement of the node begins (a call's, or HyperPod's own): the id the node runs under."""
        node_id = node.instance_id
        if verb == "replace":
            successor = self._replace(cluster_name, node, now)
        else:
            status, duration = REPAIR[verb]
            node.status = status
            self.repairs[(cluster_name, node_id)] = Repair(cluster_name, node_id, now + duration)
            successor = node_id
        self._going_down.append((now + GOING_DOWN, (cluster_name, node_id, successor, verb)))
        return successor

    def finish_repairs(self, now: datetime) -> None:
        """HyperPod's own repairs due start; nodes a repair took down by now lose their jobs (on_repair); those whose
        emulated repair is over are Running again (on_back)."""
        self._recover(now)
        due = [(at, hit) for at, hit in self._going_down if at <= now]
        self._going_down = [(at, hit) for at, hit in self._going_down if at > now]
        for at, hit in due:
            for hook in self.on_repair:
                hook(*hit, at)
        for key, repair in list(self.repairs.items()):
            if repair.until <= now:
                node = self.node(repair.cluster, repair.node_id) if self.has_cluster(repair.cluster) else None
                if node is not None and node.status in IN_REPAIR:
                    node.status = "Running"
                    for back in self.on_back:
                        back(repair.cluster, repair.node_id)
                del self.repairs[key]

    def _cluster_name(self, name_or_arn: str) -> str | None:
        if name_or_arn.startswith("arn:"):
            last = name_or_arn.rsplit("/", 1)[-1]
            name = self.cluster_ids.get(last, last)  # real ARNs carry the id; moto's carry the name
        else:
            name = name_or_arn
        return name if self.has_cluster(name) else None

    # what moto answers differently
    def describe_cluster_node(self, request: AWSPreparedRequest) -> AWSResponse | None:
        """An instance the cluster does not have (a replaced one included) is ResourceNotFound: the one error
        botocore's model declares for DescribeClusterNode (moto says ValidationException). Else moto answers."""
        params = json.loads(request.body or b"{}")
        name = self._cluster_name(params.get("ClusterName", ""))
        node_id = params.get("NodeId")
        if name is not None and isinstance(node_id, str) and self.node(name, node_id) is None:
            return error_response(request.url, "json", "ResourceNotFound", 400,
                                  f"Node {node_id} not found in cluster {name}.")
        return None

    def list_cluster_nodes(self, request: AWSPreparedRequest) -> None:
        """Remember whether this call asked for NodeLogicalId; moto answers it."""
        self._include_logical_ids = json.loads(request.body or b"{}").get("IncludeNodeLogicalIds") is True

    # the node actions moto lacks
    def batch_reboot(self, request: AWSPreparedRequest) -> AWSResponse:
        return self._batch(request, "reboot")

    def batch_replace(self, request: AWSPreparedRequest) -> AWSResponse:
        return self._batch(request, "replace")

    def _batch(self, request: AWSPreparedRequest, verb: str) -> AWSResponse:
        params = json.loads(request.body or b"{}")
        url = request.url
        name = self._cluster_name(params.get("ClusterName", ""))
        if name is None:
            return error_response(url, "json", "ResourceNotFound", 400,
                                  f"Cluster {params.get('ClusterName')!r} not found.")
        node_ids, logical_ids = params.get("NodeIds", []), params.get("NodeLogicalIds", [])
        if not node_ids and not logical_ids:
            return error_response(url, "json", "ValidationException", 400,
                                  "Either NodeIds or NodeLogicalIds must be specified.")
        for what, values in (("nodeIds", node_ids), ("nodeLogicalIds", logical_ids)):
            if len(values) > 25:
                return error_response(url, "json", "ValidationException", 400,
                                      f"1 validation error detected: Value at '{what}' failed to satisfy "
                                      f"constraint: Member must have length less than or equal to 25")
        for index, node_id in enumerate(node_ids, 1):  # botocore checks lengths, the service checks patterns
            if not isinstance(node_id, str) or not NODE_ID_PATTERN.fullmatch(node_id):
                return error_response(url, "json", "ValidationException", 400,
                                      f"1 validation error detected: Value '{node_id}' at 'nodeIds.{index}.member' "
                                      f"failed to satisfy constraint: Member must satisfy regular expression "
                                      f"pattern: {NODE_ID_PATTERN.pattern}")
        now = datetime.now(UTC)  # the replay clock
        successful: list[str] = []
        failed: list[dict] = []
        replacements: dict[str, str] = {}
        for node_id in dict.fromkeys(node_ids):
            node = self.node(name, node_id)
            if node is None:
                failed.append({"NodeId": node_id, "ErrorCode": "InstanceIdNotFound",
                               "Message": f"Node {node_id} not found in cluster {name}."})
            elif node.status in IN_REPAIR:
                failed.append({"NodeId": node_id, "ErrorCode": "InstanceIdInUse",
                               "Message": f"Node {node_id} is already being repaired (status {node.status})."})
            elif verb == "replace" and self._slurm_controller(name, node.instance_group_name):
                # The API reference (BatchReplaceClusterNodes, NodeIds): "you cannot replace instances that are
                # configured as Slurm controller nodes". It names no error code: the emulation answers with the
                # per-node code for "a state that does not allow replacement". Reboot is accepted.
                failed.append({"NodeId": node_id, "ErrorCode": "InvalidInstanceStatus",
                               "Message": f"Node {node_id} is a Slurm controller node (instance group "
                                          f"{node.instance_group_name}); controller nodes cannot be replaced."})
            else:
                successor = self._start_repair(name, node, verb, now)
                if successor != node_id:
                    replacements[node_id] = successor
                successful.append(node_id)
        body: dict[str, Any] = {}
        if successful:
            body["Successful"] = successful
        if failed:
            body["Failed"] = failed
        if logical_ids:
            body["FailedNodeLogicalIds"] = [
                {"NodeLogicalId": logical, "ErrorCode": "InstanceIdNotFound",
                 "Message": "Node logical ids are not emulated by the replay harness."}
                for logical in logical_ids]
        self.actions.append({"action": verb, "cluster": name, "node_ids": list(node_ids),
                             "successful": successful, "failed": [f["NodeId"] for f in failed],
                             **({"replacements": replacements} if replacements else {})})
        request_id = str(uuid.uuid4())
        return raw_response(url, 200, {"Content-Type": "application/x-amz-json-1.1",
                                       "x-amzn-RequestId": request_id}, json.dumps(body).encode())

    def _slurm_controller(self, cluster_name: str, group: str) -> bool:
        settings = self.settings.get(cluster_name)
        return (settings is None or settings.orchestrator == "slurm") and slurm_node_type(group) == "Controller"

    def _replace(self, cluster_name: str, node: Any, now: datetime) -> str:
        """BatchReplaceClusterNodes "terminates the specified instances and provisions new replacement
        instances" (API reference): the old instance id leaves the cluster, a new one joins the same group
        under the same NodeLogicalId ("persists throughout its lifecycle"), Pending until provisioned."""
        cluster = self.backend.clusters[cluster_name]
        old_id = node.instance_id
        logical = self.logical_id_of(cluster_name, old_id) or logical_id(cluster_name, old_id)
        generation = sum(1 for action in self.actions for old in action.get("replacements", {}) if old == old_id)
        new_id = instance_id(cluster_name, old_id, "replacement", str(generation + 1))
        del cluster.nodes[old_id]
        self.terminated.add((cluster_name, old_id))
        self.repairs.pop((cluster_name, old_id), None)
        node.instance_id = new_id
        node.launch_time = now.replace(tzinfo=None)  # moto keeps naive UTC times
        node.status = REPAIR["replace"][0]
        cluster.nodes[new_id] = node
        settings = self.settings.setdefault(cluster_name, ClusterSettings())
        settings.logical_ids.pop(old_id, None)
        settings.logical_ids[new_id] = logical
        self.repairs[(cluster_name, new_id)] = Repair(cluster_name, new_id, now + REPAIR["replace"][1])
        return new_id
