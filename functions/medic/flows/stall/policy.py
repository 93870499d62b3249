"""Medic's own alarms: what an alarm is about (read from its name) and what to do when it changes state.

Pure: no I/O. The alarm handler loads the context (ledger, cluster), calls ``decide_alarm`` and carries
out the plan; the recovery check calls ``judge_recovery`` with the metrics it read.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from medic.config_core import (
    ALARM_PREFIX,
    CLUSTER_ALARM_KINDS,
    JOB_ALARM_KINDS,
    Cluster,
    CoreConfig,
    Job,
    KubernetesJob,
)
from medic.core.mode import Mode
from medic.core.models import Action, Fault, MedicEvent, Outcome, Why
from medic.core.progress import PROBE_HISTORY_HOURS, Progress, RecoveryWatch
from medic.core.text import quoted
from medic.flows.recovery.policy import made_progress

# --- the event ("CloudWatch Alarm State Change")


class AlarmState(BaseModel):
    model_config = ConfigDict(extra="ignore")

    value: str = Field(pattern=r"^(OK|ALARM|INSUFFICIENT_DATA)$")
    reason: str = Field(default="", max_length=4096)
    # Kept as CloudWatch wrote it (it names the transition in the ledger), but it must read as a time with its
    # zone (CloudWatch writes 2026-11-21T03:10:00.000+0000): the incident's timeline is measured from it.
    timestamp: str = Field(min_length=1, max_length=64, pattern=r"^[0-9T:.+Z-]+$")

    @field_validator("timestamp")
    @classmethod
    def _zoned(cls, timestamp: str) -> str:
        try:
            when = datetime.fromisoformat(timestamp)
        except ValueError:
            raise ValueError("not an ISO 8601 time") from None
        if when.utcoffset() is None:
            raise ValueError(f"{timestamp} has no time zone: Medic cannot tell when the alarm changed state")
        return timestamp


class AlarmDetail(BaseModel):
    model_config = ConfigDict(extra="ignore")

    alarmName: str = Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9._-]+$")  # noqa: N815 - AWS's name
    state: AlarmState
    previousState: AlarmState | None = None  # noqa: N815 - AWS's name


class AlarmStateChangeEvent(MedicEvent):
    detail: AlarmDetail


def foreign_alarm(event: AlarmStateChangeEvent, *, partition: str, account: str, region: str) -> str | None:
    """Why an alarm event is not about the stack's own alarm of that name (None: it is). CloudWatch sends an alarm's
    state change from the alarm's account and region with the alarm's ARN as its one resource (CloudWatch user
    guide, "Alarm events and EventBridge"): all three must be the stack's. An empty ``account`` (unknown) is not
    checked."""
    if account and event.account != account:
        return f"The event comes from account {quoted(event.account, 32)}, not the deploying account {account}."
    if event.region != region:
        return f"The event comes from region {quoted(event.region, 32)}, not the deploying region {region}."
    arn = f"arn:{partition}:cloudwatch:{region}:{account or event.account}:alarm:{event.detail.alarmName}"
    if event.resources != [arn]:
        return f"Its resources {quoted(', '.join(event.resources), 200)} are not the alarm's ARN {arn}."
    return None


# --- what the alarm is about


class AlarmKind(StrEnum):
    STALL = "stall"  # no Heartbeat for stall_minutes (a dead process, or a stall the probe did not judge)
    HANG = "hang"  # the probe's own verdict (`Stalled`): a live process whose steps stopped
    DIVERGENCE = "divergence"
    SLOWDOWN = "slowdown"
    FAILED_NODES = "failed-nodes"


# The hang alarm is a faster witness of the same fault: one incident with the stall alarm, the same requeue, budget,
# proof of recovery and pages.
STALL_KINDS = (AlarmKind.STALL, AlarmKind.HANG)
FAULT_OF_KIND = {AlarmKind.STALL: Fault.STALLED, AlarmKind.HANG: Fault.STALLED, AlarmKind.DIVERGENCE: Fault.DIVERGED,
                 AlarmKind.SLOWDOWN: Fault.SLOWED, AlarmKind.FAILED_NODES: Fault.FAILED_NODES}


class RunTarget(NamedTuple):
    """A run watched by pattern (issue 33): exactly what a stall restarts. On Slurm its job id (the probe's
    SLURM_JOB_ID); on EKS its owning object, or why Medic may not restart it (``refused``: then it pages)."""

    key: str  # its identity on the cluster: the Slurm job id, or the pod's namespace/name
    rule: str  # the watch rule's job_prefix
    slurm_job_id: str | None = None
    kubernetes: KubernetesJob | None = None
    refused: str | None = None


class AlarmSubject(NamedTuple):
    name: str
    kind: AlarmKind
    cluster: Cluster
    job: Job | None
    run: RunTarget | None = None  # a run watched by pattern: the reconciler's sweep, not an alarm, found it

    @property
    def incident(self) -> str:
        return f"alarm:{self.name}"

    @property
    def label(self) -> str:
        """How a record names it: an alarm, or the reconciler's watch of a run (its state mirrors an alarm's)."""
        return f"The reconciler's watch of {self.name}" if self.run is not None else f"Alarm {self.name}"

    @property
    def fault(self) -> Fault:
        return FAULT_OF_KIND[self.kind]


def alarm_subject(name: str, config: CoreConfig) -> AlarmSubject | None:
    """The configured job or cluster a Medic alarm is named after; None for anything else."""
    if not name.startswith(ALARM_PREFIX):
        return None
    rest = name[len(ALARM_PREFIX):]
    for kind in JOB_ALARM_KINDS:
        if rest.startswith(f"{kind}-"):
            job = config.job(rest[len(kind) + 1:])
            cluster = config.cluster(job.cluster) if job else None
            return AlarmSubject(name, AlarmKind(kind), cluster, job) if job and cluster else None
    for kind in CLUSTER_ALARM_KINDS:
        if rest.startswith(f"{kind}-"):
            cluster = config.cluster(rest[len(kind) + 1:])
            return AlarmSubject(name, AlarmKind(kind), cluster, None) if cluster else None
    return None


# --- the decision


class Plan(StrEnum):
    REQUEUE = "requeue"  # restart the job from its checkpoint through the Slurm agent
    RECORD = "record"  # record the outcome (and page when asked); nothing to call


class AlarmContext(NamedTuple):
    subject: AlarmSubject
    state: str  # the alarm's new state
    episode_seen: bool  # this very transition (same alarm, same state timestamp) was handled before
    incident_open: bool  # an earlier ALARM of this alarm is not closed yet
    incident_paged: bool
    escalated: bool  # the last restart did not bring training back: a human owns it now
    nodes_in_repair: int  # node actions Medic took on the cluster within the repair window
    mode: Mode
    # Stall ALARM: what the probe's heartbeat says over the stall window, read back when the alarm fired
    # (None: not read or unavailable; the alarm is then the only evidence).
    recent_progress: Progress | None = None
    stall_minutes: int = 0
    # A restart of the job waiting for its proof of recovery (stall ALARM and OK); on OK, the progress since that
    # restart (None: unavailable).
    watch: RecoveryWatch | None = None
    progress_since_restart: Progress | None = None
    storm_held: bool = False  # the guardrails hold a storm back on the cluster and its summary page went out
    # Stall ALARM: the open proof-of-recovery watch of the job's incident, when one is open (a node repair holds the
    # job, or Medic's restart is being proved): that watch owns the incident (issue 27: one incident, one owner).
    owner: RecoveryWatch | None = None
    # Stall ALARM: a node the job ran on (the probe's per-node metrics) that HyperPod (or Medic, for jobs it could not
    # list) is repairing, as the reconciler last saw it: (its incident, its Slurm name, its status)
    node_in_repair: tuple[str, str, str] | None = None


class AlarmDecision(NamedTuple):
    plan: Plan
    action: Action
    outcome: Outcome
    reason: str
    page: bool = False
    close_incident: bool = False
    hold_for: str | None = None  # the node incident whose repair now owns the job (its watch is held)
    fault: Fault | None = None  # what Medic found, when it is not what the alarm says (None: the alarm's kind)
    why: Why | None = None  # the record's sub-reason (None: the outcome's only one)


def decide_alarm(ctx: AlarmContext) -> AlarmDecision:
    subject = ctx.subject
    if ctx.episode_seen:
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.DUPLICATE,
                             f"{subject.label} entering {ctx.state} was already handled (repeated delivery).")
    if ctx.state == "OK":
        if not ctx.incident_open:
            return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.IGNORED,
                                 f"{subject.label} is OK; no open incident.")
        if ctx.watch is not None and not made_progress(ctx.progress_since_restart):
            # OK is no proof by itself: an alarm treating missing data as not breaching goes OK when the
            # restarted job never publishes at all. Keep the incident and let the recovery check judge.
            steps = ctx.progress_since_restart.steps if ctx.progress_since_restart else None
            seen = f"{steps:.0f} steps" if steps is not None else "no progress readable"
            return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.IGNORED,
                                 f"{subject.label} is OK, but the probe reported {seen} since Medic's restart at "
                                 f"{ctx.watch.restarted_at:%H:%M} UTC: not proof of recovery; the recovery check "
                                 f"keeps watching until {ctx.watch.deadline:%H:%M} UTC.")
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.IGNORED,
                             f"{subject.label} is back to OK: incident closed.",
                             page=ctx.incident_paged, close_incident=True)
    if ctx.state != "ALARM":
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.IGNORED,
                             f"{subject.label} went to {ctx.state}; Medic acts on ALARM and OK only.")

    if subject.kind in STALL_KINDS:
        return _stalled(ctx)
    if subject.kind is AlarmKind.DIVERGENCE:
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.DEFERRED,
                             "Training diverged (non-finite or too high loss). Restarting from the checkpoint would "
                             "diverge again and waste the cluster; a human decides (change the learning rate, skip "
                             "the bad data, roll back further).", page=True, why=Why.HUMAN_DECIDES)
    if subject.kind is AlarmKind.SLOWDOWN:
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.DEFERRED,
                             "Training slowed down well below its recent throughput; a straggler node or a "
                             "degraded link is likely. A human decides whether to drain a node.", page=True,
                             why=Why.HUMAN_DECIDES)
    if ctx.storm_held:
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.DEFERRED,
                             "The guardrails are holding a failure storm back on this cluster and its summary page "
                             "went out: these failed nodes are that page's; no second page.", why=Why.OWNED_BY_REPAIR)
    if ctx.nodes_in_repair > 0:
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.DEFERRED,
                             f"HyperPod reports failed nodes and Medic is already repairing {ctx.nodes_in_repair} "
                             "node(s) of this cluster; no page.", why=Why.OWNED_BY_REPAIR)
    return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.DEFERRED,
                         "HyperPod has reported failed nodes for longer than a repair takes, and no Medic repair is "
                         "in flight (automatic recovery stuck, or no health event reached Medic).", page=True,
                         why=Why.HUMAN_DECIDES)


def _stalled(ctx: AlarmContext) -> AlarmDecision:
    cluster = ctx.subject.cluster
    progress = ctx.recent_progress
    finished = progress.finished_at if progress is not None else None
    if finished is not None:
        # A finished job stops publishing Heartbeat and its stall alarm treats the silence as breaching: the probe's
        # completion marker, with nothing reported after it, tells a job that ended cleanly from one that died.
        step = progress.latest_step
        at_step = f" at step {step:.0f}" if step is not None else ""
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.IGNORED,
                             f"{ctx.subject.label} is in ALARM, but the probe of {ctx.subject.job.name} published "
                             f"its completion marker (a clean close) at {finished:%Y-%m-%d %H:%M} UTC{at_step} and "
                             "has reported nothing since: the job finished; no requeue. A later run under the same "
                             "job name is watched again from its first report.", fault=Fault.COMPLETED)
    paused = progress.in_pause if progress is not None else None
    if paused is not None and ctx.subject.kind is AlarmKind.STALL:
        # The probe marks known pauses (`with probe.pause("checkpoint"):`) and says so in every flush during one; the
        # probe itself judges a pause that outlasts its limit a hang (the hang alarm), so this stall is no hang.
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.IGNORED,
                             f"{ctx.subject.label} is in ALARM, but the probe of {ctx.subject.job.name} reports a "
                             f"marked pause (a checkpoint save, an evaluation) in its latest report, at {paused:%H:%M} "
                             "UTC: the job said it would not step meanwhile; no requeue. The probe judges a pause "
                             "longer than its limit a hang itself (the hang alarm).")
    if made_progress(progress):
        # The heartbeat read back says the job is stepping (a late datapoint, a brief gap): a requeue would
        # throw away the work since the last checkpoint for nothing.
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.IGNORED,
                             f"{ctx.subject.label} is in ALARM, but the probe counted {progress.steps:.0f} steps "
                             f"in the last {ctx.stall_minutes} min (now at step {progress.last_step:.0f}): the job is "
                             "making progress; no requeue.")
    if progress is not None and progress.steps_before == 0 and progress.steps == 0 and progress.unsessioned_steps:
        # Heartbeats no probe session vouches for (a probe writes its session with every flush): written by
        # something else with PutMetricData on the namespace, or back-dated, or a probe too old to send its session.
        # They neither prove the job ran nor that it stalled: a human looks.
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.DEFERRED,
                             f"{ctx.subject.label} is in ALARM, but the {progress.unsessioned_steps:.0f} steps "
                             f"the probe's metrics show for {ctx.subject.job.name} in the {PROBE_HISTORY_HOURS} h "
                             "before came in minutes without exactly one probe session: not one probe's (forged, "
                             "back-dated, or a probe too old to send its session). Medic cannot tell whether the job "
                             "runs; no requeue.", page=True, why=Why.HUMAN_DECIDES)
    if progress is not None and progress.steps_before == 0 and progress.steps == 0:
        # A stall alarm treats missing data as breaching, so it also enters ALARM for a watched job that has not
        # started yet (a new deploy, a job configured before its launch): silence before any step is no stall.
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.IGNORED,
                             f"{ctx.subject.label} is in ALARM, but the probe has reported no step for "
                             f"{ctx.subject.job.name} in the {PROBE_HISTORY_HOURS} h before the stall window either: "
                             "the job has not started (or its probe does not report); nothing to requeue. The alarm "
                             "goes OK at the job's first step.")
    owner = ctx.owner
    if owner is not None and owner.held:
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.DEFERRED,
                             f"{ctx.subject.label} is in ALARM while a node repair holds {owner.job} "
                             f"({owner.held_by}): that repair owns this incident, so no requeue and no page; Medic "
                             "proves the job's recovery from when the node is back (or Slurm starts the job again).",
                             why=Why.OWNED_BY_REPAIR)
    if ctx.node_in_repair is not None:
        incident, name, status = ctx.node_in_repair
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.DEFERRED,
                             f"{ctx.subject.label} is in ALARM while {name}, a node {ctx.subject.job.name} ran "
                             f"on, is in repair ({status}, {incident}): that repair owns this incident, so no requeue "
                             "and no page; Medic proves the job's recovery from when the node is back.",
                             hold_for=incident, why=Why.OWNED_BY_REPAIR)
    if owner is not None:
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.DEFERRED,
                             f"{ctx.subject.label} is in ALARM while Medic proves {owner.job}'s recovery after "
                             f"its restart (attempt {owner.attempt}), until {owner.deadline:%H:%M} UTC: that proof "
                             "owns this incident (one page if training does not resume); no second requeue.",
                             why=Why.OWNED_BY_REPAIR)
    if ctx.escalated:
        return AlarmDecision(Plan.RECORD, Action.REQUEUE_JOB, Outcome.SUPPRESSED,
                             "The last restart did not bring training back and a human was paged; Medic does not "
                             "restart again until the stall alarm has been OK.", why=Why.BUDGET_SPENT)
    run = ctx.subject.run
    if run is not None and run.refused:
        return AlarmDecision(Plan.RECORD, Action.NONE, Outcome.DEFERRED,
                             f"Training of {ctx.subject.job.name} stalled, but Medic may not restart it: "
                             f"{run.refused}. A human decides.", page=True, why=Why.HUMAN_DECIDES)
    if cluster.orchestrator == "eks":
        return AlarmDecision(Plan.REQUEUE, Action.RESTART_JOB, Outcome.EXECUTED,
                             "Training stalled: restart the job's pods so it resumes from its last checkpoint.")
    return AlarmDecision(Plan.REQUEUE, Action.REQUEUE_JOB, Outcome.EXECUTED,
                         "Training stalled: requeue the job so it resumes from its last checkpoint.")


# --- proof of recovery


