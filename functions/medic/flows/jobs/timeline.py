"""A restart's incident line, written when its clone trains: the training job flow notes each clone it starts
(ledger ``CloneWatch``); the proof-of-recovery schedule (every 5 minutes) reads each with DescribeTrainingJob and,
once the clone has reached its `Training` secondary status (or ended, or Medic stopped waiting), writes the line:
the restart's `resumed_at` is when the clone trained again, not when CreateTrainingJob returned. An AWS Batch or
Bedrock clone's watch is ended by the clone's own state change event (flows/jobs/managed.clone_running, or its
failure); the schedule only stops waiting for one at its deadline (no resume)."""

from __future__ import annotations

from datetime import datetime

from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.core.timeline import job_timeline
from medic.deps import Deps
from medic.flows.jobs.policy import CLONE_TRAINING_WAIT, clone_progress
from medic.ledger.jobs import CloneWatch, JobStore
from medic.obs import emit_incident, logger

# DescribeTrainingJob of a job that does not exist: ResourceNotFound (botocore's sagemaker model, the operation's
# one error); SageMaker is also seen answering ValidationException "Requested resource not found" (assumption: both
# mean gone).
GONE = frozenset({"ResourceNotFound", "ValidationException"})
TRAINING_JOB = "training_job"  # a SageMaker clone's watch (the line's kind); the others are Batch's and Bedrock's


def watch_clone(deps: Deps, *, clone: str, incident: str, job: str, fault: str, fault_at: datetime | None,
                detected_at: datetime, acted_at: datetime, job_started_at: datetime | None,
                kind: str = TRAINING_JOB) -> CloneWatch:
    """The restart's line waits for its clone to train (at most CLONE_TRAINING_WAIT)."""
    watch = CloneWatch(clone=clone, incident=incident, job=job, fault=fault, fault_at=fault_at,
                       detected_at=detected_at, acted_at=acted_at, deadline=acted_at + CLONE_TRAINING_WAIT,
                       job_started_at=job_started_at, kind=kind)
    JobStore(deps.table).watch_clone(watch)
    return watch


def conclude_watch(watch: CloneWatch, resumed_at: datetime | None) -> None:
    """The restart's incident line, once its clone trains (``resumed_at``) or never will (None)."""
    emit_incident(job_timeline(incident=watch.incident, job=watch.job, fault=watch.fault, fault_at=watch.fault_at,
                               detected_at=watch.detected_at, restarted_at=watch.acted_at, resumed_at=resumed_at,
                               job_started_at=watch.job_started_at, kind=watch.kind))


def conclude_clone_timelines(deps: Deps) -> int:
    """Each watched clone that trains (or will not): its restart's incident line. Returns the lines written."""
    store, now, written = JobStore(deps.table), deps.now(), 0
    for watch in store.clone_watches():
        if watch.kind != TRAINING_JOB:  # its own event ends it (flows/jobs/managed); here only its deadline
            if now >= watch.deadline and store.end_clone_watch(watch.clone):
                conclude_watch(watch, None)
                written += 1
            continue
        try:
            description: dict | None = deps.training.describe(watch.clone)
        except ClientError as error:
            if error_code(error) not in GONE:
                logger.warning("clone unreadable", extra={"incident": watch.incident, "error_code": error_code(error)})
                continue  # the next run reads it again
            description = None
        except BotoCoreError as error:
            logger.warning("clone unreadable", extra={"incident": watch.incident, "error_code": error_code(error)})
            continue
        progress = clone_progress(description, now, watch.deadline)
        if progress.done and store.end_clone_watch(watch.clone):
            conclude_watch(watch, progress.resumed_at)
            written += 1
    return written
