"""Capacity memory (issue 32): replacements that failed for capacity per instance group, and node replacements
Medic holds back until capacity is back.

`capacity#<cluster>` / `failed#<group>`: the last HyperPod cluster event saying a replacement (or scale-up) in the
group failed for capacity: `at`, `said` (HyperPod's words); TTL 1 day (the check looks back an hour).
`capacity#<cluster>` / `wait#<instance id>`: a node whose replace Medic did not call because it could not be served:
`fault`, `health_reason`, `since`, `signal` (what said so); each sweep checks capacity again and, once it is back,
takes the node down the node path (a conditional delete: one run). TTL 7 days.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from medic.ledger.table import Key, Table, epoch, expires, readable

PARTITION = "capacity#"


@dataclass(frozen=True)
class CapacityFailure:
    at: datetime
    said: str


@dataclass(frozen=True)
class CapacityWait:
    node_id: str
    fault: str
    health_reason: str
    since: datetime
    signal: str


class CapacityStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def _key(self, cluster: str, sk: str) -> Key:
        return self.table.key(f"{PARTITION}{cluster}", sk)

    def replacement_failed(self, cluster: str, group: str, at: datetime, said: str) -> None:
        self.table.put({**self._key(cluster, f"failed#{group}"), "at": {"S": at.isoformat()},
                        "said": {"S": said[:1000]}, "expires_at": {"N": str(epoch(at + timedelta(days=1)))}})

    def last_failure(self, cluster: str, group: str) -> CapacityFailure | None:
        item = self.table.get(self._key(cluster, f"failed#{group}"))
        return readable(lambda: CapacityFailure(datetime.fromisoformat(item["at"]["S"]), item["said"]["S"])) \
            if item else None

    def wait(self, cluster: str, wait: CapacityWait) -> bool:
        """Hold the node's replace until capacity is back; False when it is held already."""
        return self.table.put_if({**self._key(cluster, f"wait#{wait.node_id}"), "fault": {"S": wait.fault},
                                  "health_reason": {"S": wait.health_reason[:1000]},
                                  "since": {"S": wait.since.isoformat()}, "signal": {"S": wait.signal[:1000]},
                                  "expires_at": expires(wait.since)}, "attribute_not_exists(pk)")

    def waits(self, cluster: str) -> list[CapacityWait]:
        found = []
        for item in self.table.partition(f"{PARTITION}{cluster}"):
            sk = item["sk"]["S"]
            if sk.startswith("wait#"):
                wait = readable(lambda item=item, sk=sk: CapacityWait(
                    sk.removeprefix("wait#"), item["fault"]["S"], item["health_reason"]["S"],
                    datetime.fromisoformat(item["since"]["S"]), item["signal"]["S"]))
                if wait is not None:
                    found.append(wait)
        return found

    def end_wait(self, cluster: str, node_id: str) -> bool:
        return self.table.delete_if(self._key(cluster, f"wait#{node_id}"))
