"""SageMaker HyperPod: the one module that talks to the cluster node APIs."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from botocore.exceptions import ClientError, HTTPClientError

from medic.adapters.aws import client as make_client
from medic.adapters.aws import error_code
from medic.core.models import Action, ClusterInfo, NodeInfo, slurm_node_name

# Failed[] codes (botocore's BatchRebootClusterNodesErrorCode / BatchReplaceClusterNodesErrorCode docs):
# InstanceIdInUse "another operation is already in progress for this node": a repair is running.
# InvalidInstanceStatus "a state that does not allow" the action: not necessarily a repair, re-check.
# InternalServerError "an internal error occurred while processing this node": transient.
REPAIR_IN_PROGRESS_CODES = frozenset({"InstanceIdInUse"})
INVALID_INSTANCE_STATUS = "InvalidInstanceStatus"
PER_NODE_TRANSIENT = "InternalServerError"
PER_NODE_RETRY_BACKOFF_SECONDS = (0.5, 1.5)  # one retry, after a jittered pause
CLUSTER_SIZE_TTL_SECONDS = 300
NODE_RECOVERY = {"Automatic": "automatic", "None": "none"}  # DescribeCluster NodeRecovery -> config's words
# The request was sent and its answer lost (read timeout, connection dropped): the node action may have
# gone through. Connection failures before sending (EndpointConnectionError, ConnectTimeoutError) are not.
AMBIGUOUS_ERRORS = (HTTPClientError,)
NODE_ACTION_OPERATIONS = ("BatchRebootClusterNodes", "BatchReplaceClusterNodes")


class NodeActionResult(NamedTuple):
    accepted: bool
    error_code: str | None = None
    message: str | None = None
    retried: bool = False  # a per-node InternalServerError was asked once more

    @property
    def repair_in_progress(self) -> bool:
        return self.error_code in REPAIR_IN_PROGRESS_CODES


class HyperPod:
    def __init__(self, client: Any = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self._client = client
        self._sleep = sleep
        self._clusters: dict[str, tuple[float, ClusterInfo]] = {}
        self._plans: dict[str, dict[str, str]] = {}  # cluster -> instance group -> TrainingPlanArn

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("sagemaker")
        return self._client

    def describe_node(self, cluster: str, node_id: str) -> NodeInfo | None:
        """The node's instance group and status, or None when the cluster has no such node."""
        try:
            details = self.client.describe_cluster_node(ClusterName=cluster, NodeId=node_id)["NodeDetails"]
        except ClientError as error:
            if _is_not_found(error):
                return None
            raise
        return NodeInfo(
            node_id=details["InstanceId"],
            instance_group=details["InstanceGroupName"],
            status=details.get("InstanceStatus", {}).get("Status", "Unknown"),
            logical_id=details.get("NodeLogicalId"),
            slurm_node=slurm_node_name(details.get("PrivateDnsHostname"), details.get("PrivatePrimaryIp")),
            status_message=details.get("InstanceStatus", {}).get("Message") or None,
        )

    def cluster_info(self, cluster: str, refresh: bool = False) -> ClusterInfo:
        """DescribeCluster's node count, NodeRecovery, NodeProvisioningMode and Slurm controller groups, from
        one call cached briefly (they change slowly); `refresh` asks AWS again (the reconciler's snapshot)."""
        cached = self._clusters.get(cluster)
        if cached and not refresh and time.monotonic() - cached[0] < CLUSTER_SIZE_TTL_SECONDS:
            return cached[1]
        response = self.client.describe_cluster(ClusterName=cluster)
        groups = response.get("InstanceGroups", [])
        info = ClusterInfo(
            size=sum(int(group.get("CurrentCount", 0)) for group in groups),
            node_recovery=NODE_RECOVERY.get(response.get("NodeRecovery", "")),
            provisioning=response.get("NodeProvisioningMode"),
            # InstanceGroups[].SlurmConfig.NodeType (Controller | Login | Compute) names the controller group.
            controller_groups=frozenset(group["InstanceGroupName"] for group in groups
                                        if group.get("SlurmConfig", {}).get("NodeType") == "Controller"
                                        and "InstanceGroupName" in group))
        self._clusters[cluster] = (time.monotonic(), info)
        # InstanceGroups[].TrainingPlanArn: the training plan a group's instances come from (botocore's
        # ClusterInstanceGroupDetails), for the capacity check before a replace (issue 32)
        self._plans[cluster] = {group["InstanceGroupName"]: group["TrainingPlanArn"] for group in groups
                                if group.get("TrainingPlanArn") and "InstanceGroupName" in group}
        return info

    def training_plan_of(self, cluster: str, group: str) -> str | None:
        """The training plan ARN the instance group runs on (DescribeCluster, cached with cluster_info); None: none."""
        cached = self._clusters.get(cluster)
        if cluster not in self._plans or not cached or time.monotonic() - cached[0] >= CLUSTER_SIZE_TTL_SECONDS:
            self.cluster_info(cluster, refresh=True)
        return self._plans.get(cluster, {}).get(group)

    def training_plan_capacity(self, plan_arn: str) -> tuple[str, str, int | None]:
        """DescribeTrainingPlan: the plan's name, its status, and how many of its instances are available to serve a
        replacement (AvailableInstanceCount; None when it does not say)."""
        response = self.client.describe_training_plan(TrainingPlanName=plan_arn)
        available = response.get("AvailableInstanceCount")
        return (response.get("TrainingPlanName", plan_arn), response.get("Status", "unknown"),
                int(available) if available is not None else None)

    def cluster_size(self, cluster: str) -> int:
        """Current node count over all instance groups (the cached DescribeCluster)."""
        return self.cluster_info(cluster).size

    def act(self, action: Action, cluster: str, node_id: str) -> NodeActionResult:
        """Reboot or replace one node; HTTP 200 can still carry a per-node failure in Failed[]. A per-node
        InternalServerError is transient: asked once more after a pause, never a second time."""
        self._refuse_blind_retries()
        result = self._act_once(action, cluster, node_id)
        if result.error_code == PER_NODE_TRANSIENT:
            self._sleep(random.uniform(*PER_NODE_RETRY_BACKOFF_SECONDS))  # noqa: S311 - jitter, not cryptography
            retried = self._act_once(action, cluster, node_id)
            return NodeActionResult(retried.accepted, retried.error_code, retried.message, retried=True)
        return result

    def _act_once(self, action: Action, cluster: str, node_id: str) -> NodeActionResult:
        call = {
            Action.REBOOT_NODE: self.client.batch_reboot_cluster_nodes,
            Action.REPLACE_NODE: self.client.batch_replace_cluster_nodes,
        }[action]
        response = call(ClusterName=cluster, NodeIds=[node_id])
        for failure in response.get("Failed", []):
            if failure.get("NodeId") == node_id:
                return NodeActionResult(False, failure.get("ErrorCode", "Unknown"), failure.get("Message", ""))
        if node_id in response.get("Successful", []):
            return NodeActionResult(True)
        return NodeActionResult(False, "NotAcknowledged", "The node is in neither Successful nor Failed.")

    def list_nodes(self, cluster: str) -> list[NodeInfo]:
        """Every node of the cluster with its instance group, status, logical id and Slurm name (ListClusterNodes, all
        pages; NodeLogicalId comes only with IncludeNodeLogicalIds=True; ClusterNodeSummary's PrivateDnsHostname)."""
        nodes = []
        pages = self.client.get_paginator("list_cluster_nodes").paginate(ClusterName=cluster,
                                                                          IncludeNodeLogicalIds=True)
        for page in pages:
            for summary in page.get("ClusterNodeSummaries", []):
                nodes.append(NodeInfo(node_id=summary["InstanceId"], instance_group=summary["InstanceGroupName"],
                                      status=summary.get("InstanceStatus", {}).get("Status", "Unknown"),
                                      logical_id=summary.get("NodeLogicalId"),
                                      slurm_node=slurm_node_name(summary.get("PrivateDnsHostname"), None),
                                      status_message=summary.get("InstanceStatus", {}).get("Message") or None))
        return nodes

    def _refuse_blind_retries(self) -> None:
        """botocore's standard mode retries a read timeout like a throttle; for a node action that would
        repeat a call that may have gone through. Throttling and 5xx answers are still retried."""
        events = self.client.meta.events
        for operation in NODE_ACTION_OPERATIONS:
            events.register_first(f"needs-retry.sagemaker.{operation}", _no_retry_after_sending,
                                  unique_id=f"medic-no-blind-retry-{operation}")


def _no_retry_after_sending(caught_exception: Exception | None = None, **_: Any) -> None:
    if isinstance(caught_exception, AMBIGUOUS_ERRORS):
        raise caught_exception


def _is_not_found(error: ClientError) -> bool:
    # The service answers ResourceNotFound; older emulations answer ValidationException "Could not find".
    code = error_code(error)
    return code == "ResourceNotFound" or (code == "ValidationException" and "could not find" in str(error).lower())
