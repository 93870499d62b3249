"""SageMaker HyperPod: the one module that talks to the cluster node APIs."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError, HTTPClientError

from medic.adapters.aws import client as make_client
from medic.adapters.aws import error_code
from medic.domain.models import Action, NodeInfo

# Failed[] codes meaning HyperPod is already repairing the node.
REPAIR_IN_PROGRESS_CODES = frozenset({"InstanceIdInUse", "InvalidInstanceStatus"})
CLUSTER_SIZE_TTL_SECONDS = 300
# The request was sent and its answer lost (read timeout, connection dropped): the node action may have
# gone through. Connection failures before sending (EndpointConnectionError, ConnectTimeoutError) are not.
AMBIGUOUS_ERRORS = (HTTPClientError,)
NODE_ACTION_OPERATIONS = ("BatchRebootClusterNodes", "BatchReplaceClusterNodes")


@dataclass(frozen=True)
class NodeActionResult:
    accepted: bool
    error_code: str | None = None
    message: str | None = None

    @property
    def repair_in_progress(self) -> bool:
        return self.error_code in REPAIR_IN_PROGRESS_CODES


class HyperPod:
    def __init__(self, client: Any = None) -> None:
        self._client = client
        self._sizes: dict[str, tuple[float, int]] = {}

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
        )

    def cluster_size(self, cluster: str) -> int:
        """Current node count over all instance groups, cached briefly (it changes slowly)."""
        cached = self._sizes.get(cluster)
        if cached and time.monotonic() - cached[0] < CLUSTER_SIZE_TTL_SECONDS:
            return cached[1]
        groups = self.client.describe_cluster(ClusterName=cluster).get("InstanceGroups", [])
        size = sum(int(group.get("CurrentCount", 0)) for group in groups)
        self._sizes[cluster] = (time.monotonic(), size)
        return size

    def act(self, action: Action, cluster: str, node_id: str) -> NodeActionResult:
        """Reboot or replace one node; HTTP 200 can still carry a per-node failure in Failed[]."""
        self._refuse_blind_retries()
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
        """Every node of the cluster with its instance group and status (ListClusterNodes, all pages)."""
        nodes = []
        for page in self.client.get_paginator("list_cluster_nodes").paginate(ClusterName=cluster):
            for summary in page.get("ClusterNodeSummaries", []):
                nodes.append(NodeInfo(node_id=summary["InstanceId"], instance_group=summary["InstanceGroupName"],
                                      status=summary.get("InstanceStatus", {}).get("Status", "Unknown")))
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
