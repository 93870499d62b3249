"""What every managed service's job flow beside SageMaker's shares (AWS Batch, Amazon Bedrock model customization):
the failure's handling from the typed event to its record, with the service's own steps plugged in. In order: the
ARNs the event names must be this stack's partition, account and region; the service's scope (a configured prefix,
queue, status: `ignored` otherwise); the job's lineage from Medic's own note of the jobs it started (never the
job's tags), held against the job's creation time as the service reports it; one claim per failure (a redelivery is
a `duplicate`); the service's handling; the incident line when the handling ends: at once without a restart, else
when the clone runs (its own state change event: ``clone_running``), or fails first, or Medic stops waiting."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.core.mode import Mode
from medic.core.models import Action, Fault, Outcome, Trigger
from medic.core.pages import Page, PageSource, PageText, PageWindow
from medic.core.record import About, Record
from medic.core.text import quoted
from medic.core.timeline import job_timeline
from medic.deps import Deps
from medic.flows.jobs.faults import JobFailure
from medic.flows.jobs.policy import CLOSING_OUTCOMES, JobDecision, Lineage, foreign_training_job_arn, lineage_of
from medic.flows.jobs.timeline import conclude_watch, watch_clone
from medic.ledger.jobs import CloneWatch, JobStore, MedicRestart
from medic.ledger.table import Table
from medic.obs import emit_incident, logger
from medic.outbox.pages import page_incident
from medic.outbox.records import emit


class Service(NamedTuple):
    """A managed service's names in Medic's records, ledger and pages."""

    incident_prefix: str  # "batch-job:" (core.timeline.JOB_INCIDENT_PREFIXES)
    ledger_prefix: str  # "batch/": its jobs' names and failures in the ledger, apart from other services'
    kind: str  # the incident line's kind: batch_job
    window: str  # its pages' window per configured prefix: "batch jobs"
    name_limit: int  # its job names' length limit: a restart's name is Lineage.next_name(name_limit)


class Failure(NamedTuple):
    """One failed job, as its service's flow read it from the event."""

    event_id: str
    fault_at: datetime | None  # the event's time
    name: str
    claim: str  # what makes this failure one (Batch: the job id; Bedrock: the job ARN)
    arns: tuple[tuple[str, str], ...]  # (the event's field, the ARN in it), each held to this stack
    failure: JobFailure
    started_at: datetime | None  # when the failed job started (its goodput), never acted on


# The service's own steps: the job's creation time as the service reports it (None: not known), and the handling
# of a claimed failure (its lineage, the table of the mode) to its record.
CreatedAt = Callable[[], datetime | None]
HandleClaimed = Callable[[About, Lineage, Table], Record | dict]


def handle_failure(service: Service, failure: Failure, mode: Mode, deps: Deps, *, ignored: str | None,
                   created_at: CreatedAt, handle: HandleClaimed, page_text: Callable[[Record], PageText],
                   prefix: str | None) -> dict:
    about = About(incident=service.incident_prefix + failure.name, trigger=Trigger.JOB_STATE,
                  event_id=failure.event_id, mode=mode, job=failure.name)
    for field, arn in failure.arns:
        foreign = foreign_training_job_arn(arn, account=deps.account, region=deps.region, partition=deps.partition,
                                           field=field)
        if foreign:  # defence in depth: the rule takes this account's events only; the ARNs must agree
            return emit(about.record(fault=Fault.INVALID, action=Action.NONE, outcome=Outcome.REJECTED,
                                     reason=f"{foreign} Medic acts only on this partition's, account's and region's "
                                            "jobs."))
    if ignored:
        return emit(about.record(fault=failure.failure.fault, action=Action.NONE, outcome=Outcome.IGNORED,
                                 reason=ignored))
    table, window = deps.table.for_mode(mode), PageWindow(PageSource.TRAINING_JOB, f"{service.window} {prefix}*")
    noted_as = service.ledger_prefix + failure.name
    medics = JobStore(deps.table).restart(noted_as)  # the real namespace: a dry run starts no job
    try:
        created = created_at() if medics is not None else None
    except (ClientError, BotoCoreError) as error:
        decision = JobDecision(failure.failure.fault, Action.NONE, Outcome.FAILED,
                               f"Could not read the job ({error_code(error)}): {quoted(str(error))}",
                               page=Page.INCIDENT)
        return finish(about, decision, deps, table, page_text, window)
    lineage = lineage_of(noted_as, medics, created)
    if lineage.root == noted_as:  # not Medic's restart: the job is the root of its own lineage
        lineage = Lineage(root=failure.name, restarts=0)
    about = about.but(incident=service.incident_prefix + lineage.root)

    claim, received = service.ledger_prefix + failure.claim, deps.now()
    if not JobStore(table).claim_job_failure(claim, received):
        return emit(about.record(fault=failure.failure.fault, action=Action.NONE, outcome=Outcome.DUPLICATE,
                                 reason=f"This failure of {failure.name} was already handled.",
                                 attempt=lineage.restarts + 1))
    if lineage.restarts:  # Medic's restart failed: if it never ran, its restart's line ends here (no resume)
        ended = JobStore(deps.table).clone_watch(noted_as)
        if ended is not None and JobStore(deps.table).end_clone_watch(noted_as):
            conclude_watch(ended, None)
    try:
        record = handle(about, lineage, table)
    except BaseException:  # an unexpected error: the retry of this event must not read as a duplicate
        JobStore(table).release_job_failure(claim)
        raise
    JobStore(table).finish_job_failure(claim, deps.now())
    if mode is not Mode.DRY_RUN and record["outcome"] == Outcome.EXECUTED.value:
        # the line waits for the clone to run: its own state change event (clone_running) gives the resume
        clone = service.ledger_prefix + lineage.next_name(service.name_limit)
        watch = watch_clone(deps, clone=clone, incident=about.incident, job=lineage.root, fault=record["fault"],
                            fault_at=failure.fault_at, detected_at=received, acted_at=deps.now(),
                            job_started_at=failure.started_at, kind=service.kind)
        ran = JobStore(deps.table).clone_ran(clone)  # its event came first (clone_running noted it): the line now
        if ran is not None and JobStore(deps.table).end_clone_watch(clone):
            conclude_watch(watch, ran)
    elif mode is not Mode.DRY_RUN and record["outcome"] in CLOSING_OUTCOMES:  # no restart: a human owns it now
        emit_incident(job_timeline(incident=about.incident, job=lineage.root, fault=record["fault"],
                                   fault_at=failure.fault_at, detected_at=received, restarted_at=None,
                                   job_started_at=failure.started_at, kind=service.kind))
    return record


def watched_clone(service: Service, name: str, store: JobStore,
                  medics: Callable[[MedicRestart], bool]) -> CloneWatch | None:
    """The restart whose line waits for this job to run: Medic noted the job as its restart and ``medics`` says the
    service's job is the one Medic's call started (None: not Medic's, or not waited for)."""
    restart = store.restart(service.ledger_prefix + name)
    return store.clone_watch(service.ledger_prefix + name) if restart is not None and medics(restart) else None


def clone_running(service: Service, name: str, running_at: datetime, deps: Deps,
                  medics: Callable[[MedicRestart], bool]) -> dict:
    """A job of a configured prefix is running: when it is the restart Medic started (its ledger note, and
    ``medics``: the service's job is the one Medic's call started), the restart's incident line is written with its
    resume (``running_at``), once: a redelivery, another job of that name or a job Medic did not start writes
    nothing. Medic decides nothing here, so no remediation record: the summary is logged and returned."""
    noted_as, store = service.ledger_prefix + name, JobStore(deps.table)
    restart, watch = store.restart(noted_as), None
    if restart is not None and medics(restart):
        watch = store.clone_watch(noted_as)
        if watch is None:  # running before its restart's handling wrote the watch (Bedrock: InProgress at once):
            # noted, then read again; whichever of the two runs sees both writes the line (end_clone_watch: once)
            store.note_clone_ran(noted_as, running_at)
            watch = store.clone_watch(noted_as)
    concluded = watch is not None and store.end_clone_watch(noted_as)
    if watch is not None and concluded:
        conclude_watch(watch, running_at)
    summary = {"clone": name, "kind": service.kind, "running_at": running_at.isoformat(),
               "incident": watch.incident if watch else None, "incident_closed": concluded}
    logger.info("clone running", extra=summary)
    return summary


def finish(about: About, decision: JobDecision, deps: Deps, table: Table, page_text: Callable[[Record], PageText],
           window: PageWindow) -> dict:
    """The decision's record, and its page when a human is needed (once per incident, counted in its window)."""
    record = about.record(fault=decision.fault, action=decision.action, outcome=decision.outcome,
                          reason=decision.reason, why=decision.why, attempt=decision.attempt)
    if decision.page is Page.INCIDENT:
        record = record.paged_if(page_incident(deps, table, record, page_text(record), window=window))
    return emit(record)


def note_restart(deps: Deps, decision: JobDecision, restart: MedicRestart, shown: str,
                 verb: str) -> MedicRestart | JobDecision:
    """Medic's note of the restart it is about to start (ledger/jobs.py), before the call: the note, or the
    decision that ends the handling instead: the name noted for another failure (a page), or the restart already
    started for this one (a duplicate). ``shown``: the restart's name for people; ``verb``: "submitted", "created"."""
    noted = JobStore(deps.table).intend_restart(restart)
    failed = restart.restarted_from
    if noted is None:
        return JobDecision(decision.fault, decision.action, Outcome.FAILED,
                           f"Not restarted: Medic noted the name {shown} for the failure of another job named "
                           f"{failed}. Medic {verb} nothing: restart {failed} by hand under another name.",
                           page=Page.INCIDENT, attempt=decision.attempt)
    if noted.submitted_id:
        return JobDecision(decision.fault, decision.action, Outcome.DUPLICATE,
                           f"Restart {shown} already exists: Medic {verb} it for this failure of {failed} "
                           f"({noted.submitted_id}).", attempt=decision.attempt)
    return noted
