"""Repair histories per node position (issue 32): the repairs a NodeLogicalId went through, whoever made them, so a
node that keeps failing (a repair loop) is seen across replacements.

One item per position, `loop#<cluster>` / `<NodeLogicalId>`: `repairs`, a JSON list of the repairs that ended
within the loop window (at most MAX_KEPT, oldest dropped), each once by its incident and start (a conditional update
on the item's `version`); `paged_at` once the loop paged (a new page only after the loop's window has passed
since). TTL: the window after its last repair.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import NamedTuple

from medic.ledger.table import Key, Table, epoch

PARTITION = "loop#"
MAX_KEPT = 20  # bounded whatever the loop count: the page lists the latest


class Repair(NamedTuple):
    incident: str  # the repair's node incident: a repair counts once
    fault: str
    action: str  # reboot | replace | unknown
    by: str  # medic | hyperpod | someone
    ended_at: str  # ISO 8601: the node seen back
    minutes: int | None  # from the fault (or the repair's start) to the node back; None: unknown
    node_id: str  # the instance repaired (a replacement's old id)
    started_at: str | None = None  # ISO 8601: its fault (or the repair's start); with the incident, the repair's key


class History(NamedTuple):
    cluster: str
    position: str
    repairs: tuple[Repair, ...]
    paged_at: datetime | None = None


class LoopStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def _key(self, cluster: str, position: str) -> Key:
        return self.table.key(f"{PARTITION}{cluster}", position)

    def add(self, cluster: str, position: str, repair: Repair, now: datetime, window: timedelta) -> History | None:
        """Add the repair (once by its incident and start) and drop those older than the window: the history after it,
        or None when the repair was already there."""
        for _ in range(3):  # a racing writer's update costs one more read
            item = self.table.get(self._key(cluster, position))
            history = _parse(cluster, position, item) if item else History(cluster, position, ())
            key = (repair.incident, repair.started_at)
            if any((kept.incident, kept.started_at) == key for kept in history.repairs):
                return None
            cutoff = now - window
            kept = [old for old in history.repairs if datetime.fromisoformat(old.ended_at) > cutoff]
            repairs = tuple([*kept, repair][-MAX_KEPT:])
            version = int(item["version"]["N"]) if item and "version" in item else 0
            values = {":r": {"S": json.dumps([one._asdict() for one in repairs])}, ":v": {"N": str(version + 1)},
                      ":exp": {"N": str(epoch(now + window))}}
            condition = "attribute_not_exists(pk)"
            if item and "version" in item:
                values[":old"] = {"N": str(version)}
                condition = "version = :old"
            elif item:
                condition = "attribute_not_exists(version)"
            expression = "SET repairs = :r, version = :v, expires_at = :exp"
            if self.table.update_if(self._key(cluster, position), expression, condition, values) is not None:
                return History(cluster, position, repairs, history.paged_at)
        return None

    def claim_page(self, cluster: str, position: str, now: datetime, window: timedelta) -> bool:
        """The loop's one page: True once per window."""
        return self.table.update_if(self._key(cluster, position), "SET paged_at = :now",
                                    "attribute_exists(pk) AND (attribute_not_exists(paged_at) OR paged_at < :cutoff)",
                                    {":now": {"S": now.isoformat()}, ":cutoff": {"S": (now - window).isoformat()}}
                                    ) is not None


def _parse(cluster: str, position: str, item: dict) -> History:
    try:
        repairs = tuple(Repair(**one) for one in json.loads(item["repairs"]["S"]))
    except (KeyError, TypeError, ValueError):
        repairs = ()
    paged = item.get("paged_at", {}).get("S")
    return History(cluster, position, repairs, datetime.fromisoformat(paged) if paged else None)
