"""Proof of recovery: after Medic restarts a job, did training really resume? Run on a schedule over
the open recovery watches; each ends in one record: resumed (quietly), completed (the probe's completion marker:
the job finished, quietly) or no progress (one page, and no further automatic restart until the stall alarm has been
OK)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.core.models import Action, Fault, Outcome, Trigger, Why
from medic.core.pages import PageSource, PageWindow
from medic.core.progress import PROBE_HISTORY, Progress, RecoveryWatch
from medic.core.record import About
from medic.core.text import MedicText
from medic.core.timeline import Timeline, incident_line
from medic.deps import Deps
from medic.flows.recovery.pages import alarm_page
from medic.flows.recovery.policy import (
    Verdict,
    finished_since_restart,
    judge_recovery,
    made_progress,
    progress_since,
)
from medic.ledger.follows import FollowStore
from medic.ledger.incidents import IncidentStore
from medic.ledger.nodes import NodeStore
from medic.ledger.repairs import RepairStore
from medic.obs import emit_incident, logger
from medic.outbox.pages import page_incident
from medic.outbox.records import emit


def check_recoveries(event: Any, deps: Deps) -> list[dict]:
    run_id = str(event.get("id", "schedule")) if isinstance(event, dict) else "schedule"
    now = deps.now()
    records = []
    for watch in IncidentStore(deps.table).recoveries():
        if watch.held and watch.acted_at is None and now < watch.deadline:  # a node repair owns the job, no restart
            continue
        if watch.held and now >= watch.deadline and repair_under_way(watch, deps):
            # issue 32 item 6: the window starts when the node (or its replacement) is back, however long the repair
            # takes; a repair that outlasts its window pages on its own (the reconciler's slow-repair page)
            continue
        try:
            # with the day before the restart: the last checkpoint the resume point is checked against
            # (new_session: only the restarted process's own probe session proves a recovery)
            progress = deps.metrics.progress(watch.job, progress_since(watch), now, history=PROBE_HISTORY,
                                             new_session=True)
        except (ClientError, BotoCoreError) as error:  # next run tries again; the watch stays
            logger.warning("progress unavailable", extra={"incident": watch.incident,
                                                          "error_code": error_code(error)})
            continue
        verdict = judge_recovery(watch, progress, now)
        if verdict is Verdict.WAITING:
            continue
        records.append(_conclude(watch, verdict, progress, run_id, deps))
    return records


def repair_under_way(watch: RecoveryWatch, deps: Deps) -> bool:
    """The node repair holding the watch has not ended as far as the ledger says: Medic's own (or one whose jobs the
    agent listed) not yet followed up (ledger.repairs), HyperPod's own still followed (ledger.follows), or the node
    still seen in repair (ledger `repair#`). Never raises: unreadable reads as ended (the backstop then judges)."""
    incident, cluster = watch.held_by or "", watch.cluster
    node_id = incident.rsplit(":", 1)[-1]
    try:
        if any(repair.incident == incident and repair.taken_at is None
               for repair in RepairStore(deps.table).repairs(cluster)):
            return True
        if any(followed.incident == incident for followed in FollowStore(deps.table).followed(cluster)):
            return True
        return node_id in NodeStore(deps.table).repair_watches(cluster)
    except (ClientError, BotoCoreError) as error:
        logger.warning("repair state unreadable", extra={"incident": watch.incident, "error_code": error_code(error)})
        return False


def conclude_on_ok(watch: RecoveryWatch, progress: Progress, event_id: str, deps: Deps,
                   alarm: str = "the stall alarm") -> dict:
    """The job's stall (or hang) alarm went OK while a restart was watched, and the probe counted steps since the
    restart (``decide_alarm`` made sure): training resumed, from its last checkpoint or behind it."""
    if progress.resumed_behind:
        return _conclude(watch, Verdict.RESUMED_BEHIND, progress, event_id, deps)
    record = _about(watch, Trigger.ALARM, event_id, deps).record(
        fault=Fault.RECOVERED, action=Action.NONE, outcome=Outcome.IGNORED, attempt=watch.attempt,
        reason=f"Training resumed after {since(watch)}: {alarm} is OK "
               f"again and the probe counted {progress.steps:.0f} steps since, now at step {progress.last_step:.0f}.")
    IncidentStore(deps.table).end_recovery(watch.incident)
    emit_incident(stall_timeline(watch, progress, resolved_at=deps.now()))
    return emit(record)


def _conclude(watch: RecoveryWatch, verdict: Verdict, progress: Progress, run_id: str, deps: Deps) -> dict:
    table = deps.table
    steps, last_step = progress.steps, progress.last_step
    minutes = (deps.now() - progress_since(watch)).total_seconds() / 60
    about = _about(watch, Trigger.RECONCILE, run_id, deps)
    if verdict is Verdict.RESUMED:
        record = about.record(
            fault=Fault.RECOVERED, action=Action.NONE, outcome=Outcome.IGNORED, attempt=watch.attempt,
            reason=f"Training resumed after {since(watch)}: {steps:.0f} steps in "
                   f"{minutes:.0f} min, now at step {last_step:.0f}.")
        IncidentStore(table).end_recovery(watch.incident)
        emit_incident(stall_timeline(watch, progress, resolved_at=deps.now()))
        return emit(record)
    if verdict is Verdict.RESUMED_BEHIND:
        return _resumed_behind(watch, progress, about, deps)
    if verdict is Verdict.COMPLETED and progress.finished_at is not None:
        return _completed(watch, progress.finished_at, progress, about, deps)
    if watch.held:
        reason = (f"No training progress, and the repair of its node ({watch.held_by}) that holds the job has not "
                  f"ended by {watch.deadline:%H:%M} UTC{unvouched_note(progress)}; not restarting it blindly.")
    else:
        reason = (f"No training progress {minutes:.0f} min after {since(watch)}{unvouched_note(progress)}; "
                  "not restarting again blindly.")
    record = about.record(fault=Fault.NO_PROGRESS, action=Action.NONE, outcome=Outcome.FAILED, attempt=watch.attempt,
                          reason=reason, why=Why.NOT_RECOVERED)
    IncidentStore(table).escalate(watch.incident, deps.now())
    alarm = f"stall alarm of {watch.job}"
    text = alarm_page(record, alarm, MedicText("The job was restarted but its heartbeat and step did not resume."),
                      [], deps.region)
    record = record.paged_if(page_incident(deps, table, record, text, claim=f"{watch.incident}:recovery",
                                           window=PageWindow.job(PageSource.TRAINING, watch.job)))
    IncidentStore(table).end_recovery(watch.incident)
    emit_incident(stall_timeline(watch, progress, resolved_at=None))  # gave up: a human owns it now
    return emit(record)


def unvouched_note(progress: Progress) -> str:
    """Why steps that were reported did not count (empty when none were left out)."""
    parts = []
    if progress.stale_session_steps:
        parts.append(f"{progress.stale_session_steps:.0f} from the probe session of the process before the restart")
    if progress.unsessioned_steps:
        parts.append(f"{progress.unsessioned_steps:.0f} in minutes without exactly one probe session (not one probe's: "
                     "forged, back-dated, two processes at once, or a probe too old to send its session)")
    return f" from a probe session that started after it ({' and '.join(parts)} were reported, and do not count)" \
        if parts else ""


def _resumed_behind(watch: RecoveryWatch, progress: Progress, about: About, deps: Deps) -> dict:
    """Training runs again, but from below its last checkpoint (from scratch, or an older checkpoint): no restart
    would help (the job is running); one page says what was lost, and the watch ends."""
    resumed, checkpoint = progress.first_step or 0.0, progress.checkpoint_before or 0.0
    lost = checkpoint - resumed
    # All the work the restart redoes (the incident line's lost_steps): back to where it resumed from the last step
    # before the stall, not only to the checkpoint.
    redone = (f" behind it, {watch.last_step - resumed:.0f} in all from step {watch.last_step:.0f} before the stall"
              if watch.last_step is not None and watch.last_step > checkpoint else "")
    record = about.record(
        fault=Fault.RESUMED_BEHIND, action=Action.NONE, outcome=Outcome.FAILED, attempt=watch.attempt,
        why=Why.NOT_RECOVERED,
        reason=f"Training resumed after {since(watch)}, but from step {resumed:.0f} "
               f"while the last checkpoint was step {checkpoint:.0f}: {lost:.0f} steps lost{redone}. The job did not "
               "load its last checkpoint (or loaded an older one).")
    details = [f"Resumed from:    step {resumed:.0f}", f"Last checkpoint: step {checkpoint:.0f}",
               f"Steps lost:      {lost:.0f}"]
    text = alarm_page(record, f"stall alarm of {watch.job}",
                      MedicText("The job was restarted and runs again, but not from its last checkpoint: check that "
                                "it loads the latest checkpoint on start (path, resume flag) before the next failure."),
                      details, deps.region)
    record = record.paged_if(page_incident(deps, deps.table, record, text, claim=f"{watch.incident}:recovery",
                                           window=PageWindow.job(PageSource.TRAINING, watch.job)))
    IncidentStore(deps.table).end_recovery(watch.incident)
    emit_incident(stall_timeline(watch, progress, resolved_at=deps.now()))
    return emit(record)


def since(watch: RecoveryWatch) -> str:
    """Where the watch's window starts, in words: Medic's restart, or (a job a node repair held) the repair's end."""
    if watch.held and watch.acted_at is not None:
        return f"Medic's requeue at {watch.acted_at:%H:%M} UTC, while its node was still in repair"
    if watch.acted_at is not None and watch.acted_at < watch.restarted_at:
        return (f"the repair that held it ended at {watch.restarted_at:%H:%M} UTC (Medic requeued it at "
                f"{watch.acted_at:%H:%M} UTC)")
    if not watch.attempt:
        return f"the repair that held it ended at {watch.restarted_at:%H:%M} UTC"
    return f"Medic's restart at {watch.restarted_at:%H:%M} UTC"


def _completed(watch: RecoveryWatch, finished: datetime, progress: Progress, about: About, deps: Deps) -> dict:
    """The job finished: its probe's completion marker is its latest report. Nothing to prove and nobody to page; the
    watch ends and the incident is resolved."""
    step = progress.latest_step
    at_step = f" at step {step:.0f}" if step is not None else ""
    if finished_since_restart(watch, finished):
        reason = (f"Training finished after Medic's restart at {watch.restarted_at:%H:%M} UTC: the probe published its "
                  f"completion marker (a clean close) at {finished:%H:%M} UTC{at_step} and has reported nothing "
                  "since; no page.")
    else:
        reason = (f"The job had finished before Medic's restart at {watch.restarted_at:%H:%M} UTC: the probe published "
                  f"its completion marker (a clean close) at {finished:%Y-%m-%d %H:%M} UTC{at_step} and has reported "
                  f"nothing since, through the recovery deadline {watch.deadline:%H:%M} UTC; no page.")
    record = about.record(fault=Fault.COMPLETED, action=Action.NONE, outcome=Outcome.IGNORED, attempt=watch.attempt,
                          reason=reason)
    IncidentStore(deps.table).end_recovery(watch.incident)
    emit_incident(stall_timeline(watch, progress, resolved_at=deps.now()))
    return emit(record)


def _about(watch: RecoveryWatch, trigger: Trigger, event_id: str, deps: Deps) -> About:
    """What every record about a watched restart shares: its incident, cluster and job."""
    return About(incident=watch.incident, trigger=trigger, event_id=event_id, mode=deps.mode.current(watch.cluster),
                 cluster=watch.cluster, job=watch.job)


def stall_timeline(watch: RecoveryWatch, progress: Progress, resolved_at: datetime | None) -> dict:
    """The job's incident line: the fault (last heartbeat), its detection and the requeue (the alarm handler's
    run), the first step after the restart, the end. A requeued Slurm job's running again reaches Medic only as
    that first step: repaired_at stays null. A job a node repair hit (``watch.repair``) is a ``node_repair``
    incident: the node's fault and its time (or the job's last heartbeat, if earlier), when Medic received it, and
    the node; its work lost from the probe's history when no stall alarm read it."""
    resumed = progress.first_step_at if made_progress(progress) else None
    # A job a node repair hit that Medic never restarted (Slurm requeued it, or auto-resume) has no act of Medic's.
    acted = watch.acted_at or (watch.restarted_at if watch.attempt else None)
    steps = (watch.last_step, watch.checkpoint_step, watch.steps_per_minute)
    if watch.repair is None:
        kind, fault, detected, node_id = "stall", Fault.STALLED.value, acted or watch.restarted_at, None
    else:
        kind, fault = "node_repair", watch.repair_fault or Fault.STALLED.value
        detected, node_id = watch.detected_at or acted or watch.restarted_at, watch.repair.rsplit(":", 1)[-1]
        if watch.last_step is None:  # the probe's history before the window: the step and checkpoint it stopped at
            steps = (progress.last_step_before, progress.checkpoint_before, progress.steps_per_minute_before)
    last_step, checkpoint_step, steps_per_minute = steps
    return incident_line(Timeline(
        incident=watch.incident, kind=kind, fault=fault, fault_at=watch.fault_at, detected_at=detected,
        cluster=watch.cluster, job=watch.job, node_id=node_id, acted_at=acted, resumed_at=resumed,
        resolved_at=resolved_at, last_step=last_step, checkpoint_step=checkpoint_step,
        steps_per_minute=steps_per_minute, resumed_step=progress.first_step if progress.resumed_behind else None))

