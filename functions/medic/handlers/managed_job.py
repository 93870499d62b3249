"""Lambda entry point for the managed-job services beside SageMaker: "Batch Job State Change" (FAILED; RUNNING of
Medic's restarts) and "Model Customization Job State Change" (Failed; InProgress of Medic's restarts). One function
for them (one reserved concurrency, one dead-letter queue): each event goes to its service's flow by its source (any
other is the Batch flow's to reject)."""

from __future__ import annotations

from typing import Any

from medic.handlers import cold_start

with cold_start():  # the imports build what lives as long as the container: frozen, never collected
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from medic.flows.jobs.batch import restart_batch_job
    from medic.flows.jobs.bedrock import restart_bedrock_job
    from medic.obs import logger, note_event, tracer
    from medic.wiring import dependencies


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict:
    note_event(event)
    if isinstance(event, dict) and event.get("source") == "aws.bedrock":
        return restart_bedrock_job(event, dependencies())
    return restart_batch_job(event, dependencies())
