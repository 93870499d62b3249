"""Agent memory: the commands Medic issued to the on-cluster agents, their final records, heartbeats.

Command items are not prefixed in dry runs: a dry run never queues a command. Medic writes only
`command#<id>` items; each agent writes only under `agent#<its cluster>` (IAM's dynamodb:LeadingKeys), so
nothing an agent writes can pass for something Medic wrote.
"""

from __future__ import annotations

from datetime import UTC, datetime

from medic.ledger.table import Key, Table, expires


def command_key(command_id: str, sk: str) -> Key:
    return {"pk": {"S": f"command#{command_id}"}, "sk": {"S": sk}}


class AgentStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def agent_heartbeat(self, cluster: str) -> datetime | None:
        """When the cluster's Slurm agent last reported in (agents write it; dry runs read the real one)."""
        item = self.table.get({"pk": {"S": f"agent#{cluster}"}, "sk": {"S": "heartbeat"}})
        try:
            at = datetime.fromisoformat(item["at"]["S"]) if item else None
        except (KeyError, TypeError, ValueError):
            return None  # unreadable: as good as no heartbeat
        return at.replace(tzinfo=UTC) if at is not None and at.tzinfo is None else at

    def record_command(self, command_id: str, context: dict[str, str], now: datetime) -> None:
        """What a queued agent command is for, so its result can be recorded against the same incident."""
        self.table.put({**command_key(command_id, "issued"), **{key: {"S": value} for key, value in context.items()},
                        "issued_at": {"S": now.isoformat()}, "expires_at": expires(now)})

    def command_context(self, command_id: str) -> dict[str, str]:
        """What record_command wrote for the command; empty when Medic has no record of issuing it."""
        item = self.table.get(command_key(command_id, "issued"))
        return {key: value["S"] for key, value in (item or {}).items() if "S" in value and key not in ("pk", "sk")}

    def claim_command_record(self, command_id: str, now: datetime) -> bool:
        """True for the first delivery of a command's result: its final record is written once."""
        return self.table.put_if(
            {**command_key(command_id, "recorded"), "recorded_at": {"S": now.isoformat()}, "expires_at": expires(now)},
            "attribute_not_exists(pk)")

    def claim_rejected_result(self, cluster: str, command_id: str, now: datetime) -> bool:
        """True for the first delivery of a result Medic rejects. Kept apart from `recorded`: a result forged
        by another cluster's agent must not stop the real result of the command from being recorded."""
        return self.table.put_if(
            {**command_key(command_id, f"rejected#{cluster}"), "recorded_at": {"S": now.isoformat()},
             "expires_at": expires(now)},
            "attribute_not_exists(pk)")
