"""Capacity memory (issue 32): replacements that failed for capacity per instance group, and node replacements
Medic holds back until capacity is back.

`capacity#<cluster>` / `failed`: per instance group, the last HyperPod cluster event saying a replacement (or
scale-up) in it failed for capacity: `at#<group>`, `said#<group>` (HyperPod's words); TTL 1 day after the last (the
check looks back an hour). One item per cluster, so the node path reads it in its one BatchGetItem
(ledger.node_event) before it knows the node's group (issue 31's call budget).
`capacity#<cluster>` / `wait#<instance id>`: a node whose replace Medic did not call because it could not be served:
`fault`, `health_reason`, `since`, `signal` (what said so); each sweep checks capacity again and, once it is back,
takes the node down the node path (a conditional delete: one run). TTL 7 days.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from medic.ledger.table import Key, Table, epoch, expires, readable

PARTITION = "capacity#"


class CapacityFailure(NamedTuple):
    at: datetime
    said: str


class CapacityWait(NamedTuple):
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

    def failed_key(self, cluster: str) -> Key:
        return self._key(cluster, "failed")

    def replacement_failed(self, cluster: str, group: str, at: datetime, said: str) -> None:
        self.table.update(self.failed_key(cluster), "SET #at = :at, #said = :said, expires_at = :expires",
                          {":at": {"S": at.isoformat()}, ":said": {"S": said[:1000]},
                           ":expires": {"N": str(epoch(at + timedelta(days=1)))}},
                          names={"#at": f"at#{group}", "#said": f"said#{group}"})

    def last_failure(self, cluster: str, group: str) -> CapacityFailure | None:
        return failure_of(self.table.get(self.failed_key(cluster)), group)

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


def failure_of(item: dict | None, group: str) -> CapacityFailure | None:
    """The group's last capacity failure in the cluster's `failed` item (None: none, or unreadable)."""
    if not item or f"at#{group}" not in item:
        return None
    return readable(lambda: CapacityFailure(datetime.fromisoformat(item[f"at#{group}"]["S"]),
                                            item.get(f"said#{group}", {}).get("S", "")))
