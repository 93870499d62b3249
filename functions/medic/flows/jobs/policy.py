"""The training job restart policy: pure, like the node policy."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import NamedTuple

from medic.core.mode import Mode
from medic.core.models import Action, Fault, Outcome, Why
from medic.core.pages import Page
from medic.flows.jobs.faults import JobFailure
from medic.ledger.jobs import MedicRestart

NAME_LIMIT = 63

# A job failure's handling (every service's: training jobs, Batch, Bedrock) ends with these: a clone started
# (InProgress), or no restart and a human paged (gave up, not retryable, suppressed, failed). A duplicate, an ignored
# status or a dry run closes nothing.
CLOSING_OUTCOMES = frozenset({Outcome.EXECUTED.value, Outcome.SUPPRESSED.value, Outcome.FAILED.value,
                              Outcome.DEFERRED.value})


class Checkpoint(StrEnum):
    PRESENT = "present"
    EMPTY = "empty"  # CheckpointConfig set, nothing stored under its S3 URI yet
    NOT_CONFIGURED = "not_configured"


class Lineage(NamedTuple):
    """A job and its restarts: the original job's name and how many restarts came before."""

    root: str
    restarts: int

    def next_name(self, limit: int = NAME_LIMIT) -> str:
        """``<root>-r<k>``, within the service's name limit (SageMaker's 63 characters by default); a shortened
        root keeps a hash of the full one."""
        suffix = f"-r{self.restarts + 1}"
        if len(self.root) + len(suffix) <= limit:
            return self.root + suffix
        digest = hashlib.sha256(self.root.encode()).hexdigest()[:6]
        keep = limit - len(suffix) - len(digest) - 1
        return f"{self.root[:keep].rstrip('-')}-{digest}{suffix}"


def foreign_training_job_arn(arn: str, *, account: str, region: str, partition: str = "aws",
                             field: str = "TrainingJobArn") -> str | None:
    """Why an ARN in a job event (``field``: which; SageMaker's TrainingJobArn by default, Batch's jobArn and
    jobQueue) is not of the deploying partition, account and region (None: it is). An empty ``account``
    (unknown) is not checked."""
    parts = arn.split(":")  # arn:partition:service:region:account:resource
    arn_partition, arn_region, arn_account = (parts[1], parts[3], parts[4]) if len(parts) > 5 else ("", "", "")
    if arn_partition != partition:
        return f"{field} {arn} names partition {arn_partition}, not the stack's partition {partition}."
    if account and arn_account != account:
        return f"{field} {arn} names account {arn_account}, not the deploying account {account}."
    if arn_region != region:
        return f"{field} {arn} names region {arn_region}, not the deploying region {region}."
    return None


# Tags Medic puts on a restart for people to read (console, cost reports). Medic never reads them back: the job's
# owner can set any tag (TagValue allows any letter or number, "²" and "٣" included), so lineage and attempt come
# from the ledger (ledger/jobs.py, MedicRestart), keyed by the job Medic created.
LINEAGE_TAG = "medic:lineage"
ATTEMPT_TAG = "medic:attempt"


def user_tags(job_tags: dict[str, str]) -> dict[str, str]:
    """The failed job's own tags carry over; Medic's are rewritten, AWS's reserved ones cannot be set."""
    return {key: value for key, value in job_tags.items() if not key.startswith(("medic:", "aws:"))}


def restart_tags(job_tags: dict[str, str], lineage: Lineage, restarted_from: str,
                 limit: int) -> dict[str, str] | None:
    """The user's tags and Medic's within the service's ``limit`` (SageMaker's and Batch's: 50): lineage and
    attempt are required (what people read: Medic reads the ledger, never these), restarted-from is dropped first;
    None when even the required two do not fit."""
    user = user_tags(job_tags)
    required = {LINEAGE_TAG: lineage.root, ATTEMPT_TAG: str(lineage.restarts + 1)}
    if len(user) + len(required) + 1 <= limit:
        return {**user, **required, "medic:restarted-from": restarted_from}
    if len(user) + len(required) <= limit:
        return {**user, **required}
    return None


def lineage_of(job_name: str, restart: MedicRestart | None, creation_time: datetime | None) -> Lineage:
    """The job's lineage as Medic recorded it when it created the job; any other job (whatever its tags say, and
    a job that only reuses the name of one Medic created) is the root of its own lineage."""
    if restart is not None and restart.name == job_name and restart.made(creation_time):
        return Lineage(root=restart.root, restarts=restart.attempt)
    return Lineage(root=job_name, restarts=0)


def not_medics_restart(restart: MedicRestart | None, failed_job: str, failed_created: datetime | None,
                       creation_time: datetime | None) -> str | None:
    """Why the job that holds a restart's name (created at ``creation_time``) is not Medic's own restart of the
    failure of ``failed_job`` (created at ``failed_created``); None: it is: Medic noted the restart for this failure
    and SageMaker created the job while Medic's call could run."""
    if restart is None:
        return "Medic has no record of creating it"
    if not restart.restarts(failed_job, failed_created):
        earlier = "" if restart.restarted_from != failed_job else "an earlier job named "
        return f"Medic created that name for the failure of {earlier}{restart.restarted_from}, not of this one"
    if not restart.made(creation_time):
        created = f"at {creation_time.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC" if creation_time else "when unknown"
        return (f"it was created {created}, not while Medic was creating it for this failure, from "
                f"{restart.intended_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC")
    return None


class JobContext(NamedTuple):
    mode: Mode  # `medic explain` passes the mode as the text it read: compared with ==, not is
    status: str
    failure: JobFailure
    lineage: Lineage
    max_restarts: int
    checkpoint: Checkpoint
    allow_without_checkpoint: bool
    # What "no checkpoint" means for this service, when it is not SageMaker's CheckpointConfig (None)
    no_checkpoint: str | None = None


class JobDecision(NamedTuple):
    fault: Fault
    action: Action
    outcome: Outcome
    reason: str
    page: Page = Page.NONE
    attempt: int = 0
    why: Why | None = None  # the record's sub-reason (None: the outcome's only one)

    @property
    def executes(self) -> bool:
        return self.outcome is Outcome.EXECUTED


def decide_job(ctx: JobContext) -> JobDecision:
    attempt = ctx.lineage.restarts + 1
    if ctx.status == "Stopped":
        return JobDecision(Fault.JOB_STOPPED, Action.NONE, Outcome.IGNORED,
                           "The job was stopped by a user; Medic never restarts a stopped job.")
    if ctx.status != "Failed":
        return JobDecision(ctx.failure.fault, Action.NONE, Outcome.IGNORED, f"Job status is {ctx.status}.")
    fault, label = ctx.failure.fault, ctx.failure.label
    if fault is Fault.JOB_NOT_RETRYABLE:
        return JobDecision(fault, Action.NONE, Outcome.DEFERRED,
                           f"Not retryable ({label}): a restart would fail the same way; a human must fix the job.",
                           page=Page.INCIDENT, why=Why.NOT_RETRYABLE)
    if fault is Fault.JOB_UNKNOWN:
        return JobDecision(fault, Action.NONE, Outcome.DEFERRED,
                           "Unrecognized failure reason; Medic does not restart and a human decides.",
                           page=Page.INCIDENT, why=Why.HUMAN_DECIDES)
    if ctx.lineage.restarts >= ctx.max_restarts:
        return JobDecision(fault, Action.RESTART_JOB, Outcome.SUPPRESSED,
                           f"Giving up: restart budget spent ({ctx.lineage.restarts} of {ctx.max_restarts} restarts "
                           f"of {ctx.lineage.root}).", page=Page.INCIDENT, attempt=attempt, why=Why.BUDGET_SPENT)
    if ctx.checkpoint is not Checkpoint.PRESENT and not ctx.allow_without_checkpoint:
        missing = ctx.no_checkpoint or ("the job has no CheckpointConfig" if ctx.checkpoint is Checkpoint.NOT_CONFIGURED
                                        else "nothing is stored under its checkpoint S3 URI")
        return JobDecision(fault, Action.RESTART_JOB, Outcome.SUPPRESSED,
                           f"Retryable ({label}) but {missing}: a restart would start from scratch.",
                           page=Page.INCIDENT, attempt=attempt, why=Why.NO_CHECKPOINT)
    because = f"retryable failure ({label}); restart {attempt} of {ctx.max_restarts} from the checkpoint"
    if ctx.checkpoint is not Checkpoint.PRESENT:
        because = f"retryable failure ({label}); restart {attempt} of {ctx.max_restarts} without a checkpoint (allowed)"
    if ctx.mode == Mode.PAUSED:
        return JobDecision(fault, Action.RESTART_JOB, Outcome.SUPPRESSED, f"Medic is paused; would restart: {because}.",
                           page=Page.INCIDENT, attempt=attempt, why=Why.PAUSED)
    if ctx.mode == Mode.DRY_RUN:
        return JobDecision(fault, Action.RESTART_JOB, Outcome.DRY_RUN, f"Dry run: would restart: {because}.",
                           attempt=attempt)
    return JobDecision(fault, Action.RESTART_JOB, Outcome.EXECUTED, f"{because[0].upper()}{because[1:]}.",
                       attempt=attempt)


# --- capacity backoff (issue 32)

CAPACITY_LABEL = "insufficient_capacity"  # the failure rule (config_training.DEFAULT_FAILURE_RULES) it applies to


def capacity_backoff(restarts: int, first_minutes: int, max_minutes: int) -> timedelta:
    """How long a restart after a capacity failure waits: ``first_minutes``, doubled for each restart of the lineage
    before it, at most ``max_minutes``."""
    return timedelta(minutes=min(max_minutes, first_minutes * 2 ** min(restarts, 16)))


def wait_for_capacity(decision: JobDecision, label: str, restarts: int, first_minutes: int, max_minutes: int,
                      now: datetime) -> tuple[JobDecision, datetime | None]:
    """A restart decided for a capacity failure waits out its backoff: the decision deferred, naming when the next try
    is due (and that time); any other decision as it is (None)."""
    if not decision.executes or label != CAPACITY_LABEL:
        return decision, None
    wait = capacity_backoff(restarts, first_minutes, max_minutes)
    due = now + wait
    minutes = int(wait.total_seconds() // 60)
    return JobDecision(decision.fault, decision.action, Outcome.DEFERRED,
                       f"{decision.reason[:-1]}, after a capacity backoff of {minutes} min (SageMaker had no capacity; "
                       f"capacity_backoff_minutes {first_minutes}, doubling, at most {max_minutes}): next try due at "
                       f"{due.astimezone(UTC):%Y-%m-%d %H:%M} UTC, made by Medic's reconciler.",
                       attempt=decision.attempt, why=Why.RETRY_LATER), due


# --- a restart's timeline: when did the clone train? (flows/jobs/timeline)

# How long Medic waits for a clone to reach `Training` before writing its incident line without a resume: no AWS
# source bounds SageMaker's Starting/Downloading phases (a job waiting for capacity or its training plan can pend
# for days: MaxPendingTimeInSeconds up to 28 days); a day is an assumption, and the line then says it never resumed.
CLONE_TRAINING_WAIT = timedelta(hours=24)
ENDED = frozenset({"Completed", "Failed", "Stopped"})  # TrainingJobStatus values a job does not leave


class CloneProgress(NamedTuple):
    done: bool  # the incident line can be written now
    resumed_at: datetime | None = None  # the clone's first `Training` secondary status


def clone_progress(description: dict | None, now: datetime, deadline: datetime) -> CloneProgress:
    """Where a clone Medic started is (DescribeTrainingJob, None: the job is gone). Training again at the StartTime
    of its first `Training` entry in SecondaryStatusTransitions ("Training - Training is in progress", API reference,
    SecondaryStatusTransition; botocore's sagemaker model: Status and StartTime required); a clone that ended
    without one never trained (a Completed one without the entry: its TrainingStartTime); past the deadline, Medic
    stops waiting (no resume); otherwise it waits."""
    if description is None:
        return CloneProgress(done=True)
    for transition in description.get("SecondaryStatusTransitions") or []:
        if isinstance(transition, dict) and transition.get("Status") == "Training" \
                and isinstance(transition.get("StartTime"), datetime):
            return CloneProgress(done=True, resumed_at=transition["StartTime"])
    status = description.get("TrainingJobStatus")
    if status == "Completed" and isinstance(description.get("TrainingStartTime"), datetime):
        return CloneProgress(done=True, resumed_at=description["TrainingStartTime"])
    return CloneProgress(done=status in ENDED or now >= deadline)
