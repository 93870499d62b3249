"""The ledger's table core: the client, key prefixes, conditional writes, transactions and TTL.

Every store in this package writes through one `Table`. Dry runs keep their own copy of every
Medic item (a key prefix, `dry_run#`), so a dry run never blocks a real action and still shows
what the budget and cooldown would do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from medic.adapters.aws import client as make_client
from medic.adapters.aws import error_code
from medic.core.mode import Mode

DRY_RUN = "dry_run#"  # the key prefix of a dry run's own copy of Medic's items
NODE_STATE_DAYS = 7  # long enough for escalation memory and cooldowns; TTL cleans up after
BATCH_GET_LIMIT = 100  # BatchGetItem takes 100 keys at most
Key = dict[str, dict[str, str]]
T = TypeVar("T")


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def expires(moment: datetime, days: int = NODE_STATE_DAYS) -> dict[str, str]:
    """The `expires_at` attribute (DynamoDB TTL: epoch seconds) for an item kept `days` after `moment`."""
    return {"N": str(epoch(moment + timedelta(days=days)))}


def readable(parse: Callable[..., T | None], *args: Any) -> T | None:
    """An item as a store parses it (``parse(*args)``); None when it is not what the store writes (an attribute
    missing or unreadable): an operator's overview leaves such an item out rather than failing."""
    try:
        return parse(*args)
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError):
        return None


class Table:
    def __init__(self, name: str, client: Any = None, namespace: str = "") -> None:
        self.name = name
        self._client = client
        self.namespace = namespace

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("dynamodb")
        return self._client

    def for_mode(self, mode: Mode | str) -> Table:
        namespace = DRY_RUN if Mode.of(mode) is Mode.DRY_RUN else ""
        if namespace == self.namespace:
            return self
        return Table(self.name, self.client, namespace)

    def key(self, pk: str, sk: str) -> Key:
        """A key of Medic's own items (prefixed in dry runs)."""
        return {"pk": {"S": f"{self.namespace}{pk}"}, "sk": {"S": sk}}

    def get(self, key: Key) -> dict | None:
        return self.client.get_item(TableName=self.name, ConsistentRead=True, Key=key).get("Item")

    def exists(self, key: Key) -> bool:
        return self.get(key) is not None

    def put(self, item: dict) -> None:
        self.client.put_item(TableName=self.name, Item=item)

    def delete(self, key: Key) -> None:
        self.client.delete_item(TableName=self.name, Key=key)

    def delete_if(self, key: Key) -> bool:
        """Delete the item if it exists; False when it did not (another run deleted it first)."""
        try:
            self.client.delete_item(TableName=self.name, Key=key, ConditionExpression="attribute_exists(pk)")
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def update(self, key: Key, expression: str, values: dict, names: dict | None = None) -> None:
        self.client.update_item(TableName=self.name, Key=key, UpdateExpression=expression,
                                ExpressionAttributeValues=values,
                                **({"ExpressionAttributeNames": names} if names else {}))

    def put_if(self, item: dict, condition: str, values: dict | None = None, names: dict | None = None) -> bool:
        """Put unless the condition fails; False when it does (another run got there first)."""
        try:
            self.client.put_item(TableName=self.name, Item=item, ConditionExpression=condition,
                                 **({"ExpressionAttributeValues": values} if values else {}),
                                 **({"ExpressionAttributeNames": names} if names else {}))
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def replace_if(self, item: dict, condition: str, values: dict | None = None) -> dict | None:
        """Put unless the condition fails: the item it replaced ({} when there was none), None when it fails."""
        try:
            response = self.client.put_item(TableName=self.name, Item=item, ConditionExpression=condition,
                                            ReturnValues="ALL_OLD",
                                            **({"ExpressionAttributeValues": values} if values else {}))
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return None
            raise
        return response.get("Attributes", {})

    def update_if(self, key: Key, expression: str, condition: str, values: dict, names: dict | None = None,
                  returns: str | None = None) -> dict | None:
        """Update unless the condition fails: the returned attributes ({} without `returns`), None when it fails."""
        try:
            response = self.client.update_item(
                TableName=self.name, Key=key, UpdateExpression=expression, ConditionExpression=condition,
                ExpressionAttributeValues=values, **({"ExpressionAttributeNames": names} if names else {}),
                **({"ReturnValues": returns} if returns else {}))
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return None
            raise
        return response.get("Attributes", {})

    def transact(self, writes: list[dict]) -> bool:
        """All the writes or none; False when a condition failed (TransactionCanceledException)."""
        try:
            self.client.transact_write_items(TransactItems=writes)
        except ClientError as error:
            if error_code(error) == "TransactionCanceledException":
                return False
            raise
        return True

    def partition(self, pk: str) -> Iterator[dict]:
        """Every item of one of Medic's partitions (prefixed in dry runs), every page."""
        paginator = self.client.get_paginator("query")
        for page in paginator.paginate(TableName=self.name, ConsistentRead=True, KeyConditionExpression="pk = :pk",
                                       ExpressionAttributeValues={":pk": {"S": f"{self.namespace}{pk}"}}):
            yield from page.get("Items", [])

    def newest(self, pk: str, limit: int) -> list[dict]:
        """The `limit` items of one of Medic's partitions with the highest sort keys, highest first."""
        return self.client.query(TableName=self.name, ConsistentRead=True, KeyConditionExpression="pk = :pk",
                                 ExpressionAttributeValues={":pk": {"S": f"{self.namespace}{pk}"}},
                                 ScanIndexForward=False, Limit=limit).get("Items", [])

    def scan(self) -> list[dict]:
        """Every item of the table, whatever its namespace or writer, every page. For an operator's overview
        (``medic status``); the handlers read by key. Each store picks its own items out (`among`)."""
        items: list[dict] = []
        for page in self.client.get_paginator("scan").paginate(TableName=self.name, ConsistentRead=True):
            items.extend(page.get("Items", []))
        return items

    def among(self, items: Iterable[dict], pk_prefix: str, sk: str | None = None) -> Iterator[tuple[str, str, dict]]:
        """The items of a scan in this table's namespace whose pk starts with `pk_prefix` (after the namespace's
        prefix) and, when given, whose sk is `sk`: (the rest of the pk, the sk, the item)."""
        for item in items:
            pk, item_sk = item.get("pk", {}).get("S"), item.get("sk", {}).get("S")
            if not isinstance(pk, str) or not isinstance(item_sk, str) or (sk is not None and item_sk != sk):
                continue
            if pk.startswith(DRY_RUN) != (self.namespace == DRY_RUN):
                continue  # the other namespace's copy
            pk = pk.removeprefix(self.namespace)
            if pk.startswith(pk_prefix):
                yield pk.removeprefix(pk_prefix), item_sk, item

    def batch_get(self, keys: Iterable[Key], attempts: int = 5) -> list[dict]:
        """The items that exist among the keys, in batches of 100; unprocessed keys (throttling) are asked
        again a few times, then one by one."""
        found: list[dict] = []
        keys = list(keys)
        for start in range(0, len(keys), BATCH_GET_LIMIT):
            pending = keys[start:start + BATCH_GET_LIMIT]
            for _ in range(attempts):
                response = self.client.batch_get_item(
                    RequestItems={self.name: {"Keys": pending, "ConsistentRead": True}})
                found.extend(response.get("Responses", {}).get(self.name, []))
                pending = response.get("UnprocessedKeys", {}).get(self.name, {}).get("Keys", [])
                if not pending:
                    break
            for key in pending:
                item = self.get(key)
                if item:
                    found.append(item)
        return found
