"""The ledger (DynamoDB, pk S / sk S, TTL on `expires_at`): claims, results and heartbeats.

Items the agent writes (the Lambda side reads them), all under its own cluster's partition keys: its
instance role may write nothing else (IAM dynamodb:LeadingKeys), and Medic trusts a result only as far as
its key says who wrote it.
  agent#<cluster>#command#<id> / claim    written once, conditionally, before a command runs
  agent#<cluster>#command#<id> / result   status executed|failed, Slurm's message, what it was for
  agent#<cluster> / heartbeat             `at` (ISO 8601, the agent's clock: for display), host, version
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Callable

from botocore.exceptions import ClientError

RESULT_TTL = timedelta(days=7)
HEARTBEAT_TTL = timedelta(days=1)
MESSAGE_LIMIT = 1000


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def command_key(cluster: str, command_id: str, sk: str) -> dict[str, dict[str, str]]:
    """The agent's own item for one command (never Medic's `command#<id>` items)."""
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

    def claim(self, cluster: str, command_id: str, now: datetime, host: str) -> bool:
        """True when this agent may run the command; False when it already ran (or is running) somewhere."""
        item = {**command_key(cluster, command_id, "claim"), "claimed_at": {"S": now.isoformat()}, "host": {"S": host},
                "expires_at": {"N": str(epoch(now + RESULT_TTL))}}
        try:
            self.client.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def put_result(self, result: dict[str, str], now: datetime) -> None:
        """result: command_id, status, message, cluster, kind, target, incident, finished_at, and any extras."""
        fields = dict(result)
        fields["message"] = fields.get("message", "")[:MESSAGE_LIMIT]
        item: dict[str, Any] = {**command_key(fields["cluster"], fields.pop("command_id"), "result"),
                                "expires_at": {"N": str(epoch(now + RESULT_TTL))}}
        for name, value in fields.items():
            if isinstance(value, (list, tuple)):
                item[name] = {"L": [{"S": str(part)} for part in value]}
            else:
                item[name] = {"S": str(value)}
        self.client.put_item(TableName=self.table, Item=item)

    def heartbeat(self, cluster: str, now: datetime, host: str, version: str) -> None:
        self.client.put_item(TableName=self.table, Item={
            "pk": {"S": f"agent#{cluster}"}, "sk": {"S": "heartbeat"}, "at": {"S": now.isoformat()},
            "host": {"S": host}, "version": {"S": version}, "expires_at": {"N": str(epoch(now + HEARTBEAT_TTL))},
        })
