"""Proof of recovery (pure): did training resume after a restart, and by when must it have."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from medic.config_core import Job
from medic.core.progress import Progress, RecoveryWatch


class Verdict(StrEnum):
    RESUMED = "resumed"
    RESUMED_BEHIND = "resumed_behind"  # stepping again, but from below the last checkpoint
    WAITING = "waiting"
    NO_PROGRESS = "no_progress"
    COMPLETED = "completed"  # the job finished: the probe's completion marker is its latest report


def made_progress(progress: Progress | None) -> bool:
    """Steps were counted (the probe's Heartbeat) and a step was reported in the window read."""
    return progress is not None and progress.steps >= 1 and progress.last_step is not None


def judge_recovery(watch: RecoveryWatch, progress: Progress, now: datetime) -> Verdict:
    """Training resumed when steps were counted after the restart (from the last checkpoint, or it resumed
    behind it); it finished when the probe's completion marker is its latest report (at once when the marker came
    after the restart; a marker from before it only at the deadline, so a restarted run reporting late is still
    judged); past the deadline without either: escalate. A watch a node repair holds waits for the repair: its window
    has not started (steps counted now may be the job's last ones before the node went down), unless the repair
    outlasts the backstop deadline; only steps since Medic's requeue of the job prove it resumed meanwhile."""
    if watch.held and (watch.acted_at is None or not made_progress(progress)):
        # (with Medic's requeue, ``progress`` is read since it: steps then are the requeued job's)
        if now < watch.deadline:
            return Verdict.WAITING
        return Verdict.COMPLETED if progress.finished_at is not None else Verdict.NO_PROGRESS
    if made_progress(progress):
        return Verdict.RESUMED_BEHIND if progress.resumed_behind else Verdict.RESUMED
    finished = progress.finished_at
    if finished is not None and (finished_since_restart(watch, finished) or now >= watch.deadline):
        return Verdict.COMPLETED
    return Verdict.NO_PROGRESS if now >= watch.deadline else Verdict.WAITING


def progress_since(watch: RecoveryWatch) -> datetime:
    """Since when steps count as the restarted job's: the window's start; while a node repair holds the watch, Medic's
    requeue of the job (the old process died with the node)."""
    return watch.acted_at if watch.held and watch.acted_at is not None else watch.restarted_at


def finished_since_restart(watch: RecoveryWatch, finished: datetime) -> bool:
    """The completion marker came in the restart's minute or later (the probe's datapoints are read back per
    minute, stamped with the minute's start)."""
    return finished >= watch.restarted_at.replace(second=0, microsecond=0)


def recovery_deadline(job: Job, restarted_at: datetime) -> datetime:
    return restarted_at + timedelta(minutes=job.recovery_minutes)


def held_deadline(job: Job, repair_minutes: int, held_at: datetime) -> datetime:
    """The backstop of a watch a node repair holds: the repair's window (guardrails.repair_minutes, past which a slow
    repair pages) and then the job's own."""
    return held_at + timedelta(minutes=repair_minutes + job.recovery_minutes)
