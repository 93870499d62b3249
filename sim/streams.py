"""Lambda event source mappings on DynamoDB streams, as the Lambda service runs them.

moto keeps a stream for each table created with a StreamSpecification and serves it through the
DynamoDB Streams API (DescribeStream, GetShardIterator, GetRecords), but it does not poll it for
Lambda. Here each ``AWS::Lambda::EventSourceMapping`` on a table's stream reads the stream with that
API, from its StartingPosition, turns each record into the shape Lambda delivers (DynamoDB JSON,
``eventSourceARN``, epoch ``ApproximateCreationDateTime``: DynamoDB Streams API reference, StreamRecord, "in UNIX
epoch time format and rounded down to the closest second"), keeps those its FilterCriteria match
(moto's EventBridge pattern matcher: Lambda filters use the same syntax) and hands them to the
function in batches of BatchSize, in order.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from moto.events.models import EventPattern


@dataclass
class StreamMapping:
    logical_id: str
    function: Any  # sim.world.Function
    stream_arn: str
    filters: list[EventPattern] = field(default_factory=list)
    batch_size: int = 100  # Lambda's default for DynamoDB streams
    max_retries: int = -1  # -1: until the record expires (Lambda's default)
    bisect: bool = False
    report_item_failures: bool = False
    starting_position: str = "TRIM_HORIZON"
    on_failure: str = ""  # the SQS queue URL of DestinationConfig.OnFailure ("": none)
    shard_id: str = ""  # the shard it reads (moto's table streams have one)
    _iterator: str | None = None
    _polled_at_write: int = -1  # the table-write count when this mapping last read its stream

    def matches(self, record: dict) -> bool:
        return not self.filters or any(pattern.matches_event(record) for pattern in self.filters)


def lambda_record(raw: dict, stream_arn: str, region: str) -> dict:
    """A GetRecords record (botocore-parsed) as Lambda puts it in the event."""
    record = _jsonable(raw)
    record["awsRegion"] = region  # moto writes us-east-1 whatever the table's region
    record["eventVersion"] = "1.1"
    record["eventSourceARN"] = stream_arn
    return record


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    if isinstance(value, datetime):
        return int(value.timestamp())
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    return value


# DynamoDB calls that can put a record on a table's stream.
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems", "ExecuteStatement",
                    "BatchExecuteStatement", "ExecuteTransaction"})


class Streams:
    def __init__(self, client: Callable[[str], Any], region: str) -> None:
        self.client = client  # the harness's own clients: reading the stream is not a handler's call
        self.region = region
        self.mappings: list[StreamMapping] = []
        self.writes = 0  # DynamoDB writes by anyone (handlers, agents, directives): no write, no new record
        # A process outside the replay writes to the tables too (the real agent, through the live session's endpoint,
        # sim/live.py): its writes are not counted here, so every poll reads the streams.
        self.other_writers = False

    def count_write(self, model: Any = None, **kwargs: Any) -> None:
        """A ``before-call.dynamodb`` hook: count the writes, so a stream nobody wrote to is not read."""
        if model is None or getattr(model, "name", None) in WRITES:
            self.writes += 1

    def add(self, mapping: StreamMapping) -> None:
        self.mappings.append(mapping)

    def poll(self, mapping: StreamMapping) -> list[dict]:
        """The new records on the mapping's stream that its filters keep (those it drops are consumed)."""
        if mapping._iterator is not None and mapping._polled_at_write == self.writes and not self.other_writers:
            return []  # nothing was written since the last read
        mapping._polled_at_write = self.writes
        streams = self.client("dynamodbstreams")
        if mapping._iterator is None:
            shards = streams.describe_stream(StreamArn=mapping.stream_arn)["StreamDescription"].get("Shards", [])
            if not shards:
                return []
            position = "LATEST" if mapping.starting_position == "LATEST" else "TRIM_HORIZON"
            mapping.shard_id = shards[0]["ShardId"]
            mapping._iterator = streams.get_shard_iterator(
                StreamArn=mapping.stream_arn, ShardId=mapping.shard_id, ShardIteratorType=position)["ShardIterator"]
        records: list[dict] = []
        while True:
            response = streams.get_records(ShardIterator=mapping._iterator, Limit=1000)
            mapping._iterator = response.get("NextShardIterator") or mapping._iterator
            batch = response.get("Records", [])
            records.extend(lambda_record(raw, mapping.stream_arn, self.region) for raw in batch)
            if len(batch) < 1000:
                break
        return [record for record in records if mapping.matches(record)]


def failure_record(mapping: StreamMapping, batch: list[dict], attempts: int, raised: bool, request_id: str,
                   now: datetime) -> dict:
    """What Lambda sends a stream mapping's on-failure destination for a batch it gave up on: an invocation record
    that says where the batch was, not the records ("The actual records aren't included, so you must process this
    record and retrieve them from the stream before they expire and are lost": Lambda developer guide, "Using AWS
    Lambda with Amazon DynamoDB", Error handling, whose example record this follows field by field)."""
    arrivals = [record.get("dynamodb", {}).get("ApproximateCreationDateTime", 0) for record in batch]
    response: dict[str, Any] = {"statusCode": 200, "executedVersion": "$LATEST"}
    if raised:
        response["functionError"] = "Unhandled"
    return {
        "requestContext": {"requestId": request_id, "functionArn": mapping.function.arn,
                           "condition": "RetryAttemptsExhausted", "approximateInvokeCount": attempts},
        "responseContext": response,
        "version": "1.0",
        "timestamp": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
        "DDBStreamBatchInfo": {
            "shardId": mapping.shard_id,
            "startSequenceNumber": batch[0]["dynamodb"]["SequenceNumber"],
            "endSequenceNumber": batch[-1]["dynamodb"]["SequenceNumber"],
            "approximateArrivalOfFirstRecord": _iso(min(arrivals)),
            "approximateArrivalOfLastRecord": _iso(max(arrivals)),
            "batchSize": len(batch),
            "streamArn": mapping.stream_arn,
        },
    }


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_filters(criteria: Any) -> list[EventPattern]:
    """``FilterCriteria: {Filters: [{Pattern: "<json>"}]}`` → matchers."""
    if not isinstance(criteria, dict):
        return []
    patterns = []
    for entry in criteria.get("Filters", []) or []:
        pattern = entry.get("Pattern") if isinstance(entry, dict) else None
        if pattern is not None:
            patterns.append(EventPattern.load(pattern if isinstance(pattern, str) else json.dumps(pattern)))
    return patterns
