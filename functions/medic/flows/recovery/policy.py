"""Proof of recovery (pure): did training resume after a restart, and by when must it have."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from medic.config import Job
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
    judged); past the deadline without either: escalate."""
    if made_progress(progress):
        return Verdict.RESUMED_BEHIND if progress.resumed_behind else Verdict.RESUMED
    finished = progress.finished_at
    if finished is not None and (finished_since_restart(watch, finished) or now >= watch.deadline):
        return Verdict.COMPLETED
    return Verdict.NO_PROGRESS if now >= watch.deadline else Verdict.WAITING


def finished_since_restart(watch: RecoveryWatch, finished: datetime) -> bool:
    """The completion marker came in the restart's minute or later (the probe's datapoints are read back per
    minute, stamped with the minute's start)."""
    return finished >= watch.restarted_at.replace(second=0, microsecond=0)


def recovery_deadline(job: Job, restarted_at: datetime) -> datetime:
    return restarted_at + timedelta(minutes=job.recovery_minutes)
