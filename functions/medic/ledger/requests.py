"""Request memory: each delivered event id (node health, cluster event, operator request) acts once."""

from __future__ import annotations

from datetime import datetime

from medic.ledger.table import Key, Table, expires


class RequestStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def _claim_key(self, trigger: str, event_id: str) -> Key:
        return self.table.key(f"request#{trigger}#{event_id}", "claim")

    def claim_request(self, trigger: str, event_id: str, now: datetime) -> bool:
        """True for the first delivery of an explicit request (an event id names one request)."""
        return self.table.put_if({**self._claim_key(trigger, event_id), "claimed_at": {"S": now.isoformat()},
                                  "expires_at": expires(now)}, "attribute_not_exists(pk)")

    def release_node_event(self, event_id: str) -> None:
        """The run that claimed a node health event failed with an error: let Lambda's retry of it act.
        (Only node events are released: IAM grants DeleteItem on request#node_health# alone.)"""
        self.table.delete(self.table.key(f"request#node_health#{event_id}", "claim"))
