"""Lambda entry point for the operator requests (source medic.operator), each through the cluster's agent:
"Medic Requeue Job" requeues a Slurm job (or restarts a watched EKS job); "Medic Release Node" returns a node Medic
quarantined to service (`medic release NODE --cluster C` sends it: flows/agent/quarantine.py).

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

    from medic.flows.agent.requests import RELEASE_DETAIL_TYPE
    from medic.flows.agent.restart import handle_requeue_event
    from medic.obs import logger, note_event, tracer
    from medic.wiring import dependencies


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict:
    note_event(event)
    if isinstance(event, dict) and event.get("detail-type") == RELEASE_DETAIL_TYPE:
        from medic.flows.agent.quarantine import handle_release_event

        return handle_release_event(event, dependencies())
    return handle_requeue_event(event, dependencies())
