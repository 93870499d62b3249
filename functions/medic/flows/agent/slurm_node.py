"""Slurm's side of a node action (issue 16): tell Slurm, and see to the jobs the repair hit.

Before the call (flows/node/remediation.decide_claim_act, the event path and the reconciler's):
  a Slurm cluster with an agent queue → agent alive? → queue `drain_node <node>` (the agent drains it, then lists
  the jobs on it with `squeue -w`) → remember the repair (ledger.repairs) → the HyperPod call waits for the drain
  (flows/node/drain_first: AWS says not to change a node's Slurm state while HyperPod repairs it). Agent down: no
  drain, the call at once; the record's `jobs` is null (unknown) and one page says the jobs need a look.
The drain's result (results.py → record_node_result): a `node_repair` record of the node's incident
  naming the jobs (`jobs`), kept with the repair; each watched job listed is held by the repair (its stall alarm
  does not requeue or page; its recovery window starts when the node is back); then the call that waited.
  Past the drain's deadline without a result (drain_overdue): the drain withdrawn, the call made without it.
While the node is in repair (each reconciler sweep): `job_states` of the jobs the repair hit; one Slurm ended
  (NODE_FAIL, FAILED) is seen to at once, before slurmctld forgets it (MinJobAge), the rest wait silently.
After the repair (the reconciler's sweep → follow_up_repairs): the node, or its replacement (same NodeLogicalId),
  Running again → the held watched jobs' recovery windows start → `resume_node` when it kept its Slurm name (the
  agent resumes it only if still drained with Medic's reason; one already back in service is `ignored`) →
  `job_states` of the jobs not seen to yet.
Their states (record_node_result, commands.job_after_repair): a job pending or running again (slurmctld requeued
  it itself when its node went down, or HyperPod's auto-resume) is left alone (`ignored`); one Slurm ended that it
  may requeue (its requeue and batch flags) is requeued from its checkpoint like a stall restart
  (restart_through_agent: the job's restart budget, guardrails, mode, and a proof-of-recovery watch for a watched
  job); one it will not requeue (NODE_FAIL: submitted --no-requeue) gets one page saying to resubmit it, and no
  restart is spent on a requeue that cannot succeed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.config_core import Cluster
from medic.core.agent_command import EARLY, CommandContext
from medic.core.mode import Mode
from medic.core.models import Action, Fault, NodeInfo, Outcome, Trigger, Why
from medic.core.pages import PageSource, PageWindow
from medic.core.record import NOT_A_NODE_ACTION, About, Record
from medic.core.repairs import DrainNote
from medic.core.text import MedicText
from medic.deps import Deps, NodeSweep
from medic.flows.agent.agent_result import AgentResult
from medic.flows.agent.commands import (
    JOB_ID,
    RESTART_COUNT,
    SLURM_FLAG,
    SQUEUE_JOB_ID,
    InvalidCommand,
    heartbeat_is_fresh,
    job_after_repair,
    jobs_unknown_page,
    matches,
    node_command,
    not_requeueable_page,
    quoted_agent,
    valid_job_name,
    why_not_requeueable,
)
from medic.flows.node.pages import node_page
from medic.ledger.agents import AgentStore, CommandRef
from medic.ledger.follows import FollowStore
from medic.ledger.repairs import RepairStore, SlurmRepair
from medic.ledger.table import Table
from medic.obs import logger
from medic.outbox.pages import page_incident
from medic.outbox.records import emit

SLURM_STATE = re.compile(r"[A-Z_]{1,32}", re.ASCII)  # what squeue's %T prints (NODE_FAIL, RUNNING, ...)
# What `scontrol show node` prints as a node's State (node_state_string_complete: IDLE+DRAIN, DOWN+DRAIN+NOT_RESPONDING)
NODE_STATE = re.compile(r"[A-Z_]{1,32}(?:\+[A-Z_]{1,32}){0,8}", re.ASCII)
# A node found Running this soon after Medic's call may not have started its repair yet (a reboot's node reads
# Running until HyperPod takes it down): the sweep waits at least this long before it resumes the node.
REPAIR_SETTLE = timedelta(minutes=5)


def jobs_claim(incident: str) -> str:
    """The one "jobs need a look" page of a node incident (kept apart from the node's own page)."""
    return f"{incident}:jobs"


# --- before the call


def drain_before_repair(deps: Deps, table: Table, cluster: Cluster, node: NodeInfo | None, node_id: str,
                        incident: str, action: Action, fault: str, event_id: str | None, now: datetime,
                        heartbeat: datetime | None) -> DrainNote | None:
    """Queue the drain of the node in Slurm (never waiting for it); None when the cluster has no agent (not Slurm,
    no queue). ``heartbeat``: when the agent last reported, read with the node path's other ledger items
    (ledger/node_event: no round trip of its own). Never raises for AWS errors: the repair matters more than the
    drain."""
    if cluster.orchestrator != "slurm" or not deps.agents.has_queue(cluster.name):
        return None
    name = node.slurm_node if node is not None else None
    shown = name or "the node"
    if heartbeat is None:  # no agent has ever reported: Slurm is not told, as before the agent was installed
        return DrainNote(f"No Medic agent has reported on {cluster.name}: {shown} was not drained in Slurm and the "
                         "jobs on it are unknown.", name, page=False)
    if name is None:
        return DrainNote("DescribeClusterNode gave no Slurm node name (PrivateDnsHostname), so Medic could not drain "
                         "it in Slurm: the jobs on it are unknown.", page=True)
    if not heartbeat_is_fresh(heartbeat, now):
        return DrainNote(f"The Medic agent on {cluster.name} is not reporting (last heartbeat "
                         f"{heartbeat:%Y-%m-%d %H:%M} UTC): {name} was not drained in Slurm and the jobs on it are "
                         "unknown.", name, page=True)
    try:
        request = f"{event_id or 'reconcile'}:{int(now.timestamp())}"
        command = node_command(cluster.name, "drain_node", incident, now, request, node=name)
        RepairStore(table).remember(SlurmRepair(cluster=cluster.name, node_id=node_id, incident=incident,
                                                node_name=name, action=action.value, fault=fault, acted_at=now,
                                                logical_id=node.logical_id if node else None))
        AgentStore(table).record_command(command.command_id, CommandContext(
            cluster=cluster.name, kind=command.kind, target=command.target, incident=incident,
            trigger=Trigger.NODE_REPAIR, event_id=event_id or command.command_id, fault=fault, action=action,
            node_id=node_id, node_name=name, instance_group=node.instance_group if node else None), now)
        deps.agents.send(command)
    except InvalidCommand as error:  # unreachable: the name matched the agent's pattern
        return DrainNote(f"Refused to queue the drain: {error}; the jobs on the node are unknown.", name, page=True)
    except (ClientError, BotoCoreError) as error:
        return DrainNote(f"Could not queue the drain of {name} ({error_code(error)}): the jobs on it are unknown.",
                         name, page=True)
    return DrainNote(f"Drain of {name} in Slurm queued for the agent (command {command.command_id}); the jobs on "
                     "the node are recorded when it reports.", name, page=False, queued=True,
                     command_id=command.command_id)


def list_while_hyperpod_repairs(deps: Deps, table: Table, cluster: Cluster, node: NodeInfo, incident: str, fault: str,
                                event_id: str | None, now: datetime) -> None:
    """HyperPod repairs the node by itself (issue 32): queue `list_node_jobs <node>` (squeue -w; its Slurm state is
    HyperPod's, untouched) and remember the repair (ledger.repairs, action none): the jobs it lists are seen to after
    the repair as after Medic's own (follow_up_repairs). No agent, or one not reporting: nothing listed (the agent's
    silence pages on its own: flows/agent/silence)."""
    if cluster.orchestrator != "slurm" or node.slurm_node is None or not deps.agents.has_queue(cluster.name):
        return
    try:
        heartbeat = AgentStore(deps.table).agent_heartbeat(cluster.name)
        if heartbeat is None or not heartbeat_is_fresh(heartbeat, now):
            return
        command = node_command(cluster.name, "list_node_jobs", incident, now,
                               f"{event_id or 'reconcile'}:{int(now.timestamp())}", node=node.slurm_node)
        RepairStore(table).remember(SlurmRepair(cluster=cluster.name, node_id=node.node_id, incident=incident,
                                                node_name=node.slurm_node, action=Action.NONE.value, fault=fault,
                                                acted_at=now, logical_id=node.logical_id))
        AgentStore(table).record_command(command.command_id, CommandContext(
            cluster=cluster.name, kind=command.kind, target=command.target, incident=incident,
            trigger=Trigger.NODE_REPAIR, event_id=event_id or command.command_id, fault=fault, action=Action.NONE,
            node_id=node.node_id, node_name=node.slurm_node, instance_group=node.instance_group), now)
        deps.agents.send(command)
    except (InvalidCommand, ClientError, BotoCoreError) as error:
        logger.warning("jobs on the node not listed", extra={"incident": incident, "error": str(error)[:200]})


def drain_overdue(deps: Deps, table: Table, cluster: Cluster, node_id: str, node_name: str, command_id: str,
                  now: datetime) -> DrainNote:
    """The call goes ahead without the drain: withdraw it (in one transaction with the agent's claim check: it then
    never runs during the repair), or, when the agent took it already, let its result come (it lists the jobs)."""
    store, ref = AgentStore(table), CommandRef(cluster.name, command_id)  # a drain is always issued keyed by cluster
    try:
        withdrawn = store.withdraw_command(ref, now)
    except (ClientError, BotoCoreError) as error:
        return DrainNote(f"Medic could not withdraw the drain (command {command_id}: {error_code(error)}) and called "
                         f"HyperPod without it: the jobs on {node_name} are unknown.", node_name, page=True)
    if not withdrawn:
        return DrainNote(f"The agent took the drain (command {command_id}) but has not reported it: Medic called "
                         f"HyperPod without waiting further; the jobs on {node_name} are recorded when the agent "
                         "reports.", node_name, queued=True, command_id=command_id)
    if store.claim_command_record(ref, now):  # this is its final word: the command sweep leaves it alone
        store.close_command(command_id)
    RepairStore(table).drained(cluster.name, node_id, False, None)
    return DrainNote(f"Medic withdrew the drain (command {command_id}; it can no longer run during the repair) and "
                     f"called HyperPod without it: new work could land on {node_name} until HyperPod takes it down, "
                     "and the jobs on it are unknown.", node_name, page=True, command_id=command_id)


def after_the_call(drain: DrainNote, outcome: Outcome, table: Table, cluster: str, node_id: str) -> DrainNote:
    """A call that failed repairs nothing: the node stays drained in Slurm (a faulty node takes no new work) and
    nothing is resumed or requeued after it; the node's own page asks a human to look."""
    if not drain.queued or outcome is not Outcome.FAILED:
        return drain
    RepairStore(table).forget(cluster, node_id)
    return DrainNote(f"{drain.text} The call failed, so {drain.node_name} stays drained in Slurm: resume it "
                     f"(scontrol update NodeName={drain.node_name} State=RESUME) once the node is fixed.",
                     drain.node_name, drain.page, drain.queued)


def page_jobs_unknown(deps: Deps, table: Table, record: Record, node_name: str | None) -> bool:
    return page_incident(deps, table, record, jobs_unknown_page(record, node_name, deps.region),
                         claim=jobs_claim(record["incident"]),
                         window=PageWindow.cluster(PageSource.NODE, record["cluster"]))


# --- the agent's results


def record_node_result(result: AgentResult, context: CommandContext, cluster: str, stream_event_id: str,
                       deps: Deps) -> dict | None:
    """The final record of a drain_node / resume_node / job_states result (already checked and claimed)."""
    if result.kind == "job_states":
        return _job_states(result, context, cluster, stream_event_id, deps)
    node_id, name = context.node_id or "", context.node_name or ""
    said = quoted_agent(result.message) if result.message else "no output"
    about = About(incident=context.incident, trigger=Trigger.NODE_REPAIR, event_id=stream_event_id,
                  mode=context.mode, cluster=cluster, node_id=node_id or None, instance_group=context.instance_group)
    # The drain and the resume are their own actions (the repair's call is HyperPod's record): one replacement
    # reads drain_node, replace_node, resume_node in `medic history`, each with what it did.
    fault, repair = context.fault or "unknown", context.action or Action.NONE
    store = RepairStore(deps.table)
    if result.kind == "resume_node":
        action = Action.RESUME_NODE
        if result.status == "executed" and result.resumed == "false":
            return emit(about.record(fault=fault, action=action, outcome=Outcome.IGNORED,
                                     reason=_not_resumed(cluster, name, result.node_state or "unknown",
                                                         result.node_reason or "")))
        if result.status == "executed":
            return emit(about.record(fault=fault, action=action, outcome=Outcome.EXECUTED,
                                     reason=f"The agent on {cluster} resumed {name} in Slurm after the repair: "
                                            f"{said}."))
        record = about.record(fault=fault, action=action, outcome=Outcome.FAILED,
                              reason=f"The agent on {cluster} could not resume {name} in Slurm after the repair: "
                                     f"{said}. Resume it by hand (scontrol update NodeName={name} State=RESUME).")
        record = record.paged_if(page_incident(deps, deps.table, record,
                                               node_page(record, MedicText("Slurm resume after a repair"), deps.region),
                                               claim=f"{about.incident}:resume",
                                               window=PageWindow.cluster(PageSource.NODE, cluster)))
        return emit(record)
    if result.kind == "list_node_jobs":
        return _listed_jobs(result, context, cluster, about, fault, deps)
    # drain_node
    action = Action.DRAIN_NODE
    jobs = _jobs(result) if result.status == "executed" else None
    store.drained(cluster, node_id, result.status == "executed", jobs)
    if jobs is not None:
        listing = ", ".join(f"{job_id} ({job_name})" for job_id, job_name in jobs) or "none"
        drained = emit(about.record(fault=fault, action=action, outcome=Outcome.EXECUTED,
                                    jobs=[{"id": i, "name": n} for i, n in jobs],
                                    reason=f"The agent on {cluster} drained {name} in Slurm before the {repair}; jobs "
                                           f"running on it: {listing}."))
        return _then_call(drained, result, context, cluster, jobs, deps)
    what = "drained" if result.status == "executed" else "could not drain"
    record = about.record(fault=fault, action=action,
                          outcome=Outcome.EXECUTED if result.status == "executed" else Outcome.FAILED, jobs=None,
                          reason=f"The agent on {cluster} {what} {name} in Slurm, and the jobs on it are unknown: "
                                 f"{said}.")
    record = record.paged_if(page_jobs_unknown(deps, deps.table, record, name))
    return _then_call(emit(record), result, context, cluster, None, deps)


def _listed_jobs(result: AgentResult, context: CommandContext, cluster: str, about: About, fault: str,
                 deps: Deps) -> dict:
    """The jobs on a node HyperPod repairs by itself: kept with the repair (the follow-up asks where they are once the
    node is back), each watched one held by the repair; unknown: one page that they need a look."""
    name, node_id = context.node_name or "", context.node_id or ""
    jobs = _jobs(result) if result.status == "executed" else None
    RepairStore(deps.table).drained(cluster, node_id, False, jobs)
    if jobs is not None:
        listing = ", ".join(f"{job_id} ({job_name})" for job_id, job_name in jobs) or "none"
        if jobs:
            hold_watched_jobs(jobs, context.incident, cluster, deps, context.fault)
        return emit(about.record(fault=fault, action=Action.LIST_NODE_JOBS, outcome=Outcome.EXECUTED,
                                 jobs=[{"id": i, "name": n} for i, n in jobs],
                                 reason=f"HyperPod repairs {name} itself; the agent on {cluster} listed the jobs on it "
                                        f"(its Slurm state untouched): {listing}."))
    said = quoted_agent(result.message) if result.message else "no output"
    record = about.record(fault=fault, action=Action.LIST_NODE_JOBS, outcome=Outcome.FAILED, jobs=None,
                          reason=f"HyperPod repairs {name} itself; the agent on {cluster} could not list the jobs on "
                                 f"it: {said}.")
    return emit(record.paged_if(page_jobs_unknown(deps, deps.table, record, name)))


def _then_call(drained: dict, result: AgentResult, context: CommandContext, cluster: str,
               jobs: list[tuple[str, str]] | None, deps: Deps) -> dict:
    """After the drain's record: the jobs a watched job's stall now belongs to the repair (item 8), and the HyperPod
    call that waited for the drain (flows/node/drain_first; nothing when its deadline came first)."""
    from medic.flows.node.drain_first import call_after_drain

    if jobs:
        hold_watched_jobs(jobs, context.incident, cluster, deps, context.fault)
    listed = None if jobs is None else [{"id": job_id, "name": name} for job_id, name in jobs]
    call_after_drain(deps, cluster, context.node_id or "", result.command_id, result.status == "executed",
                     quoted_agent(result.message) if result.message else "no output", listed)
    return drained


def _not_resumed(cluster: str, name: str, state: str, reason: str) -> str:
    """Why the agent left the node as it was: the node's state as Slurm said it before the resume (the agent's word:
    a state shown as is only when it is Slurm's state names, the reason always quoted)."""
    flags = state.split("+") if matches(NODE_STATE, state) else ["UNKNOWN"]
    shown = state if matches(NODE_STATE, state) else quoted_agent(state)
    said = f"State={shown}" + (f", Reason {quoted_agent(reason)}" if reason else "")
    if "DRAIN" in flags:
        return (f"The agent on {cluster} did not resume {name}: Slurm has it drained, but not with Medic's reason "
                f"({said}): whoever drained it decides when it returns.")
    if flags[0] in ("DOWN", "FAIL", "UNKNOWN"):
        return (f"The agent on {cluster} did not resume {name}: it is not drained by Medic ({said}); left as it is.")
    return (f"{name} was already back in service in Slurm ({said}) when Medic came to resume it after the repair: "
            "HyperPod (or a person) returned it; nothing to resume.")


def _jobs(result: AgentResult) -> list[tuple[str, str]] | None:
    """The drain's job list as Medic keeps it; None when the agent did not list the jobs (or listed garbage)."""
    if result.jobs is None:
        return None
    jobs = []
    for job in result.jobs[:50]:
        job_id, name = job.get("id"), job.get("name", "")
        if not matches(SQUEUE_JOB_ID, job_id) or not isinstance(name, str):
            return None
        printable = "".join(ch if " " <= ch <= "~" else " " for ch in name)  # the agent's word: shown, never run
        jobs.append((job_id, " ".join(printable.split())[:200]))
    return jobs


def _job_states(result: AgentResult, context: CommandContext, cluster: str, stream_event_id: str,
                deps: Deps) -> dict | None:
    """One record per job the repair hit: left alone, or requeued from its checkpoint (trigger node_repair)."""
    node_id = context.node_id or ""
    repair = RepairStore(deps.table).get(cluster, node_id)
    jobs = repair.jobs if repair and repair.jobs else ()
    states: dict[str, SlurmSays] = {}
    if result.status == "executed" and result.job_states is not None:
        states = {job["id"]: SlurmSays.of(job) for job in result.job_states  # Slurm's state names only
                  if isinstance(job, dict) and isinstance(job.get("id"), str)
                  and matches(SLURM_STATE, job.get("state"))}
    early = context.early
    records = []
    for job_id, name in jobs:
        if early:  # the node is still in repair: act only on a job Slurm already ended for it, say nothing else
            said = states.get(job_id) if result.status == "executed" else None
            state = said.state if said else None
            if repair is not None and state is not None and state != "RUNNING" and job_id not in repair.stopped:
                RepairStore(deps.table).mark_stopped(cluster, node_id, job_id)
            if repair is not None and state == "RUNNING" and job_id in repair.stopped:
                # stopped by the repair and RUNNING again: Slurm started it again (elsewhere): its window starts
                start_recovery_windows(repair.incident, cluster, deps, job_name=name)
            if said is None or said.fate not in ("requeue", "not_requeueable"):
                continue
            RepairStore(deps.table).drop_job(cluster, node_id, job_id)
        try:
            records.append(_one_job(job_id, name, states.get(job_id), result.status == "executed", context,
                                    cluster, stream_event_id, repair, deps))
        except (ClientError, BotoCoreError) as error:  # the result is claimed: say so rather than lose the job
            about = About(incident=context.incident, trigger=Trigger.NODE_REPAIR,
                          event_id=f"{context.incident}:{job_id}", mode=deps.mode.current(cluster), cluster=cluster,
                          job=job_id)
            records.append(emit(about.record(fault=repair.fault if repair else "unknown", action=Action.NONE,
                                             outcome=Outcome.FAILED,
                                             reason=f"Could not see to job {job_id} ({name}) after the repair "
                                                    f"({error_code(error)}): it needs a look.")))
    if not early:
        RepairStore(deps.table).forget(cluster, node_id)
    return records[-1] if records else None


class SlurmSays(NamedTuple):
    """One job of the agent's job_states, as Medic reads it: the state, and the flags and restart count when the
    agent reported them well-formed (None otherwise)."""

    state: str
    requeue: str | None = None
    batch: str | None = None
    restarts: int | None = None

    @classmethod
    def of(cls, job: dict) -> SlurmSays:
        flag = {key: job.get(key) if matches(SLURM_FLAG, job.get(key)) else None for key in ("requeue", "batch")}
        restarts = job.get("restarts")
        return cls(job["state"], flag["requeue"], flag["batch"],
                   int(restarts) if matches(RESTART_COUNT, restarts) else None)

    @property
    def fate(self) -> str:
        return job_after_repair(self.state, self.requeue, self.batch)


def _one_job(job_id: str, name: str, said: SlurmSays | None, listed: bool, context: CommandContext, cluster: str,
             stream_event_id: str, repair: SlurmRepair | None, deps: Deps) -> dict:
    mode = deps.mode.current(cluster)
    node_name = context.node_name or ""
    action = repair.action if repair else "node repair"
    whose = "HyperPod's own repair" if action == Action.NONE.value else f"Medic's {action}"  # automatic recovery
    by_name = valid_job_name(name)
    from medic.flows.agent.restart import RestartRequest, restart_through_agent, slurm_job_incident

    incident = slurm_job_incident(cluster, name if by_name else job_id)
    about = About(incident=incident, trigger=Trigger.NODE_REPAIR, event_id=f"{context.incident}:{job_id}", mode=mode,
                  cluster=cluster, job=job_id)
    fault = repair.fault if repair else "unknown"
    state = said.state if said else None
    fate = said.fate if listed and said else "unknown"
    if fate in ("ended", "unknown", "not_requeueable") and by_name and deps.config.job(name) is not None:
        from medic.ledger.incidents import IncidentStore

        # nothing to prove of a job that ended, that Slurm will not requeue, or that a human now owns (one page)
        IncidentStore(deps.table).end_recovery(incident)
    if fate == "back":
        return emit(about.record(fault=fault, action=Action.NONE, outcome=Outcome.IGNORED,
                                 reason=f"Job {job_id} ({name}) ran on {node_name} when {whose} hit it and "
                                        f"is {state} again: {_brought_back(said)}: left alone."))
    if fate == "not_requeueable" and said is not None:
        why = why_not_requeueable(said.requeue, said.batch)
        record = about.record(fault=Fault.JOB_NOT_REQUEUEABLE, action=Action.NONE, outcome=Outcome.DEFERRED,
                              why=Why.NOT_RETRYABLE,
                              reason=f"Job {job_id} ({name}) ran on {node_name} when {whose} hit it and "
                                     f"ended {state}. Slurm cannot requeue it: {why}. Medic does not try: a human "
                                     "resubmits it from its checkpoint.")
        page = not_requeueable_page(record, name, state or "", why, node_name, deps.region)
        return emit(record.paged_if(page_incident(deps, deps.table, record, page,
                                                  window=PageWindow.cluster(PageSource.NODE, cluster))))
    if fate == "ended":
        return emit(about.record(fault=fault, action=Action.NONE, outcome=Outcome.IGNORED,
                                 reason=f"Job {job_id} ({name}) ran on {node_name} when {whose} hit it and "
                                        f"ended {state}, not by the repair: left alone."))
    if fate == "unknown" or not matches(JOB_ID, job_id):
        why = ("Slurm no longer lists it (it ended more than MinJobAge ago)" if listed
               else "the agent could not read the job states")
        record = about.record(fault=fault, action=Action.NONE, outcome=Outcome.FAILED,
                              reason=f"Job {job_id} ({name}) ran on {node_name} when {whose} hit it, and "
                                     f"Medic cannot tell whether it runs again: {why}. It needs a look.")
        # The page names the node the job ran on; the record is the job's.
        on_node = jobs_unknown_page({**record, "node_id": context.node_id}, node_name, deps.region)
        record = record.paged_if(page_incident(deps, deps.table, record, on_node,
                                               window=PageWindow.cluster(PageSource.NODE, cluster)))
        return emit(record)
    reason = f"Job {job_id} ({name}) ran on {node_name} when {whose} hit it; Slurm says {state}."
    record = restart_through_agent(RestartRequest(
        mode=mode, cluster=cluster, incident=incident, trigger=Trigger.NODE_REPAIR, event_id=about.event_id,
        fault=fault, context=reason, job_id=job_id), deps)
    _watch_recovery(record, name if by_name else None, cluster, repair, context.early, deps, context.incident, fault)
    return record


def _brought_back(said: SlurmSays | None) -> str:
    """Who put a job the repair hit back in the queue, as far as Slurm's flags say."""
    if said is not None and said.requeue == "1" and said.batch == "1" and said.restarts:
        return (f"Slurm requeued it by itself when its node went down (a batch job with the requeue flag; restarts "
                f"{said.restarts})")
    return "Slurm's own requeue or HyperPod's auto-resume brought it back"


def _watch_recovery(record: dict, name: str | None, cluster: str, repair: SlurmRepair | None, early: bool,
                    deps: Deps, node_incident: str = "", fault: str | None = None) -> None:
    """A requeued watched job (medic.yaml `jobs`) gets the stall restart's proof of recovery. One the repair holds
    (hold_watched_jobs) keeps its hold: while the node is still in repair, the window starts when it is back."""
    job = deps.config.job(name) if name else None
    if job is None or job.cluster != cluster or record["outcome"] != Outcome.DEFERRED.value \
            or not Mode.of(record["mode"]).acts:
        return
    from medic.core.progress import RecoveryWatch
    from medic.flows.recovery.policy import held_deadline, recovery_deadline
    from medic.ledger.incidents import IncidentStore

    now, store = deps.now(), IncidentStore(deps.table)
    if store.note_restart(record["incident"], record["attempt"], now):
        return
    held = early and repair is not None
    repair_minutes = deps.config.guardrails_for(deps.config.cluster(cluster)).repair_minutes if held else 0
    store.watch_recovery(RecoveryWatch(
        incident=record["incident"], job=job.name, cluster=cluster, restarted_at=now,
        deadline=held_deadline(job, repair_minutes, now) if held else recovery_deadline(job, now),
        attempt=record["attempt"], held_by=repair.incident if held and repair else None, acted_at=now,
        **hit_by_repair(deps, cluster, repair.incident if repair else node_incident, fault)))


def hit_by_repair(deps: Deps, cluster: str, node_incident: str, fault: str | None = None) -> dict:
    """What a job's recovery watch keeps of the node repair that hit it (RecoveryWatch.repair): the node's incident,
    and from Medic's claim of the node its fault, its time and when Medic received it (a repair HyperPod or a person
    started has no claim: the fault given, no moments). Never raises: the line lacks what could not be read."""
    from medic.ledger.nodes import NodeStore

    fields: dict = {"repair": node_incident, "repair_fault": fault}
    if not node_incident:
        return {}
    node_id = node_incident.rsplit(":", 1)[-1]
    try:
        claim = NodeStore(deps.table).node_claims(cluster, [node_id]).get(node_id)
    except (KeyError, ValueError):  # an item not of Medic's claim shape: no moments
        return fields
    except (ClientError, BotoCoreError) as error:
        logger.warning("node claim unreadable for a job's timeline", extra={"incident": node_incident,
                                                                           "error_code": error_code(error)})
        return fields
    if claim is not None:
        fields.update(repair_fault=claim.fault, fault_at=claim.fault_at, detected_at=claim.detected_at)
    return fields


def hold_watched_jobs(jobs: list[tuple[str, str]], node_incident: str, cluster: str, deps: Deps,
                      fault: str | None = None) -> None:
    """One incident, one owner (issue 27): each watched job (medic.yaml `jobs`) the drain found on a node Medic
    repairs belongs to that repair. Its proof-of-recovery watch is held by the node's incident: the stall alarm does
    not requeue or page it meanwhile, and its window starts when the node is back (or Slurm starts it again)."""
    from medic.core.progress import RecoveryWatch
    from medic.flows.agent.restart import slurm_job_incident
    from medic.flows.recovery.policy import held_deadline
    from medic.ledger.incidents import IncidentStore

    config_cluster = deps.config.cluster(cluster)
    if config_cluster is None or not deps.mode.current(cluster).acts:
        return
    now, repair_minutes = deps.now(), deps.config.guardrails_for(config_cluster).repair_minutes
    origin: dict | None = None
    for _, name in jobs:
        job = deps.config.job(name) if valid_job_name(name) else None
        if job is None or job.cluster != cluster:
            continue
        origin = origin if origin is not None else hit_by_repair(deps, cluster, node_incident, fault)
        IncidentStore(deps.table).watch_recovery(RecoveryWatch(
            incident=slurm_job_incident(cluster, job.name), job=job.name, cluster=cluster, restarted_at=now,
            deadline=held_deadline(job, repair_minutes, now), attempt=0, held_by=node_incident, **origin))


def start_recovery_windows(node_incident: str, cluster: str, deps: Deps, job_name: str | None = None) -> None:
    """The repair that held watched jobs is over for them (the node is back; or Slurm started ``job_name`` again):
    each held watch's window starts now."""
    from medic.flows.recovery.policy import recovery_deadline
    from medic.ledger.incidents import IncidentStore

    store, now = IncidentStore(deps.table), deps.now()
    for watch in store.recoveries():
        job = deps.config.job(watch.job)
        if watch.held_by != node_incident or watch.cluster != cluster or job is None:
            continue
        if job_name is None or watch.job == job_name:
            store.release_recovery(watch.incident, node_incident, now, recovery_deadline(job, now))


# --- after the repair: the reconciler's sweep


def follow_up_repairs(sweep: NodeSweep, nodes: list[NodeInfo]) -> None:
    """Each node Medic drained that is Running again (itself, or its replacement under the same NodeLogicalId):
    resume it in Slurm when it kept its Slurm name, and ask where the jobs the repair hit are now. (The agent's
    heartbeats do the same every minute, resume_repaired_nodes: this sweep is their backstop.) A node HyperPod
    repaired by itself (its jobs listed, nothing drained) is not resumed: only its jobs are seen to."""
    cluster, deps = sweep.cluster, sweep.deps
    if cluster.orchestrator != "slurm" or not sweep.mode.acts:
        return
    release_holds_of_repaired_nodes(sweep)
    if not deps.agents.has_queue(cluster.name):
        return
    store = RepairStore(sweep.table)
    by_logical = {node.logical_id: node for node in nodes if node.logical_id}
    for repair in store.repairs(cluster.name):
        if not _awaits_follow_up(repair):
            continue
        node = sweep.by_id.get(repair.node_id) or (by_logical.get(repair.logical_id) if repair.logical_id else None)
        if not _back(sweep, repair, node):
            if repair.jobs:  # still in repair: a job Slurm ended NODE_FAIL is requeued now, before Slurm forgets it
                _ask_early(sweep, repair)
            continue
        _see_to(sweep, store, repair, node)


@dataclass
class HeartbeatLook:
    """What the agent's heartbeat knows of its cluster when it looks for repaired nodes (medic.deps.NodeSweep)."""

    deps: Deps
    mode: Mode
    run_id: str
    cluster: Cluster
    table: Table
    now: datetime
    by_id: dict[str, NodeInfo]


def resume_repaired_nodes(deps: Deps, cluster: Cluster, run_id: str) -> None:
    """At each heartbeat of the cluster's agent (every minute): a node Medic drained that HyperPod reports Running
    again is resumed in Slurm now, and its jobs asked about, instead of at the reconciler's next sweep, up to 5
    minutes later (issue 31). HyperPod sends no event when a node it rebooted or replaced is back on a cluster
    without continuous provisioning (its instance-level events are "SageMaker HyperPod Cluster Event"s, "available
    for HyperPod clusters with NodeProvisioningMode set to Continuous": "SageMaker HyperPod cluster events
    reference", docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-cluster-events-reference.html), so
    Medic asks HyperPod itself (ListClusterNodes, as the sweep does), only while a drained repair is old enough to
    be back (REPAIR_SETTLE): one Query of the cluster's repairs per heartbeat, one ListClusterNodes a minute during
    a repair. The resume itself is the sweep's (_issue_follow_up; the agent's resume_node resumes only a node
    drained with Medic's reason). AWS errors are logged, never raised: the sweep is the backstop."""
    if cluster.orchestrator != "slurm" or not deps.agents.has_queue(cluster.name):
        return
    mode, now = deps.mode.current(cluster.name), deps.now()
    if not mode.acts:
        return
    table = deps.table.for_mode(mode)
    store = RepairStore(table)
    try:
        due = [repair for repair in store.repairs(cluster.name)
               if _awaits_follow_up(repair) and now - repair.acted_at >= REPAIR_SETTLE]
        nodes = deps.hyperpod.list_nodes(cluster.name) if due else []
    except (ClientError, BotoCoreError) as error:
        logger.warning("repaired nodes not looked up", extra={"cluster": cluster.name, "error_code": error_code(error)})
        return
    look = HeartbeatLook(deps, mode, run_id, cluster, table, now, {node.node_id: node for node in nodes})
    by_logical = {node.logical_id: node for node in nodes if node.logical_id}
    for repair in due:
        node = look.by_id.get(repair.node_id) or (by_logical.get(repair.logical_id) if repair.logical_id else None)
        if _back(look, repair, node):
            _see_to(look, store, repair, node)


def _awaits_follow_up(repair: SlurmRepair) -> bool:
    """Not seen to yet, and its drain's result known (a pending drain is the drain's own business)."""
    return repair.taken_at is None and repair.drained != "pending"


def _back(sweep: NodeSweep, repair: SlurmRepair, node: NodeInfo | None) -> bool:
    """The repaired node (or its replacement) is Running, long enough after the call that it is not the node still
    Running before HyperPod took it down, and, for a repair HyperPod made by itself, no longer followed."""
    if node is None or node.status != "Running" or sweep.now - repair.acted_at < REPAIR_SETTLE:
        return False
    return not _hyperpods_under_way(sweep, repair)


def _see_to(sweep: NodeSweep, store: RepairStore, repair: SlurmRepair, node: NodeInfo | None) -> None:
    """The node is back: its follow-up (resume, job states), issued once whoever sees it first (RepairStore.take)."""
    if node is None:
        return
    cluster = sweep.cluster.name
    if repair.drained == "no" and not repair.jobs:  # nothing drained, nothing known: the page said so
        store.forget(cluster, repair.node_id)
        return
    try:
        if store.take(cluster, repair.node_id, sweep.now):
            _issue_follow_up(sweep, repair, node)
    except (ClientError, BotoCoreError) as error:
        logger.warning("repair follow-up not issued", extra={"incident": repair.incident,
                                                             "error_code": error_code(error)})


def _hyperpods_under_way(sweep: NodeSweep, repair: SlurmRepair) -> bool:
    """A repair HyperPod makes by itself (action none) is over once the node flow stopped following it (the node, or
    its replacement, Running again after it: flows/node/sweep_follow, earlier in the same sweep); a node that reads
    Running before HyperPod took it down is not back yet."""
    if repair.action != Action.NONE.value:
        return False
    return FollowStore(sweep.table).find(sweep.cluster.name, repair.node_id, repair.logical_id) is not None


def release_holds_of_repaired_nodes(sweep: NodeSweep) -> None:
    """A watched job whose stall alarm a node repair took over (flows/stall: HyperPod's repair, or one whose jobs Medic
    could not list) gets its recovery window once that node is Running again. Medic's own drained repairs release
    theirs when the sweep sees to them (_issue_follow_up), never earlier: a node Medic reboots reads Running until
    HyperPod takes it down."""
    from medic.ledger.incidents import IncidentStore

    cluster = sweep.cluster.name
    held = [watch for watch in IncidentStore(sweep.table).recoveries() if watch.held and watch.cluster == cluster]
    if not held:
        return
    medics = {repair.incident for repair in RepairStore(sweep.table).repairs(cluster)}
    for watch in held:
        node = sweep.by_id.get((watch.held_by or "").rsplit(":", 1)[-1])
        if watch.held_by not in medics and node is not None and node.status == "Running":
            start_recovery_windows(watch.held_by or "", cluster, sweep.deps, job_name=watch.job)


def _ask_early(sweep: NodeSweep, repair: SlurmRepair) -> None:
    """While the node is in repair: where are its jobs now? slurmctld ends a job whose node goes down (NODE_FAIL)
    and forgets it MinJobAge later (300 s by default; slurm.conf(5)), long before a replacement is back, so a job
    it did not requeue itself is requeued as soon as Slurm reports it ended; the rest waits for the node."""
    plain = [job_id for job_id, _ in repair.jobs or () if matches(JOB_ID, job_id)]
    if not plain:
        return
    try:
        command = node_command(sweep.cluster.name, "job_states", repair.incident, sweep.now, f"early:{sweep.run_id}",
                               job_ids=plain)
        AgentStore(sweep.table).record_command(command.command_id, CommandContext(
            cluster=sweep.cluster.name, kind=command.kind, target=command.target, incident=repair.incident,
            trigger=Trigger.NODE_REPAIR, event_id=sweep.run_id, fault=repair.fault, action=Action(repair.action),
            node_id=repair.node_id, node_name=repair.node_name, phase=EARLY), sweep.now)
        sweep.deps.agents.send(command)
    except (ClientError, BotoCoreError) as error:  # the next sweep asks again
        logger.warning("job states not asked", extra={"incident": repair.incident, "error_code": error_code(error)})


def _issue_follow_up(sweep: NodeSweep, repair: SlurmRepair, node: NodeInfo) -> None:
    deps, now, cluster = sweep.deps, sweep.now, sweep.cluster.name
    current = node
    if node.node_id != repair.node_id or node.slurm_node is None:
        current = deps.hyperpod.describe_node(cluster, node.node_id) or node  # its Slurm name (PrivateDnsHostname)
    about = About(incident=repair.incident, trigger=Trigger.NODE_REPAIR, event_id=sweep.run_id,
                  mode=sweep.mode, cluster=cluster, node_id=repair.node_id, instance_group=node.instance_group)
    start_recovery_windows(repair.incident, cluster, deps)  # the node is back: the jobs it held may run again
    issued = []
    if repair.drained == "yes" and current.slurm_node == repair.node_name:
        issued.append(node_command(cluster, "resume_node", repair.incident, now, sweep.run_id, node=repair.node_name))
    elif repair.drained == "yes":
        emit(about.record(fault=repair.fault, action=Action.RESUME_NODE, outcome=Outcome.IGNORED,
                          reason=f"The node is back as {node.node_id}, Slurm node {current.slurm_node or 'unknown'}, "
                                 f"not {repair.node_name}: nothing to resume ({repair.node_name} stays drained in "
                                 "Slurm until someone removes or resumes it)."))
    plain = [job_id for job_id, _ in repair.jobs or () if matches(JOB_ID, job_id)]
    if plain:
        issued.append(node_command(cluster, "job_states", repair.incident, now, sweep.run_id, job_ids=plain))
    for command in issued:
        AgentStore(sweep.table).record_command(command.command_id, CommandContext(
            cluster=cluster, kind=command.kind, target=command.target, incident=repair.incident,
            trigger=Trigger.NODE_REPAIR, event_id=sweep.run_id, fault=repair.fault, action=Action(repair.action),
            node_id=repair.node_id, node_name=repair.node_name, instance_group=node.instance_group), now)
        deps.agents.send(command)
    if not plain:
        RepairStore(sweep.table).forget(cluster, repair.node_id)


# The record's action of each node command (job_states, the follow-up of the jobs, is no node action).
NODE_COMMAND_ACTIONS = {"drain_node": Action.DRAIN_NODE, "resume_node": Action.RESUME_NODE,
                        "list_node_jobs": Action.LIST_NODE_JOBS}
LISTS_JOBS = ("drain_node", "list_node_jobs")  # the commands whose result names the jobs on the node


def expire_node_command(context: CommandContext, cluster: str, command_id: str, run_id: str, minutes: int,
                        what: str, deps: Deps) -> dict:
    """The sweep's record of a drain/resume/job_states command its agent never answered: the jobs need a look."""
    kind = context.kind or ""
    about = About(incident=context.incident or f"command:{cluster}:{command_id}", trigger=Trigger.NODE_REPAIR,
                  event_id=run_id, mode=context.mode, cluster=cluster, node_id=context.node_id,
                  instance_group=context.instance_group)
    record = about.record(
        fault=context.fault or "unknown", action=NODE_COMMAND_ACTIONS.get(kind, Action.NONE), outcome=Outcome.FAILED,
        jobs=None if kind in LISTS_JOBS else NOT_A_NODE_ACTION,  # a drain's (a listing's) jobs: unknown
        reason=f"No result from the agent on {cluster} for its {kind} command {command_id} within {minutes} minutes: "
               f"the agent {what}. The jobs on {context.node_name or 'the node'} need a look.")
    if kind in LISTS_JOBS:
        RepairStore(deps.table).drained(cluster, context.node_id or "", False, None)
    record = record.paged_if(page_jobs_unknown(deps, deps.table, record, context.node_name))
    return emit(record)


class SlurmJobsOnNode:
    """The node flow's jobs-on-node port on Slurm clusters (medic.deps.JobsOnNode): drain the node and list its
    jobs before the call, resume it and requeue the jobs Slurm ended after the repair, all through the agent."""

    def before_repair(self, deps: Deps, table: Table, cluster: Cluster, node: NodeInfo | None, node_id: str,
                      incident: str, action: Action, fault: str, event_id: str | None, now: datetime,
                      agent_seen_at: datetime | None) -> DrainNote | None:
        return drain_before_repair(deps, table, cluster, node, node_id, incident, action, fault, event_id, now,
                                   agent_seen_at)

    def after_the_call(self, drain: DrainNote, outcome: Outcome, table: Table, cluster: Cluster,
                       node_id: str) -> DrainNote:
        return after_the_call(drain, outcome, table, cluster.name, node_id)

    def drain_overdue(self, deps: Deps, table: Table, cluster: Cluster, node_id: str, node_name: str,
                      command_id: str, now: datetime) -> DrainNote:
        return drain_overdue(deps, table, cluster, node_id, node_name, command_id, now)

    def page_jobs_unknown(self, deps: Deps, table: Table, cluster: Cluster, record: Record,
                          node_name: str | None) -> bool:
        return page_jobs_unknown(deps, table, record, node_name)

    def follow_up(self, sweep: NodeSweep, nodes: list[NodeInfo]) -> None:
        follow_up_repairs(sweep, nodes)

    def while_hyperpod_repairs(self, deps: Deps, table: Table, cluster: Cluster, node: NodeInfo, incident: str,
                               fault: str, event_id: str | None, now: datetime) -> None:
        list_while_hyperpod_repairs(deps, table, cluster, node, incident, fault, event_id, now)
