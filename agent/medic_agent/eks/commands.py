"""`restart_job` commands from Medic for an EKS cluster: parse and validate a queue message. Pure: no I/O.

Message body (JSON): {"command_id", "cluster", "kind": "restart_job", "incident", "issued_at", "namespace",
"job_kind", "job_name"}. The command's target, which the ledger claim compares with Medic's
`command#<cluster>#<id>/issued` item and the result carries, is "<job_kind>/<namespace>/<job_name>".

Every name is checked against Kubernetes' own rules before it is used in a request path
(k8s.io/apimachinery/pkg/util/validation/validation.go):
  namespace  IsDNS1123Label:      at most 63 characters, [a-z0-9]([-a-z0-9]*[a-z0-9])?
  job name   IsDNS1123Subdomain:  at most 253 characters, DNS-1123 labels joined by '.'
Full match, ASCII only (`$` would accept a trailing newline; re.ASCII keeps `[a-z]` ASCII).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from medic_agent.commands import COMMAND_ID, Refused, _text, matches, read_body, shown

DNS1123_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?", re.ASCII)
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*", re.ASCII)
DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
KIND = "restart_job"
EXIT_CODE_KEY = "launcher_exits_128_or_more_on_sigterm"


@dataclass(frozen=True)
class JobKind:
    """Where a job kind lives in the API, and how its controller labels the pods it creates."""

    kind: str
    group: str  # "" is the core group
    version: str
    plural: str
    # label selectors (first that finds pods wins) for the job's pods; () = list the namespace's pods and keep
    # those whose controller ownerReference is the job (the ownerReference check is made for every kind)
    selectors: tuple[str, ...]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


# Kubeflow training-operator (kubeflow/common pkg/apis/common/v1/constants.go): every pod it creates for a job
# carries training.kubeflow.org/job-name=<job>, with replica-type, replica-index and operator-name labels.
# batch/v1 Job: the Job controller labels its pods batch.kubernetes.io/job-name=<job> (Kubernetes >= 1.27) and
# the legacy job-name=<job> (kept for compatibility; Kubernetes docs, "Jobs": "Job labels").
# HyperPodPyTorchJob (aws/sagemaker-hyperpod-cli, src/sagemaker/hyperpod/training/hyperpod_pytorch_job.py:
# group sagemaker.amazonaws.com, version v1, plural hyperpodpytorchjobs): AWS documents no pod label for it (its
# own CLI finds a job's pods by the name prefix "<job>-pod"), so its pods are found by ownerReference alone.
JOB_KINDS: dict[str, JobKind] = {
    "PyTorchJob": JobKind("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs",
                          ("training.kubeflow.org/job-name={name}",)),
    "HyperPodPyTorchJob": JobKind("HyperPodPyTorchJob", "sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs", ()),
    "Job": JobKind("Job", "batch", "v1", "jobs", ("batch.kubernetes.io/job-name={name}", "job-name={name}")),
}


def is_namespace(value: object) -> bool:
    return isinstance(value, str) and len(value) <= DNS1123_LABEL_MAX and matches(DNS1123_LABEL, value)


def is_object_name(value: object) -> bool:
    return isinstance(value, str) and len(value) <= DNS1123_SUBDOMAIN_MAX and matches(DNS1123_SUBDOMAIN, value)


def is_label_value(value: object) -> bool:
    """A label value (IsValidLabelValue): at most 63, alphanumerics with '-', '_', '.' inside. A job name that is
    a longer subdomain cannot be a label selector's value: such a job is found by ownerReference."""
    return isinstance(value, str) and (value == "" or (
        len(value) <= 63 and re.fullmatch(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?", value, re.ASCII) is not None))


@dataclass(frozen=True)
class RestartJob:
    namespace: str
    job_kind: str
    job_name: str

    @property
    def target(self) -> str:
        return f"{self.job_kind}/{self.namespace}/{self.job_name}"

    @property
    def spec(self) -> JobKind:
        return JOB_KINDS[self.job_kind]


# A node in a repair loop (issue 32): quarantine_node cordons it, release_node uncordons it (kubectl cordon / uncordon:
# spec.unschedulable, Kubernetes docs "Safely Drain a Node" and kubectl reference "kubectl cordon").
HOLD_KINDS = ("quarantine_node", "release_node")


@dataclass(frozen=True)
class HoldNode:
    kind: str  # quarantine_node | release_node
    node: str  # the Kubernetes node name (HyperPod EKS: hyperpod-i-...)

    @property
    def target(self) -> str:
        return f"node:{self.node}"


@dataclass(frozen=True)
class Command:
    command_id: str
    cluster: str
    kind: str
    action: RestartJob | HoldNode
    incident: str = ""
    issued_at: str = ""

    @property
    def target(self) -> str:
        return self.action.target


def parse(body: str, *, cluster: str) -> Command:
    """A queue message body → a restart_job (or a quarantine_node / release_node) this agent may run, or Refused
    saying why not."""
    data = read_body(body)
    raw_id = data.get("command_id")
    command_id = raw_id if matches(COMMAND_ID, raw_id) else None
    kind = data.get("kind")
    raw_target = "/".join(_text(data.get(key), 256) for key in ("job_kind", "namespace", "job_name"))
    if kind in HOLD_KINDS:
        raw_target = f"node:{_text(data.get('node'), 256)}"
    envelope = {"command_id": command_id, "cluster": _text(data.get("cluster"), 128), "kind": _text(kind, 64),
                "incident": _text(data.get("incident")), "target": raw_target if raw_target != "//" else ""}
    if command_id is None:
        raise Refused(f"command_id must match {COMMAND_ID.pattern}: {shown(raw_id)}", **envelope)
    if data.get("cluster") != cluster:
        raise Refused(f"command is for cluster {shown(data.get('cluster'))}, this agent serves {cluster!r}",
                      **envelope)
    if kind in HOLD_KINDS:
        extra = sorted(set(data) & {"job_kind", "namespace", "job_name", "job_id"})
        if extra:
            raise Refused(f"{kind} takes a node, not {', '.join(extra)}", **envelope)
        if not is_object_name(data.get("node")):
            raise Refused(f"node must be a Kubernetes node name (a DNS-1123 subdomain): {shown(data.get('node'))}",
                          **envelope)
        return Command(command_id=command_id, cluster=cluster, kind=kind, action=HoldNode(kind, data["node"]),
                       incident=envelope["incident"], issued_at=_text(data.get("issued_at"), 64))
    if kind != KIND:
        raise Refused(f"kind must be one of {KIND}, {', '.join(HOLD_KINDS)}: {shown(kind)}", **envelope)
    job_kind, namespace, job_name = data.get("job_kind"), data.get("namespace"), data.get("job_name")
    if not isinstance(job_kind, str) or job_kind not in JOB_KINDS:
        raise Refused(f"job_kind must be one of {', '.join(JOB_KINDS)}: {shown(job_kind)}", **envelope)
    if not is_namespace(namespace):
        raise Refused(f"namespace must be a DNS-1123 label (at most {DNS1123_LABEL_MAX} characters, "
                      f"{DNS1123_LABEL.pattern}): {shown(namespace)}", **envelope)
    if not is_object_name(job_name):
        raise Refused(f"job_name must be a DNS-1123 subdomain (at most {DNS1123_SUBDOMAIN_MAX} characters, "
                      f"lowercase alphanumerics, '-' and '.'): {shown(job_name)}", **envelope)
    return Command(command_id=command_id, cluster=cluster, kind=KIND,
                   action=RestartJob(namespace=namespace, job_kind=job_kind, job_name=job_name),
                   incident=envelope["incident"], issued_at=_text(data.get("issued_at"), 64))


# A watched-jobs entry whose name is ANY_JOB covers every job of its kind in its namespace: a namespace the operator
# opted in for Medic's watch rules (medic.yaml clusters[].watch[].namespaces, issue 33). Its RBAC rule names no
# resourceNames (render.py); its jobs are restarted with the safe default (launcher_exits_128_or_more_on_sigterm false).
ANY_JOB = "*"


@dataclass(frozen=True)
class WatchedJob:
    namespace: str
    kind: str
    name: str  # the job's name, or ANY_JOB
    # medic.yaml's job key of the same name: its launcher exits with 128 or more when its pod is deleted (SIGTERM),
    # so a PyTorchJob under restartPolicy ExitCode is recreated rather than failed (policy.py)
    launcher_exits_128_or_more_on_sigterm: bool = False

    @property
    def target(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


def load_watched(text: str) -> tuple[WatchedJob, ...]:
    """The watched-jobs file (the ConfigMap render.py writes): a JSON list of {namespace, kind, name (or `*`: any job
    of the kind in the namespace), launcher_exits_128_or_more_on_sigterm (optional, default false)}. Every entry is
    validated like a command; a bad entry is an error (the agent does not start on a bad config)."""
    data = json.loads(text)
    if isinstance(data, dict):
        data = data.get("jobs")
    if not isinstance(data, list):
        raise ValueError("watched jobs: expected a JSON list of {namespace, kind, name}")
    jobs = []
    for number, entry in enumerate(data, start=1):
        if not isinstance(entry, dict):
            raise ValueError(f"watched job {number}: not an object")
        namespace, kind, name = entry.get("namespace", "default"), entry.get("kind"), entry.get("name")
        if kind not in JOB_KINDS:
            raise ValueError(f"watched job {number}: kind must be one of {', '.join(JOB_KINDS)}: {shown(kind)}")
        if not is_namespace(namespace):
            raise ValueError(f"watched job {number}: namespace is not a DNS-1123 label: {shown(namespace)}")
        if name != ANY_JOB and not is_object_name(name):
            raise ValueError(f"watched job {number}: name is not a DNS-1123 subdomain (or {ANY_JOB}: any job of the "
                             f"kind in the namespace): {shown(name)}")
        exits_128 = entry.get(EXIT_CODE_KEY, False)
        if not isinstance(exits_128, bool):
            raise ValueError(f"watched job {number}: {EXIT_CODE_KEY} must be true or false: {shown(exits_128)}")
        jobs.append(WatchedJob(namespace, kind, name, exits_128))
    return tuple(jobs)
