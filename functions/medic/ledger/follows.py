"""HyperPod's own repairs that Medic follows (issue 32): on a cluster with automatic node recovery (DescribeCluster
NodeRecovery Automatic) a node fault is HyperPod's to repair, and Medic times it as an incident.

One item per node position, `follow#<cluster>` / `<NodeLogicalId>` (the instance id when the node has none):
written (first fault wins) when Medic defers a fault to HyperPod; `repair_seen_at` once a sweep sees the repair
(the node in a repair status, or a new instance under the logical id); deleted, conditionally so one run writes the
incident's line, when the node is Running again after it or a healthy report names it, or once its bound passed and
a human was paged. TTL 7 days.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from medic.ledger.table import Key, Table, expires

PARTITION = "follow#"


class FollowedRepair(NamedTuple):
    cluster: str
    position: str  # the NodeLogicalId (survives a replacement), else the instance id
    incident: str  # the node incident of the faulty instance (`node:<cluster>:<instance id>`)
    node_id: str  # the faulty instance (a replacement runs under a new id)
    fault: str
    fault_at: datetime  # the health event's time (a sweep's for a failed node it found)
    detected_at: datetime  # Medic's receipt
    logical_id: str | None = None
    repair_seen_at: datetime | None = None  # a sweep saw HyperPod's repair under way
    paged_at: datetime | None = None  # its bound passed: the one page went out


class FollowStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def _key(self, cluster: str, position: str) -> Key:
        return self.table.key(f"{PARTITION}{cluster}", position)

    def follow(self, repair: FollowedRepair) -> bool:
        """Start following the node's repair; False when one is followed already (its first fault is the start)."""
        item = {**self._key(repair.cluster, repair.position), "incident": {"S": repair.incident},
                "node_id": {"S": repair.node_id}, "fault": {"S": repair.fault},
                "fault_at": {"S": repair.fault_at.isoformat()}, "detected_at": {"S": repair.detected_at.isoformat()},
                "expires_at": expires(repair.detected_at)}
        if repair.logical_id:
            item["logical_id"] = {"S": repair.logical_id}
        return self.table.put_if(item, "attribute_not_exists(pk)")

    def followed(self, cluster: str) -> list[FollowedRepair]:
        return [repair for item in self.table.partition(f"{PARTITION}{cluster}")
                if (repair := _parse(cluster, item)) is not None]

    def find(self, cluster: str, node_id: str, logical_id: str | None) -> FollowedRepair | None:
        """The repair followed for this instance, or for its position (a replacement's new instance)."""
        for position in filter(None, (logical_id, node_id)):
            item = self.table.get(self._key(cluster, position))
            if item is not None and (repair := _parse(cluster, item)) is not None:
                return repair
        return None

    def repair_seen(self, cluster: str, position: str, now: datetime) -> None:
        self.table.update_if(self._key(cluster, position), "SET repair_seen_at = if_not_exists(repair_seen_at, :now)",
                             "attribute_exists(pk)", {":now": {"S": now.isoformat()}})

    def paged(self, cluster: str, position: str, now: datetime) -> bool:
        """Claim the bound's one page: True once."""
        return self.table.update_if(self._key(cluster, position), "SET paged_at = :now",
                                    "attribute_exists(pk) AND attribute_not_exists(paged_at)",
                                    {":now": {"S": now.isoformat()}}) is not None

    def end(self, cluster: str, position: str) -> bool:
        """Stop following: True for the one run that ends it (and writes the incident's line)."""
        return self.table.delete_if(self._key(cluster, position))


def _parse(cluster: str, item: dict) -> FollowedRepair | None:
    try:
        return FollowedRepair(
            cluster=cluster, position=item["sk"]["S"], incident=item["incident"]["S"], node_id=item["node_id"]["S"],
            fault=item["fault"]["S"], fault_at=datetime.fromisoformat(item["fault_at"]["S"]),
            detected_at=datetime.fromisoformat(item["detected_at"]["S"]),
            logical_id=item.get("logical_id", {}).get("S"),
            repair_seen_at=datetime.fromisoformat(item["repair_seen_at"]["S"]) if "repair_seen_at" in item else None,
            paged_at=datetime.fromisoformat(item["paged_at"]["S"]) if "paged_at" in item else None)
    except (KeyError, TypeError, ValueError):
        return None
