"""Amazon Bedrock model customization job restart, a sibling of the SageMaker and Batch flows (flows/jobs/managed):
parse → claim the failure → classify its failureMessage (the shared classifier, Bedrock's rules) → decide (the
shared policy) → create the job again → page → record.

A Bedrock job does not resume from a checkpoint: a restart starts over (CreateModelCustomizationJob with what
GetModelCustomizationJob returns, a new job and custom model name `<base>-r<k>`), repeating the failed job's
training time and cost. So it happens only on an entry with `allow_restart_from_scratch: true`, and the record and
the page say what it repeats; elsewhere a retryable failure pages. The job's role must be one of the entry's
`role_arns` (Medic passes exactly those)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from medic.adapters.aws import error_code
from medic.config_training import BedrockJobs
from medic.core.mode import Mode
from medic.core.models import Action, Fault, Outcome, Trigger, Why
from medic.core.pages import Page, PageSource, PageText, PageWindow
from medic.core.record import About, Record
from medic.core.text import quoted
from medic.deps import Deps
from medic.flows.jobs.bedrock_events import BedrockJobDetail, BedrockJobStateEvent
from medic.flows.jobs.faults import JobFailure, classify_failure
from medic.flows.jobs.managed import Failure, Service, clone_running, finish, handle_failure, note_restart
from medic.flows.jobs.pages import job_page
from medic.flows.jobs.policy import Checkpoint, JobContext, JobDecision, Lineage, decide_job, restart_tags, user_tags
from medic.ledger.jobs import JobStore, MedicRestart
from medic.ledger.table import Table
from medic.outbox.records import rejected

NAME_LIMIT = 63  # CreateModelCustomizationJob jobName and customModelName: at most 63 (botocore's bedrock model)
TAG_LIMIT = 200  # jobTags: at most 200 (botocore's bedrock model, TagList)
SERVICE = Service(incident_prefix="bedrock-job:", ledger_prefix="bedrock/", kind="bedrock_job",
                  window="bedrock jobs", name_limit=NAME_LIMIT)
TOKENS = uuid.UUID("3f0c7b9e-2d41-4c8a-9b6e-5a1d2c3e4f70")  # the namespace of Medic's clientRequestTokens


def restart_bedrock_job(raw: Any, deps: Deps) -> dict:
    try:
        event = BedrockJobStateEvent.model_validate(raw, context=deps.edge())
    except ValidationError as error:
        return rejected(raw, error, deps.mode.current(), Trigger.JOB_STATE,
                        "Bedrock model customization job state event")
    detail = event.detail
    if detail.jobStatus == "InProgress":  # a job Medic created again, running: its restart's incident line
        # Bedrock publishes an event "whenever there is a change in the state of a job" ("How EventBridge for Amazon
        # Bedrock works"); a job is InProgress from its creation (ModelCustomizationJobStatus has no earlier status:
        # botocore's bedrock model): assumption: the new job's InProgress is published, and its time is the resume.
        return clone_running(SERVICE, detail.jobName, event.time, deps,
                             lambda restart: same_job(restart.submitted_id, detail.jobArn))
    spec = deps.jobs_config.bedrock_jobs_for(detail.jobName)
    failure = classify_failure(detail.failureMessage, deps.jobs_config.bedrock_failure_rules(spec) if spec else [])
    seen = Failure(event.id, event.time, detail.jobName, detail.jobArn, (("jobArn", detail.jobArn),), failure,
                   detail.creationTime)
    page = partial(_page, detail=detail, deps=deps)

    # GetModelCustomizationJob by the job's name: its jobIdentifier takes a name or an ARN of the model's form
    # (model-customization-job/<base model>/<id>), which the documented sample's jobArn is not.
    def created_at() -> datetime | None:  # Bedrock's word (GetModelCustomizationJob), not the event's
        return deps.bedrock.describe(detail.jobName).get("creationTime")

    def handle(about: About, lineage: Lineage, table: Table) -> dict:
        assert spec is not None  # handle_failure handles only what not_ours let through
        done = partial(finish, about, deps=deps, table=table, page_text=page, window=_window(spec))
        return _handle_claimed(detail, about, spec, failure, lineage, deps, done)

    return handle_failure(SERVICE, seen, deps.mode.current(), deps, ignored=not_ours(detail, spec),
                          created_at=created_at, handle=handle, page_text=page, prefix=spec.prefix if spec else None)


def same_job(created_arn: str | None, event_arn: str) -> bool:
    """The job CreateModelCustomizationJob answered ``created_arn`` for is the event's: the same job id, the ARN's last
    part (botocore's model names a job `model-customization-job/<base model>/<id>`, AWS's documented sample event
    `model-customization-job/<id>`), in the same account and region."""
    if not created_arn:
        return False
    created, seen = created_arn.split(":", 5), event_arn.split(":", 5)
    return (len(created) == len(seen) == 6 and created[:5] == seen[:5]
            and created[5].rsplit("/", 1)[-1] == seen[5].rsplit("/", 1)[-1])


def not_ours(detail: BedrockJobDetail, spec: BedrockJobs | None) -> str | None:
    if spec is None:
        return f"Bedrock job {detail.jobName} matches no configured prefix; Medic leaves it alone."
    if detail.jobStatus != "Failed":
        return f"Job status is {detail.jobStatus}."
    return None


def _handle_claimed(detail: BedrockJobDetail, about: About, spec: BedrockJobs, failure: JobFailure, lineage: Lineage,
                    deps: Deps, done: Callable[[JobDecision], dict]) -> dict:
    max_restarts, description = deps.jobs_config.max_restarts_for(spec), None
    if failure.fault is Fault.JOB_RETRYABLE and lineage.restarts < max_restarts:
        try:
            description = deps.bedrock.describe(detail.jobName)
        except (ClientError, BotoCoreError) as error:
            return done(JobDecision(failure.fault, Action.NONE, Outcome.FAILED,
                                    f"Could not read the job ({error_code(error)}): {quoted(str(error))}",
                                    page=Page.INCIDENT))
    decision = plan_bedrock_restart(detail, spec, failure, lineage, about.mode, max_restarts, description)
    if decision.executes and description is not None:
        decision = _create_again(decision, deps, detail, description, lineage, _repeats(description))
    return done(decision)


def plan_bedrock_restart(detail: BedrockJobDetail, spec: BedrockJobs, failure: JobFailure, lineage: Lineage,
                         mode: Mode | str, max_restarts: int, description: dict | None) -> JobDecision:
    """The decision for a Bedrock job's claimed failure (the shared policy, decide_job) with what only Bedrock has:
    no checkpoint, so a restart starts over, only where allowed; the job's role must be the entry's. Pure (given
    GetModelCustomizationJob's answer, read when a restart is wanted); `medic explain` makes the same plan."""
    repeats = _repeats(description or {})
    if description is not None and description.get("roleArn") not in spec.role_arns:
        return JobDecision(
            failure.fault, Action.RESTART_JOB, Outcome.SUPPRESSED,
            f"Retryable ({failure.label}) but the job runs as {description.get('roleArn')}, not in its bedrock_jobs "
            f"entry's role_arns: Medic may not pass it; add it to the config to let Medic restart these jobs.",
            page=Page.INCIDENT, attempt=lineage.restarts + 1, why=Why.NOT_ALLOWED)
    return decide_job(JobContext(
        mode=mode, status=detail.jobStatus, failure=failure, lineage=lineage, max_restarts=max_restarts,
        checkpoint=Checkpoint.NOT_CONFIGURED, allow_without_checkpoint=spec.allow_restart_from_scratch,
        no_checkpoint=(f"a Bedrock job does not resume from a checkpoint: a restart starts over and repeats {repeats} "
                       f"and its cost (allow_restart_from_scratch: true on the bedrock_jobs entry lets Medic)")))


def _repeats(description: dict) -> str:
    """What a restart repeats, in words: the failed job's time from its creation to its end."""
    began, ended = description.get("creationTime"), description.get("endTime") or description.get("lastModifiedTime")
    if isinstance(began, datetime) and isinstance(ended, datetime) and ended > began:
        hours = (ended - began).total_seconds() / 3600
        return f"the failed job's {hours:.1f} h of training"
    return "the failed job's training time"


def _create_again(decision: JobDecision, deps: Deps, detail: BedrockJobDetail, description: dict, lineage: Lineage,
                  repeats: str) -> JobDecision:
    failed, new_name = detail.jobName, lineage.next_name(NAME_LIMIT)
    model_root = str(description.get("outputModelName") or failed)
    if lineage.restarts and model_root.endswith(f"-r{lineage.restarts}"):
        model_root = model_root[: -len(f"-r{lineage.restarts}")]
    model_name = Lineage(model_root, lineage.restarts).next_name(NAME_LIMIT)
    try:
        own_tags = user_tags(deps.bedrock.tags(str(description.get("jobArn") or detail.jobArn)))
    except (ClientError, BotoCoreError) as error:
        return JobDecision(decision.fault, decision.action, Outcome.FAILED,
                           f"Could not read the job's tags to carry them over ({error_code(error)}): "
                           f"{quoted(str(error))}", page=Page.INCIDENT, attempt=decision.attempt)
    tags = restart_tags(own_tags, lineage, failed, TAG_LIMIT) or own_tags
    noted = note_restart(deps, decision, MedicRestart(
        name=SERVICE.ledger_prefix + new_name, root=lineage.root, attempt=lineage.restarts + 1, restarted_from=failed,
        intended_at=deps.now(), restarted_from_created=description.get("creationTime")), new_name, "created")
    if isinstance(noted, JobDecision):
        return noted
    # One token per failure and restart: an earlier run's call for it comes back as that job, never a second one.
    token = str(uuid.uuid5(TOKENS, f"{detail.jobArn}/{new_name}"))
    try:
        arn = deps.bedrock.create_clone(description, new_name, model_name, tags, token)
    except (ClientError, BotoCoreError) as error:
        return JobDecision(decision.fault, decision.action, Outcome.FAILED,
                           f"CreateModelCustomizationJob for {new_name} failed ({error_code(error)}): "
                           f"{quoted(str(error))}", page=Page.INCIDENT, attempt=decision.attempt)
    JobStore(deps.table).note_submitted(SERVICE.ledger_prefix + new_name, arn)
    return JobDecision(decision.fault, decision.action, Outcome.EXECUTED,
                       f"{decision.reason[:-1]}: created {new_name} (custom model {model_name}) from scratch: a "
                       f"Bedrock job does not resume, so it repeats {repeats} and its cost.",
                       attempt=decision.attempt)


def _window(spec: BedrockJobs) -> PageWindow:
    return PageWindow(PageSource.TRAINING_JOB, f"{SERVICE.window} {spec.prefix}*")


def _page(record: Record, *, detail: BedrockJobDetail, deps: Deps) -> PageText:
    console = (f"https://{deps.region}.console.aws.amazon.com/bedrock/home?region={deps.region}"
               f"#/custom-models/item?arn={detail.jobArn}")
    return job_page(record, detail.failureMessage, deps.region, kind="Bedrock model customization job",
                    console=console, extra=("Bedrock:        a restart starts over (no checkpoint): it repeats the "
                                            "job's training time and cost",))
