"""Lambda entry point for "SageMaker Training Job State Change" (Failed)."""

from __future__ import annotations

from typing import Any

from medic.handlers import cold_start

with cold_start():  # the imports build what lives as long as the container: frozen, never collected
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from medic.flows.jobs.restart import restart_training_job
    from medic.obs import logger, note_event, tracer
    from medic.wiring import dependencies


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict:
    note_event(event)
    return restart_training_job(event, dependencies())
