"""Lambda entry point for the ledger table's stream (NEW_IMAGE): the Slurm agents' command results.

Each `command#<id>/result` item becomes the command's final remediation record; every other item
is skipped. A record that fails (an AWS error) is reported as a batch item failure, so the stream
retries it without blocking the records after it.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.parser.models import DynamoDBStreamRecordModel
from aws_lambda_powertools.utilities.typing import LambdaContext

from medic.deps import dependencies
from medic.obs import logger, tracer
from medic.slurm_requeue import record_agent_result

processor = BatchProcessor(event_type=EventType.DynamoDBStreams, model=DynamoDBStreamRecordModel)


def _record(record: DynamoDBStreamRecordModel) -> dict | None:
    try:
        return record_agent_result(record, dependencies())
    except Exception:
        logger.exception("agent result not recorded; the stream will retry it",
                         extra={"stream_event_id": record.eventID, "keys": record.dynamodb.Keys})
        raise


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict:
    return process_partial_response(event=event, record_handler=_record, processor=processor, context=context)
