"""Carry out a validated restart_job through the Kubernetes API, and report nodes in trouble.

Restart = delete the job's pods so that the job's own controller recreates them and the training script
resumes from its checkpoint. The job object is never deleted, patched or updated: its spec is the only copy.
Per kind (sources in agent/README.md, "HyperPod EKS"):
  PyTorchJob          the training-operator reconciles each replica index and creates the missing pod again,
                      same name (<job>-master-0, <job>-worker-<i>), under restartPolicy OnFailure or Always (or
                      ExitCode with a launcher that exits >= 128 on SIGTERM)
  HyperPodPyTorchJob  the HyperPod training operator recreates the job's pods
  Job                 the Job controller creates replacement pods (new random suffix); each deleted pod counts
                      as a failure against the Job's backoffLimit
Checks before anything is deleted: the job is one this agent watches (its ConfigMap), the job object exists
(GET: 404 → failed "job not found"; never a guess from pod names), the job has not finished, its controller would
recreate the pods rather than fail the job (policy.py: restartPolicy, backoffLimit; a refusal is `refused` with
its code), and each pod's controller ownerReference is that job's uid. Each DELETE carries a uid precondition, so
a pod replaced meanwhile is not touched.

Pods that never go away (kubeflow/trainer issues 2072, 2000): a pod of the job that is already Terminating,
whose deletionTimestamp (the end of its grace period, set by the API server when the deletion was asked for)
is more than `terminating_grace_seconds` ago, on a node whose Ready condition is not True, is deleted with
gracePeriodSeconds=0: the kubelet that would confirm it is gone, and the operator cannot recreate a pod of the
same name while it exists. Listed in the result's `force_deleted`. Never on a Ready node, even one HyperPod
labels unschedulable: its kubelet is alive and may still be stopping the containers, and a force deletion lets a
second copy of the rank start beside them (Kubernetes docs, Pod Lifecycle, "Forced Pod termination").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from medic_agent.eks import policy
from medic_agent.eks.commands import ANY_JOB, JOB_KINDS, JobKind, RestartJob, WatchedJob, is_label_value
from medic_agent.eks.kube import CONFLICT, FORBIDDEN, NOT_FOUND, Kube, KubeError

log = logging.getLogger("medic_agent.eks")
EXECUTED, FAILED, REFUSED = "executed", "failed", "refused"
HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
SCHEDULABLE = "Schedulable"
# HyperPod's values (SageMaker Developer Guide, HyperPod EKS resiliency: node health labels)
HEALTH_STATES = ("Schedulable", "Unschedulable", "UnschedulablePendingReplacement", "UnschedulablePendingReboot")
DEFAULT_TERMINATING_GRACE_SECONDS = 300
NODES_ITEM_LIMIT = 90_000  # bytes of the `nodes` attribute: the item stays under DynamoDB's 400 KB, Medic's 100 KB


@dataclass(frozen=True)
class Result:
    status: str  # executed | failed | refused (the job's own rules say a restart would end it: nothing deleted)
    message: str
    pods: tuple[str, ...] = field(default=())  # deleted (graceful)
    force_deleted: tuple[str, ...] = field(default=())  # deleted with gracePeriodSeconds=0
    refusal: str = ""  # refused: policy.py's code (job_finished, restart_policy_never, ...)
    held: bool | None = None  # quarantine_node: whether Medic's cordon holds the node (cordon.py)
    resumed: bool | None = None  # release_node: whether it was uncordoned


def parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def node_ready(node: dict) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False  # no Ready condition: the node controller has not heard from its kubelet


def health_status(node: dict) -> str | None:
    return ((node.get("metadata") or {}).get("labels") or {}).get(HEALTH_LABEL)


def node_in_trouble(node: dict) -> bool:
    """NotReady, or labelled by HyperPod with anything but Schedulable (a node without the label is not a
    HyperPod-managed node: only its Ready condition counts)."""
    status = health_status(node)
    return not node_ready(node) or (status is not None and status != SCHEDULABLE)


def controller_of(pod: dict) -> dict | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def owned_by(pod: dict, spec: JobKind, job: dict) -> bool:
    ref = controller_of(pod)
    meta = job.get("metadata") or {}
    return bool(ref and meta.get("uid") and ref.get("uid") == meta.get("uid") and ref.get("kind") == spec.kind
                and ref.get("apiVersion") == spec.api_version and ref.get("name") == meta.get("name"))


def _name(obj: dict) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _api_failed(error: KubeError, what: str) -> Result:
    if error.status == FORBIDDEN:
        return Result(FAILED, f"forbidden: the agent's RBAC does not grant {what} ({error.message or error.reason})")
    return Result(FAILED, f"{what} failed: {error}")


def _refused(refusal: policy.Refusal) -> Result:
    return Result(REFUSED, refusal.message, refusal=refusal.code)  # the command's target names the job


def restart(kube: Kube, action: RestartJob, *, watched: Iterable[WatchedJob], now: datetime,
            terminating_grace_seconds: float = DEFAULT_TERMINATING_GRACE_SECONDS) -> Result:
    spec = action.spec
    watched = list(watched)
    entry = next((job for job in watched
                  if (job.namespace, job.kind, job.name) == (action.namespace, action.job_kind, action.job_name)), None)
    if entry is None:  # a namespace opted in for Medic's watch rules: any job of the kind there (issue 33)
        entry = next((job for job in watched
                      if (job.namespace, job.kind, job.name) == (action.namespace, action.job_kind, ANY_JOB)), None)
    if entry is None:
        return Result(FAILED, f"{action.target} is not among the jobs this agent watches (its watched-jobs "
                              "ConfigMap): not touched")
    try:
        job = kube.get_job(spec, action.namespace, action.job_name)
    except KubeError as error:
        if error.status == NOT_FOUND:
            return Result(FAILED, f"job not found: {action.target}")
        return _api_failed(error, f"get {spec.plural}.{spec.group or 'core'} {action.job_name} in "
                                   f"{action.namespace}")
    refusal = policy.finished(spec.kind, job) or (
        policy.restart_policy(job, exit_code_restartable=entry.launcher_exits_128_or_more_on_sigterm)
        if spec.kind == "PyTorchJob" else None)
    if refusal is not None:
        return _refused(refusal)
    try:
        pods = _job_pods(kube, spec, action, job)
    except KubeError as error:
        return _api_failed(error, f"list pods in {action.namespace}")
    if not pods:
        return Result(FAILED, f"{action.target} has no pods (none whose controller is the job's uid "
                              f"{(job.get('metadata') or {}).get('uid')}): nothing to restart")
    if spec.kind == "Job":
        refusal = policy.backoff(job, [pod for pod in pods if not (pod.get("metadata") or {}).get("deletionTimestamp")])
        if refusal is not None:
            return _refused(refusal)
    ready: dict[str, bool] | None = None  # node name -> its Ready condition is True (listed when first needed)
    deleted: list[str] = []
    forced: list[str] = []
    notes: list[str] = []
    for pod in pods:
        name, meta = _name(pod), pod.get("metadata") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        terminating = parse_time(meta.get("deletionTimestamp"))
        grace: int | None = None
        if terminating is not None:
            overdue = (now - terminating).total_seconds()
            if overdue < terminating_grace_seconds:
                notes.append(f"{name} already terminating")
                continue
            if ready is None:
                try:
                    ready = {_name(item): node_ready(item) for item in kube.list_nodes()}
                except KubeError as error:
                    return _partial(_api_failed(error, "list nodes"), deleted, forced)
            if node not in ready:
                notes.append(f"{name} terminating for {int(overdue)} s past its grace period on node {node}, which "
                             "is gone from the API: left to the pod garbage collector")
                continue
            if ready[node]:
                notes.append(f"{name} terminating for {int(overdue)} s past its grace period on node {node}, "
                             "which is Ready: left to its kubelet (never force-deleted where a kubelet runs)")
                continue
            grace = 0
        try:
            kube.delete_pod(action.namespace, name, str(meta.get("uid", "")), grace_period_seconds=grace)
        except KubeError as error:
            if error.status == NOT_FOUND:
                notes.append(f"{name} already gone")
                continue
            if error.status == CONFLICT:
                notes.append(f"{name} was replaced meanwhile (uid changed): not deleted")
                continue
            return _partial(_api_failed(error, f"delete pod {name} in {action.namespace}"), deleted, forced)
        (forced if grace == 0 else deleted).append(name)
        if grace is None:
            if ready is None:
                try:
                    ready = {_name(item): node_ready(item) for item in kube.list_nodes()}
                except KubeError:
                    ready = {}  # only for the note below: the deletion is done
            if ready.get(node) is False:
                notes.append(f"{name} is on node {node}, NotReady: it may stay Terminating; a restart "
                             f"{int(terminating_grace_seconds)} s after its grace period force-deletes it")
    if not deleted and not forced:
        return Result(FAILED, "; ".join([f"{action.target}: no pod deleted", *notes]))
    parts = [f"{action.target}: deleted {len(deleted)} pod(s) for its controller to recreate"]
    if forced:
        parts.append(f"force-deleted {len(forced)} pod(s) stuck terminating on a NotReady node")
    return Result(EXECUTED, "; ".join(parts + notes), tuple(deleted), tuple(forced))


def _partial(result: Result, deleted: list[str], forced: list[str]) -> Result:
    if deleted or forced:
        done = ", ".join(deleted + forced)
        return Result(result.status, f"{result.message} (after deleting {done})", tuple(deleted), tuple(forced))
    return result


def _job_pods(kube: Kube, spec: JobKind, action: RestartJob, job: dict) -> list[dict]:
    """The job's pods: by its controller's label (the first selector that finds any) when the name can be a
    label value, else the namespace's pods; in every case only those whose controller is this job's uid."""
    selectors = [selector.format(name=action.job_name) for selector in spec.selectors] \
        if is_label_value(action.job_name) else []
    for selector in selectors or [None]:
        pods = [pod for pod in kube.list_pods(action.namespace, selector) if owned_by(pod, spec, job)]
        if pods:
            return sorted(pods, key=_name)
    return []


# --- the node report (issue item 6)

def training_job_of(pod: dict) -> tuple[str, str] | None:
    """(job kind, job name) as the pod's controller ownerReference claims it, when that is one of the three job
    kinds: a claim only (anyone who may create pods in the namespace writes its ownerReferences), never trusted
    without the job's uid (node_report)."""
    ref = controller_of(pod)
    if not ref:
        return None
    spec = JOB_KINDS.get(str(ref.get("kind")))
    if spec is None or ref.get("apiVersion") != spec.api_version:
        return None
    return spec.kind, str(ref.get("name", ""))


def _watched_objects(kube: Kube, watched: Iterable[WatchedJob]) -> list[tuple[WatchedJob, JobKind, dict]]:
    """Each watched job's object as the API server has it now (its uid): a job not found is left out."""
    found = []
    for entry in watched:
        spec = JOB_KINDS.get(entry.kind)
        if spec is None or entry.name == ANY_JOB:  # an opted-in namespace names no object to read
            continue
        try:
            found.append((entry, spec, kube.get_job(spec, entry.namespace, entry.name)))
        except KubeError as error:
            if error.status != NOT_FOUND:
                raise
    return found


def node_report(kube: Kube, watched: Iterable[WatchedJob]) -> list[dict]:
    """Every node in trouble (NotReady, or health label other than Schedulable) with the watched jobs' pods on it:
    a pod counts as a watched job's only when its controller ownerReference is that job's uid (the object read now),
    kind, apiVersion and name, as a restart deletes only such pods. A pod whose ownerReference merely names a watched
    job (a namespace tenant may write any ownerReference on a pod it creates: Kubernetes docs, "Owners and
    Dependents") is not reported, so it can never make Medic restart the job (logged)."""
    nodes = [node for node in kube.list_nodes() if node_in_trouble(node)]
    if not nodes:
        return []
    jobs = _watched_objects(kube, list(watched))
    on_node: dict[str, list[dict]] = {}
    for namespace in sorted({entry.namespace for entry, _, _ in jobs}):
        for pod in kube.list_pods(namespace):
            node = (pod.get("spec") or {}).get("nodeName")
            claimed = training_job_of(pod)
            if not node or claimed is None:
                continue
            owner = next((entry for entry, spec, job in jobs
                          if entry.namespace == namespace and owned_by(pod, spec, job)), None)
            if owner is None:
                if any((entry.namespace, entry.kind, entry.name) == (namespace, *claimed) for entry, _, _ in jobs):
                    log.warning("pod claims a watched job but is not its", extra={"fields": {
                        "namespace": namespace, "pod": _name(pod), "claims": f"{claimed[0]}/{claimed[1]}",
                        "node": node}})
                continue
            meta = pod.get("metadata") or {}
            on_node.setdefault(node, []).append({
                "namespace": namespace, "name": _name(pod), "job_kind": owner.kind, "job_name": owner.name,
                "phase": (pod.get("status") or {}).get("phase"),
                "terminating_since": meta.get("deletionTimestamp")})
    return [{"name": _name(node), "health_status": health_status(node), "ready": node_ready(node),
             "pods": sorted(on_node.get(_name(node), []), key=lambda pod: (pod["namespace"], pod["name"]))}
            for node in sorted(nodes, key=_name)]


def encode_nodes(nodes: list[dict], limit: int = NODES_ITEM_LIMIT) -> tuple[str, bool]:
    """The report as the JSON string the ledger item holds, and whether it had to be truncated to fit."""
    text = json.dumps(nodes, separators=(",", ":"), sort_keys=True)
    if len(text.encode()) <= limit:
        return text, False
    low, high = 0, len(nodes)  # the most nodes (in order) whose JSON fits: binary search
    while low < high:
        middle = (low + high + 1) // 2
        if len(json.dumps(nodes[:middle], separators=(",", ":"), sort_keys=True).encode()) <= limit:
            low = middle
        else:
            high = middle - 1
    return json.dumps(nodes[:low], separators=(",", ":"), sort_keys=True), True
