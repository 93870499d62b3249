"""The canary's memory (flows/canary): the one Medic sent last and the last one that came back. One item."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from medic.ledger.table import Key, Table, expires


def canary_key(table: Table) -> Key:
    return table.key("canary#pipeline", "state")


class CanaryState(NamedTuple):
    sent_id: str | None  # the last canary Medic put (None: none yet)
    sent_at: datetime | None
    first_sent_at: datetime | None  # the first canary since the item exists: a canary that never came back counts
    arrived_at: datetime | None  # from here
    arrived_id: str | None


class CanaryStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def load(self) -> CanaryState:
        item = self.table.get(canary_key(self.table)) or {}

        def text(name: str) -> str | None:
            return item.get(name, {}).get("S")

        def moment(name: str) -> datetime | None:
            value = text(name)
            try:
                return datetime.fromisoformat(value) if value else None
            except ValueError:
                return None

        return CanaryState(text("sent_id"), moment("sent_at"), moment("first_sent_at"), moment("arrived_at"),
                           text("arrived_id"))

    def sent(self, canary_id: str, at: datetime) -> None:
        """The canary Medic just put: the one its target expects."""
        self.table.update(canary_key(self.table),
                          "SET sent_id = :id, sent_at = :at, first_sent_at = if_not_exists(first_sent_at, :at), "
                          "expires_at = :expires",
                          {":id": {"S": canary_id}, ":at": {"S": at.isoformat()}, ":expires": expires(at, days=30)})

    def arrived(self, canary_id: str, at: datetime) -> bool:
        """The canary came back through the rule: True when it is the one Medic sent last (one conditional write:
        a canary Medic did not send, or an older one, never makes the pipeline look alive)."""
        return self.table.update_if(canary_key(self.table), "SET arrived_id = :id, arrived_at = :at",
                                    "sent_id = :id", {":id": {"S": canary_id}, ":at": {"S": at.isoformat()}}) \
            is not None
