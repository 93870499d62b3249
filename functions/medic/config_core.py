"""The sections of the Medic configuration every handler reads (the deploy mode, the guardrails, the clusters, the
watched jobs) and the constants the flows share.

:mod:`medic.config` composes these with the sections only synth and the job flows read (notify, the job sections:
training_jobs, batch_jobs, bedrock_jobs, job_failure_rules; the archive and concurrency settings) into the one
contract, :class:`medic.config.MedicConfig`, which synth validates whole and serializes into each handler's
``MEDIC_CONFIG``. A handler validates only :class:`CoreConfig` from it (``Deps.config``): a node event builds no
Batch or Bedrock model. The job flows read the rest through ``Deps.jobs_config``, validated where first needed.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator


class Strict(BaseModel):
    """Every config model: unknown keys are errors (a typo must not pass as a default), values frozen.

    An empty default is written as a value (`= []`, copied for each instance by pydantic) and a model default as a
    lambda, never `default_factory=list` or a class: pydantic inspects a factory's signature at class creation, which
    for a builtin costs a text-signature parse at every cold start (docs/architecture.md, "Cold start")."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# SageMaker HyperPod cluster names: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$
CLUSTER_NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
# A HyperPod cluster's id: the last part of its ARN (DescribeCluster's ClusterArn, botocore's ClusterArn pattern
# `arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12}`).
CLUSTER_ID_PATTERN = r"^[a-z0-9]{12}$"
CLUSTER_ARN_FOR_ID = (r"arn:(?P<partition>aws[a-z-]*):sagemaker:(?P<region>[a-z0-9-]+):(?P<account>[0-9]{12}):"
                      r"cluster/(?P<id>[a-z0-9]{12})")
# An EKS cluster's OIDC issuer URL (Amazon EKS user guide, "Create an IAM OIDC provider for your cluster":
# https://oidc.eks.<region>.amazonaws.com/id/<ID>; amazonaws.com.cn in the China regions).
EKS_OIDC_ISSUER_PATTERN = r"^https://oidc\.eks\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/id/[A-Za-z0-9]{1,64}$"
INSTANCE_GROUP_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"

# Instance group names AWS's own material gives Slurm controller and login nodes: the HyperPod developer
# guide's provisioning_parameters.json (my-controller-group, my-login-group) and the
# awsome-distributed-training samples (controller-machine, login-group); plus the short forms.
DEFAULT_PROTECTED_GROUPS = ("controller-machine", "login-group", "controller", "login",
                            "my-controller-group", "my-login-group")
# Of these, the controller names: a cluster set up by lifecycle scripts names its controller group only in
# provisioning_parameters.json, which no API returns.
KNOWN_CONTROLLER_GROUPS = frozenset({"controller-machine", "controller", "my-controller-group"})

# Kubernetes' own name rules (apimachinery validation: IsDNS1123Label for namespaces, IsDNS1123Subdomain for
# object names, at most 253 characters), full match, ASCII: https://kubernetes.io/docs/concepts/overview/working-with-objects/names/
K8S_NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
K8S_OBJECT_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# The job kinds an EKS agent restarts (agent/README.md says what restart means for each).
K8sJobKind = Literal["PyTorchJob", "HyperPodPyTorchJob", "Job"]

DeployMode = Literal["act", "dry_run"]  # the mode a deploy starts in (the run-time switch: core.mode.Mode)

# --- Delivery: how long an event may take to reach a handler, as the stack configures it (infra/components/
# function.py sets these very values), and the bounds Medic derives from them.
# A rule target's RetryPolicy.MaximumEventAgeInSeconds: EventBridge retries a delivery Lambda did not accept this
# long (60..86,400 s, 24 h by default: botocore's events model, shape MaximumEventAgeInSeconds; EventBridge user
# guide, "Event retry policy and using dead-letter queues"); Medic takes the maximum.
EVENTBRIDGE_MAX_EVENT_AGE = timedelta(hours=24)
# Then Lambda's own queue for the asynchronous invoke: throttled and failed runs are retried this long
# (EventInvokeConfig MaximumEventAgeInSeconds, 60..21,600 s: botocore's lambda model; Lambda developer guide, "How
# Lambda handles errors and retries with asynchronous invocation": up to 6 hours by default).
LAMBDA_MAX_EVENT_AGE = timedelta(hours=6)
# Between an event's `time` (when it happened) and EventBridge taking it in: AWS services put their events within
# seconds to minutes (assumption: no AWS page bounds it; an hour is far beyond what the bundled samples show).
EVENT_SOURCE_LAG = timedelta(hours=1)
# The oldest event any retry can hand a handler: older ones are redeliveries (a DLQ redrive, a copy sent by hand)
# and are rejected at the edge unless an operator's override says otherwise (core.models.MedicEvent).
EVENT_AGE_LIMIT = EVENTBRIDGE_MAX_EVENT_AGE + LAMBDA_MAX_EVENT_AGE + EVENT_SOURCE_LAG
# A dead-letter queue keeps an undelivered event this long (every DLQ of the stack: infra/components/function.py).
DEAD_LETTER_RETENTION = timedelta(days=14)
# The oldest event that can still come back at all: left in a dead-letter queue to the last day, then redriven
# under an operator's override. Beyond it no source holds the event, and no override is accepted.
REDELIVERY_WINDOW = DEAD_LETTER_RETENTION + EVENT_AGE_LIMIT
# De-duplication items (an event id claimed, an alarm transition handled, a job failure handled, a command's result
# recorded) live at least this long, so that nothing that can still be redelivered finds its claim gone.
DEDUPE_DAYS = -(-REDELIVERY_WINDOW // timedelta(days=1))  # whole days, rounded up: 16
# How far ahead of Medic's clock an event's time may be: clocks of AWS services and Lambda are NTP-synchronized; a
# later time is the sender's claim (PutEvents takes any `Time`) and could hide what happens until then.
EVENT_CLOCK_SKEW = timedelta(minutes=5)


class Guardrails(Strict):
    max_node_actions_per_hour: int = Field(default=4, ge=0, le=1000)
    max_fraction_in_repair: float = Field(default=0.25, gt=0, le=1)
    node_cooldown_minutes: int = Field(default=60, ge=1, le=24 * 60)
    max_job_restarts: int = Field(default=3, ge=0, le=100)
    # How long a node Medic acted on counts as "in repair" for the breaker.
    repair_minutes: int = Field(default=30, ge=1, le=24 * 60)
    # A node that fails again within this window after a reboot is replaced instead.
    reboot_escalation_hours: int = Field(default=24, ge=1, le=24 * 7)
    # EKS: a watched job's pod Terminating this long on a failed node is stuck: Medic restarts the job (under its
    # budget) and the agent force-deletes the pod. AWS's HyperPod EKS guide suggests a force delete for a pod
    # "stuck in termination for more than 30min" ("Manually quarantine, replace, or reboot a node").
    stuck_terminating_minutes: int = Field(default=30, ge=5, le=24 * 60)
    # Slurm: Medic drains a node before it reboots or replaces it and calls HyperPod once the agent reports the
    # drain (AWS's HyperPod Slurm guide: avoid changing a node's state during the operation); without a drain
    # result within this, it calls without draining and says so (the repair matters more).
    drain_deadline_seconds: int = Field(default=120, ge=30, le=900)
    # Operator requests ("Medic Requeue Job") acted on per cluster per clock hour; beyond: suppressed, one page.
    max_operator_requests_per_hour: int = Field(default=10, ge=0, le=1000)
    # A watched job's stall alarm restarts it at most once per this many minutes (after any restart of the job):
    # a stall that comes back sooner (or a fake recovery between) is held back and paged.
    stall_restart_interval_minutes: int = Field(default=60, ge=0, le=7 * 24 * 60)
    # A cluster's agent (every Slurm cluster's; an EKS cluster's when it has watched jobs) whose last heartbeat,
    # by DynamoDB's clock, is older than this is reported silent: one record and one page per silence, and one
    # when it reports again. Agents heartbeat every minute; the reconciler looks every 5 minutes.
    agent_silence_minutes: int = Field(default=15, ge=5, le=24 * 60)
    # An agent never heard from since Medic began watching the cluster (its first sweep after the deploy that
    # configured it) is reported after this grace: the time to install it.
    agent_install_grace_hours: int = Field(default=24, ge=1, le=24 * 14)
    # A repair loop (issue 32): one node position (NodeLogicalId, which a replacement keeps) repaired this many times,
    # by anyone (Medic, HyperPod's automatic node recovery, a person), within repair_loop_days pages once with its
    # history.
    repair_loop_count: int = Field(default=3, ge=2, le=100)
    repair_loop_days: int = Field(default=7, ge=1, le=30)


class GuardrailOverrides(Strict):
    """Per-cluster overrides: any guardrail left unset takes the global value."""

    max_node_actions_per_hour: int | None = Field(default=None, ge=0, le=1000)
    max_fraction_in_repair: float | None = Field(default=None, gt=0, le=1)
    node_cooldown_minutes: int | None = Field(default=None, ge=1, le=24 * 60)
    max_job_restarts: int | None = Field(default=None, ge=0, le=100)
    repair_minutes: int | None = Field(default=None, ge=1, le=24 * 60)
    reboot_escalation_hours: int | None = Field(default=None, ge=1, le=24 * 7)
    stuck_terminating_minutes: int | None = Field(default=None, ge=5, le=24 * 60)
    drain_deadline_seconds: int | None = Field(default=None, ge=30, le=900)
    max_operator_requests_per_hour: int | None = Field(default=None, ge=0, le=1000)
    stall_restart_interval_minutes: int | None = Field(default=None, ge=0, le=7 * 24 * 60)
    agent_silence_minutes: int | None = Field(default=None, ge=5, le=24 * 60)
    agent_install_grace_hours: int | None = Field(default=None, ge=1, le=24 * 14)
    repair_loop_count: int | None = Field(default=None, ge=2, le=100)
    repair_loop_days: int | None = Field(default=None, ge=1, le=30)


JOB_NAME_PATTERN = r"^[A-Za-z0-9._-]+$"
# How long a pattern-watched run may be silent (no `Run` report) and still be watched: CloudWatch's ListMetrics
# finds metrics with data in the past three hours at most (RecentlyActive: "PT3H" is its one value, CloudWatch API
# Reference, ListMetrics), and Metrics Insights alarms evaluate the latest three hours.
WATCH_RETENTION = timedelta(hours=3)


class WatchRule(Strict):
    """Watch by pattern (issue 33): every run on the cluster whose probe reports a `Job` starting with ``job_prefix``
    (and its run identity, `Run`) is watched from its first step, with no deploy; a `jobs[]` entry of that name wins."""

    job_prefix: str = Field(min_length=1, max_length=128, pattern=JOB_NAME_PATTERN)
    stall_minutes: int = Field(default=7, ge=1, le=24 * 60)  # as jobs[].stall_minutes
    recovery_minutes: int = Field(default=20, ge=5, le=24 * 60)  # as jobs[].recovery_minutes
    # EKS: the namespaces the operator opted in. A matching run in one of them is restarted (the agent's RBAC takes
    # the job kinds in these namespaces, without resourceNames: docs/security.md); in another, it is paged.
    namespaces: list[str] = []

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, namespaces: list[str]) -> list[str]:
        for namespace in namespaces:
            if not isinstance(namespace, str) or not re.match(K8S_NAMESPACE_PATTERN, namespace):
                raise ValueError(f"not a Kubernetes namespace: {namespace!r}")
        return namespaces


class Cluster(Strict):
    name: str = Field(pattern=CLUSTER_NAME_PATTERN)
    # The cluster id, the last part of its ARN (arn:aws:sagemaker:<region>:<account>:cluster/<id>):
    # IAM grants the node actions on exactly these ARNs. The full ARN is accepted too: its id is taken
    # (cluster_id_notices says so at synth).
    id: str = Field(pattern=CLUSTER_ID_PATTERN)
    orchestrator: Literal["slurm", "eks"]
    # What the deployer expects HyperPod does; DescribeCluster's NodeRecovery is the truth Medic follows
    # (a disagreement is paged once and shown by `medic status`).
    node_recovery: Literal["automatic", "none"] = "none"
    protected_groups: list[str] = Field(default_factory=lambda: list(DEFAULT_PROTECTED_GROUPS))
    # Slurm: Medic never reboots a Slurm controller node unless this says so (it never replaces one:
    # AWS refuses BatchReplaceClusterNodes on Slurm controller nodes). A controller is a node of a group
    # whose DescribeCluster SlurmConfig.NodeType is Controller, or of a group named as AWS names controller
    # groups (KNOWN_CONTROLLER_GROUPS). A protected group stays protected whatever this says.
    allow_controller_reboot: bool = False
    # A node position in a repair loop (guardrails.repair_loop_count repairs within repair_loop_days) is taken out of
    # service after its next repair: drained in Slurm with Medic's reason, cordoned on EKS, until `medic release`
    # (issue 32). Off: the loop's page only.
    quarantine_repeat_offenders: bool = False
    guardrails: GuardrailOverrides = Field(default_factory=lambda: GuardrailOverrides())
    # EKS clusters with Container Insights: the EKS cluster's name; its cluster_failed_node_count joins Medic's
    # own FailedNodes gauge (every cluster's failed-node alarm) as a second witness.
    eks_cluster_name: str | None = Field(default=None, pattern=r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
    # EKS clusters whose agent gets AWS credentials through IRSA instead of EKS Pod Identity: the EKS cluster's OIDC
    # issuer, as `aws eks describe-cluster --name <eks> --query cluster.identity.oidc.issuer` prints it. The agent
    # role then also trusts that IAM OIDC provider (sts:AssumeRoleWithWebIdentity for the agent's ServiceAccount).
    eks_oidc_issuer: str | None = Field(default=None, pattern=EKS_OIDC_ISSUER_PATTERN)
    # Watch by pattern: the runs of this cluster watched without a jobs[] entry (issue 33)
    watch: list[WatchRule] = []

    @field_validator("id", mode="before")
    @classmethod
    def _id_from_arn(cls, value: object) -> object:
        found = re.fullmatch(CLUSTER_ARN_FOR_ID, value) if isinstance(value, str) else None
        return found.group("id") if found else value

    @model_validator(mode="after")
    def _eks_only(self) -> Cluster:
        if self.eks_oidc_issuer is not None and self.orchestrator != "eks":
            raise ValueError(f"eks_oidc_issuer: only an EKS cluster's agent uses IRSA ({self.name!r} is "
                             f"orchestrated by {self.orchestrator})")
        if self.eks_cluster_name is not None and self.orchestrator != "eks":
            raise ValueError(f"eks_cluster_name: only a HyperPod cluster orchestrated by EKS has an EKS cluster "
                             f"({self.name!r} is orchestrated by {self.orchestrator}): remove it")
        prefixes = [rule.job_prefix for rule in self.watch]
        for index, rule in enumerate(self.watch):
            if rule.namespaces and self.orchestrator != "eks":
                raise ValueError(f"watch.{index}.namespaces: only an EKS cluster's runs have namespaces "
                                 f"({self.name!r} is orchestrated by {self.orchestrator}): remove it")
            if rule.job_prefix in prefixes[:index]:
                raise ValueError(f"watch.{index}.job_prefix: {rule.job_prefix!r} is given twice")
        return self

    def watch_rule(self, job_name: str) -> WatchRule | None:
        """The most specific watch rule whose prefix the run's name starts with; None: not watched by pattern."""
        matching = [rule for rule in self.watch if job_name.startswith(rule.job_prefix)]
        return max(matching, key=lambda rule: len(rule.job_prefix), default=None)

    @property
    def opted_in_namespaces(self) -> tuple[str, ...]:
        """EKS: every namespace a watch rule opts in (the agent's RBAC covers the job kinds there)."""
        return tuple(sorted({namespace for rule in self.watch for namespace in rule.namespaces}))

    @property
    def eks_oidc_provider(self) -> str | None:
        """The IAM OIDC provider's name for the issuer (its ARN's resource part, and the condition keys' prefix)."""
        return self.eks_oidc_issuer.removeprefix("https://") if self.eks_oidc_issuer else None

    @field_validator("protected_groups")
    @classmethod
    def _groups(cls, groups: list[str]) -> list[str]:
        for group in groups:
            if not re.match(INSTANCE_GROUP_PATTERN, group):
                raise ValueError(f"not an instance group name: {group!r}")
        return groups


class KubernetesJob(Strict):
    """A training job's object on an EKS cluster, as the agent names it."""

    namespace: str = Field(pattern=K8S_NAMESPACE_PATTERN)
    kind: K8sJobKind
    name: str = Field(max_length=253, pattern=K8S_OBJECT_NAME_PATTERN)

    @property
    def target(self) -> str:
        """The agent's name for it: a restart_job command's target (`PyTorchJob/kubeflow/bert-xl`)."""
        return f"{self.kind}/{self.namespace}/{self.name}"


class Job(Strict):
    """A long-running job the training probe reports on; Medic's alarms watch its metrics."""

    name: str = Field(min_length=1, max_length=128, pattern=JOB_NAME_PATTERN)
    cluster: str
    # Stall: no training step (probe heartbeat) for this long: a dead process, a hang before the probe judges (its
    # warm-up), a probe too old to judge, a marked pause (stood down when the probe says so). A live process's hang is
    # the probe's own `Stalled` verdict (the hang alarm), within about a minute. Default 7: the alarm fires about
    # stall_minutes + 2 after the last step, before PyTorch's NCCL watchdog (10 minutes) ends a hung job.
    stall_minutes: int = Field(default=7, ge=1, le=24 * 60)
    # Divergence: a NaN/inf loss always; a loss above this ceiling too, when set.
    loss_ceiling: float | None = None
    # Slowdown: throughput below this fraction of its recent level (the probe's baseline) ...
    slowdown_fraction: float = Field(default=0.6, gt=0, lt=1)
    # ... for this many minutes.
    slowdown_minutes: int = Field(default=10, ge=1, le=24 * 60)
    # Proof of recovery: after Medic restarts the job, training must resume within this.
    recovery_minutes: int = Field(default=20, ge=5, le=24 * 60)
    # EKS clusters only: the Kubernetes object the agent restarts (its namespace, kind and name; the name is
    # the job's `name` unless object_name says otherwise). Left unset here, defaulted by `kubernetes_object`.
    namespace: str | None = Field(default=None, pattern=K8S_NAMESPACE_PATTERN)
    kind: K8sJobKind | None = None
    object_name: str | None = Field(default=None, max_length=253, pattern=K8S_OBJECT_NAME_PATTERN)
    # EKS clusters, a PyTorchJob whose replica specs say restartPolicy: ExitCode: true when the job's launcher exits
    # with 128 or more on SIGTERM (a deleted pod's signal), the only exit codes on which the training-operator
    # recreates the pod (kubeflow/training-operator IsRetryableExitCode); false: the agent refuses to restart it.
    launcher_exits_128_or_more_on_sigterm: bool = False

    def kubernetes_object(self) -> KubernetesJob:
        """The job's Kubernetes object on an EKS cluster (defaults: namespace `default`, kind PyTorchJob)."""
        return KubernetesJob(namespace=self.namespace or "default", kind=self.kind or "PyTorchJob",
                             name=self.object_name or self.name)

    @field_validator("loss_ceiling")
    @classmethod
    def _finite(cls, ceiling: float | None) -> float | None:
        if ceiling is not None and not (-1e300 < ceiling < 1e300):
            raise ValueError(f"loss_ceiling must be a finite number, got {ceiling!r}")
        return ceiling


# The sections of the contract (medic.config.MedicConfig) that CoreConfig leaves to synth and the job flows: a
# handler reading MEDIC_CONFIG skips them (they were validated at synth), and reads them through Deps.jobs_config.
SECTIONS_ELSEWHERE = frozenset({"notify", "training_jobs", "batch_jobs", "bedrock_jobs", "job_failure_rules",
                                "event_archive_days", "reserved_concurrency"})


class CoreConfig(Strict):
    """The sections every handler reads, as it reads them from ``MEDIC_CONFIG`` (``from_env``)."""

    mode: DeployMode = "act"
    guardrails: Guardrails = Field(default_factory=lambda: Guardrails())
    clusters: list[Cluster] = Field(min_length=1)
    jobs: list[Job] = []
    # The MEDIC_CONFIG it was read from, and which of the sections it skipped are set (`configures`).
    _source: str = PrivateAttr(default="")
    _set_elsewhere: frozenset[str] = PrivateAttr(default=frozenset())

    @model_validator(mode="before")
    @classmethod
    def _removed_keys(cls, data: object) -> object:
        # One layer number does not hold in every partition and region, nor name the tested release.
        if isinstance(data, dict) and "powertools_layer_version" in data:
            raise ValueError("powertools_layer_version is no longer used: remove it. The stack resolves the "
                             "Powertools layer of the aws-lambda-powertools version pinned in requirements.txt "
                             "from Powertools' public SSM parameter when it deploys")
        return data

    @model_validator(mode="after")
    def _cross_references(self) -> CoreConfig:
        names = [cluster.name for cluster in self.clusters]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise ValueError(f"clusters: duplicate cluster name(s) {duplicated}")
        ids = [cluster.id for cluster in self.clusters]
        same_id = sorted({cluster_id for cluster_id in ids if ids.count(cluster_id) > 1})
        if same_id:
            named = {cluster_id: [c.name for c in self.clusters if c.id == cluster_id] for cluster_id in same_id}
            raise ValueError(f"clusters: duplicate cluster id(s) {named}: each HyperPod cluster has its own id "
                             "(DescribeCluster's ClusterArn ends in it)")
        jobs = [job.name for job in self.jobs]
        duplicated_jobs = sorted({name for name in jobs if jobs.count(name) > 1})
        if duplicated_jobs:
            raise ValueError(f"jobs: duplicate job name(s) {duplicated_jobs}")
        for index, job in enumerate(self.jobs):
            if job.cluster not in names:
                raise ValueError(
                    f"jobs.{index}.cluster: {job.cluster!r} is not a configured cluster (known: {names})"
                )
            _check_kubernetes_keys(index, job, self.cluster(job.cluster))
        objects = [(job.cluster, job.kubernetes_object().target) for job in self.jobs
                   if self.cluster(job.cluster).orchestrator == "eks"]
        twice = sorted({target for cluster, target in objects if objects.count((cluster, target)) > 1})
        if twice:
            raise ValueError(f"jobs: more than one job names the same Kubernetes object {twice}")
        return self

    def cluster(self, name: str) -> Cluster | None:
        return next((cluster for cluster in self.clusters if cluster.name == name), None)

    def job(self, name: str) -> Job | None:
        return next((job for job in self.jobs if job.name == name), None)

    def watched_names(self, cluster: str) -> tuple[str, ...]:
        """The names of the jobs watched on a cluster (`jobs:` entries): on Slurm, the job names operator requests
        and stall restarts may requeue."""
        return tuple(sorted(job.name for job in self.jobs if job.cluster == cluster))

    def guardrails_for(self, cluster: Cluster) -> Guardrails:
        overrides = cluster.guardrails.model_dump(exclude_none=True)
        return self.guardrails.model_copy(update=overrides)

    def configures(self, section: str) -> bool:
        """Whether a section is set (non-empty), whether or not this model reads it (``training_jobs``, ...)."""
        if section in type(self).model_fields:
            return bool(getattr(self, section))
        return section in self._set_elsewhere

    @property
    def source(self) -> str:
        """The whole config as JSON (MEDIC_CONFIG): the one it was read from, else its own sections."""
        return self._source or self.model_dump_json(exclude_defaults=True)

    @classmethod
    def from_env(cls, value: str) -> CoreConfig:
        """The handlers' config from MEDIC_CONFIG (the whole contract, validated at synth): this model's sections
        validated, the others (SECTIONS_ELSEWHERE) left unread. Any other key is an error, as at synth."""
        data = json.loads(value)
        if not isinstance(data, dict):
            return cls.model_validate_json(value)  # the model's own error for a config that is not an object
        config = cls.model_validate({key: item for key, item in data.items() if key not in SECTIONS_ELSEWHERE})
        config._source = value
        config._set_elsewhere = frozenset(key for key in SECTIONS_ELSEWHERE if data.get(key))
        return config


# The canary (flows/canary): each reconciler run puts one event with this source and detail-type on the default bus;
# a rule takes it (its own stack's: detail.ledger, the ledger table's name) to the node remediation function, which
# notes its arrival. The reconciler publishes how long ago the last one arrived; the CanaryLate alarm pages past
# CANARY_LATE (three reconciler runs without one).
CANARY_SOURCE = "medic.canary"
CANARY_DETAIL_TYPE = "Medic Canary"
CANARY_LATE = timedelta(minutes=15)

# Medic's alarms are named medic-<kind>-<job or cluster>: the rule takes only these, and the alarm
# handler reads kind and subject back from the name (kinds never contain each other as prefixes).
ALARM_PREFIX = "medic-"
JOB_ALARM_KINDS = ("stall", "hang", "divergence", "slowdown")
CLUSTER_ALARM_KINDS = ("failed-nodes",)


def alarm_name(kind: str, subject: str) -> str:
    if kind not in JOB_ALARM_KINDS + CLUSTER_ALARM_KINDS:
        raise ValueError(f"unknown alarm kind {kind!r}")
    return f"{ALARM_PREFIX}{kind}-{subject}"


def _check_kubernetes_keys(index: int, job: Job, cluster: Cluster | None) -> None:
    given = [key for key in ("namespace", "kind", "object_name") if getattr(job, key) is not None]
    if cluster is not None and cluster.orchestrator != "eks" and given:
        raise ValueError(f"jobs.{index}.{given[0]}: only a job on an EKS cluster names a Kubernetes object "
                         f"({job.cluster!r} is orchestrated by {cluster.orchestrator})")
    if job.launcher_exits_128_or_more_on_sigterm and cluster is not None and (
            cluster.orchestrator != "eks" or job.kubernetes_object().kind != "PyTorchJob"):
        where = (f"{job.cluster!r} is orchestrated by {cluster.orchestrator}" if cluster.orchestrator != "eks"
                 else f"this job's kind is {job.kubernetes_object().kind}")
        raise ValueError(f"jobs.{index}.launcher_exits_128_or_more_on_sigterm: only a PyTorchJob on an EKS cluster "
                         f"has restartPolicy ExitCode ({where})")
    if cluster is not None and cluster.orchestrator == "eks" and job.object_name is None \
            and not re.match(K8S_OBJECT_NAME_PATTERN, job.name):
        raise ValueError(f"jobs.{index}.name: {job.name!r} is not a Kubernetes object name (lowercase letters, "
                         f"digits, '-' and '.'): give the job's object name in jobs.{index}.object_name")
