"""``medic explain EVENT.json``: what Medic would decide for this event right now, and why, without acting.

The same steps as the handlers (functions/medic/flows/node/remediation.py, flows/jobs/restart.py, an operator's
"Medic Release Node": flows/agent/quarantine.py) up to the decision:
parse the event with Medic's models, classify the fault, read the live ledger and the node or job, and
call the pure policy. Only read calls are made (DescribeClusterNode, DescribeCluster, DescribeTrainingJob, DescribeJobs,
ListObjectsV2, DynamoDB reads); nothing is claimed, executed, paged or recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from medic.adapters.aws import error_code
from medic.adapters.batch import BatchJobs
from medic.adapters.bedrock import BedrockJobs
from medic.adapters.checkpoints import Checkpoints
from medic.adapters.hyperpod import HyperPod
from medic.adapters.training import TrainingJobs
from medic.config import MedicConfig
from medic.core.mode import Mode, mode_under, pause_of
from medic.core.models import (
    DEFAULT_WHY,
    Action,
    ClusterInfo,
    EventEnvelope,
    Fault,
    NodeState,
    Outcome,
    Trigger,
    Why,
)
from medic.core.pages import Page
from medic.core.text import quoted, validation_problems
from medic.flows.agent.commands import COMMAND_DEADLINE
from medic.flows.agent.quarantine import quarantine_incident, release_reason, release_refused
from medic.flows.agent.requests import RELEASE_DETAIL_TYPE, ReleaseNodeEvent
from medic.flows.jobs import batch, bedrock
from medic.flows.jobs.batch_events import BatchJobStateEvent
from medic.flows.jobs.bedrock_events import BedrockJobStateEvent
from medic.flows.jobs.events import TrainingJobStateEvent, epoch_millis
from medic.flows.jobs.faults import classify_failure
from medic.flows.jobs.managed import Service, watched_clone
from medic.flows.jobs.policy import Checkpoint, JobContext, Lineage, decide_job, lineage_of
from medic.flows.node.faults import classify
from medic.flows.node.health_event import NodeHealthEvent
from medic.flows.node.policy import NodeContext, NodeDecision, decide_node
from medic.ledger.jobs import JobStore, MedicRestart
from medic.ledger.nodes import NodeStore
from medic.ledger.pages import PageStore
from medic.ledger.quarantine import QuarantineStore
from medic.ledger.table import Table
from medic_cli import pauses
from medic_cli.context import CliError, Context
from medic_cli.mode import ModeReading
from medic_cli.render import when

NODE_HEALTH = "SageMaker HyperPod Cluster Node Health Event"
JOB_STATE = "SageMaker Training Job State Change"
BATCH_JOB_STATE = "Batch Job State Change"
BEDROCK_JOB_STATE = "Model Customization Job State Change"
SUPPORTED = (f"explain supports node health events ({NODE_HEALTH!r}), training job state changes ({JOB_STATE!r}), "
             f"AWS Batch job state changes ({BATCH_JOB_STATE!r}), Bedrock model customization job state changes "
             f"({BEDROCK_JOB_STATE!r}) and operators' node releases ({RELEASE_DETAIL_TYPE!r})")
STORM_WINDOW = timedelta(hours=1)  # as medic.flows.node.remediation.STORM_WINDOW
API_FOR_ACTION = {Action.REBOOT_NODE: "BatchRebootClusterNodes", Action.REPLACE_NODE: "BatchReplaceClusterNodes"}


@dataclass
class Explanation:
    record: dict  # the remediation record's decision fields, as the handler would write them
    page: str = "none"  # none | incident | storm
    would: list[str] = field(default_factory=list)  # what the handler would do next, in order
    facts: list[tuple[str, str]] = field(default_factory=list)  # what the decision was based on

    def as_json(self) -> dict:
        return {"record": self.record, "page": self.page, "would": self.would,
                "facts": {label: text for label, text in self.facts}}


def explain(ctx: Context, raw: Any, mode: ModeReading) -> Explanation:
    if not isinstance(raw, dict):
        raise CliError(f"the event must be one JSON object (an EventBridge event); {SUPPORTED}")
    detail_type = raw.get("detail-type")
    if detail_type == NODE_HEALTH:
        return explain_node(ctx, raw, mode)
    if detail_type == JOB_STATE:
        return explain_job(ctx, raw, mode)
    if detail_type == BATCH_JOB_STATE:
        return explain_batch_job(ctx, raw, mode)
    if detail_type == BEDROCK_JOB_STATE:
        return explain_bedrock_job(ctx, raw, mode)
    if detail_type == RELEASE_DETAIL_TYPE:
        return explain_release(ctx, raw, mode)
    raise CliError(f"{SUPPORTED}; this event's detail-type is {detail_type!r}")


def _config(ctx: Context) -> MedicConfig:
    if ctx.config is None:
        raise CliError("explain needs Medic's config (clusters, guardrails): pass --config medic.yaml, or let it "
                       "read the deployed one (lambda:GetFunctionConfiguration on the stack's functions)")
    return ctx.config


def _base_facts(ctx: Context, mode: ModeReading) -> list[tuple[str, str]]:
    stored = "" if mode.value == mode.effective else f" (parameter holds {mode.value!r}: read as paused)"
    return [("mode", f"{mode.effective}{stored} from {mode.parameter}"),
            ("config", ctx.loaded_config.source),
            ("decided at", f"{when(ctx.now())} UTC (now, not the event's time)")]


def _rejected(raw: dict, error: ValidationError, trigger: Trigger, what: str, mode: str,
              facts: list[tuple[str, str]]) -> Explanation:
    try:
        event_id = EventEnvelope.model_validate(raw).id
    except ValidationError:
        event_id = "unknown"
    problems = validation_problems(error)
    record = {"incident": f"event:{event_id}", "trigger": trigger.value, "event_id": event_id,
              "fault": Fault.INVALID.value, "action": Action.NONE.value, "outcome": Outcome.REJECTED.value,
              "reason": f"Invalid {what}: {problems}", "mode": mode, "attempt": 0}
    return Explanation(record, would=["record the rejection; act on nothing"], facts=facts)


# --- node health

def explain_node(ctx: Context, raw: dict, mode_reading: ModeReading) -> Explanation:
    mode = mode_reading.effective
    facts = _base_facts(ctx, mode_reading)
    try:
        event = NodeHealthEvent.model_validate(raw)
    except ValidationError as error:
        return _rejected(raw, error, Trigger.NODE_HEALTH, "node health event", mode, facts)
    config = _config(ctx)
    detail = event.detail
    summary = detail.HealthSummary
    mode = _under_pause(ctx, mode, detail.ClusterName, facts)
    base = {"incident": f"node:{detail.ClusterName}:{detail.InstanceId}", "trigger": Trigger.NODE_HEALTH.value,
            "event_id": event.id, "cluster": detail.ClusterName, "instance_group": None,
            "node_id": detail.InstanceId, "job": None, "mode": mode}
    fault = classify(summary.HealthStatus, summary.HealthStatusReason)
    facts.append(("fault", f"{fault.value} (health {summary.HealthStatus}: {summary.HealthStatusReason!r})"))
    cluster = config.cluster(detail.ClusterName)
    if cluster is None:
        return Explanation(_record(base, fault, NodeDecision(
            Action.NONE, Outcome.IGNORED, f"Cluster {detail.ClusterName} is not managed by Medic.")),
            would=["record it; act on nothing"], facts=facts)

    hyperpod = HyperPod(ctx.client("sagemaker"))
    table = ctx.ledger(mode)
    node = None
    if fault not in (Fault.HEALTHY, Fault.USER_APP_ERROR):
        try:
            node = hyperpod.describe_node(cluster.name, detail.InstanceId)
        except (ClientError, BotoCoreError) as error:
            decision = NodeDecision(Action.NONE, Outcome.FAILED, page=Page.INCIDENT,
                                    reason=f"Could not look the node up (DescribeClusterNode: {error_code(error)}).")
            explanation = Explanation(_record(base, fault, decision), facts=facts)
            return _with_page(explanation, decision.page, table, ctx.now(), mode, cluster.name)
        facts.append(("node", f"group {node.instance_group}, status {node.status} (DescribeClusterNode)"
                      if node else "not in the cluster (DescribeClusterNode)"))
    if node is not None:
        base["instance_group"] = node.instance_group

    guardrails = config.guardrails_for(cluster)
    now = ctx.now()
    state, cluster_state = NodeStore(table).load(cluster.name, detail.InstanceId)
    facts.append(("ledger", _node_state_text(state) + (" [dry-run copy]" if table.namespace else "")))
    hour = sum(1 for action in cluster_state.actions if action.at > now - timedelta(hours=1))
    repair = sum(1 for action in cluster_state.actions
                 if action.at > now - timedelta(minutes=guardrails.repair_minutes))
    facts.append(("cluster", f"{hour} node action(s) in the last hour (max {guardrails.max_node_actions_per_hour}), "
                             f"{repair} inside the {guardrails.repair_minutes}-minute repair window "
                             f"(breaker above {guardrails.max_fraction_in_repair:.0%} of the cluster)"))
    sizes: list[int] = []

    def cluster_info() -> ClusterInfo:  # DescribeCluster: size, NodeRecovery, Slurm controller groups
        info = hyperpod.cluster_info(cluster.name)
        sizes.append(info.size)
        return info

    decision = decide_node(NodeContext(mode=mode, cluster=cluster, guardrails=guardrails, fault=fault, node=node,
                                       state=state, cluster_state=cluster_state, cluster_info=cluster_info, now=now))
    if sizes:
        facts.append(("cluster size", f"{sizes[-1]} node(s) (DescribeCluster)"))
    explanation = Explanation(_record(base, fault, decision), facts=facts)
    if decision.close_incident:
        explanation.would.append(f"close incident {base['incident']} (its next failure may page again)")
    if decision.outcome in (Outcome.EXECUTED, Outcome.DRY_RUN):
        copy = "its dry-run copy in " if table.namespace else ""
        pending = ", in flight until HyperPod answers" if decision.executes else ""
        explanation.would.append(f"claim the action in {copy}ledger {ctx.table} (conditional write{pending})")
    if decision.executes:
        explanation.would.append(f"call {API_FOR_ACTION[decision.action]}(ClusterName={cluster.name}, "
                                 f"NodeIds=[{detail.InstanceId}]); HyperPod's answer decides the final outcome")
    elif decision.outcome is Outcome.DRY_RUN:
        explanation.would.append("call nothing (dry run)")
    return _with_page(explanation, decision.page, table, now, mode, cluster.name)


def _node_state_text(state: NodeState | None) -> str:
    if state is None:
        return "no earlier action on this node"
    text = (f"last {state.action} for {state.fault} at {when(state.acted_at)} UTC ({state.outcome}), "
            f"attempt {state.attempt}")
    if state.last_reboot_at:
        text += f"; last reboot {when(state.last_reboot_at)} UTC"
    return text


def _record(base: dict, fault: Fault, decision: NodeDecision) -> dict:
    return {**base, "fault": fault.value, "action": decision.action.value, "outcome": decision.outcome.value,
            "why": str(decision.why or DEFAULT_WHY.get(decision.outcome, "")) or None,
            "reason": decision.reason, "attempt": decision.attempt}


def _under_pause(ctx: Context, mode: str, cluster: str | None, facts: list[tuple[str, str]]) -> str:
    """The mode a decision about ``cluster`` runs in: an operator's pause (`medic pause`) turns act into paused."""
    try:
        pause = pause_of(pauses.read(ctx), cluster, ctx.now())
    except (ClientError, BotoCoreError) as error:
        facts.append(("pauses", f"unreadable ({error}); the functions would keep their last read"))
        return mode
    if pause is None:
        return mode
    facts.append(("paused", pauses.pause_text(pause, ctx.now())))
    return str(mode_under(Mode.of(mode), pause))


def _with_page(explanation: Explanation, page: Page, table: Table, now: datetime, mode: str,
               cluster: str | None) -> Explanation:
    """Whether the handler would page: at most once per incident, one storm summary per cluster per hour."""
    incident = explanation.record["incident"]
    if page is Page.NONE:
        explanation.would.append("page nobody")
    elif mode == "dry_run":
        explanation.would.append(f"page nobody (dry run; a real run would send a {page.value} page)")
    elif page is Page.INCIDENT:
        if PageStore(table).incident_paged(incident):
            explanation.would.append(f"page nobody: incident {incident} already paged")
        else:
            explanation.page = page.value
            explanation.would.append(f"page once for incident {incident}")
    else:
        sent = PageStore(table).storm_paged_at(cluster or "")
        if sent and now - sent < STORM_WINDOW:
            explanation.would.append(f"page nobody: the storm summary for {cluster} went out at {when(sent)} UTC")
        else:
            explanation.page = page.value
            explanation.would.append(f"send the storm summary page for cluster {cluster} (once per hour)")
    explanation.would.append("write the remediation record")
    return explanation


# --- training job state changes

def explain_job(ctx: Context, raw: dict, mode_reading: ModeReading) -> Explanation:
    mode = mode_reading.effective
    facts = _base_facts(ctx, mode_reading)
    try:
        event = TrainingJobStateEvent.model_validate(raw)
    except ValidationError as error:
        return _rejected(raw, error, Trigger.JOB_STATE, "training job state event", mode, facts)
    config = _config(ctx)
    detail = event.detail
    name, reason = detail.TrainingJobName, detail.FailureReason
    mode = _under_pause(ctx, mode, None, facts)
    base = {"incident": f"job:{name}", "trigger": Trigger.JOB_STATE.value, "event_id": event.id, "cluster": None,
            "instance_group": None, "node_id": None, "job": name, "mode": mode}
    spec = config.training_jobs_for(name)
    failure = classify_failure(reason, config.job_failure_rules)
    facts.append(("failure", f"{failure.fault.value} (rule {failure.label}; status {detail.TrainingJobStatus}, "
                             f"reason {reason!r})"))

    def done(fault: Fault, action: Action, outcome: Outcome, why: str, attempt: int = 0,
             page: Page = Page.NONE, table: Table | None = None) -> Explanation:
        record = {**base, "fault": fault.value, "action": action.value, "outcome": outcome.value, "reason": why,
                  "attempt": attempt}
        explanation = Explanation(record, facts=facts)
        if table is None:
            explanation.would += ["page nobody", "write the remediation record"]
            return explanation
        return _with_page(explanation, page, table, ctx.now(), mode, None)

    if spec is None:
        return done(failure.fault, Action.NONE, Outcome.IGNORED,
                    f"Training job {name} matches no configured prefix; Medic leaves it alone.")
    table = ctx.ledger(mode)
    training = TrainingJobs(ctx.client("sagemaker"))
    medics = JobStore(ctx.ledger()).restart(name)  # the jobs Medic created: the real namespace
    description = None
    if medics is not None:
        try:
            description = training.describe(name)
        except (ClientError, BotoCoreError) as error:
            return done(failure.fault, Action.NONE, Outcome.FAILED, f"Could not read the job ({error_code(error)}).",
                        page=Page.INCIDENT, table=table)
    lineage = lineage_of(name, medics, (description or {}).get("CreationTime"))
    base["incident"] = f"job:{lineage.root}"
    facts.append(("lineage", f"{lineage.root}, {lineage.restarts} restart(s) before this job"))
    if detail.TrainingJobStatus == "Failed" and JobStore(table).job_failure_claimed(name):
        return done(failure.fault, Action.NONE, Outcome.DUPLICATE, f"This failure of {name} was already handled.",
                    attempt=lineage.restarts + 1)

    max_restarts = config.max_restarts_for(spec)
    checkpoint = Checkpoint.NOT_CONFIGURED
    if (detail.TrainingJobStatus == "Failed" and failure.fault is Fault.JOB_RETRYABLE
            and lineage.restarts < max_restarts):
        try:
            description = description or training.describe(name)
            uri = (description.get("CheckpointConfig") or {}).get("S3Uri")
            if uri:
                present = Checkpoints(ctx.client("s3")).exist(uri)
                checkpoint = Checkpoint.PRESENT if present else Checkpoint.EMPTY
            facts.append(("checkpoint", f"{checkpoint.value}" + (f" ({uri})" if uri else "")))
        except (ClientError, BotoCoreError, ValueError) as error:
            return done(failure.fault, Action.NONE, Outcome.FAILED,
                        f"Could not read the job or its checkpoint ({error_code(error)}): {error}",
                        page=Page.INCIDENT, table=table)
    decision = decide_job(JobContext(mode=mode, status=detail.TrainingJobStatus, failure=failure, lineage=lineage,
                                     max_restarts=max_restarts, checkpoint=checkpoint,
                                     allow_without_checkpoint=spec.allow_restart_without_checkpoint))
    explanation = done(decision.fault, decision.action, decision.outcome, decision.reason, decision.attempt,
                       decision.page, table)
    steps = []
    if detail.TrainingJobStatus == "Failed":
        steps.append(f"claim this failure of {name} in the ledger (handled once)")
    if decision.executes:
        steps.append(f"call CreateTrainingJob {lineage.next_name()} (a clone of {name}, noted in the ledger as restart "
                     f"{lineage.restarts + 1} of {lineage.root})")
    explanation.would[:0] = steps
    return explanation


# --- the managed services beside SageMaker: AWS Batch, Amazon Bedrock

@dataclass
class _Managed:
    """One managed job's explanation as it is built (flows/jobs/managed: scope, lineage, claim, then the plan)."""

    record: dict
    facts: list[tuple[str, str]]
    mode: str

    def ends(self, fault: Fault, outcome: Outcome, reason: str | None, would: list[str],
             attempt: int = 0) -> Explanation:
        self.record.update(fault=fault.value, action=Action.NONE.value, outcome=outcome.value, reason=reason,
                           attempt=attempt)
        return Explanation(self.record, would=would, facts=self.facts)

    def lineage(self, ctx: Context, prefixes: tuple[str, str], name: str, created: Callable[[], Any]) -> Lineage:
        """The lineage as the handler reads it: Medic's note of the job, held against the service's creation time."""
        incident_prefix, ledger_prefix = prefixes
        medics = JobStore(ctx.ledger()).restart(ledger_prefix + name)
        lineage = lineage_of(ledger_prefix + name, medics, created() if medics is not None else None)
        lineage = Lineage(name, 0) if lineage.root == ledger_prefix + name else lineage
        self.record["incident"] = incident_prefix + lineage.root
        self.facts.append(("lineage", f"{lineage.root}, {lineage.restarts} restart(s) before this job"))
        return lineage

    def decided(self, ctx: Context, decision: Any, table: Table, steps: list[str]) -> Explanation:
        self.record.update(fault=decision.fault.value, action=decision.action.value, outcome=decision.outcome.value,
                           reason=decision.reason, attempt=decision.attempt)
        explanation = _with_page(Explanation(self.record, facts=self.facts), decision.page, table, ctx.now(),
                                 self.mode, None)
        explanation.would[:0] = steps
        return explanation


def _managed(ctx: Context, mode_reading: ModeReading, facts: list[tuple[str, str]], event_id: str, name: str,
             incident_prefix: str) -> _Managed:
    mode = _under_pause(ctx, mode_reading.effective, None, facts)
    return _Managed({"incident": incident_prefix + name, "trigger": Trigger.JOB_STATE.value, "event_id": event_id,
                     "cluster": None, "instance_group": None, "node_id": None, "job": name, "mode": mode,
                     "attempt": 0}, facts, mode)


def _clone_running(ctx: Context, job: _Managed, service: Service, name: str, running_at: datetime,
                   medics: Callable[[MedicRestart], bool], fault: Fault) -> Explanation:
    """As flows/jobs/managed.clone_running: Medic decides nothing; it writes the restart's incident line when this is
    the restart it waits for (the job trains again: `recovered`)."""
    watch = watched_clone(service, name, JobStore(ctx.ledger()), medics)
    if watch is None:
        return job.ends(fault, Outcome.IGNORED,
                        f"{name} is running; it is not a restart Medic started and waits for (its ledger note, the "
                        "job's id): nothing to do.", ["write nothing (no remediation record, no incident line)"])
    job.record["incident"] = watch.incident
    job.facts.append(("restart", f"{name}: Medic's restart of {watch.job}, started at {when(watch.acted_at)} UTC, "
                                 f"its incident line waiting (until {when(watch.deadline)} UTC)"))
    return job.ends(Fault.RECOVERED, Outcome.IGNORED,
                    f"Medic's restart {name} is running: Medic decides nothing, it times the recovery.",
                    [f"write incident {watch.incident}'s line: resumed at {when(running_at)} UTC (medic report times "
                     "the recovery); once, a redelivery writes nothing", "write no remediation record"])


def explain_batch_job(ctx: Context, raw: dict, mode_reading: ModeReading) -> Explanation:
    """As flows/jobs/batch: the same scope, lineage, claim and plan (batch.plan_batch_restart), read-only."""
    facts = _base_facts(ctx, mode_reading)
    try:
        event = BatchJobStateEvent.model_validate(raw)
    except ValidationError as error:
        return _rejected(raw, error, Trigger.JOB_STATE, "Batch job state event", mode_reading.effective, facts)
    config, detail = _config(ctx), event.detail
    job = _managed(ctx, mode_reading, facts, event.id, detail.jobName, batch.INCIDENT_PREFIX)
    spec = config.batch_jobs_for(detail.jobName)
    failure = classify_failure(detail.failure_text(), config.batch_failure_rules(spec) if spec else [])
    if detail.status == "RUNNING":  # as flows/jobs/batch: a restart Medic started, running
        return _clone_running(ctx, job, batch.SERVICE, detail.jobName, epoch_millis(detail.startedAt) or event.time,
                              lambda restart: restart.submitted_id == detail.jobId, failure.fault)
    facts.append(("failure", f"{failure.fault.value} (rule {failure.label}; status {detail.status}; "
                             f"{detail.failure_text()!r}; {batch.attempts_of(detail)})"))
    ignored = batch.not_ours(detail, spec)
    if ignored or spec is None:
        return job.ends(failure.fault, Outcome.IGNORED, ignored, ["record it; act on nothing"])
    lineage = job.lineage(ctx, (batch.INCIDENT_PREFIX, batch.LEDGER_PREFIX), detail.jobName, lambda: epoch_millis(
        (BatchJobs(ctx.client("batch")).describe(detail.jobId) or {}).get("createdAt")))
    table = ctx.ledger(job.mode)
    if JobStore(table).job_failure_claimed(batch.LEDGER_PREFIX + detail.jobId):
        return job.ends(failure.fault, Outcome.DUPLICATE, f"This failure of {detail.jobName} was already handled.",
                        ["page nobody", "write the remediation record"], lineage.restarts + 1)
    try:
        plan = batch.plan_batch_restart(detail, spec, failure, lineage, job.mode, config.max_restarts_for(spec),
                                        Checkpoints(ctx.client("s3")))
    except (ClientError, BotoCoreError, ValueError) as error:
        raise CliError(f"could not look for the job's checkpoint ({error_code(error)}): {error}") from None
    steps = [f"claim this failure of {detail.jobName} (job {detail.jobId}) in the ledger (handled once)"]
    if plan.decision.executes:
        steps.append(f"call SubmitJob {lineage.next_name(batch.BATCH_NAME_LIMIT)} to queue {detail.queue_name} (a "
                     f"clone of {detail.jobName}, {plan.resume}; noted in the ledger as restart "
                     f"{lineage.restarts + 1} of {lineage.root})")
    return job.decided(ctx, plan.decision, table, steps)


def explain_bedrock_job(ctx: Context, raw: dict, mode_reading: ModeReading) -> Explanation:
    """As flows/jobs/bedrock: the same scope, lineage, claim and plan (bedrock.plan_bedrock_restart), read-only."""
    facts = _base_facts(ctx, mode_reading)
    try:
        event = BedrockJobStateEvent.model_validate(raw)
    except ValidationError as error:
        return _rejected(raw, error, Trigger.JOB_STATE, "Bedrock model customization job state event",
                         mode_reading.effective, facts)
    config, detail, service = _config(ctx), event.detail, bedrock.SERVICE
    job = _managed(ctx, mode_reading, facts, event.id, detail.jobName, service.incident_prefix)
    spec = config.bedrock_jobs_for(detail.jobName)
    failure = classify_failure(detail.failureMessage, config.bedrock_failure_rules(spec) if spec else [])
    if detail.jobStatus == "InProgress":  # as flows/jobs/bedrock: a restart Medic created, running
        return _clone_running(ctx, job, service, detail.jobName, event.time,
                              lambda restart: bedrock.same_job(restart.submitted_id, detail.jobArn), failure.fault)
    facts.append(("failure", f"{failure.fault.value} (rule {failure.label}; status {detail.jobStatus}; "
                             f"{detail.failureMessage!r})"))
    if bedrock.not_ours(detail, spec) or spec is None:
        return job.ends(failure.fault, Outcome.IGNORED, bedrock.not_ours(detail, spec), ["record it; act on nothing"])
    jobs = BedrockJobs(ctx.client("bedrock"))
    lineage = job.lineage(ctx, (service.incident_prefix, service.ledger_prefix), detail.jobName,
                          lambda: jobs.describe(detail.jobName).get("creationTime"))
    table, max_restarts = ctx.ledger(job.mode), config.max_restarts_for(spec)
    if JobStore(table).job_failure_claimed(service.ledger_prefix + detail.jobArn):
        return job.ends(failure.fault, Outcome.DUPLICATE, f"This failure of {detail.jobName} was already handled.",
                        ["page nobody", "write the remediation record"], lineage.restarts + 1)
    wanted = failure.fault is Fault.JOB_RETRYABLE and lineage.restarts < max_restarts
    decision = bedrock.plan_bedrock_restart(detail, spec, failure, lineage, job.mode, max_restarts,
                                            jobs.describe(detail.jobName) if wanted else None)
    steps = [f"claim this failure of {detail.jobName} in the ledger (handled once)"]
    if decision.executes:
        steps.append(f"call CreateModelCustomizationJob {lineage.next_name(bedrock.NAME_LIMIT)} (the job again, from "
                     f"scratch: it repeats the failed job's training and its cost; noted in the ledger as restart "
                     f"{lineage.restarts + 1} of {lineage.root})")
    return job.decided(ctx, decision, table, steps)


# --- an operator's node release

def explain_release(ctx: Context, raw: dict, mode_reading: ModeReading) -> Explanation:
    """A "Medic Release Node" request as the requeue function handles it (flows/agent/quarantine.handle_release_event):
    the same parse and the same decision (release_refused: an unmanaged cluster, a node not quarantined there, one
    released already, the mode), from the ledger's quarantine items; then what the handler would do."""
    mode = mode_reading.effective
    facts = _base_facts(ctx, mode_reading)
    try:
        event = ReleaseNodeEvent.model_validate(raw)
    except ValidationError as error:
        return _rejected(raw, error, Trigger.OPERATOR, "release request", mode, facts)
    config = _config(ctx)
    detail = event.detail
    mode = _under_pause(ctx, mode, detail.cluster, facts)
    who = detail.requested_by or f"account {event.account}"
    facts.append(("requested by", f"{quoted(who, 130)} (as the sender says: not verified)"))
    cluster = config.cluster(detail.cluster)
    store = QuarantineStore(ctx.ledger())  # quarantines are held in the real namespace only (a mode that acts)
    held = store.find(detail.cluster, detail.node) if cluster is not None else None
    if held is not None:
        facts.append(("quarantine", f"{held.node_name} ({held.position}, {held.node_id}) since {when(held.since)} UTC"
                                    + (f", released {when(held.released_at)} UTC" if held.released_at else "")))
    refused = release_refused(detail.cluster, detail.node, cluster, held, config.clusters, store.held, Mode.of(mode))
    outcome, reason, why = refused or (Outcome.DEFERRED, release_reason(held, who, "<new id>", detail.reason),
                                       Why.QUEUED_FOR_AGENT)
    action = Action.NONE if outcome in (Outcome.REJECTED, Outcome.DUPLICATE) else Action.RELEASE_NODE
    record = {"incident": quarantine_incident(detail.cluster, held.position if held else detail.node),
              "trigger": Trigger.OPERATOR.value, "event_id": event.id, "cluster": detail.cluster,
              "instance_group": None, "node_id": held.node_id if held else None, "job": None,
              "fault": Fault.OPERATOR_REQUEST.value, "action": action.value, "outcome": outcome.value,
              "why": str(why or DEFAULT_WHY.get(outcome, "")) or None, "reason": reason, "attempt": 0, "mode": mode}
    would: list[str] = []
    if refused is None and held is not None:
        would.append(f"release position {held.position} in ledger {ctx.table} (a conditional update: a second "
                     "request is a duplicate)")
        if held.command_id and ctx.now() - held.since < COMMAND_DEADLINE:
            would.append(f"withdraw quarantine_node command {held.command_id} if its agent has not taken it yet")
        would.append(f"send release_node for {held.node_name} to the agent of {detail.cluster} (its result records "
                     "executed or failed; with no agent queue for the cluster the record is failed: release it by "
                     "hand)")
    return Explanation(record, would=[*would, "page nobody", "write the remediation record"], facts=facts)
