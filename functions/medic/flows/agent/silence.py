"""The reconciler's watch on each cluster's agent (issue 29, item 1): a silent agent is reported, never noticed only
when Medic needs it.

Per configured cluster, every run (5 minutes): the agent's heartbeat age by DynamoDB's clock → the gauges
`Medic/Cluster` `AgentHeartbeatAgeSeconds` and `AgentSilent` (dimensions Cluster, service) → the verdict
(silence_policy.judge_agent) → on a new silence of an agent Medic needs, one record (`fault: agent_silent`,
`outcome: failed`) and one page; when it reports again, one record (`fault: agent_back`) and one all-clear. Each is
claimed once in the ledger's `agentwatch#<cluster>` item (conditional writes), whatever the page windows do.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.config_core import Cluster
from medic.core.models import Action, Fault, Outcome, Trigger
from medic.core.pages import PageSource, PageText, PageWindow
from medic.core.record import About, Record
from medic.core.text import quoted, short
from medic.deps import Deps
from medic.flows.agent.silence_policy import AgentState, AgentVerdict, judge_agent, needs_agent
from medic.ledger.agents import AgentStore
from medic.obs import cluster_gauges, logger
from medic.outbox.pages import page_incident, page_resolution
from medic.outbox.records import emit

NEXT_STEP = {
    "slurm": "Check medic-agent on the controller node (systemctl status medic-agent; journalctl -u medic-agent) and "
             "that its instance role may write the ledger (agent/README.md); install it if it never was.",
    "eks": "Check the Medic agent (kubectl -n medic-agent get pods; kubectl -n medic-agent logs deploy/medic-agent) "
           "and its AWS credentials (EKS Pod Identity or IRSA); install it if it never was.",
}


def agent_incident(cluster: str) -> str:
    return f"agent:{cluster}:silent"


def sweep_agent_silence(raw: Any, deps: Deps) -> list[dict]:
    """One look at every configured cluster's agent: the records it wrote (a new silence, an agent back)."""
    run_id = str(raw.get("id", "schedule"))[:80] if isinstance(raw, dict) else "schedule"
    records: list[dict] = []
    for cluster in deps.config.clusters:
        try:
            records.extend(_watch(cluster, run_id, deps))
        except (ClientError, BotoCoreError) as error:  # the next run looks again
            logger.warning("agent watch failed", extra={"cluster": cluster.name, "error_code": error_code(error)})
    return records


def _watch(cluster: Cluster, run_id: str, deps: Deps) -> list[dict]:
    now, store = deps.now(), AgentStore(deps.table)  # heartbeats are real in every mode
    watch = store.watch_agent(cluster.name, store.agent_heartbeat(cluster.name), now)
    verdict = judge_agent(needed=needs_agent(deps.config, cluster), last_seen=watch.last_seen,
                          watching_since=watch.watching_since, reported=watch.reported, now=now,
                          guardrails=deps.config.guardrails_for(cluster))
    cluster_gauges(cluster.name, {"AgentHeartbeatAgeSeconds": int(verdict.age.total_seconds())},
                   unit=MetricUnit.Seconds)
    cluster_gauges(cluster.name, {"AgentSilent": int(verdict.state in (AgentState.SILENT,
                                                                        AgentState.NEVER_REPORTED))})
    about = About(incident=agent_incident(cluster.name), trigger=Trigger.RECONCILE, event_id=run_id,
                  mode=deps.mode.current(), cluster=cluster.name)
    window = PageWindow.cluster(PageSource.AGENT_SILENT, cluster.name)
    if verdict.report and store.claim_silence_report(cluster.name, verdict.silence, now):
        record = about.record(fault=Fault.AGENT_SILENT, action=Action.NONE, outcome=Outcome.FAILED,
                              reason=short(_silent_reason(cluster, verdict, watch.last_seen, watch.watching_since,
                                                          deps), 500))
        page = _silent_page(record, cluster, store.heartbeat_said(cluster.name),
                            never=verdict.state is AgentState.NEVER_REPORTED)
        return [emit(record.paged_if(page_incident(deps, deps.table, record, page,
                                                   claim=f"{agent_incident(cluster.name)}:{verdict.silence}",
                                                   window=window)))]
    if verdict.back and store.clear_silence_report(cluster.name, watch.reported):
        said = store.heartbeat_said(cluster.name)
        seen = f"{watch.last_seen:%Y-%m-%d %H:%M:%S} UTC" if watch.last_seen else "now"
        record = about.record(fault=Fault.AGENT_BACK, action=Action.NONE, outcome=Outcome.IGNORED,
                              reason=short(f"The agent on {cluster.name} reports again: its heartbeat at {seen} "
                                           f"(DynamoDB's clock){_said_text(said)}.", 500))
        text = PageText(f"[Medic] RESOLVED {cluster.name}: its agent reports again",
                        (f"Cluster:        {cluster.name}", f"What happened:  {record['reason']}",
                         f"Incident:       {record['incident']} (mode {record['mode']})"))
        return [emit(record.paged_if(page_resolution(deps, deps.table, record, text, window=window)))]
    return []


def _silent_reason(cluster: Cluster, verdict: AgentVerdict, last_seen: datetime | None, since: datetime,
                   deps: Deps) -> str:
    minutes = int(verdict.age.total_seconds() // 60)
    guardrails = deps.config.guardrails_for(cluster)
    needs = ("drains around node repairs and requeues" if cluster.orchestrator == "slurm"
             else "restarts of its watched jobs")
    if verdict.state is AgentState.NEVER_REPORTED:
        heard = (f"The agent on {cluster.name} has never reported since Medic began watching the cluster at "
                 f"{since:%Y-%m-%d %H:%M} UTC ({minutes // 60} h, more than agent_install_grace_hours "
                 f"{guardrails.agent_install_grace_hours} h)")
    else:
        heard = (f"The agent on {cluster.name} has been silent for {minutes} min (its last heartbeat "
                 f"{last_seen:%Y-%m-%d %H:%M:%S} UTC by DynamoDB's clock; agent_silence_minutes "
                 f"{guardrails.agent_silence_minutes})")
    return f"{heard}. Until it reports, Medic cannot see or act through it: {needs} fail or go ahead without it."


def _said_text(said: dict[str, str]) -> str:
    """What the agent said of itself (its word, quoted)."""
    parts = [f"{name} {quoted(value, 64)}" for name, value in said.items()]
    return f"; the agent said {', '.join(parts)}" if parts else ""


def _silent_page(record: Record, cluster: Cluster, said: dict[str, str], *, never: bool) -> PageText:
    what = "has never reported" if never else "is silent"
    lines = (
        f"Cluster:        {cluster.name} ({cluster.orchestrator})",
        f"Agent:          {'; '.join(f'{name} {quoted(value, 64)}' for name, value in said.items()) or 'unknown'}",
        f"What happened:  {record['reason']}",
        "",
        f"What to do:     {NEXT_STEP[cluster.orchestrator]} `medic status` shows each agent's last heartbeat. "
        "Medic pages once per silence, and once when it reports again.",
        f"Incident:       {record['incident']} (mode {record['mode']})",
    )
    return PageText(f"[Medic] {cluster.name}: its agent {what}"[:100], lines)
