"""Training job restart: parse → claim the failure → describe → decide (pure) → clone → page → record."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NamedTuple
from urllib.parse import urlparse

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from medic.adapters.aws import error_code
from medic.adapters.training import JobAlreadyExists, training_plan_arns
from medic.config_training import (
    TrainingJobs,  # the job sections: built at the training handler's cold start, read per event
)
from medic.core.mode import Mode
from medic.core.models import Action, Fault, Outcome, Trigger, Why
from medic.core.pages import Page, PageSource, PageWindow
from medic.core.record import About
from medic.core.text import quoted
from medic.core.timeline import job_timeline
from medic.deps import Deps
from medic.flows.jobs.events import TrainingJobStateEvent
from medic.flows.jobs.faults import classify_failure
from medic.flows.jobs.pages import job_page
from medic.flows.jobs.policy import (
    CLOSING_OUTCOMES,
    Checkpoint,
    JobContext,
    JobDecision,
    Lineage,
    decide_job,
    foreign_training_job_arn,
    lineage_of,
    not_medics_restart,
    restart_tags,
    user_tags,
    wait_for_capacity,
)
from medic.flows.jobs.timeline import watch_clone
from medic.ledger.backoffs import BackoffStore, DueRestart
from medic.ledger.jobs import JobStore, MedicRestart
from medic.ledger.table import Table
from medic.obs import emit_incident
from medic.outbox.pages import page_incident
from medic.outbox.records import emit, rejected


class CheckpointOutsideConfig(Exception):
    """The job checkpoints to a bucket the config does not name: Medic may not list it."""


def restart_training_job(raw: Any, deps: Deps) -> dict:
    mode = deps.mode.current()
    try:
        event = TrainingJobStateEvent.model_validate(raw, context=deps.edge())
    except ValidationError as error:
        return rejected(raw, error, mode, Trigger.JOB_STATE, "training job state event")

    detail = event.detail
    name, reason = detail.TrainingJobName, detail.FailureReason
    about = About(incident=f"job:{name}", trigger=Trigger.JOB_STATE, event_id=event.id, mode=mode, job=name)
    spec = deps.jobs_config.training_jobs_for(name)
    failure = classify_failure(reason, deps.jobs_config.job_failure_rules)
    foreign = foreign_training_job_arn(detail.TrainingJobArn, account=deps.account, region=deps.region,
                                       partition=deps.partition)
    if foreign:  # defence in depth: the rule takes this account's events only; the ARN must agree
        return emit(about.record(fault=Fault.INVALID, action=Action.NONE, outcome=Outcome.REJECTED,
                                 reason=f"{foreign} Medic acts only on this partition's, account's and region's jobs."))
    if spec is None:
        return emit(about.record(fault=failure.fault, action=Action.NONE, outcome=Outcome.IGNORED,
                                 reason=f"Training job {name} matches no configured prefix; Medic leaves it alone."))

    table = deps.table.for_mode(mode)
    # Lineage and attempt are Medic's word: its note of the job it created (the real namespace: a dry run creates
    # no job), held against the job's own CreationTime. Never the job's tags: its owner sets those.
    medics = JobStore(deps.table).restart(name)
    description = None
    if medics is not None:
        try:
            description = deps.training.describe(name)
        except (ClientError, BotoCoreError) as error:
            return _failed(about, failure.fault, deps, table, reason,
                           f"Could not read the job ({error_code(error)}): {quoted(str(error))}")
    lineage = lineage_of(name, medics, (description or {}).get("CreationTime"))
    about = about.but(incident=f"job:{lineage.root}")

    claimed = detail.TrainingJobStatus == "Failed"
    received = deps.now()
    if claimed and not JobStore(table).claim_job_failure(name, received):
        return emit(about.record(fault=failure.fault, action=Action.NONE, outcome=Outcome.DUPLICATE,
                                 reason=f"This failure of {name} was already handled.", attempt=lineage.restarts + 1))
    try:
        record = _handle_claimed(detail, about, spec, failure, lineage, description, table, deps,
                                 fault_at=event.time, detected_at=received)
    except BaseException:
        if claimed:  # an unexpected error: the retry of this event must not read as a duplicate
            JobStore(table).release_job_failure(name)
        raise
    if claimed:
        JobStore(table).finish_job_failure(name, deps.now())
        _follow(record, deps, about, lineage, event.time, received, detail.started_at)
    return record


def _follow(record: dict, deps: Deps, about: About, lineage: Lineage, fault_at: datetime | None,
            detected_at: datetime, job_started_at: datetime | None) -> None:
    """The failure's incident line: once the clone trains (a restart), or now (its handling ended without one)."""
    if about.mode is Mode.DRY_RUN or waits(record):
        return
    # the lineage's root names the job across its restarts (its incident's name too)
    if record["outcome"] == Outcome.EXECUTED.value:
        # the line waits for the clone to train (flows/jobs/timeline): its resume is then, not now
        watch_clone(deps, clone=lineage.next_name(), incident=about.incident, job=lineage.root,
                    fault=record["fault"], fault_at=fault_at, detected_at=detected_at, acted_at=deps.now(),
                    job_started_at=job_started_at)
    elif record["outcome"] in CLOSING_OUTCOMES:
        emit_incident(job_timeline(incident=about.incident, job=lineage.root, fault=record["fault"],
                                   fault_at=fault_at, detected_at=detected_at, restarted_at=None,
                                   job_started_at=job_started_at))


class _DueFailure(NamedTuple):
    """A failure whose restart waited out its capacity backoff, shaped as the event's detail the restart reads."""

    TrainingJobName: str  # noqa: N815 - the event's field names
    FailureReason: str  # noqa: N815
    started_at: datetime | None = None
    TrainingJobStatus: str = "Failed"  # noqa: N815


def restart_after_backoff(due: DueRestart, deps: Deps, run_id: str) -> dict:
    """A restart whose capacity backoff is over (flows/jobs/backoff.py took it), by the event's path."""
    mode = deps.mode.current()
    about = About(incident=due.incident, trigger=Trigger.RECONCILE, event_id=run_id, mode=mode, job=due.job)
    spec = deps.jobs_config.training_jobs_for(due.job)
    failure = classify_failure(due.failure_reason, deps.jobs_config.job_failure_rules)
    table = deps.table.for_mode(mode)
    if spec is None:
        return emit(about.record(fault=failure.fault, action=Action.NONE, outcome=Outcome.IGNORED,
                                 reason=f"Training job {due.job} no longer matches a configured prefix; its restart "
                                        "after the capacity backoff is dropped."))
    try:
        description = deps.training.describe(due.job)
    except (ClientError, BotoCoreError) as error:
        return _failed(about, failure.fault, deps, table, due.failure_reason,
                       f"Could not read the job for its restart after the capacity backoff ({error_code(error)}): "
                       f"{quoted(str(error))}")
    lineage = lineage_of(due.job, JobStore(deps.table).restart(due.job), description.get("CreationTime"))
    record = _handle_claimed(_DueFailure(due.job, due.failure_reason, due.job_started_at), about, spec, failure,
                             lineage, description, table, deps, fault_at=due.fault_at, detected_at=due.detected_at,
                             backoff_over=True)
    _follow(record, deps, about, lineage, due.fault_at, due.detected_at, due.job_started_at)
    return record


def waits(record: dict) -> bool:
    """A restart deferred to its capacity backoff: the failure's handling goes on (flows/jobs/backoff)."""
    return record["outcome"] == Outcome.DEFERRED.value and record.get("why") == Why.RETRY_LATER.value


def _handle_claimed(detail: Any, about: About, spec: TrainingJobs, failure: Any, lineage: Lineage,
                    description: dict | None, table: Table, deps: Deps, *, fault_at: datetime | None,
                    detected_at: datetime, backoff_over: bool = False) -> dict:
    name, reason = detail.TrainingJobName, detail.FailureReason
    max_restarts = deps.jobs_config.max_restarts_for(spec)
    checkpoint = Checkpoint.NOT_CONFIGURED
    wants_restart = (detail.TrainingJobStatus == "Failed" and failure.fault is Fault.JOB_RETRYABLE
                     and lineage.restarts < max_restarts)
    if wants_restart:
        try:
            description = description or deps.training.describe(name)
            checkpoint = _checkpoint_state(deps, description, spec)
        except CheckpointOutsideConfig as outside:
            decision = JobDecision(failure.fault, Action.RESTART_JOB, Outcome.SUPPRESSED,
                                   f"Retryable ({failure.label}) but {outside}.", page=Page.INCIDENT,
                                   attempt=lineage.restarts + 1, why=Why.NOT_ALLOWED)
            return _finish(about, decision, deps, table, reason)
        except (ClientError, BotoCoreError, ValueError) as error:
            return _failed(about, failure.fault, deps, table, reason,
                           f"Could not read the job or its checkpoint ({error_code(error)}): {quoted(str(error))}")

    decision = decide_job(JobContext(mode=about.mode, status=detail.TrainingJobStatus, failure=failure, lineage=lineage,
                                     max_restarts=max_restarts, checkpoint=checkpoint,
                                     allow_without_checkpoint=spec.allow_restart_without_checkpoint))
    if not backoff_over:  # a capacity failure's restart waits out its backoff (issue 32): the reconciler makes it
        decision, due = wait_for_capacity(decision, failure.label, lineage.restarts, spec.capacity_backoff_minutes,
                                          spec.capacity_backoff_max_minutes, deps.now())
        if due is not None:
            BackoffStore(deps.table).wait(DueRestart(
                job=name, incident=about.incident, failure_reason=reason, due_at=due, detected_at=detected_at,
                fault_at=fault_at, job_started_at=getattr(detail, "started_at", None)))
    if decision.executes and description is not None:
        decision = _start_restart(decision, deps, description, lineage, spec)
    return _finish(about, decision, deps, table, reason)


def _checkpoint_state(deps: Deps, description: dict, spec: TrainingJobs) -> Checkpoint:
    uri = (description.get("CheckpointConfig") or {}).get("S3Uri")
    if not uri:
        return Checkpoint.NOT_CONFIGURED
    bucket = urlparse(uri).netloc
    if bucket not in spec.checkpoint_buckets:
        raise CheckpointOutsideConfig(f"the checkpoint {uri} is in bucket {bucket}, not in "
                                      f"training_jobs.checkpoint_buckets (Medic may list only those); add it to "
                                      f"the config to let Medic restart these jobs")
    return Checkpoint.PRESENT if deps.checkpoints.exist(uri) else Checkpoint.EMPTY


TAG_LIMIT = 50  # CreateTrainingJob's Tags: at most 50 (botocore's sagemaker model)


def _start_restart(decision: JobDecision, deps: Deps, description: dict, lineage: Lineage,
                   spec: TrainingJobs) -> JobDecision:
    failed, new_name = description["TrainingJobName"], lineage.next_name()
    outside = _outside_grants(description, spec)
    if outside:
        return JobDecision(decision.fault, decision.action, Outcome.SUPPRESSED, outside, page=Page.INCIDENT,
                           attempt=decision.attempt, why=Why.NOT_ALLOWED)
    plans = [arn for arn in training_plan_arns(description)
             if arn.rsplit("/", 1)[-1] not in spec.training_plans]
    if plans:
        return JobDecision(decision.fault, decision.action, Outcome.SUPPRESSED,
                           f"The job ran on training plan(s) {', '.join(plans)}, not in training_jobs.training_plans: "
                           f"Medic may not create jobs on them; add the plan to the config to let Medic restart.",
                           page=Page.INCIDENT, attempt=decision.attempt, why=Why.NOT_ALLOWED)
    try:
        job_tags = deps.training.tags(description["TrainingJobArn"])  # carried over to the clone, never trusted
    except (ClientError, BotoCoreError) as error:
        return JobDecision(decision.fault, decision.action, Outcome.FAILED,
                           f"Could not read the job's tags to carry them over ({error_code(error)}): "
                           f"{quoted(str(error))}", page=Page.INCIDENT, attempt=decision.attempt)
    tags = restart_tags(job_tags, lineage, failed, TAG_LIMIT)
    if tags is None:
        return JobDecision(decision.fault, decision.action, Outcome.SUPPRESSED,
                           f"The job has {len(user_tags(job_tags))} tags: with Medic's lineage tags the restart would "
                           f"exceed SageMaker's {TAG_LIMIT}; restart it by hand or drop a tag.",
                           page=Page.INCIDENT, attempt=decision.attempt, why=Why.NOT_ALLOWED)
    now, failed_created = deps.now(), description.get("CreationTime")
    store = JobStore(deps.table)
    noted = store.intend_restart(MedicRestart(name=new_name, root=lineage.root, attempt=lineage.restarts + 1,
                                              restarted_from=failed, intended_at=now,
                                              restarted_from_created=failed_created))
    if noted is None:  # Medic noted that name for another failure
        return _name_taken(decision, failed, new_name,
                           not_medics_restart(store.restart(new_name), failed, failed_created, None))
    try:
        deps.training.start_clone(description, new_name, tags)
    except JobAlreadyExists:
        return _existing_restart(decision, deps, noted, failed_created, now)
    except (ClientError, BotoCoreError) as error:
        return JobDecision(decision.fault, decision.action, Outcome.FAILED,
                           f"CreateTrainingJob for {new_name} failed ({error_code(error)}): {quoted(str(error))}",
                           page=Page.INCIDENT, attempt=decision.attempt)
    uri = (description.get("CheckpointConfig") or {}).get("S3Uri", "no checkpoint")
    return JobDecision(decision.fault, decision.action, Outcome.EXECUTED,
                       f"{decision.reason[:-1]}: started {new_name} resuming from {uri}.", attempt=decision.attempt)


def _existing_restart(decision: JobDecision, deps: Deps, noted: MedicRestart, failed_created: datetime | None,
                      now: datetime) -> JobDecision:
    """CreateTrainingJob said the restart's name is taken (ResourceInUse): a duplicate only when that job is Medic's
    own restart of this failure; anyone else's job under that name is a human's to sort out."""
    failed = noted.restarted_from
    try:
        existing = deps.training.describe(noted.name)
    except (ClientError, BotoCoreError) as error:
        return _name_taken(decision, failed, noted.name,
                           f"Medic could not read that job ({error_code(error)}): {quoted(str(error))}")
    why_not = not_medics_restart(noted, failed, failed_created, existing.get("CreationTime"))
    if why_not is not None:
        return _name_taken(decision, failed, noted.name, why_not)
    uri = (existing.get("CheckpointConfig") or {}).get("S3Uri", "no checkpoint")
    if noted.intended_at == now:  # this run's own call: SageMaker accepted it, botocore's retry found it taken
        return JobDecision(decision.fault, decision.action, Outcome.EXECUTED,
                           f"{decision.reason[:-1]}: started {noted.name} resuming from {uri}.",
                           attempt=decision.attempt)
    return JobDecision(decision.fault, decision.action, Outcome.DUPLICATE,
                       f"Restart {noted.name} already exists: Medic started it for this failure of {failed} "
                       f"(an earlier try, from {noted.intended_at.astimezone(UTC):%H:%M:%S} UTC).",
                       attempt=decision.attempt)


def _name_taken(decision: JobDecision, failed: str, new_name: str, why: str | None) -> JobDecision:
    return JobDecision(decision.fault, decision.action, Outcome.FAILED,
                       f"Not restarted: a training job named {new_name} already exists and is not Medic's restart of "
                       f"{failed}: {why}. Medic started nothing: restart {failed} by hand under another name, and "
                       f"find out who created {new_name}.", page=Page.INCIDENT, attempt=decision.attempt)


def _outside_grants(description: dict, spec: TrainingJobs) -> str | None:
    """Why IAM would refuse this restart (Medic passes only the configured roles and lists only the configured
    buckets), said before calling rather than discovered as AccessDenied."""
    role = description.get("RoleArn", "")
    if role not in spec.role_arns:
        return (f"The job runs as {role}, not in training_jobs.role_arns: Medic may not pass it to a restart; "
                f"add it to the config to let Medic restart these jobs.")
    return None


def _failed(about: About, fault: Fault, deps: Deps, table: Table, failure_reason: str, reason: str) -> dict:
    decision = JobDecision(fault, Action.NONE, Outcome.FAILED, reason, page=Page.INCIDENT)
    return _finish(about, decision, deps, table, failure_reason)


def _finish(about: About, decision: JobDecision, deps: Deps, table: Table, failure_reason: str) -> dict:
    record = about.record(fault=decision.fault, action=decision.action, outcome=decision.outcome,
                          reason=decision.reason, why=decision.why, attempt=decision.attempt)
    if decision.page is Page.INCIDENT:
        record = record.paged_if(page_incident(deps, table, record, job_page(record, failure_reason, deps.region),
                                               window=training_jobs_window(deps, about.job)))
    return emit(record)


def training_jobs_window(deps: Deps, job: str | None) -> PageWindow:
    """Training-job pages count per configured prefix (a team's jobs): a capacity shortage failing fifty of them is
    one summary, not fifty pages."""
    spec = deps.jobs_config.training_jobs_for(job) if job else None
    return PageWindow(PageSource.TRAINING_JOB, f"training jobs {spec.prefix if spec else job or '-'}*")
