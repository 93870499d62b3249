"""Restarts of training jobs on HyperPod EKS clusters, through the cluster's EKS agent (agent/medic_agent/eks).

Medic restarts only the jobs its config watches (`jobs[]` on an EKS cluster names each one's Kubernetes object):
the agent's RBAC reaches only their namespaces, and a request for any other object is rejected here, before
anything is queued. Restart means: the agent deletes the job's pods and the job's own controller recreates them
under its restart policy, so the script resumes from its checkpoint; the job object is never deleted (its spec
is the only copy). agent/README.md says what that means per kind.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import NamedTuple

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from medic.config_core import K8S_NAMESPACE_PATTERN, K8S_OBJECT_NAME_PATTERN, CoreConfig, Job, KubernetesJob
from medic.core.agent_command import AgentCommand, command_id_for
from medic.core.models import Fault
from medic.core.progress import Progress
from medic.core.text import quoted
from medic.flows.recovery.policy import made_progress


class NotWatched(LookupError):
    """A Kubernetes job Medic does not watch on that cluster: Medic never touches it."""


def eks_job_incident(cluster: str, job: KubernetesJob) -> str:
    """The incident and restart-budget lineage of a job on an EKS cluster: its Kubernetes object, so a stall
    alarm and an operator request for the same job share one budget."""
    return f"job:eks:{cluster}:{job.target}"


def watched_job(config: CoreConfig, cluster: str, namespace: str, name: str) -> Job:
    """The configured job whose object is `namespace/name` on the cluster; NotWatched (saying why) otherwise."""
    on_cluster = [job for job in config.jobs if job.cluster == cluster]
    for job in on_cluster:
        target = job.kubernetes_object()
        if (target.namespace, target.name) == (namespace, name):
            return job
    watched = sorted(f"{job.kubernetes_object().namespace}/{job.kubernetes_object().name}" for job in on_cluster)
    raise NotWatched(f"{namespace}/{name} is not a job Medic watches on {cluster} "
                     f"(watched: {', '.join(watched) if watched else 'none'}); Medic restarts only its configured "
                     "jobs, whose namespaces the agent's RBAC reaches")


def restart_command(cluster: str, incident: str, now: datetime, job: KubernetesJob,
                    request_id: str | None = None) -> AgentCommand:
    """`restart_job` for the EKS agent: the object's kind, namespace and name, already validated against
    Kubernetes' name rules by KubernetesJob (and again by the agent)."""
    return AgentCommand(command_id=command_id_for(cluster, incident, request_id), cluster=cluster,
                        kind="restart_job", incident=incident, issued_at=now, job_name=job.name,
                        namespace=job.namespace, job_kind=job.kind)


# --- the agent's node report (`agent#<cluster>/nodes`): the agent's word, validated like any input

# HyperPod's node label and its values (HyperPod developer guide, "Resilience-related Kubernetes labels by
# SageMaker HyperPod"): Unschedulable: deep health checks are running; UnschedulablePendingReboot/-Replacement:
# the node failed them (or the health-monitoring agent's checks) and needs a reboot/replacement, which HyperPod
# does itself "if automatic node recovery is enabled".
HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
HYPERPOD_CHECKING = "Unschedulable"
HYPERPOD_PENDING_REPAIR = ("UnschedulablePendingReboot", "UnschedulablePendingReplacement")
# HyperPod EKS nodes are named `hyperpod-i-<instance id>` (HyperPod developer guide, EKS node names).
HYPERPOD_NODE_NAME = re.compile(r"hyperpod-(i-[0-9a-f]{8,17})", re.ASCII)
MAX_REPORTED_NODES = 500
MAX_PODS_PER_NODE = 256
# metav1.Time is written as RFC 3339 ("2006-01-02T15:04:05Z07:00", Kubernetes API conventions, "Primitive types");
# the agent's client may add a fraction. pydantic alone would also take a number or a numeric string as epoch seconds.
RFC_3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})", re.ASCII)


class ReportedPod(BaseModel):
    model_config = ConfigDict(extra="ignore")

    namespace: str = Field(max_length=63, pattern=K8S_NAMESPACE_PATTERN)
    name: str = Field(max_length=253, pattern=K8S_OBJECT_NAME_PATTERN)
    job_kind: str = Field(max_length=32)
    job_name: str = Field(max_length=253, pattern=K8S_OBJECT_NAME_PATTERN)
    phase: str | None = Field(default=None, max_length=32)
    # With its zone, as Kubernetes writes metadata.deletionTimestamp (RFC 3339, UTC): a time without one is
    # refused with the report, never compared with Medic's clock.
    terminating_since: AwareDatetime | None = None

    @field_validator("terminating_since", mode="before")
    @classmethod
    def _rfc_3339(cls, value: object) -> object:
        if value is not None and not (isinstance(value, str) and RFC_3339.fullmatch(value)):
            raise ValueError(f"{quoted(str(value), 64)} is not a time as Kubernetes writes metadata.deletionTimestamp "
                             "(RFC 3339, with its zone)")
        return value


class ReportedNode(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(max_length=253, pattern=K8S_OBJECT_NAME_PATTERN)
    health_status: str | None = Field(default=None, max_length=64, pattern=r"^[A-Za-z]+$")
    ready: bool
    pods: list[ReportedPod] = Field(default=[], max_length=MAX_PODS_PER_NODE)

    @property
    def instance_id(self) -> str | None:
        found = HYPERPOD_NODE_NAME.fullmatch(self.name)
        return found.group(1) if found else None

    @property
    def state(self) -> str:
        """What is wrong, in one token: the health label's value, and NotReady when the kubelet is not Ready."""
        return "/".join(part for part in (self.health_status, None if self.ready else "NotReady") if part) or "ok"


class NodeReport(BaseModel):
    nodes: list[ReportedNode] = Field(max_length=MAX_REPORTED_NODES)


class AffectedJob(NamedTuple):
    job: Job
    pods: tuple[str, ...]


class NodeNotice(NamedTuple):
    """A node in trouble as the agent saw it, and the watched jobs with pods on it."""

    node: ReportedNode
    jobs: tuple[AffectedJob, ...]
    hyperpod_in_charge: bool  # deep health checks running, or a repair HyperPod's automatic recovery will do
    medic_action: str | None = None  # Medic's own reboot/replace of the node in progress

    @property
    def in_repair(self) -> bool:
        return self.hyperpod_in_charge or self.medic_action is not None

    @property
    def reason(self) -> str:
        jobs = "; ".join(f"{affected.job.name} (pods {', '.join(affected.pods[:8])}"
                         f"{', ...' if len(affected.pods) > 8 else ''})"
                         for affected in self.jobs) or "none Medic watches"
        where = f"The EKS agent reports node {self.node.name} {self.node.state}"
        if self.medic_action is not None:
            return (f"{where}: Medic's {self.medic_action} of it is in progress. Training pods on it: {jobs}; a job "
                    "its operator has not brought back within its recovery_minutes is restarted.")
        if self.hyperpod_in_charge:
            doing = ("running deep health checks" if self.node.health_status == HYPERPOD_CHECKING else
                     "repairing it (automatic node recovery)")
            return f"{where}: HyperPod is {doing}; Medic leaves the node to HyperPod. Training pods on it: {jobs}."
        return (f"{where}, and HyperPod will not repair it by itself: a human should look (kubectl describe node "
                f"{self.node.name}). Training pods on it: {jobs}.")


class StuckJob(NamedTuple):
    """A watched job with pods stuck Terminating on a NotReady node for longer than the guardrail allows."""

    job: Job
    pods: tuple[str, ...]
    since: datetime


def agent_node_incident(cluster: str, node: str) -> str:
    """The incident of a node as an EKS agent reports it: the agent's word, in a namespace of its own, so a report
    naming a real instance never takes the page of that node's own incident (`node:<cluster>:<instance id>`, which
    HyperPod's events and Medic's repairs own)."""
    return f"agent:{cluster}:node:{node}"


def agent_nodes_incident(cluster: str) -> str:
    """The one record of a sweep for the reported nodes past MAX_NOTICE_RECORDS."""
    return f"agent:{cluster}:nodes"


MAX_NOTICE_RECORDS = 10  # node notices recorded one by one per cluster per sweep; the rest in one summary record


def notices_to_record(notices: list[NodeNotice]) -> tuple[list[NodeNotice], list[NodeNotice]]:
    """The notices recorded one by one (at most MAX_NOTICE_RECORDS) and the rest, summarized in one record: those a
    human must look at first (watched jobs there and no repair under way), then those with watched jobs, then the
    others, each group by node name. A report of 500 nodes is 11 records, not 500."""
    ordered = sorted(notices, key=lambda notice: (not (notice.jobs and not notice.in_repair), not notice.jobs,
                                                  notice.node.name))
    return ordered[:MAX_NOTICE_RECORDS], ordered[MAX_NOTICE_RECORDS:]


def overflow_reason(overflow: list[NodeNotice], shown: int = 12) -> str:
    names = ", ".join(f"{notice.node.name} ({notice.node.state})" for notice in overflow[:shown])
    jobs = sorted({affected.job.name for notice in overflow for affected in notice.jobs})
    more = f", and {len(overflow) - shown} more" if len(overflow) > shown else ""
    with_jobs = (f" Watched jobs with pods on them: {', '.join(jobs)} (each watched: restarted if it has not trained "
                 "again within its recovery_minutes).") if jobs else " No watched job has pods on them."
    return (f"The EKS agent reports {len(overflow)} more nodes in trouble than Medic records one by one in a sweep "
            f"({MAX_NOTICE_RECORDS}): {names}{more}.{with_jobs} A report this large is a cluster-wide failure or a "
            "compromised agent: check the nodes (kubectl get nodes) and the agent.")


def stuck_but_not_stalled(stuck: StuckJob, progress: Progress) -> tuple[Fault, str] | None:
    """Why a job with pods reported stuck Terminating is not restarted (its fault and the reason), or None to
    restart it. A pod's ownerReference is its creator's word (a namespace tenant may write one naming a watched job,
    even with the job's uid, which anyone who may read the job can copy), so pods alone never restart a job: only
    when its probe shows no progress since the first stuck pod's deletion (and no completion marker)."""
    since = f"since {stuck.since:%H:%M} UTC"
    pods = f"{len(stuck.pods)} pod(s) of {stuck.job.name} reported stuck Terminating on a NotReady node {since} " \
           f"({', '.join(stuck.pods[:8])}{', ...' if len(stuck.pods) > 8 else ''})"
    finished = progress.finished_at
    if finished is not None:
        return Fault.COMPLETED, (f"{pods}, but the probe of {stuck.job.name} published its completion marker (a clean "
                                 f"close) at {finished:%Y-%m-%d %H:%M} UTC and has reported nothing since: the job "
                                 "finished; no restart.")
    if made_progress(progress):
        return Fault.PODS_STUCK_TERMINATING, (
            f"{pods}, but the probe counted {progress.steps:.0f} steps {since} (now at step {progress.last_step:.0f}): "
            "the job is training, so those pods are not what it runs on; no restart. A human may look at them "
            "(kubectl describe pod): a pod can name any job as its owner.")
    return None


def read_node_report(nodes_json: str) -> NodeReport:
    """The report item's `nodes` attribute → typed; ValueError (pydantic's) naming what is wrong."""
    return NodeReport.model_validate({"nodes": json.loads(nodes_json)})


def assess_node_report(report: NodeReport, jobs: list[Job], now: datetime, stuck_after: timedelta,
                       automatic_recovery: bool, medic_actions: dict[str, str] | None = None,
                       ) -> tuple[list[NodeNotice], list[StuckJob]]:
    """Which reported nodes to record (every one in trouble, with the watched jobs on it) and which watched jobs
    to restart because their pods have been stuck Terminating on a NotReady node for longer than ``stuck_after``
    (the restart's agent force-deletes them; on a Ready node, labelled or not, the kubelet finishes them). Never a
    job Medic does not watch. ``medic_actions``: the nodes (instance ids) Medic itself is repairing, and how
    (reboot_node, replace_node)."""
    by_object = {(job.kubernetes_object().kind, job.kubernetes_object().namespace, job.kubernetes_object().name): job
                 for job in jobs}
    notices: list[NodeNotice] = []
    stuck: dict[str, tuple[Job, list[str], datetime]] = {}
    for node in report.nodes:
        affected: dict[str, list[str]] = {}
        for pod in node.pods:
            job = by_object.get((pod.job_kind, pod.namespace, pod.job_name))
            if job is None:
                continue
            affected.setdefault(job.name, []).append(pod.name)
            # Only where no kubelet runs: the agent force-deletes nothing on a Ready node (Kubernetes docs, Pod
            # Lifecycle, "Forced Pod termination"), whatever HyperPod's label says.
            if pod.terminating_since is not None and not node.ready and now - pod.terminating_since >= stuck_after:
                _, pods, since = stuck.setdefault(job.name, (job, [], pod.terminating_since))
                pods.append(pod.name)
                stuck[job.name] = (job, pods, min(since, pod.terminating_since))
        in_charge = node.health_status == HYPERPOD_CHECKING or (
            automatic_recovery and node.health_status in HYPERPOD_PENDING_REPAIR)
        notices.append(NodeNotice(
            node=node, hyperpod_in_charge=in_charge, medic_action=(medic_actions or {}).get(node.instance_id or ""),
            jobs=tuple(AffectedJob(job=next(j for j in jobs if j.name == name), pods=tuple(sorted(pods)))
                       for name, pods in sorted(affected.items()))))
    return notices, [StuckJob(job=job, pods=tuple(sorted(pods)), since=since)
                     for job, pods, since in sorted(stuck.values(), key=lambda entry: entry[0].name)]
