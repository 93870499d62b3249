"""The ledger's stream records as Lambda delivers them (a batch of DynamoDB Streams records), read with Medic's own
small model, and the batch answered with the records to retry.

Medic's own because Powertools' parser models package builds every event source's models when it is imported, and its
batch utility more (together about 0.2× `import boto3` of the results function's cold start, issue 31). The model has
the fields and checks of Powertools' `DynamoDBStreamRecordModel` (aws_lambda_powertools/utilities/parser/models/
dynamodb.py), and Keys and NewImage are deserialized by the same `TypeDeserializer` (DynamoDB's attribute values to
Python's). The batch follows Lambda's partial batch response for streams ("Configuring partial batch response with
DynamoDB and Lambda", the Lambda developer guide: `batchItemFailures` of `itemIdentifier` = the record's
`SequenceNumber`; Lambda retries from the lowest) and Powertools' BatchProcessor: every record is handled, each
failure reported, and a batch whose every record failed raises, so Lambda retries it whole.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from aws_lambda_powertools.shared.dynamodb_deserializer import TypeDeserializer
from pydantic import BaseModel, field_validator

_DESERIALIZER = TypeDeserializer()


class StreamChange(BaseModel):
    """A stream record's `dynamodb` member (DynamoDB Streams API reference, StreamRecord)."""

    ApproximateCreationDateTime: datetime | None = None
    Keys: dict[str, Any]
    NewImage: dict[str, Any] | None = None
    OldImage: dict[str, Any] | None = None
    SequenceNumber: str
    SizeBytes: int
    StreamViewType: Literal["NEW_AND_OLD_IMAGES", "KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE"]

    @field_validator("Keys", "NewImage", "OldImage", mode="before")
    @classmethod
    def _deserialize(cls, value: Any) -> Any:
        # as Powertools' model: a map that is not one raises AttributeError, an unknown type TypeError (the caller
        # rejects the record: no retry could read it)
        return {name: _DESERIALIZER.deserialize(item) for name, item in value.items()} if value is not None else None


class StreamRecord(BaseModel):
    """One record of the batch (DynamoDB Streams API reference, Record)."""

    eventID: str
    eventName: Literal["INSERT", "MODIFY", "REMOVE"]
    eventVersion: float
    eventSource: Literal["aws:dynamodb"]
    awsRegion: str
    eventSourceARN: str
    dynamodb: StreamChange


class StreamBatchFailed(Exception):
    """Every record of the batch failed: Lambda retries the batch whole (as Powertools' BatchProcessingError)."""


def process_stream_batch(records: list[Any], handle: Callable[[dict], Any]) -> dict:
    """Each record to ``handle`` (a raw record: it parses it itself, so an unreadable one is rejected alone); the
    records that raised, as Lambda's partial batch response."""
    failures = []
    for raw in records:
        try:
            handle(raw)
        except Exception:  # noqa: BLE001 - any failure of one record is that record's retry, not the batch's
            sequence = raw.get("dynamodb", {}).get("SequenceNumber") if isinstance(raw, dict) else None
            failures.append({"itemIdentifier": sequence})
    if records and len(failures) == len(records):
        raise StreamBatchFailed(f"All {len(records)} records failed; each was logged")
    return {"batchItemFailures": failures}
