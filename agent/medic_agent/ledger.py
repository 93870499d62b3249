"""The ledger (DynamoDB, pk S / sk S, TTL on `expires_at`): claims, results and heartbeats.

Items the agent writes (the Lambda side reads them), all under its own cluster's partition keys: its
instance role may write nothing else (IAM dynamodb:LeadingKeys), and Medic trusts a result only as far as
its key says who wrote it.
  agent#<cluster>#command#<id> / claim    written once, conditionally, before a command runs
  agent#<cluster>#command#<id> / result   status executed|failed, Slurm's message, what it was for
  agent#<cluster> / heartbeat             `at` (ISO 8601, the agent's clock: for display), host, version,
                                          role `primary`: written only by the agent whose host runs the
                                          slurmctld in charge (role.py); the only heartbeat Medic counts
  agent#<cluster> / standby#<host>        the same, role `standby`, from each other head node's agent, with
                                          why it stands by and which host is in charge (Medic's stream
                                          filter keeps only sk `heartbeat`: a standby never counts as alive)

The claim is one transaction with a condition check on Medic's own `command#<cluster>#<id>/issued` item (which the
agent may check, never write; IAM lets it check only its own cluster's, `command#<cluster>#*`): the command runs
only if Medic issued exactly this command (id, cluster, kind, target, incident) and has not withdrawn it, and only
once (the claim's attribute_not_exists). A command Medic issued before it keyed commands by cluster is checked at
its old key, `command#<id>/issued`, where the stack still lets the agent check it (agent/README.md, "Upgrading").
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any, Callable

from botocore.exceptions import ClientError

from medic_agent.commands import Command
from medic_agent.role import PRIMARY

CLAIMED, ALREADY_CLAIMED, NOT_ISSUED = "claimed", "already_claimed", "not_issued"
RESULT_TTL = timedelta(days=7)
HEARTBEAT_TTL = timedelta(days=1)
MESSAGE_LIMIT = 1000


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def command_key(cluster: str, command_id: str, sk: str) -> dict[str, dict[str, str]]:
    """The agent's own item for one command (never Medic's `command#<cluster>#<id>` items)."""
    return {"pk": {"S": f"agent#{cluster}#command#{command_id}"}, "sk": {"S": sk}}


class Ledger:
    def __init__(self, table: str, client_factory: Callable[[], Any]) -> None:
        self.table = table
        self._client_factory = client_factory
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def claim(self, command: Command, now: datetime, host: str) -> str:
        """CLAIMED when this agent may run the command; ALREADY_CLAIMED when it already ran (or is running)
        somewhere; NOT_ISSUED when Medic's ledger has no such command for this cluster, kind, target and
        incident (a message Medic did not send: never run). Other errors raise (the message stays queued)."""
        claimed = self._claim(command, now, host, f"command#{command.cluster}#{command.command_id}")
        if claimed != NOT_ISSUED:
            return claimed
        # Issued by a Medic from before commands were keyed by cluster? Its old key, where that stack's grant lets the
        # agent check it; the current stack's grant refuses the check (AccessDenied): no such command for us.
        try:
            return self._claim(command, now, host, f"command#{command.command_id}")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "AccessDeniedException":
                return NOT_ISSUED
            raise

    def _claim(self, command: Command, now: datetime, host: str, issued_pk: str) -> str:
        item = {**command_key(command.cluster, command.command_id, "claim"), "claimed_at": {"S": now.isoformat()},
                "host": {"S": host}, "expires_at": {"N": str(epoch(now + RESULT_TTL))}}
        issued = {"pk": {"S": issued_pk}, "sk": {"S": "issued"}}
        expected = {"cluster": command.cluster, "kind": command.kind, "target": command.target,
                    "incident": command.incident}
        try:
            self.client.transact_write_items(TransactItems=[
                {"ConditionCheck": {
                    "TableName": self.table, "Key": issued,
                    # Medic withdraws a command it gave up on (no result by its deadline): it never runs late.
                    "ConditionExpression": " AND ".join([*(f"#{name} = :{name}" for name in expected),
                                                         "attribute_not_exists(withdrawn_at)"]),
                    "ExpressionAttributeNames": {f"#{name}": name for name in expected},
                    "ExpressionAttributeValues": {f":{name}": {"S": value} for name, value in expected.items()}}},
                {"Put": {"TableName": self.table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}},
            ])
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            codes = [reason.get("Code") for reason in error.response.get("CancellationReasons", [])]
            if codes[:1] == ["ConditionalCheckFailed"]:
                return NOT_ISSUED
            if codes[1:2] == ["ConditionalCheckFailed"]:
                return ALREADY_CLAIMED
            raise
        return CLAIMED

    def put_result(self, result: dict[str, str], now: datetime) -> None:
        """result: command_id, status, message, cluster, kind, target, incident, finished_at, and any extras."""
        fields = dict(result)
        fields["message"] = fields.get("message", "")[:MESSAGE_LIMIT]
        item: dict[str, Any] = {**command_key(fields["cluster"], fields.pop("command_id"), "result"),
                                "expires_at": {"N": str(epoch(now + RESULT_TTL))}}
        for name, value in fields.items():
            if isinstance(value, (list, tuple)):
                item[name] = {"L": [{"M": {key: {"S": str(text)} for key, text in part.items()}}
                                    if isinstance(part, dict) else {"S": str(part)} for part in value]}
            else:
                item[name] = {"S": str(value)}
        self.client.put_item(TableName=self.table, Item=item)

    def heartbeat(self, cluster: str, now: datetime, host: str, version: str, role: str = PRIMARY,
                  reason: str = "", in_charge: str | None = None) -> None:
        """The primary's heartbeat under `heartbeat`; a standby's under its own `standby#<host>`, never the same
        item, so a standby cannot make Medic believe a primary is alive."""
        item = {"pk": {"S": f"agent#{cluster}"}, "sk": {"S": heartbeat_sk(role, host)}, "at": {"S": now.isoformat()},
                "host": {"S": host}, "version": {"S": version}, "role": {"S": role},
                "expires_at": {"N": str(epoch(now + HEARTBEAT_TTL))}}
        if reason:
            item["reason"] = {"S": reason[:MESSAGE_LIMIT]}
        if in_charge:
            item["in_charge"] = {"S": in_charge}
        self.client.put_item(TableName=self.table, Item=item)


def heartbeat_sk(role: str, host: str) -> str:
    if role == PRIMARY:
        return "heartbeat"
    return "standby#" + (re.sub(r"[^A-Za-z0-9._-]", "_", host)[:128] or "unknown")
