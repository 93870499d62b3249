"""A stand-in stream handler for harness specs: it keeps every batch it is given and answers from a
script (``None``: success; a list of sequence-number indexes: those batch items failed; an exception:
raised)."""

from __future__ import annotations

from typing import Any

batches: list[list[dict]] = []
script: list[Any] = []


def handler(event: dict, context: object) -> dict:
    batches.append(event["Records"])
    answer = script.pop(0) if script else None
    if isinstance(answer, BaseException):
        raise answer
    failed = [event["Records"][index]["dynamodb"]["SequenceNumber"] for index in answer or []]
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}
