"""HyperPod's own repairs, followed as incidents (issue 32).

On a cluster with automatic node recovery (DescribeCluster NodeRecovery Automatic) HyperPod "will automatically
reboot or replace faulty nodes when issues are detected" (API reference, CreateCluster NodeRecovery): Medic defers
the node's fault to it, and follows the repair to its end:
  the fault deferred (the event path, or a sweep's failed node) → `follow#<cluster>` / <NodeLogicalId> remembered →
  each sweep: the node (by instance id, or its replacement by NodeLogicalId) seen in repair (a repair status, its old
  instance gone, a new instance under the logical id) → seen Running after that → the incident's line (fault,
  detected, repaired, resolved; acted null: no action of Medic's), once (a conditional delete). A healthy report of
  the node (or its replacement) dated after the fault ends it too, at the report's time.
  No repair seen and the node not Running again within `guardrails.repair_minutes` of Medic's receipt of the fault:
  one page saying what HyperPod says of the node (its InstanceStatus and Message, quoted). A node seen in a repair
  status that lasts longer is the repair watch's page (sweep_repairs), not this one.
"""

from __future__ import annotations

from datetime import datetime

from medic.core.models import Fault, NodeInfo
from medic.core.timeline import node_timeline
from medic.ledger.follows import FollowedRepair, FollowStore
from medic.ledger.table import Table
from medic.obs import emit_incident


def start_following(table: Table, cluster: str, node: NodeInfo, fault: Fault, incident: str, fault_at: datetime,
                    detected_at: datetime) -> bool:
    """Remember HyperPod's repair of the node to follow (the node's first fault starts it): False when one is
    followed already."""
    return FollowStore(table).follow(FollowedRepair(
        cluster=cluster, position=node.logical_id or node.node_id, incident=incident, node_id=node.node_id,
        fault=fault.value, fault_at=fault_at, detected_at=detected_at, logical_id=node.logical_id))


def end_on_healthy(table: Table, cluster: str, node_id: str, node: NodeInfo | None,
                   reported_at: datetime) -> FollowedRepair | None:
    """A healthy report of a node (or of its replacement) after its fault: HyperPod's repair is over (a reboot that
    finished between two sweeps is seen only so). The repair it ended, if it did."""
    store = FollowStore(table)
    repair = store.find(cluster, node_id, node.logical_id if node else None)
    if repair is None or reported_at <= repair.fault_at:
        return None  # no repair followed, or a report from before the fault
    if not store.end(cluster, repair.position):
        return None
    emit_incident(followed_line(repair, max(reported_at, repair.detected_at)))
    return repair


def followed_line(repair: FollowedRepair, repaired_at: datetime) -> dict:
    """The incident's line: HyperPod's repair, no action of Medic's (acted null)."""
    return node_timeline(incident=repair.incident, cluster=repair.cluster, node_id=repair.node_id, fault=repair.fault,
                         fault_at=repair.fault_at, detected_at=repair.detected_at, acted_at=None,
                         repaired_at=repaired_at, resolved_at=repaired_at)
