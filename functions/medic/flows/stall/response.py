"""Act on Medic's alarms: a stalled job is requeued from its checkpoint (then watched until training
resumes), divergence, slowdown and lasting failed nodes page a human, OK closes the incident."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from medic.adapters.aws import error_code
from medic.core.mode import Mode
from medic.core.models import Action, Fault, Outcome, Trigger
from medic.core.pages import PageSource, PageWindow
from medic.core.progress import PROBE_HISTORY, Progress, RecoveryWatch
from medic.core.record import About
from medic.core.text import quoted, short
from medic.core.timeline import alarm_timeline
from medic.deps import Deps
from medic.flows.node.sweep_policy import STORM_HOLD
from medic.flows.recovery.check import conclude_on_ok
from medic.flows.recovery.pages import alarm_page
from medic.flows.recovery.policy import held_deadline, made_progress, progress_since, recovery_deadline
from medic.flows.stall.policy import (
    STALL_KINDS,
    AlarmContext,
    AlarmKind,
    AlarmStateChangeEvent,
    AlarmSubject,
    Plan,
    alarm_subject,
    decide_alarm,
    foreign_alarm,
)
from medic.ledger.incidents import IncidentStore
from medic.ledger.nodes import NodeStore
from medic.ledger.pages import PageStore
from medic.obs import emit_incident, logger
from medic.outbox.pages import page_incident, page_resolution
from medic.outbox.records import emit, rejected


class StateChange(NamedTuple):
    """What a stall flow acts on: an alarm's new state (its state timestamp names the transition), or the reconciler's
    sweep's verdict on a run watched by pattern (the run's last step names the episode)."""

    state: str
    timestamp: str
    reason: str


def incident_of(subject: AlarmSubject) -> str:
    """A stalled job shares its incident (and restart budget) with operator requests for that job: on Slurm by
    its name, on EKS by its Kubernetes object. A run watched by pattern: by its Slurm job id (a later run of the same
    name is another job, with a budget of its own), or its Kubernetes object."""
    run = subject.run
    if run is not None and run.slurm_job_id is not None:
        from medic.flows.agent.restart import slurm_job_incident

        return slurm_job_incident(subject.cluster.name, run.slurm_job_id)
    if run is not None:
        from medic.flows.agent.eks import eks_job_incident

        return eks_job_incident(subject.cluster.name, run.kubernetes) if run.kubernetes else \
            f"job:eks:{subject.cluster.name}:{run.key}"
    if subject.kind in STALL_KINDS and subject.job and subject.cluster.orchestrator == "slurm":
        from medic.flows.agent.restart import slurm_job_incident  # the agent paths only: not at every cold start

        return slurm_job_incident(subject.cluster.name, subject.job.name)
    if subject.kind in STALL_KINDS and subject.job and subject.cluster.orchestrator == "eks":
        from medic.flows.agent.eks import eks_job_incident

        return eks_job_incident(subject.cluster.name, subject.job.kubernetes_object())
    return subject.incident


def respond_to_alarm(raw: Any, deps: Deps) -> dict:
    mode = deps.mode.current()
    try:
        event = AlarmStateChangeEvent.model_validate(raw, context=deps.edge())
    except ValidationError as error:
        return rejected(raw, error, mode, Trigger.ALARM, "alarm state change event")
    detail = event.detail
    foreign = foreign_alarm(event, partition=deps.partition, account=deps.account, region=deps.region)
    if foreign:  # defence in depth: the rule takes this account's events; the alarm must be this stack's own
        about = About(incident=f"event:{event.id}", trigger=Trigger.ALARM, event_id=event.id, mode=mode)
        return emit(about.record(fault=Fault.INVALID, action=Action.NONE, outcome=Outcome.REJECTED,
                                 reason=short(f"{foreign} Medic acts only on its own alarms; no call.", 500)))
    subject = alarm_subject(detail.alarmName, deps.config)
    if subject is None:
        about = About(incident=f"alarm:{detail.alarmName}", trigger=Trigger.ALARM, event_id=event.id, mode=mode)
        return emit(about.record(fault=Fault.UNKNOWN, action=Action.NONE, outcome=Outcome.IGNORED,
                                 reason=f"Alarm {detail.alarmName} is not one of Medic's configured alarms."))
    return respond(subject, StateChange(detail.state.value, detail.state.timestamp, detail.state.reason), event.id,
                   deps)


def respond(subject: AlarmSubject, change: StateChange, event_id: str, deps: Deps, trigger: Trigger = Trigger.ALARM,
            quiet_repeats: bool = False) -> dict | None:
    """One state change of a Medic alarm's subject (or of a run watched by pattern) → one record. ``quiet_repeats``:
    a change already handled makes no record (None): the reconciler's sweep sees a stalled run at every run."""
    now = deps.now()
    incident = incident_of(subject)
    mode = deps.mode.current(subject.cluster.name)  # an operator's pause of the cluster lowers act to paused
    table = deps.table.for_mode(mode)
    incidents = IncidentStore(table)
    first_delivery = incidents.claim_alarm_transition(subject.name, change.state, change.timestamp, now)
    if quiet_repeats and not first_delivery:
        return None
    open_incident = incidents.alarm_incident(subject.name)
    nodes_in_repair, storm_held = 0, False
    if subject.kind is AlarmKind.FAILED_NODES and change.state == "ALARM":
        window = timedelta(minutes=deps.config.guardrails_for(subject.cluster).repair_minutes)
        nodes_in_repair = NodeStore(table).cluster_actions_since(subject.cluster.name, now - window)
        storm_at = PageStore(table).storm_paged_at(subject.cluster.name)
        storm_held = storm_at is not None and now - storm_at < STORM_HOLD
    stall = subject.kind in STALL_KINDS and subject.job is not None and first_delivery
    recent = None
    if stall and change.state == "ALARM":  # does the heartbeat agree? (one GetMetricData)
        # The hang alarm is the probe's own verdict, seconds after the last step: the steps of the minutes read back
        # are the job's last ones before it, so no window (steps since would come with the probe's 0, the alarm's
        # OK); the day before still says whether the job finished, never ran, or is in a marked pause.
        since = now - timedelta(minutes=subject.job.stall_minutes) if subject.kind is AlarmKind.STALL else \
            _next_minute(now)  # (the read's one-minute buckets then start on whole minutes)
        recent = _progress(subject, since, now, deps, history=PROBE_HISTORY)
    watch = since_restart = owner = in_repair = None
    if stall and (change.state == "ALARM" or open_incident is not None):
        watch = next((w for w in incidents.recoveries() if w.incident == incident), None)
    if stall and change.state == "ALARM":  # a node repair, or Medic's own restart, may own the incident
        owner = watch
        if owner is None and subject.cluster.orchestrator == "slurm" and not made_progress(recent):
            in_repair = _node_in_repair(subject, table, deps, now)
    if stall and change.state == "OK" and open_incident is not None:
        if watch is not None:  # OK alone is no proof: did the job step since the restart?
            since_restart = _progress(subject, progress_since(watch), now, deps, history=PROBE_HISTORY,
                                      new_session=True)
    decision = decide_alarm(AlarmContext(
        subject=subject, state=change.state, episode_seen=not first_delivery,
        incident_open=open_incident is not None,
        incident_paged=open_incident is not None and PageStore(table).incident_paged(incident),
        escalated=open_incident is not None and incidents.is_escalated(incident),
        nodes_in_repair=nodes_in_repair, mode=mode, recent_progress=recent,
        stall_minutes=subject.job.stall_minutes if subject.job else 0,
        watch=watch, progress_since_restart=since_restart, storm_held=storm_held, owner=owner,
        node_in_repair=in_repair))

    if decision.plan is Plan.REQUEUE:
        incidents.open_alarm_incident(subject.name, incident, now)
        from medic.flows.agent.restart import RestartRequest, restart_through_agent  # the agent paths only

        eks = subject.cluster.orchestrator == "eks"
        interval = deps.config.guardrails_for(subject.cluster).stall_restart_interval_minutes
        run = subject.run
        target = (run.kubernetes if run is not None else subject.job.kubernetes_object()) if eks else None
        by_id = run.slurm_job_id if run is not None and not eks else None
        record = restart_through_agent(RestartRequest(
            mode=mode, cluster=subject.cluster.name, incident=incident, trigger=trigger,
            event_id=event_id, fault=subject.fault.value, context=change.reason,
            # a run watched by pattern: exactly its Slurm job, which the agent checks still bears the run's name
            job_name=None if by_id else subject.job.name, job_id=by_id,
            job_names=(subject.job.name,) if by_id else (), kubernetes=target,
            min_interval=timedelta(minutes=interval) if interval else None), deps)
        if record["outcome"] == Outcome.DEFERRED and mode.acts:  # queued for the agent
            incidents.watch_recovery(RecoveryWatch(
                incident=incident, job=subject.job.name, cluster=subject.cluster.name, restarted_at=now,
                deadline=recovery_deadline(subject.job, now), attempt=record["attempt"],
                fault_at=recent.last_heartbeat_at if recent else None,
                last_step=recent.last_step_before if recent else None,
                checkpoint_step=recent.checkpoint_before if recent else None,
                steps_per_minute=recent.steps_per_minute_before if recent else None))
        return record

    if decision.hold_for is not None and mode.acts:  # the repair owns the job: its watch, held until the node is back
        from medic.flows.agent.slurm_node import hit_by_repair

        repair_minutes = deps.config.guardrails_for(subject.cluster).repair_minutes
        origin = hit_by_repair(deps, subject.cluster.name, decision.hold_for)
        # the job's incident is the repair's (a node_repair line): from its last heartbeat, or the node's fault if
        # that came first
        stopped = [at for at in (origin.pop("fault_at", None), recent.last_heartbeat_at if recent else None) if at]
        incidents.watch_recovery(RecoveryWatch(
            incident=incident, job=subject.job.name, cluster=subject.cluster.name, restarted_at=now,
            deadline=held_deadline(subject.job, repair_minutes, now), attempt=0, held_by=decision.hold_for,
            fault_at=min(stopped, default=None), **origin,
            last_step=recent.last_step_before if recent else None,
            checkpoint_step=recent.checkpoint_before if recent else None,
            steps_per_minute=recent.steps_per_minute_before if recent else None))
    about = About(incident=incident, trigger=trigger, event_id=event_id, mode=mode,
                  cluster=subject.cluster.name, job=subject.job.name if subject.job else None)
    record = about.record(fault=decision.fault or subject.fault, action=decision.action, outcome=decision.outcome,
                          reason=decision.reason, why=decision.why)
    if change.state == "ALARM" and decision.outcome not in (Outcome.DUPLICATE, Outcome.IGNORED):
        incidents.open_alarm_incident(subject.name, incident, now, fault_at=_state_time(change.timestamp))
    if decision.page and mode.pages:  # the page's details cost metric reads: none for a page nobody gets
        text = alarm_page(record, subject.name, change.reason, _details(subject, deps), deps.region)
        window = alarm_window(subject)
        record = record.paged_if(page_resolution(deps, table, record, text, window=window) if decision.close_incident
                                 else page_incident(deps, table, record, text, window=window))
    if decision.close_incident:
        if watch is not None and since_restart is not None:  # OK and steps since the restart: the proof
            conclude_on_ok(watch, since_restart, event_id, deps,
                           alarm="the stall alarm" if subject.kind is AlarmKind.STALL else "the hang alarm")
        incidents.close_alarm_incident(subject.name, incident)
    emitted = emit(record)
    closes_page_only = decision.close_incident and subject.kind in PAGE_ONLY and open_incident is not None
    if closes_page_only and mode is not Mode.DRY_RUN:  # a dry run's incident is a rehearsal: no timeline line
        _close_timeline(subject, incident, open_incident, now)  # after its record, as the other kinds
    return emitted


def alarm_window(subject: AlarmSubject) -> PageWindow:
    """A job's alarms page under the job's training window (a flapping alarm is one summary, not a page per
    flap); the failed-nodes alarm under its cluster's node window."""
    if subject.job is not None:
        return PageWindow.job(PageSource.TRAINING, subject.job.name)
    return PageWindow.cluster(PageSource.NODE, subject.cluster.name)


PAGE_ONLY = (AlarmKind.DIVERGENCE, AlarmKind.SLOWDOWN)  # incidents Medic pages for and never acts on


def _close_timeline(subject: AlarmSubject, incident: str, opened: dict[str, str], now: datetime) -> None:
    """A divergence or slowdown incident's line when its alarm goes OK: the ALARM's state time, Medic's receipt."""
    detected = _state_time(opened.get("opened_at"))
    emit_incident(alarm_timeline(incident=incident, kind=subject.kind.value, fault=subject.fault.value,
                                 cluster=subject.cluster.name, job=subject.job.name if subject.job else None,
                                 fault_at=_state_time(opened.get("fault_at")) or detected, detected_at=detected,
                                 resolved_at=now))


def _node_in_repair(subject: AlarmSubject, table: Any, deps: Deps, now: datetime) -> tuple[str, str, str] | None:
    """A node in repair (as the reconciler last saw it: ledger `repair#<cluster>`) that the job ran on (the probe's
    per-node throughput over the stall window and a quarter hour before): its incident, Slurm name and status. None
    when no node is in repair (no metrics read then), or the probe names none of them."""
    watches = [w for w in NodeStore(table).repair_watches(subject.cluster.name).values() if w.slurm_node]
    if not watches:
        return None
    window = timedelta(minutes=subject.job.stall_minutes + 15)
    try:
        ran_on = {node for node, _ in deps.metrics.node_throughput(subject.job.name, now, window=window)}
    except (ClientError, BotoCoreError) as error:
        logger.warning("job nodes unavailable", extra={"alarm": subject.name, "error_code": error_code(error)})
        return None
    hit = next((w for w in watches if w.slurm_node in ran_on), None)
    return (f"node:{subject.cluster.name}:{hit.node_id}", hit.slurm_node or "", hit.status) if hit else None


def _next_minute(at: datetime) -> datetime:
    """``at`` if it is a whole minute, else the next one."""
    whole = at.replace(second=0, microsecond=0)
    return whole if whole == at else whole + timedelta(minutes=1)


def _state_time(text: str | None) -> datetime | None:
    """An ISO 8601 time (CloudWatch's state timestamp, ``2026-11-21T03:18:00.000+0000``); None when unreadable."""
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def _progress(subject: AlarmSubject, since: datetime, until: datetime, deps: Deps,
              history: timedelta | None = None, new_session: bool = False) -> Progress | None:
    """The probe's heartbeat and step over the window (and the history before it); None when CloudWatch cannot
    say (logged). ``new_session``: only steps of a probe session that started since ``since`` count."""
    try:
        return deps.metrics.progress(subject.job.name, since, until, history=history, new_session=new_session)
    except (ClientError, BotoCoreError) as error:
        logger.warning("progress unavailable", extra={"alarm": subject.name, "error_code": error_code(error)})
        return None


def _details(subject: AlarmSubject, deps: Deps) -> list[str]:
    """What the metrics add to a page; a metrics outage must not stop the page."""
    if subject.job is None:
        return []
    try:
        if subject.kind is AlarmKind.DIVERGENCE:
            step = deps.metrics.last_checkpoint_step(subject.job.name, deps.now())
            return [f"Last checkpoint:  step {step:.0f}" if step is not None else
                    "Last checkpoint:  none reported by the probe in the last 24 h"]
        if subject.kind is AlarmKind.SLOWDOWN:
            nodes = deps.metrics.node_throughput(subject.job.name, deps.now())
            if not nodes:
                return ["Per node:       no per-node throughput reported"]
            fastest = nodes[-1][1] or 1.0
            # the Node dimension's values are whatever a PutMetricData caller wrote (the probe, or anyone allowed
            # to put data in the namespace): shown quoted
            return ["Per node (tokens/s, last 15 min, slowest first):",
                    *[f"  {quoted(node, 64):<24} {value:>12.1f}  ({value / fastest:.0%} of the fastest)"
                      for node, value in nodes[:16]]]
    except (ClientError, BotoCoreError) as error:
        logger.warning("metrics unavailable for the page", extra={"alarm": subject.name,
                                                                  "error_code": error_code(error)})
        return [f"(metrics unavailable: {short(error_code(error), 80)})"]
    return []
