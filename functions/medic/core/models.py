"""Typed models at the edges: the node events Medic accepts, the envelope every event shares, and the
records it writes. Each other kind of event has its models in its own flow (training jobs: flows/jobs/events.py;
cluster events, alarms, schedules, operator requests: their flows' policy modules), so a handler builds only the
pydantic classes it parses at cold start."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from medic.config_core import (
    EVENT_AGE_LIMIT,
    EVENT_CLOCK_SKEW,
    EVENTBRIDGE_MAX_EVENT_AGE,
    LAMBDA_MAX_EVENT_AGE,
    REDELIVERY_WINDOW,
)
from medic.core.text import quoted

# EC2 instance ids as HyperPod reports them: i- followed by 8 or 17 lowercase hex digits.
INSTANCE_ID_PATTERN = r"^i-[0-9a-f]{8}(?:[0-9a-f]{9})?$"
CLUSTER_ARN_PATTERN = r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:cluster/[a-zA-Z0-9-]{1,63}$"


def foreign_cluster_arn(arn: str, *, account: str, region: str, name: str, cluster_id: str,
                        partition: str = "aws") -> str | None:
    """Why a cluster ARN in an event is not the configured cluster of the deploying partition, account and region
    (None: it is). AWS's documented example events carry the cluster name where a real ARN has its 12-character
    id, so either is accepted. An empty ``account`` (unknown) is not checked."""
    parts = arn.split(":", 5)
    if len(parts) != 6:
        return f"ClusterArn {arn} is not an ARN."
    arn_partition, arn_region, arn_account, resource = parts[1], parts[3], parts[4], parts[5]
    if arn_partition != partition:
        return f"ClusterArn {arn} names partition {arn_partition}, not the stack's partition {partition}."
    if account and arn_account != account:
        return f"ClusterArn {arn} names account {arn_account}, not the deploying account {account}."
    if arn_region != region:
        return f"ClusterArn {arn} names region {arn_region}, not the deploying region {region}."
    if resource.removeprefix("cluster/") not in (cluster_id, name):
        return (f"ClusterArn {arn} names cluster {resource.removeprefix('cluster/')}, not the configured cluster "
                f"{name} (id {cluster_id}).")
    return None


def mismatched_cluster_id(arn: str, *, account: str, region: str, name: str, cluster_id: str,
                          partition: str = "aws") -> str | None:
    """The cluster id a ``ClusterArn`` names when it is an ARN of the stack's own partition, account and region, for
    a configured cluster's name, but another id than the configured one (and not the name, as AWS's examples have
    it): a wrong ``clusters[].id``, or the cluster deleted and created again under the same name. None otherwise
    (the configured cluster, or a foreign ARN, which is not a configuration error). An unknown ``account`` (empty)
    says nothing: no mismatch."""
    parts = arn.split(":", 5)
    if not account or len(parts) != 6 or not parts[5].startswith("cluster/"):
        return None
    if (parts[1], parts[3], parts[4]) != (partition, region, account):
        return None
    named = parts[5].removeprefix("cluster/")
    return named if named not in (cluster_id, name) and re.fullmatch(r"[a-z0-9]{12}", named) else None


class Trigger(StrEnum):
    NODE_HEALTH = "node_health"
    CLUSTER_EVENT = "cluster_event"
    JOB_STATE = "job_state"
    ALARM = "alarm"
    RECONCILE = "reconcile"
    OPERATOR = "operator"  # an explicit request from a person or a tool ("Medic Requeue Job")
    NODE_REPAIR = "node_repair"  # Slurm's side of a node action: drain, resume, the jobs the repair hit
    MODE_CHANGE = "mode_change"  # the run-time mode parameter changed (SSM "Parameter Store Change")


class Action(StrEnum):
    REBOOT_NODE = "reboot_node"
    REPLACE_NODE = "replace_node"
    RESTART_JOB = "restart_job"
    REQUEUE_JOB = "requeue_job"
    # Slurm's side of a node repair, each its own action (trigger node_repair): the drain before the HyperPod call
    # and the resume after it (scontrol update NodeName=... State=DRAIN / State=RESUME, by the agent)
    DRAIN_NODE = "drain_node"
    RESUME_NODE = "resume_node"
    # the jobs on a node HyperPod repairs by itself (automatic node recovery), listed by the agent, nothing changed
    LIST_NODE_JOBS = "list_node_jobs"
    # a node position in a repair loop kept out of service after its next repair (Slurm: drained with Medic's
    # quarantine reason; EKS: cordoned), and returned by an operator's `medic release` (issue 32)
    QUARANTINE_NODE = "quarantine_node"
    RELEASE_NODE = "release_node"
    NONE = "none"


class Outcome(StrEnum):
    EXECUTED = "executed"
    DRY_RUN = "dry_run"
    DUPLICATE = "duplicate"
    SUPPRESSED = "suppressed"
    DEFERRED = "deferred"
    FAILED = "failed"
    REJECTED = "rejected"
    IGNORED = "ignored"


class Why(StrEnum):
    """The precise sub-reason of a record's outcome (the record's `why`): one outcome word means several things
    (`deferred`: HyperPod repairs it, queued for the agent, awaiting the drain, ...; `suppressed`: a guardrail, a
    pause, a protected node, ...). Each value belongs to the outcomes WHY_OUTCOMES types it for, and says whether
    a human must act (NEEDS_HUMAN: the record's `needs_human`, unless its builder says otherwise)."""

    # executed, dry_run, duplicate: one meaning each
    ACTED = "acted"  # Medic called (or queued) the action, or the agent carried it out
    WOULD_ACT = "would_act"  # a dry run: Medic would have acted
    ALREADY_HANDLED = "already_handled"  # a repeated event, or one inside its cooldown for the same fault
    # deferred: Medic does not act now, for one of these
    HYPERPOD_REPAIRING = "hyperpod_repairing"  # HyperPod repairs the node (automatic recovery, a repair under way)
    QUEUED_FOR_AGENT = "queued_for_agent"  # a command waits in the agent's queue; its result is recorded later
    AWAITING_DRAIN = "awaiting_drain"  # the HyperPod call waits for the agent's drain (or its deadline)
    OWNED_BY_REPAIR = "owned_by_repair"  # a node repair or a proof of recovery owns the incident already
    RESULT_UNKNOWN = "result_unknown"  # a call's answer was lost: Medic re-checks before any new call
    RETRY_LATER = "retry_later"  # Medic takes it up again by itself (its next sweep)
    NOT_RETRYABLE = "not_retryable"  # a restart would fail the same way, or Slurm cannot requeue the job
    HUMAN_DECIDES = "human_decides"  # no automatic action for this: an unknown reason, a divergence, a slow repair
    # suppressed: Medic would act, and holds back, for one of these
    PAUSED = "paused"  # the mode (or an operator's pause of the cluster) allows no action
    PROTECTED = "protected"  # a protected instance group, or a Slurm controller
    COOLDOWN = "cooldown"  # the node failed again inside its cooldown
    RATE_LIMIT = "rate_limit"  # a budget per hour is spent (node actions, operator requests), or restarted too soon
    BREAKER = "breaker"  # too many of the cluster's nodes already in repair
    BUDGET_SPENT = "budget_spent"  # Medic gave up on the job: its restart budget spent, or a restart did not help
    NO_CHECKPOINT = "no_checkpoint"  # a restart would start from scratch
    NOT_ALLOWED = "not_allowed"  # the config does not let Medic do it (outside its scope, a plan, a limit)
    # failed, rejected, ignored
    CALL_FAILED = "call_failed"  # a call or a command failed, or its result never came: a human looks
    NOT_RECOVERED = "not_recovered"  # the proof of recovery failed: no progress, or resumed behind its checkpoint
    INVALID = "invalid"  # the event or the result could not be used (the reason names the field)
    NOTHING_TO_DO = "nothing_to_do"  # the node is healthy again, the job finished, a stale event, ...


_DEFERRED, _SUPPRESSED = frozenset({Outcome.DEFERRED}), frozenset({Outcome.SUPPRESSED})
# Which outcomes each sub-reason is typed for: About.record refuses any other pair.
WHY_OUTCOMES: dict[Why, frozenset[Outcome]] = {
    Why.ACTED: frozenset({Outcome.EXECUTED}),
    Why.WOULD_ACT: frozenset({Outcome.DRY_RUN}),
    Why.ALREADY_HANDLED: frozenset({Outcome.DUPLICATE}),
    **dict.fromkeys((Why.HYPERPOD_REPAIRING, Why.QUEUED_FOR_AGENT, Why.AWAITING_DRAIN, Why.OWNED_BY_REPAIR,
                     Why.RESULT_UNKNOWN, Why.RETRY_LATER, Why.NOT_RETRYABLE, Why.HUMAN_DECIDES), _DEFERRED),
    **dict.fromkeys((Why.PAUSED, Why.PROTECTED, Why.COOLDOWN, Why.RATE_LIMIT, Why.BREAKER, Why.BUDGET_SPENT,
                     Why.NO_CHECKPOINT, Why.NOT_ALLOWED), _SUPPRESSED),
    Why.CALL_FAILED: frozenset({Outcome.FAILED}),
    Why.NOT_RECOVERED: frozenset({Outcome.FAILED}),
    Why.INVALID: frozenset({Outcome.REJECTED}),
    Why.NOTHING_TO_DO: frozenset({Outcome.IGNORED}),
}
# The sub-reason of an outcome with one meaning, when a record's builder names none. Deferred and suppressed have
# none: their builders always say which.
DEFAULT_WHY: dict[Outcome, Why] = {Outcome.EXECUTED: Why.ACTED, Outcome.DRY_RUN: Why.WOULD_ACT,
                                   Outcome.DUPLICATE: Why.ALREADY_HANDLED, Outcome.FAILED: Why.CALL_FAILED,
                                   Outcome.REJECTED: Why.INVALID, Outcome.IGNORED: Why.NOTHING_TO_DO}
# Whether a human must act on a record of this sub-reason (its builder may say otherwise: a failure Medic retries
# by itself needs no one).
NEEDS_HUMAN: frozenset[Why] = frozenset({
    Why.NOT_RETRYABLE, Why.HUMAN_DECIDES, Why.PAUSED, Why.PROTECTED, Why.COOLDOWN, Why.RATE_LIMIT, Why.BREAKER,
    Why.BUDGET_SPENT, Why.NO_CHECKPOINT, Why.NOT_ALLOWED, Why.CALL_FAILED, Why.NOT_RECOVERED})


class Fault(StrEnum):
    GPU_REBOOT = "gpu_reboot"  # recoverable by a reboot (NvidiaErrorReboot)
    GPU_FATAL = "gpu_fatal"  # the GPU needs a new host (NvidiaErrorTerminate, hardware XIDs)
    ACCELERATOR_REBOOT = "accelerator_reboot"  # other HMA "...ErrorReboot" (Neuron, EFA, ...)
    HARDWARE_FATAL = "hardware_fatal"  # other HMA "...ErrorTerminate"
    USER_APP_ERROR = "user_app_error"  # XidUserAppError: the job's problem, not the node's
    UNKNOWN = "unknown"  # unrecognized reason: a human decides
    HEALTHY = "healthy"  # the node recovered
    JOB_RETRYABLE = "job_retryable"  # a training job failure a restart from the checkpoint fixes
    JOB_NOT_RETRYABLE = "job_not_retryable"  # the job would fail the same way again
    JOB_UNKNOWN = "job_unknown"  # unrecognized failure reason: a human decides
    JOB_STOPPED = "job_stopped"  # stopped by a user: never restarted
    # a Slurm job a node failure ended that Slurm will not requeue (submitted --no-requeue, or not a batch job)
    JOB_NOT_REQUEUEABLE = "job_not_requeueable"
    OPERATOR_REQUEST = "operator_request"  # a person asked for the action (no fault classified by Medic)
    STALLED = "stalled"  # the training probe's heartbeat stopped
    DIVERGED = "diverged"  # a NaN/inf loss, or a loss above the configured ceiling
    SLOWED = "slowed"  # throughput well below its recent level
    FAILED_NODES = "failed_nodes"  # HyperPod reports failed nodes for longer than a repair takes
    RECOVERED = "recovered"  # proof of recovery: training resumed after Medic's restart
    NO_PROGRESS = "no_progress"  # proof of recovery failed: no training progress after the restart
    # proof of recovery failed: training resumed, but below the last checkpoint (from scratch, an older checkpoint)
    RESUMED_BEHIND = "resumed_behind"
    # the job finished: its probe published the completion marker (a clean close) last, or Slurm (slurmctld's memory,
    # sacct) says the newest job of its name ended COMPLETED
    COMPLETED = "completed"
    CAPACITY_SHORTFALL = "capacity_shortfall"  # HyperPod could not get an instance (replacement, scaling)
    LIFECYCLE_SCRIPT_FAILED = "lifecycle_script_failed"  # a node's lifecycle script failed
    REPAIR_FAILED = "repair_failed"  # a reboot or replacement did not complete
    CLUSTER_ERROR = "cluster_error"  # another HyperPod cluster event at Error level
    CONFIG_MISMATCH = "config_mismatch"  # medic.yaml says one thing, DescribeCluster another
    REPAIR_LOOP = "repair_loop"  # one node position repaired repair_loop_count times within repair_loop_days
    # EKS: the cluster's agent reports a node NotReady, or labelled unhealthy by HyperPod (node-health-status)
    K8S_NODE_UNHEALTHY = "k8s_node_unhealthy"
    # EKS: a watched job's pods stuck Terminating on a NotReady node (they never go away by themselves)
    PODS_STUCK_TERMINATING = "pods_stuck_terminating"
    MODE_CHANGED = "mode_changed"  # the run-time mode parameter changed: paged whoever made it
    # a cluster's agent silent longer than agent_silence_minutes (or never heard from past agent_install_grace_hours)
    AGENT_SILENT = "agent_silent"
    AGENT_BACK = "agent_back"  # the agent Medic reported silent heartbeats again
    # the metrics of a cluster's runs watched by pattern could not be read: those runs are not watched until they can
    WATCH_UNREADABLE = "watch_unreadable"
    INVALID = "invalid"  # the event itself could not be used


class Redrive(BaseModel):
    """An operator's override on one event redriven from a dead-letter queue after its age bound
    (docs/operator-runbook.md, "A dead-letter queue has messages"): a top-level `medic-redrive` the runbook's
    redrive adds. No event's author can set it: PutEvents takes only Source, DetailType, Detail, Resources and
    Time, and EventBridge builds the envelope itself (EventBridge API reference, PutEventsRequestEntry); a
    top-level field reaches a handler only through a direct invoke (lambda:InvokeFunction on Medic's function: an
    operator's permission)."""

    model_config = ConfigDict(extra="forbid")

    event: str = Field(min_length=1, max_length=64)  # the id of the event it is given for (the envelope's id)
    by: str = Field(min_length=1, max_length=128)
    reason: str = Field(min_length=1, max_length=500)


class Edge(NamedTuple):
    """What every event is checked against where it enters Medic: the handler's clock and the stack's own
    partition, account and region. Passed as the validation context (``Model.model_validate(raw,
    context=deps.edge())``); without one (``medic explain``, a model read in a test) only what needs none is
    checked."""

    now: datetime
    partition: str = "aws"
    account: str = ""
    region: str = ""


def _edge(info: ValidationInfo) -> Edge | None:
    context = info.context
    edge = context.get("edge") if isinstance(context, dict) else None
    return edge if isinstance(edge, Edge) else None


def span(delta: timedelta) -> str:
    """A duration as a person reads it: "8 d 2 h", "31 h", "12 min", "40 s"."""
    seconds = int(abs(delta.total_seconds()))
    days, hours, minutes = seconds // 86400, seconds % 86400 // 3600, seconds % 3600 // 60
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min" if minutes else f"{seconds} s"


class EventBridgeEnvelope(BaseModel):
    """An EventBridge event (the envelope Powertools' EventBridgeModel describes, without importing its
    hundred sibling models at cold start). The id is what EventBridge sends (a UUID): it ends up in
    ledger keys and records."""

    model_config = ConfigDict(populate_by_name=True)

    version: str
    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9-]+$")
    source: str
    account: str
    # An operator's override on a redriven event: read by MedicEvent (typed there), whatever it holds here, so that
    # a bad one still leaves the event's id to record. Before `time`: the age check reads it (fields validate in
    # this order).
    redrive: Any = Field(default=None, alias="medic-redrive")
    time: datetime
    region: str
    resources: list[str]
    detail_type: str = Field(alias="detail-type")
    detail: Any
    # EventBridge adds replay-name, the replay's name, to each event it replays from an archive (EventBridge user
    # guide, "Archiving and replaying events": every archive's managed rule excludes replays by it; Powertools'
    # EventBridgeModel: optional top-level `replay-name`). A live event has none.
    replay_name: str | None = Field(default=None, alias="replay-name")


class MedicEvent(EventBridgeEnvelope):
    """An event Medic may act on: a live one, of now, from its own partition. Every handler's event passes these
    checks at the edge (a `rejected` record naming the field, never an action):

    - a replay (EventBridge's `replay-name`: an old event sent again, a new id, the old time): Medic's rules exclude
      replays (infra/event_patterns.py); one that reaches a handler all the same is rejected;
    - a time without a time zone: no one can tell when it happened;
    - an event older than EVENT_AGE_LIMIT (medic.config: the longest EventBridge's and Lambda's retries can take,
      plus the source's lag): a redelivery, not news (a DLQ redrive days later, a copy sent by hand), unless an
      operator's override (`medic-redrive`, for this event id) vouches for it, and never older than
      REDELIVERY_WINDOW (the last day any queue keeps it: de-duplication items outlive it, medic.config.DEDUPE_DAYS);
    - an event dated more than EVENT_CLOCK_SKEW ahead of Medic's clock: a sender's claim that would hide what
      happens until then (a Healthy report dated next week);
    - an ARN in `resources` of another partition than the stack's (aws-us-gov, aws-iso-b, ... in a stack in aws).
    The clock and partition come from the validation context (Edge)."""

    redrive: Redrive | None = Field(default=None, alias="medic-redrive")

    @field_validator("replay_name")
    @classmethod
    def _live(cls, replay: str | None) -> str | None:
        if replay is not None:
            raise ValueError(f"a replayed event (EventBridge archive replay {quoted(replay, 64)}); Medic acts only "
                             "on live events, never on a replay")
        return replay

    @field_validator("time")
    @classmethod
    def _timely(cls, when: datetime, info: ValidationInfo) -> datetime:
        if when.tzinfo is None or when.utcoffset() is None:
            raise ValueError(f"{when.isoformat()} has no time zone: Medic cannot tell when the event happened "
                             "(EventBridge writes UTC with a Z)")
        edge = _edge(info)
        if edge is None:
            return when
        try:
            age = edge.now - when
        except OverflowError:
            raise ValueError(f"{when.isoformat()} is out of any range Medic can compare with its clock") from None
        if age < -EVENT_CLOCK_SKEW:
            raise ValueError(f"the event is dated {span(age)} after Medic's clock ({edge.now:%Y-%m-%dT%H:%M:%SZ}), "
                             f"beyond the {span(EVENT_CLOCK_SKEW)} clocks may differ by: a time its sender claims, not "
                             "one that happened")
        if age <= EVENT_AGE_LIMIT:
            return when
        override = info.data.get("redrive")
        given = override is not None and override.event == info.data.get("id")
        window = (f"older than the {span(EVENT_AGE_LIMIT)} EventBridge ({span(EVENTBRIDGE_MAX_EVENT_AGE)}) and "
                  f"Lambda ({span(LAMBDA_MAX_EVENT_AGE)}) retries can take to deliver it")
        if given and age <= REDELIVERY_WINDOW:
            return when  # the operator vouches for it: the handlers' de-duplication still holds (DEDUPE_DAYS)
        if age > REDELIVERY_WINDOW:
            raise ValueError(f"the event is {span(age)} old (its time {when.isoformat()}), {window}, and older than "
                             f"any dead-letter queue keeps one ({span(REDELIVERY_WINDOW)}): not even an operator's "
                             "override makes it act")
        raise ValueError(f"the event is {span(age)} old (its time {when.isoformat()}), {window}: a redelivery, not "
                         "news. To make it act, redrive it with an operator's override (medic-redrive for its id: "
                         "docs/operator-runbook.md, 'A dead-letter queue has messages')")

    @field_validator("resources")
    @classmethod
    def _this_partition(cls, resources: list[str], info: ValidationInfo) -> list[str]:
        edge = _edge(info)
        for resource in resources if edge is not None else ():
            parts = resource.split(":", 2)
            if parts[0] == "arn" and len(parts) == 3 and parts[1] != edge.partition:
                raise ValueError(f"{quoted(resource, 120)} is an ARN of partition {quoted(parts[1], 32)}, not the "
                                 f"stack's partition {edge.partition}")
        return resources


class EventEnvelope(EventBridgeEnvelope):
    """The EventBridge envelope alone, so a bad detail (or a replay) can still be recorded against its event id.
    Built on its first use (a rejected event's record), not at every handler's cold start."""

    model_config = ConfigDict(defer_build=True)

    detail: dict


class Requester(BaseModel):
    """Who sent an operator request, as far as the event can tell. EventBridge's PutEvents carries no caller
    identity: `account` and `source` are the event's own fields (the sending account, and a source any
    principal allowed `events:PutEvents` may set); `claimed_by` is the detail's `requested_by`, validated
    but claimed by the sender, not verified. CloudTrail's PutEvents entry has the real caller."""

    account: str
    source: str
    claimed_by: str | None = None


class RemediationRecord(BaseModel):
    """One decision, exactly as it lands in the remediation log (DESIGN.md contract). The handlers read only its
    field names (obs.RECORD_FIELDS): its validator is built on first use (`medic history`), not at cold start."""

    model_config = ConfigDict(use_enum_values=True, defer_build=True)

    incident: str
    trigger: Trigger
    event_id: str
    cluster: str | None = None
    instance_group: str | None = None
    node_id: str | None = None
    job: str | None = None
    fault: str
    action: Action
    outcome: Outcome
    reason: str
    paged: bool = False
    mode: str
    attempt: int = 0
    requester: Requester | None = None  # operator requests only
    why: Why | None = None  # the outcome's precise sub-reason (typed per outcome: WHY_OUTCOMES)
    needs_human: bool = False  # a human must act on this record (`medic history --needs-human`)


# A Slurm node name as HyperPod names its nodes: one node, never a hostlist expression, ALL or a list (the agent's
# NODE_NAME, agent/medic_agent/commands.py). HyperPod's Slurm nodes are named after their private DNS hostname's
# first label, ip-<a>-<b>-<c>-<d> (AWS's HyperPod Slurm samples: `sinfo` lists ip-10-1-...); DescribeClusterNode
# says PrivateDnsHostname (pattern ip-<a>-<b>-<c>-<d>.<domain> in botocore's model) and PrivatePrimaryIp.
SLURM_NODE_NAME = re.compile(r"ip-(?:[0-9]{1,3}-){3}[0-9]{1,3}", re.ASCII)
_IPV4 = re.compile(r"(?:[0-9]{1,3}\.){3}[0-9]{1,3}", re.ASCII)


def slurm_node_name(hostname: Any, ip: Any) -> str | None:
    """The node's Slurm name from DescribeClusterNode's PrivateDnsHostname (else PrivatePrimaryIp); None when
    neither gives one that matches SLURM_NODE_NAME exactly (nothing else may reach an argv)."""
    if isinstance(hostname, str):
        first = hostname.split(".", 1)[0]
        if SLURM_NODE_NAME.fullmatch(first):
            return first
    if isinstance(ip, str) and _IPV4.fullmatch(ip):
        name = "ip-" + ip.replace(".", "-")
        return name if SLURM_NODE_NAME.fullmatch(name) else None
    return None


class JobRef(BaseModel):
    """A Slurm job a node action hit, as the record's `jobs` names it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(pattern=r"^[0-9]{1,10}(?:_[0-9]{1,10})?$")
    name: str = Field(max_length=200)


# ClusterInstanceStatus NotFound (botocore's model: one of its seven values): the instance is gone.
NOT_FOUND = "NotFound"


class NodeInfo(NamedTuple):
    """What DescribeClusterNode (or ListClusterNodes) says about the node."""

    node_id: str
    instance_group: str
    status: str
    # NodeLogicalId: persists across BatchReplaceClusterNodes, which gives the node a new instance id.
    logical_id: str | None = None
    # The node's Slurm node name (ip-<a>-<b>-<c>-<d>, from the PrivateDnsHostname DescribeClusterNode and
    # ListClusterNodes give: botocore's ClusterNodeDetails and ClusterNodeSummary); None when not known.
    slurm_node: str | None = None
    # InstanceStatus.Message (botocore's ClusterInstanceStatusDetails): what HyperPod says of the status; its text,
    # shown quoted. None when it says nothing.
    status_message: str | None = None

    @property
    def gone(self) -> bool:
        return self.status == NOT_FOUND


class ClusterInfo(NamedTuple):
    """What DescribeCluster says about the cluster (cached briefly by the adapter)."""

    size: int
    node_recovery: str | None  # "automatic" | "none"; None when DescribeCluster does not say
    provisioning: str | None  # NodeProvisioningMode: "Continuous", or None (the default mode)
    controller_groups: frozenset[str]  # instance groups whose SlurmConfig.NodeType is Controller


class NodeState(NamedTuple):
    """What the ledger remembers about Medic's last action on a node."""

    fault: str
    action: str
    outcome: str
    acted_at: datetime
    attempt: int
    last_reboot_at: datetime | None
    version: int
    logical_id: str | None = None  # the node's NodeLogicalId when Medic acted (it outlives the instance)


class ClusterAction(NamedTuple):
    node_id: str
    action: str
    at: datetime
    logical_id: str | None = None


class ClusterState(NamedTuple):
    """Medic's recent node actions in one cluster: the rolling budget and the breaker's input."""

    actions: tuple[ClusterAction, ...]
    version: int
