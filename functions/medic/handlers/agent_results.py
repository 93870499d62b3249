"""Lambda entry point for the ledger table's stream (NEW_IMAGE): every item the agents write (their command results
and heartbeats are recorded; every item gets an expiry if the agent's own does not bound it: flows/agent/expiry.py).

Each `agent#<cluster>/heartbeat` becomes Medic's own note of when DynamoDB wrote it (flows/agent/heartbeats.py).
Each `agent#<cluster>#command#<id>/result` item becomes the command's final remediation record (or a
rejected one: flows/agent/results.py); every other item is skipped. A record that fails (an AWS error) is
reported as a batch item failure, so the stream retries it without blocking the records after it.
"""

from __future__ import annotations

from typing import Any

from medic.handlers import cold_start

with cold_start():  # the imports build what lives as long as the container: frozen, never collected
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from pydantic import ValidationError

    from medic.flows.agent.expiry import bound_agent_item
    from medic.flows.agent.heartbeats import heartbeat_cluster, record_heartbeat
    from medic.flows.agent.results import record_agent_result, rejected_stream_record
    from medic.flows.agent.stream import StreamRecord, process_stream_batch
    from medic.obs import logger, tracer
    from medic.wiring import dependencies


def _record(raw: dict) -> dict | None:
    # Records are parsed one by one: a record the model cannot read is rejected alone, it never fails the batch.
    try:
        parsed = StreamRecord.model_validate(raw)
    except (ValidationError, TypeError, AttributeError, ValueError) as error:
        # The deserializer raises TypeError/AttributeError on unknown type descriptors: no retry could read such a
        # record either.
        return rejected_stream_record(raw, error, dependencies())
    try:
        deps = dependencies()
        bound_agent_item(parsed, deps)  # every item an agent writes expires (flows/agent/expiry.py)
        cluster = heartbeat_cluster(parsed)
        if cluster is not None:
            record_heartbeat(parsed, cluster, deps)
            return None
        return record_agent_result(parsed, deps)
    except Exception:
        logger.exception("agent result not recorded; the stream will retry it",
                         extra={"stream_event_id": parsed.eventID, "keys": parsed.dynamodb.Keys})
        raise


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict:
    if not isinstance(event, dict) or not isinstance(event.get("Records"), list) or not event["Records"]:
        # Only the event source mapping invokes this; anything else is nobody's batch to retry.
        logger.warning("not a DynamoDB Streams batch; nothing to do", extra={"event_type": type(event).__name__})
        return {"batchItemFailures": []}
    return process_stream_batch(event["Records"], _record)
