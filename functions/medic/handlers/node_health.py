"""Lambda entry point for "SageMaker HyperPod Cluster Node Health Event", and for Medic's canary (the canary rule
delivers its events here, on the path HyperPod's node events take: medic.flows.canary.pipeline, arrival.py)."""

from __future__ import annotations

from typing import Any

from medic.handlers import cold_start

with cold_start():  # the imports build what lives as long as the container: frozen, never collected
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from medic.config_core import CANARY_SOURCE
    from medic.flows.node.health_event import remediate_node
    from medic.obs import logger, note_event, tracer
    from medic.wiring import dependencies


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict:
    note_event(event)
    if isinstance(event, dict) and event.get("source") == CANARY_SOURCE:  # the canary rule's event
        from medic.flows.canary.arrival import record_canary  # imported by the canary's run: a fault never needs it

        return record_canary(event, dependencies())
    return remediate_node(event, dependencies())
