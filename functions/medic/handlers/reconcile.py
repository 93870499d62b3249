"""Lambda entry point for the reconcile schedule (every 5 minutes): see medic.flows.node.sweep, then the sweep of
agent commands that never got a result (medic.flows.agent.command_sweep), then the EKS agents' node reports
(medic.flows.agent.eks_nodes: loaded only by a stack with an EKS cluster), then the operators' pauses that ended or
stay on too long (medic.flows.mode.pauses), then each cluster's agent: its heartbeat's age, a silence reported once
(medic.flows.agent.silence), then the runs watched by pattern (medic.flows.stall.watch: loaded only by a stack with
watch rules; a stalled run restarted as by its stall alarm), then the training job restarts whose capacity backoff is
over (medic.flows.jobs.backoff.restart_due), then the canary (medic.flows.canary.pipeline)."""

from __future__ import annotations

from typing import Any

from medic.handlers import cold_start

with cold_start():  # the imports build what lives as long as the container: frozen, never collected
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from medic.flows.agent.command_sweep import sweep_commands
    from medic.flows.agent.silence import sweep_agent_silence
    from medic.flows.canary.pipeline import send_canary
    from medic.flows.jobs.backoff import restart_due
    from medic.flows.mode.pauses import see_to_pauses
    from medic.flows.node.sweep import reconcile
    from medic.obs import logger, tracer
    from medic.wiring import dependencies


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    deps = dependencies()
    report = reconcile(event, deps, remaining_seconds=(lambda: remaining() / 1000) if callable(remaining) else None)
    if not report.get("rejected"):  # not a schedule run: nothing else happens either
        report["expired_commands"] = len(sweep_commands(event, deps))
        report["node_report_records"] = len(_sweep_node_reports(event, deps))
        report["pause_notices"] = len(see_to_pauses(deps, report["run"]))
        report["agent_records"] = len(sweep_agent_silence(event, deps))
        if any(cluster.watch for cluster in deps.config.clusters):  # the stall flow loads only where rules watch
            from medic.flows.stall.watch import sweep_watched_runs

            report["watched_run_records"] = len(sweep_watched_runs(event, deps))
        report["training_restarts"] = len(restart_due(deps, report["run"]))
        report["canary"] = send_canary(deps)  # last: the pipeline's proof, whatever the sweeps above found
    return report


def _sweep_node_reports(event: dict[str, Any], deps: Any) -> list[dict]:
    """The EKS agents' node reports: the EKS flow (its report models, the restarts through the agent) is imported only
    where the config names an EKS cluster, so a Slurm-only stack's reconciler never loads it."""
    if not any(cluster.orchestrator == "eks" for cluster in deps.config.clusters):
        return []
    from medic.flows.agent.eks_nodes import sweep_node_reports

    return sweep_node_reports(event, deps)
