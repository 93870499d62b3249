"""AWS Batch job restart, the sibling of the SageMaker training-job flow (flows/jobs/restart): parse → claim the
failure → classify (the shared failure-rule classifier, Batch's rules) → decide (the shared pure policy) → submit
the clone → page → record.

FAILED is Batch's last word: the job's own retryStrategy (attempts, evaluateOnExit) has run ("Automated job
retries", docs.aws.amazon.com/batch/latest/userguide/job_retries.html: a failed attempt goes back to RUNNABLE
while attempts remain), so Medic never fights it; each record says how many attempts Batch made.

What Medic does with the parts of a job:
- an array job's child (jobId `<array>:<index>`): nothing (`ignored`): the array job fails when a child does and
  its own FAILED event is the one Medic handles; an array job is paged, never resubmitted: SubmitJob cannot
  resubmit one index (a clone of the array reruns every child, the ones that succeeded too, and a single job may
  not set AWS_BATCH_JOB_ARRAY_INDEX itself: the name is reserved, botocore's batch model);
- a multi-node parallel job's node (jobId `<job>#<node index>`): nothing (`ignored`): the job as a whole is what
  fails and what Medic resubmits, with every node range (adapters/batch.clone_request).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from medic.adapters.aws import error_code
from medic.adapters.batch import Unclonable
from medic.config_training import BatchJobs
from medic.core.clock import epoch_millis
from medic.core.mode import Mode
from medic.core.models import Action, Fault, Outcome, Trigger, Why
from medic.core.pages import Page, PageSource, PageText, PageWindow
from medic.core.record import About, Record
from medic.core.text import quoted
from medic.deps import Deps
from medic.flows.jobs import policy
from medic.flows.jobs.batch_events import BatchJobDetail, BatchJobStateEvent
from medic.flows.jobs.faults import JobFailure, classify_failure
from medic.flows.jobs.managed import Failure, Service, clone_running, finish, handle_failure, note_restart
from medic.flows.jobs.pages import job_page
from medic.flows.jobs.policy import Checkpoint, JobContext, JobDecision, Lineage
from medic.ledger.jobs import JobStore, MedicRestart
from medic.ledger.table import Table
from medic.outbox.records import rejected

if TYPE_CHECKING:
    from medic.adapters.checkpoints import Checkpoints

BATCH_NAME_LIMIT = 128  # SubmitJob jobName: up to 128 characters (AWS Batch API reference)
TAG_LIMIT = 50  # SubmitJob tags: at most 50 (botocore's batch model, TagrisTagsMap)
INCIDENT_PREFIX = "batch-job:"
# The ledger's names for Batch jobs (failure claims, restart notes): Batch's own namespace, apart from SageMaker's.
LEDGER_PREFIX = "batch/"
SERVICE = Service(incident_prefix=INCIDENT_PREFIX, ledger_prefix=LEDGER_PREFIX, kind="batch_job", window="batch jobs",
                  name_limit=BATCH_NAME_LIMIT)


def restart_batch_job(raw: Any, deps: Deps) -> dict:
    try:
        event = BatchJobStateEvent.model_validate(raw, context=deps.edge())
    except ValidationError as error:
        return rejected(raw, error, deps.mode.current(), Trigger.JOB_STATE, "Batch job state event")
    detail = event.detail
    if detail.status == "RUNNING":  # a clone Medic submitted, running: its restart's incident line (rule BatchClone)
        # startedAt: "when the job transitioned from the STARTING state to the RUNNING state" (botocore's batch
        # model, JobDetail.startedAt); else the event's time. A node of a multi-node job has its own id: not matched.
        return clone_running(SERVICE, detail.jobName, epoch_millis(detail.startedAt) or event.time, deps,
                             lambda restart: restart.submitted_id == detail.jobId)
    spec = deps.jobs_config.batch_jobs_for(detail.jobName)
    failure = classify_failure(detail.failure_text(), deps.jobs_config.batch_failure_rules(spec) if spec else [])
    seen = Failure(event.id, event.time, detail.jobName, detail.jobId,
                   (("jobArn", detail.jobArn), ("jobQueue", detail.jobQueue)), failure, detail.started_at)

    def created_at() -> datetime | None:  # Batch's word (DescribeJobs), not the event's
        return epoch_millis((deps.batch.describe(detail.jobId) or {}).get("createdAt"))

    def handle(about: About, lineage: Lineage, table: Table) -> dict:
        assert spec is not None  # handle_failure handles only what not_ours let through
        done = partial(finish, about, deps=deps, table=table, page_text=partial(_page, detail=detail, deps=deps),
                       window=batch_jobs_window(deps, detail.jobName))
        return _handle_claimed(detail, raw["detail"], about, spec, failure, lineage, deps, done)

    return handle_failure(SERVICE, seen, deps.mode.current(), deps, ignored=not_ours(detail, spec),
                          created_at=created_at, handle=handle, page_text=partial(_page, detail=detail, deps=deps),
                          prefix=spec.prefix if spec else None)


def not_ours(detail: BatchJobDetail, spec: BatchJobs | None) -> str | None:
    """Why Medic leaves this event alone (None: it handles it)."""
    if spec is None:
        return f"Batch job {detail.jobName} matches no configured prefix; Medic leaves it alone."
    if detail.queue_name not in spec.job_queues:
        return (f"Batch job {detail.jobName} ran in queue {detail.queue_name}, not in its batch_jobs entry's "
                f"job_queues; Medic leaves it alone.")
    if detail.status != "FAILED":
        return f"Job status is {detail.status}."
    if detail.array_child:
        return (f"Job {detail.jobId} is a child of an array job: Medic handles the array job's own failure, once "
                "(and pages: it never resubmits part of an array).")
    if detail.node_of_multi_node:
        return (f"Job {detail.jobId} is one node of a multi-node parallel job: Medic handles the job's own failure, "
                "once, as a whole.")
    return None


def _handle_claimed(detail: BatchJobDetail, event_job: dict, about: About, spec: BatchJobs, failure: JobFailure,
                    lineage: Lineage, deps: Deps, done: Callable[[JobDecision], dict]) -> dict:
    try:
        plan = plan_batch_restart(detail, spec, failure, lineage, Mode(about.mode),
                                  deps.jobs_config.max_restarts_for(spec), deps.checkpoints)
    except (ClientError, BotoCoreError, ValueError) as error:
        return done(JobDecision(failure.fault, Action.NONE, Outcome.FAILED,
                                f"Could not look for the job's checkpoint ({error_code(error)}): {quoted(str(error))}",
                                page=Page.INCIDENT))
    decision = plan.decision
    if decision.executes:
        decision = _submit_restart(decision, deps, detail, event_job, lineage, plan.resume, attempts_of(detail))
    return done(decision)


class BatchPlan(NamedTuple):
    decision: JobDecision
    resume: str  # "resuming from <where the checkpoint is>" | "from scratch"


def attempts_of(detail: BatchJobDetail) -> str:
    return f"Batch made {len(detail.attempts)} attempt(s) under the job's own retry strategy first"


def plan_batch_restart(detail: BatchJobDetail, spec: BatchJobs, failure: JobFailure, lineage: Lineage, mode: Mode | str,
                       max_restarts: int, checkpoints: Checkpoints) -> BatchPlan:
    """The decision for a Batch job's claimed failure (the shared policy, decide_job), with what only Batch has: an
    array job is paged, a definition outside the entry is not submitted, the checkpoint is where the entry says.
    Reads only (ListObjectsV2); `medic explain` makes the same plan. Raises the S3 call's errors."""
    attempts = attempts_of(detail)
    if detail.array_parent:
        return BatchPlan(JobDecision(failure.fault, Action.NONE, Outcome.DEFERRED,
                                     f"An array job ({failure.label}): Medic never resubmits an array job (a clone "
                                     f"reruns every child, the ones that succeeded too); {attempts}; a human decides.",
                                     page=Page.INCIDENT, why=Why.HUMAN_DECIDES), "")
    checkpoint, where = Checkpoint.NOT_CONFIGURED, "the batch_jobs entry names no checkpoint location"
    if failure.fault is Fault.JOB_RETRYABLE and lineage.restarts < max_restarts:
        definition = detail.jobDefinition.rsplit("/", 1)[-1].split(":", 1)[0]
        if definition not in spec.job_definitions:
            return BatchPlan(JobDecision(
                failure.fault, Action.RESTART_JOB, Outcome.SUPPRESSED,
                f"Retryable ({failure.label}) but the job's definition {definition} is not in its batch_jobs "
                f"entry's job_definitions: Medic may not submit it; add it to the config to let Medic restart these "
                f"jobs.", page=Page.INCIDENT, attempt=lineage.restarts + 1, why=Why.NOT_ALLOWED), "")
        checkpoint, where = _checkpoint_state(checkpoints, spec, lineage.root)
    decision = policy.decide_job(JobContext(mode=mode, status="Failed", failure=failure, lineage=lineage,
                                            max_restarts=max_restarts, checkpoint=checkpoint,
                                            allow_without_checkpoint=spec.allow_restart_without_checkpoint,
                                            no_checkpoint=f"nothing is stored under {where}"))
    if not decision.executes and decision.outcome is not Outcome.DRY_RUN:
        decision = JobDecision(decision.fault, decision.action, decision.outcome,
                               f"{decision.reason[:-1]} ({attempts}).", decision.page, decision.attempt, decision.why)
    return BatchPlan(decision, f"resuming from {where}" if checkpoint is Checkpoint.PRESENT else "from scratch")


def _checkpoint_state(checkpoints: Checkpoints, spec: BatchJobs, root: str) -> tuple[Checkpoint, str]:
    """Whether a checkpoint exists where the entry says these jobs write them (the first location holding one),
    and the location(s) as words."""
    if not spec.checkpoint_buckets:
        return Checkpoint.NOT_CONFIGURED, "the batch_jobs entry's checkpoint_buckets (none)"
    for location in spec.checkpoint_buckets:
        if checkpoints.exist(location.uri_for(root)):
            return Checkpoint.PRESENT, location.uri_for(root)
    return Checkpoint.EMPTY, " or ".join(location.uri_for(root) for location in spec.checkpoint_buckets)


def _submit_restart(decision: JobDecision, deps: Deps, detail: BatchJobDetail, event_job: dict,
                    lineage: Lineage, resume: str, attempts: str) -> JobDecision:
    failed, new_name = detail.jobName, lineage.next_name(BATCH_NAME_LIMIT)
    try:
        description = deps.batch.describe(detail.jobId) or event_job  # the event's detail is the job, as described
    except (ClientError, BotoCoreError) as error:
        return JobDecision(decision.fault, decision.action, Outcome.FAILED,
                           f"Could not read the job to clone it ({error_code(error)}): {quoted(str(error))}",
                           page=Page.INCIDENT, attempt=decision.attempt)
    own_tags = policy.user_tags(dict(description.get("tags") or {}))
    tags = policy.restart_tags(own_tags, lineage, failed, TAG_LIMIT)
    if tags is None:
        return JobDecision(decision.fault, decision.action, Outcome.SUPPRESSED,
                           f"The job has {len(own_tags)} tags: with Medic's lineage "
                           f"tags the restart would exceed Batch's {TAG_LIMIT}; restart it by hand or drop a tag.",
                           page=Page.INCIDENT, attempt=decision.attempt, why=Why.NOT_ALLOWED)
    now, store = deps.now(), JobStore(deps.table)
    noted = note_restart(deps, decision, MedicRestart(
        name=LEDGER_PREFIX + new_name, root=lineage.root, attempt=lineage.restarts + 1, restarted_from=failed,
        intended_at=now, restarted_from_created=detail.created), new_name, "submitted")
    if isinstance(noted, JobDecision):
        return noted
    if noted.intended_at != now:  # an earlier run began the submission and never recorded its answer
        return JobDecision(decision.fault, decision.action, Outcome.FAILED,
                           f"An earlier run of Medic began submitting {new_name} at "
                           f"{noted.intended_at:%H:%M:%S} UTC and recorded no answer; Batch takes two jobs of one "
                           f"name, so Medic does not submit again: look for {new_name} in queue {detail.queue_name} "
                           f"and submit it by hand if it is not there.", page=Page.INCIDENT, attempt=decision.attempt)
    try:
        job_id = deps.batch.submit_clone(description, new_name, tags)
    except Unclonable as unclonable:
        return JobDecision(decision.fault, decision.action, Outcome.SUPPRESSED,
                           f"Retryable, but Medic cannot clone the job faithfully: {unclonable}.",
                           page=Page.INCIDENT, attempt=decision.attempt, why=Why.NOT_ALLOWED)
    except (ClientError, BotoCoreError) as error:
        return JobDecision(decision.fault, decision.action, Outcome.FAILED,
                           f"SubmitJob for {new_name} failed ({error_code(error)}): {quoted(str(error))}",
                           page=Page.INCIDENT, attempt=decision.attempt)
    store.note_submitted(LEDGER_PREFIX + new_name, job_id)
    return JobDecision(decision.fault, decision.action, Outcome.EXECUTED,
                       f"{decision.reason[:-1]} ({attempts}): submitted {new_name} (job {job_id}) to queue "
                       f"{detail.queue_name}, {resume}.", attempt=decision.attempt)


def _page(record: Record, *, detail: BatchJobDetail, deps: Deps) -> PageText:
    console = f"https://{deps.region}.console.aws.amazon.com/batch/home?region={deps.region}#jobs/detail/{detail.jobId}"
    return job_page(record, detail.failure_text(), deps.region, kind="Batch job", console=console,
                    extra=(f"Batch:          job {detail.jobId} in queue {detail.queue_name}, FAILED after "
                           f"{len(detail.attempts)} attempt(s) of its own retry strategy",))


def batch_jobs_window(deps: Deps, job: str | None) -> PageWindow:
    """Batch job pages count per configured prefix, as training jobs' do: a queue's outage failing fifty jobs is
    one summary, not fifty pages."""
    spec = deps.jobs_config.batch_jobs_for(job) if job else None
    return PageWindow(PageSource.TRAINING_JOB, f"batch jobs {spec.prefix if spec else job or '-'}*")
