"""Quarantined node positions (issue 32, `quarantine_repeat_offenders`): a NodeLogicalId in a repair loop that Medic
took out of service after its next repair (drained in Slurm with Medic's reason, cordoned on EKS) until an operator's
`medic release`.

One item per position, `quarantine#<cluster>` / `<NodeLogicalId>`: `node_id` and `node_name` (the instance and its
Slurm or Kubernetes node name when quarantined), `since`, `why`, `command_id` (the agent's quarantine_node). Written
once (a conditional put: a position held already is not held twice; one released may be held again). `released_at`,
`released_by` and `release_command` once released (a conditional update: two releases are one). No TTL while held
(it lasts until an operator releases it); a released item expires RELEASED_DAYS later.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from medic.ledger.table import Key, Table, expires

PARTITION = "quarantine#"
RELEASED_DAYS = 30  # `medic status` no longer lists a released position; the item stays to answer a second release


@dataclass(frozen=True)
class Quarantine:
    cluster: str
    position: str  # the NodeLogicalId
    node_id: str
    node_name: str  # the Slurm node name, or the Kubernetes node name on EKS
    since: datetime
    why: str  # Medic's own words: the repairs that made the loop
    command_id: str = ""
    released_at: datetime | None = None
    released_by: str | None = None  # who asked, as the request said (claimed, not verified)

    @property
    def held(self) -> bool:
        return self.released_at is None

    def names(self) -> set[str]:
        """What an operator may call the node: its position, instance id or node name."""
        return {self.position, self.node_id, self.node_name}


class QuarantineStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def _key(self, cluster: str, position: str) -> Key:
        return self.table.key(f"{PARTITION}{cluster}", position)

    def hold(self, quarantine: Quarantine) -> bool:
        """Hold the position; False when it is held already."""
        item = {**self._key(quarantine.cluster, quarantine.position), "node_id": {"S": quarantine.node_id},
                "node_name": {"S": quarantine.node_name}, "since": {"S": quarantine.since.isoformat()},
                "why": {"S": quarantine.why}, "command_id": {"S": quarantine.command_id}}
        return self.table.put_if(item, "attribute_not_exists(pk) OR attribute_exists(released_at)")

    def all(self, cluster: str) -> list[Quarantine]:
        """Every position of the cluster, held or released (not yet expired), oldest first."""
        found = [one for item in self.table.partition(f"{PARTITION}{cluster}")
                 if (one := _parse(cluster, item)) is not None]
        return sorted(found, key=lambda one: one.since)

    def held(self, cluster: str) -> list[Quarantine]:
        return [one for one in self.all(cluster) if one.held]

    def find(self, cluster: str, node: str) -> Quarantine | None:
        """The position an operator names by its NodeLogicalId, instance id or node name: a held one first, else the
        latest released."""
        matching = [one for one in self.all(cluster) if node in one.names()]
        held = [one for one in matching if one.held]
        return (held or matching[-1:] or [None])[0]

    def release(self, cluster: str, position: str, by: str, command_id: str, now: datetime) -> bool:
        """Release the held position; False when it is not held (released already, or never held)."""
        return self.table.update_if(
            self._key(cluster, position),
            "SET released_at = :now, released_by = :by, release_command = :cmd, expires_at = :exp",
            "attribute_exists(pk) AND attribute_not_exists(released_at)",
            {":now": {"S": now.isoformat()}, ":by": {"S": by}, ":cmd": {"S": command_id},
             ":exp": expires(now, RELEASED_DAYS)}) is not None


def _parse(cluster: str, item: dict) -> Quarantine | None:
    try:
        released = item.get("released_at", {}).get("S")
        return Quarantine(cluster=cluster, position=item["sk"]["S"], node_id=item["node_id"]["S"],
                          node_name=item["node_name"]["S"], since=datetime.fromisoformat(item["since"]["S"]),
                          why=item.get("why", {}).get("S", ""), command_id=item.get("command_id", {}).get("S", ""),
                          released_at=datetime.fromisoformat(released) if released else None,
                          released_by=item.get("released_by", {}).get("S"))
    except (KeyError, TypeError, ValueError):
        return None
