"""SageMaker HyperPod in the emulated world: clusters and nodes kept in moto's own SageMaker
backend (so moto's DescribeCluster / DescribeClusterNode / ListClusterNodes see them), plus the
node actions moto lacks, BatchRebootClusterNodes and BatchReplaceClusterNodes."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from moto.sagemaker.models import ClusterNode, sagemaker_backends

from sim.faults import error_response, raw_response

INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8}([0-9a-f]{9})?$")
NODE_ID_PATTERN = re.compile(r"i-[a-f0-9]{8}(?:[a-f0-9]{9})?")  # ClusterNodeId in the service model
# The emulated repair: how long a node stays in its repair status before it is Running again.
REPAIR = {"reboot": ("SystemUpdating", timedelta(minutes=10)), "replace": ("Pending", timedelta(minutes=30))}
IN_REPAIR = frozenset({"ShuttingDown", "Pending", "SystemUpdating"})
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


class HyperPodWorld:
    def __init__(self, account: str, region: str, execution_role: str) -> None:
        self.account = account
        self.region = region
        self.execution_role = execution_role
        self.cluster_ids: dict[str, str] = {}  # configured cluster id -> name (real ARNs carry the id)
        self.repairs: dict[tuple[str, str], Repair] = {}
        self.actions: list[dict] = []  # every Batch* call that reached the service, with its answer

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

    def finish_repairs(self, now: datetime) -> None:
        """Nodes whose emulated repair is over are Running again."""
        for key, repair in list(self.repairs.items()):
            if repair.until <= now:
                node = self.node(repair.cluster, repair.node_id) if self.has_cluster(repair.cluster) else None
                if node is not None and node.status in IN_REPAIR:
                    node.status = "Running"
                del self.repairs[key]

    def _cluster_name(self, name_or_arn: str) -> str | None:
        if name_or_arn.startswith("arn:"):
            last = name_or_arn.rsplit("/", 1)[-1]
            name = self.cluster_ids.get(last, last)  # real ARNs carry the id; moto's carry the name
        else:
            name = name_or_arn
        return name if self.has_cluster(name) else None

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
        for node_id in dict.fromkeys(node_ids):
            node = self.node(name, node_id)
            if node is None:
                failed.append({"NodeId": node_id, "ErrorCode": "InstanceIdNotFound",
                               "Message": f"Node {node_id} not found in cluster {name}."})
            elif node.status in IN_REPAIR:
                failed.append({"NodeId": node_id, "ErrorCode": "InstanceIdInUse",
                               "Message": f"Node {node_id} is already being repaired (status {node.status})."})
            elif verb == "replace" and "controller" in node.instance_group_name:
                failed.append({"NodeId": node_id, "ErrorCode": "InvalidInstanceStatus",
                               "Message": f"Node {node_id} is in controller group {node.instance_group_name}; "
                                          "controller nodes cannot be replaced."})
            else:
                status, duration = REPAIR[verb]
                node.status = status
                self.repairs[(name, node_id)] = Repair(name, node_id, now + duration)
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
                             "successful": successful, "failed": [f["NodeId"] for f in failed]})
        request_id = str(uuid.uuid4())
        return raw_response(url, 200, {"Content-Type": "application/x-amz-json-1.1",
                                       "x-amzn-RequestId": request_id}, json.dumps(body).encode())
