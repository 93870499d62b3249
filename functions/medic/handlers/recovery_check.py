"""Lambda entry point for the proof-of-recovery schedule (every 5 minutes): the restarted jobs' proofs of recovery,
and the job restarts whose clone has now trained (their incident lines; a Batch or Bedrock clone past its wait)."""

from __future__ import annotations

from typing import Any

from medic.handlers import cold_start

with cold_start():  # the imports build what lives as long as the container: frozen, never collected
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from medic.flows.jobs.timeline import conclude_clone_timelines
    from medic.flows.recovery.check import check_recoveries
    from medic.obs import logger, tracer
    from medic.wiring import dependencies


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict:
    deps = dependencies()
    concluded = len(check_recoveries(event, deps))
    watched = any(deps.config.configures(section) for section in ("training_jobs", "batch_jobs", "bedrock_jobs"))
    timelines = conclude_clone_timelines(deps) if watched else 0
    return {"concluded": concluded, "job_timelines": timelines}
