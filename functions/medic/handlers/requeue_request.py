"""Lambda entry point for "Medic Requeue Job" (source medic.operator): requeue a Slurm job through its agent.

    aws events put-events --entries '[{"Source": "medic.operator", "DetailType": "Medic Requeue Job",
      "Detail": "{\"cluster\": \"pretrain-slurm\", \"job_id\": \"4211\", \"reason\": \"NCCL hang\"}"}]'

Optional detail: `requested_by` (who asks: recorded as claimed, not verified). Who may send it: docs/security.md
(a Deny on `events:source` = medic.operator).
"""

from __future__ import annotations

from typing import Any

from medic.handlers import cold_start

with cold_start():  # the imports build what lives as long as the container: frozen, never collected
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from medic.flows.agent.restart import handle_requeue_event
    from medic.obs import logger, note_event, tracer
    from medic.wiring import dependencies


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict:
    note_event(event)
    return handle_requeue_event(event, dependencies())
