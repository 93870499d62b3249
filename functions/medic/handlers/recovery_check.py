"""Lambda entry point for the proof-of-recovery schedule (every 5 minutes)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from medic.flows.recovery.check import check_recoveries
from medic.obs import logger, tracer
from medic.wiring import dependencies


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict:
    return {"concluded": len(check_recoveries(event, dependencies()))}
