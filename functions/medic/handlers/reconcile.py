"""Lambda entry point for the reconcile schedule (every 5 minutes): see medic.reconcile."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from medic.deps import dependencies
from medic.obs import logger, tracer
from medic.reconcile import reconcile


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return reconcile(event, dependencies(),
                     remaining_seconds=(lambda: remaining() / 1000) if callable(remaining) else None)
