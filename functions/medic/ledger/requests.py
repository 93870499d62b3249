"""Request memory: each delivered event id (node health, cluster event, operator request) acts once; and each
cluster's budget of operator requests per clock hour."""

from __future__ import annotations

from datetime import datetime

from medic.config_core import DEDUPE_DAYS
from medic.ledger.table import Key, Table, expires


class RequestStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def claim_key(self, trigger: str, event_id: str) -> Key:
        return self.table.key(f"request#{trigger}#{event_id}", "claim")

    def _claim_item(self, trigger: str, event_id: str, now: datetime) -> dict:
        # Kept as long as the event can come back (a DLQ redrive under an operator's override: medic.config)
        return {**self.claim_key(trigger, event_id), "claimed_at": {"S": now.isoformat()},
                "expires_at": expires(now, days=DEDUPE_DAYS)}

    def claim_request(self, trigger: str, event_id: str, now: datetime) -> bool:
        """True for the first delivery of an explicit request (an event id names one request)."""
        return self.table.put_if(self._claim_item(trigger, event_id, now), "attribute_not_exists(pk)")

    def claim_write(self, trigger: str, event_id: str, now: datetime) -> dict:
        """The same claim as one write of a transaction (the node path claims its event with the node)."""
        return {"Put": {"TableName": self.table.name, "Item": self._claim_item(trigger, event_id, now),
                        "ConditionExpression": "attribute_not_exists(pk)"}}

    def budget_key(self, cluster: str, hour: str) -> Key:
        return self.table.key(f"opbudget#{cluster}", hour)

    def spend_operator_request(self, cluster: str, now: datetime, per_hour: int) -> bool:
        """Count one operator request against the cluster's budget for this clock hour; False when it is spent.
        Atomic under races (one conditional update)."""
        return self.table.update_if(
            self.budget_key(cluster, operator_hour(now)), "ADD requests :one SET expires_at = :exp",
            "attribute_not_exists(requests) OR requests < :max",
            {":one": {"N": "1"}, ":max": {"N": str(per_hour)}, ":exp": expires(now, days=1)}) is not None


def operator_hour(now: datetime) -> str:
    """The clock hour (UTC) a request budget counts in: `2026-11-20T08`."""
    return now.strftime("%Y-%m-%dT%H")
