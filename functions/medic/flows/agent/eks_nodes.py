"""The EKS agents' node reports, read by the reconciler's schedule (every 5 minutes).

An EKS agent writes, with each heartbeat, the nodes Kubernetes shows in trouble (NotReady, or labelled unhealthy
by HyperPod) with the training pods on them (`agent#<cluster>/nodes`). Per EKS cluster whose agent is alive:
  read the report → validate it (the agent's word) → per node in trouble, once per episode, a record naming the
  watched jobs whose pods are on it (at most ten a sweep, the rest in one summary record; a page when HyperPod will
  not repair the node by itself, one per cluster per hour, under an incident of the agent's own namespace, never the
  node's) → per watched job with pods stuck Terminating on a NotReady node for longer than the guardrail, a restart
  through the agent, under the job's restart budget (the agent force-deletes the stuck pods; never a pod of a job
  Medic does not watch, never on a Ready node: its kubelet is alive).
Medic never reboots or replaces a node on an agent's word: node actions come from HyperPod's own events.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from medic.adapters.aws import error_code
from medic.config_core import Cluster, Job
from medic.core.mode import Mode
from medic.core.models import Action, Fault, Outcome, Trigger, Why
from medic.core.pages import PageSource, PageText, PageWindow, console_link
from medic.core.progress import PROBE_HISTORY, RecoveryWatch
from medic.core.record import About, Record
from medic.core.text import short
from medic.deps import Deps
from medic.flows.agent.commands import heartbeat_is_fresh
from medic.flows.agent.eks import (
    NodeNotice,
    StuckJob,
    agent_node_incident,
    agent_nodes_incident,
    assess_node_report,
    eks_job_incident,
    notices_to_record,
    overflow_reason,
    read_node_report,
    stuck_but_not_stalled,
)
from medic.flows.agent.restart import RestartRequest, restart_through_agent
from medic.flows.recovery.policy import made_progress, recovery_deadline
from medic.ledger.agents import AgentStore, NodeReportStore
from medic.ledger.clusters import ClusterInfoStore, fresh_cluster_info
from medic.ledger.incidents import IncidentStore
from medic.ledger.nodes import NodeStore
from medic.ledger.requests import RequestStore
from medic.obs import logger
from medic.outbox.pages import page_incident
from medic.outbox.records import emit


def sweep_node_reports(raw: Any, deps: Deps) -> list[dict]:
    """One pass over the EKS clusters' node reports: the records it wrote."""
    run_id = str(raw.get("id", "schedule"))[:80] if isinstance(raw, dict) else "schedule"
    records: list[dict] = []
    for cluster in deps.config.clusters:
        if cluster.orchestrator != "eks":
            continue
        try:
            records.extend(_sweep_cluster(cluster, run_id, deps))
        except (ClientError, BotoCoreError) as error:  # the next run reads the report again
            logger.warning("node report not read", extra={"cluster": cluster.name, "error_code": error_code(error)})
    return records


def _sweep_cluster(cluster: Cluster, run_id: str, deps: Deps) -> list[dict]:
    now, mode = deps.now(), deps.mode.current(cluster.name)
    if not heartbeat_is_fresh(AgentStore(deps.table).agent_heartbeat(cluster.name), now):
        return []  # no live agent: its last report may be stale (a requeue into the void is paged elsewhere)
    item = NodeReportStore(deps.table).report(cluster.name)
    if not item:
        return []
    try:
        report = read_node_report(item.get("nodes", {}).get("S", "[]"))
    except (ValidationError, ValueError) as error:
        logger.warning("node report unreadable", extra={"cluster": cluster.name, "error": short(str(error), 300)})
        return []
    info = fresh_cluster_info(deps.table.get(ClusterInfoStore(deps.table).key(cluster.name)), now)
    automatic = ((info.node_recovery if info and info.node_recovery else cluster.node_recovery).lower()
                 == "automatic")
    jobs = [job for job in deps.config.jobs if job.cluster == cluster.name]
    stuck_after = timedelta(minutes=deps.config.guardrails_for(cluster).stuck_terminating_minutes)
    window = timedelta(minutes=deps.config.guardrails_for(cluster).repair_minutes)
    actions = NodeStore(deps.table).cluster_state(cluster.name).actions
    medic_actions = {action.node_id: action.action for action in actions if now - action.at <= window}
    notices, stuck = assess_node_report(report, jobs, now, stuck_after, automatic, medic_actions)
    table = deps.table.for_mode(mode)
    news = [notice for notice in notices
            if NodeReportStore(table).note_state(cluster.name, notice.node.name, notice.node.state, now)]
    for notice in news:
        for affected in notice.jobs:
            NodeReportStore(table).watch_job(cluster.name, affected.job.name, notice.node.name, now,
                                             now + timedelta(minutes=affected.job.recovery_minutes))
    one_by_one, overflow = notices_to_record(news)
    records = [_notice(notice, cluster, run_id, mode, deps) for notice in one_by_one]
    if overflow:
        about = About(incident=agent_nodes_incident(cluster.name), trigger=Trigger.RECONCILE, event_id=run_id,
                      mode=mode, cluster=cluster.name)
        records.append(emit(about.record(fault=Fault.K8S_NODE_UNHEALTHY, action=Action.NONE, outcome=Outcome.IGNORED,
                                         reason=short(overflow_reason(overflow), 1000))))
    records.extend(_follow_job_watches(cluster, run_id, mode, deps))
    for job in stuck:
        record = _restart_stuck(job, cluster, mode, deps)
        if record is not None:
            records.append(record)
    return records


def _notice(notice: NodeNotice, cluster: Cluster, run_id: str, mode: Mode, deps: Deps) -> dict:
    node_id = notice.node.instance_id
    about = About(incident=agent_node_incident(cluster.name, notice.node.name), trigger=Trigger.RECONCILE,
                  event_id=run_id, mode=mode, cluster=cluster.name, node_id=node_id)
    record = about.record(fault=Fault.K8S_NODE_UNHEALTHY, action=Action.NONE,
                          outcome=Outcome.DEFERRED if notice.in_repair else Outcome.IGNORED,
                          why=Why.HYPERPOD_REPAIRING if notice.in_repair else None,
                          # the agent's word that a node failed with a watched job's pods on it: a human looks
                          needs_human=bool(not notice.in_repair and notice.jobs),
                          reason=short(notice.reason, 500))
    if not notice.in_repair and notice.jobs:  # the agent's word: one page per cluster per window (its own window)
        # Claimed per episode (a notice is written once per episode: NodeReportStore.note_state), since nothing
        # closes an agent's node incident: the node failing again another day may page again, within the window.
        record = record.paged_if(page_incident(deps, deps.table.for_mode(mode), record,
                                               _node_page(record, notice, deps),
                                               claim=f"{about.incident}@{deps.now():%Y%m%dT%H%M%S}",
                                               window=PageWindow.cluster(PageSource.AGENT_NODES, cluster.name)))
    return emit(record)


def _node_page(record: Record, notice: NodeNotice, deps: Deps) -> PageText:
    jobs = [f"  {affected.job.name}: {', '.join(affected.pods[:16])}" for affected in notice.jobs]
    lines = [
        f"Cluster:        {record['cluster']}",
        f"Node:           {notice.node.name} ({notice.node.state})",
        "Training pods on it (watched jobs):", *jobs,
        "",
        f"Why:            {record['reason']}",
        "",
        "What to do:     kubectl describe node; if the node is broken, reboot or replace it (aws sagemaker "
        "batch-reboot-cluster-nodes / batch-replace-cluster-nodes); the jobs' operators recreate their pods.",
        f"Console:        {console_link(deps.region, record['cluster'])}",
        f"Incident:       {record['incident']} (event {record['event_id']}, mode {record['mode']})",
    ]
    return PageText(f"[Medic] {record['cluster']} node {notice.node.name}: {notice.node.state}", lines)


def _restart_stuck(stuck: StuckJob, cluster: Cluster, mode: Mode, deps: Deps) -> dict | None:
    """One restart per stuck episode (named by the first stuck pod's deletion time); None once it was handled:
    the sweeps after it stay quiet while the agent works."""
    target = stuck.job.kubernetes_object()
    episode = f"stuck:{target.target}:{stuck.since.isoformat()}"
    table = deps.table.for_mode(mode)
    if table.exists(RequestStore(table).claim_key(Trigger.RECONCILE, episode)):
        return None
    now = deps.now()
    try:  # pods are a pod creator's word: the job's own probe decides (no progress since they got stuck)
        progress = deps.metrics.progress(stuck.job.name, stuck.since, now, history=PROBE_HISTORY)
    except (ClientError, BotoCoreError) as error:  # the next sweep asks again
        logger.warning("progress unavailable", extra={"job": stuck.job.name, "error_code": error_code(error)})
        return None
    not_stalled = stuck_but_not_stalled(stuck, progress)
    if not_stalled is not None:
        if not RequestStore(table).claim_request(Trigger.RECONCILE, episode, now):
            return None  # a racing sweep recorded it
        fault, reason = not_stalled
        about = About(incident=eks_job_incident(cluster.name, target), trigger=Trigger.RECONCILE, event_id=episode,
                      mode=mode, cluster=cluster.name, job=stuck.job.name)
        return emit(about.record(fault=fault, action=Action.NONE, outcome=Outcome.IGNORED, reason=short(reason, 500)))
    minutes = int((now - stuck.since).total_seconds() // 60)
    return restart_through_agent(RestartRequest(
        mode=mode, cluster=cluster.name, incident=eks_job_incident(cluster.name, target), trigger=Trigger.RECONCILE,
        event_id=episode, fault=Fault.PODS_STUCK_TERMINATING.value,
        context=f"{len(stuck.pods)} pod(s) of {stuck.job.name} stuck Terminating on a NotReady node for {minutes} min "
                f"({', '.join(stuck.pods[:8])}); the agent force-deletes them and the job's controller recreates "
                "them", job_name=stuck.job.name, kubernetes=target), deps)


def _follow_job_watches(cluster: Cluster, run_id: str, mode: Mode, deps: Deps) -> list[dict]:
    """Each watched job that had pods on a failing node: stepping again since (its operator brought it back) →
    the watch ends quietly; past its recovery_minutes without a step → one restart through the agent, under its
    budget, with the stall restart's proof of recovery. A job a stall restart already watches is left to it."""
    table, now = deps.table.for_mode(mode), deps.now()
    store, records = NodeReportStore(table), []
    watched_by_stall = {watch.incident for watch in IncidentStore(deps.table).recoveries()}
    for name, node, since, deadline in store.job_watches(cluster.name):
        job = deps.config.job(name)
        if job is None or job.cluster != cluster.name:
            store.end_job_watch(cluster.name, name)
            continue
        target = job.kubernetes_object()
        incident = eks_job_incident(cluster.name, target)
        if incident in watched_by_stall:  # the stall alarm restarted it meanwhile: its watch proves the recovery
            store.end_job_watch(cluster.name, name)
            continue
        if now - since < timedelta(minutes=1):  # started by this sweep: nothing to read yet
            continue
        try:
            progress = deps.metrics.progress(job.name, since, now, history=PROBE_HISTORY)
        except (ClientError, BotoCoreError) as error:  # the next sweep asks again
            logger.warning("progress unavailable", extra={"job": job.name, "error_code": error_code(error)})
            continue
        finished = progress.finished_at
        about = About(incident=incident, trigger=Trigger.NODE_REPAIR, event_id=run_id, mode=mode,
                      cluster=cluster.name, job=job.name)
        if finished is not None and not made_progress(progress):  # its latest report is the completion marker
            store.end_job_watch(cluster.name, name)
            records.append(emit(about.record(
                fault=Fault.COMPLETED, action=Action.NONE, outcome=Outcome.IGNORED,
                reason=short(f"{job.name} had pods on node {node}, which failed at {since:%H:%M} UTC, but its probe "
                             f"published its completion marker at {finished:%Y-%m-%d %H:%M} UTC and has reported "
                             "nothing since: the job finished; no restart.", 500))))
        elif made_progress(progress):
            store.end_job_watch(cluster.name, name)
            records.append(emit(about.record(
                fault=Fault.K8S_NODE_UNHEALTHY, action=Action.NONE, outcome=Outcome.IGNORED,
                reason=short(f"{job.name} is training again after node {node} failed at {since:%H:%M} UTC "
                             f"({progress.steps:.0f} steps since): its operator brought it back; no restart.", 500))))
        elif now >= deadline:
            store.end_job_watch(cluster.name, name)
            records.append(_restart_after_node_failure(job, node, since, cluster, mode, deps))
    return records


def _restart_after_node_failure(job: Job, node: str, since: datetime, cluster: Cluster, mode: Mode,
                                deps: Deps) -> dict:
    target = job.kubernetes_object()
    incident = eks_job_incident(cluster.name, target)
    now = deps.now()
    record = restart_through_agent(RestartRequest(
        mode=mode, cluster=cluster.name, incident=incident, trigger=Trigger.NODE_REPAIR,
        event_id=f"noderepair:{node}:{since.isoformat()}", fault=Fault.K8S_NODE_UNHEALTHY.value,
        context=f"node {node} failed at {since:%H:%M} UTC with pods of {job.name} on it, and the job has not trained "
                f"since ({job.recovery_minutes} min)", job_name=job.name, kubernetes=target), deps)
    if record["outcome"] == Outcome.DEFERRED.value and mode.acts:  # queued: prove the recovery
        IncidentStore(deps.table).watch_recovery(RecoveryWatch(
            incident=incident, job=job.name, cluster=cluster.name, restarted_at=now,
            deadline=recovery_deadline(job, now), attempt=record["attempt"], fault_at=since))
    return record
