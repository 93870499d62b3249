"""An emulated Kubernetes API server: a local threaded HTTP server speaking the REST API for exactly the
endpoints Medic's EKS agent calls (agent/medic_agent/eks/kube.py), so the agent runs its real client code path
(the official `kubernetes` Python client) in tests and replays.

What it models, with the Kubernetes documentation it follows:
- Paths: /api/v1/... (core group) and /apis/<group>/<version>/..., namespaced `namespaces/<ns>/<resource>[/<name>]`
  and cluster-scoped `<resource>[/<name>]` (API Concepts, "Resource URIs").
- Verbs from the request (Authorization overview, "Determine the request verb"): GET item → get, GET collection
  → list, POST → create, PUT → update, PATCH → patch, DELETE item → delete.
- PATCH of a node with a JSON merge patch (RFC 7386; API Concepts, "Patch"): the EKS agent's cordon and uncordon
  (spec.unschedulable, kubectl reference "kubectl cordon"), 409 Conflict on a stale metadata.resourceVersion (`_patch`).
- resourceVersion on every object and list: one counter for the whole store, like etcd's revision (API
  Concepts, "Resource versions"); every write bumps it.
- Errors as `Status` objects (API Concepts, "Receiving a response"/status codes): 404 NotFound, 409 AlreadyExists
  on create, 409 Conflict on an update whose metadata.resourceVersion is stale (optimistic concurrency,
  "Resource versions" / "Conflicts") or a delete whose preconditions.uid does not match, 403 Forbidden, 401.
- Authorization: RBAC (Using RBAC Authorization): the ServiceAccount's rules are computed from the Role,
  ClusterRole, RoleBinding and ClusterRoleBinding documents given (the shipped manifest): a Role or a
  RoleBinding'd ClusterRole grants only in its binding's namespace, a ClusterRoleBinding everywhere; a rule
  matches on apiGroups, resources, verbs, and resourceNames (never for list or create, whose requests name no
  object). A call the manifest does not grant is 403 with the API server's message.
- Label selectors (Labels and Selectors: equality-based `k=v`, `k==v`, `k!=v`, existence `k`, `!k`) and the
  field selectors `spec.nodeName` and `metadata.name` on pods.
- Pod deletion (Pod Lifecycle, "Termination of Pods" and "Forced Pod termination",
  https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/): DELETE sets metadata.deletionTimestamp (now +
  grace period) and deletionGracePeriodSeconds; the kubelet of a Ready node then stops the containers (they exit
  with the job's SIGTERM exit code), gives the pod its terminal phase from their exit codes (all 0: Succeeded, else
  Failed: "Pod phase", since Kubernetes 1.27) and the object goes (here at once, the controllers seeing each step);
  on a NotReady node no kubelet confirms, so the pod stays Terminating; gracePeriodSeconds=0 removes the object at
  once. A second DELETE may only shorten the grace. A pod bound to no node goes at once.
- Controllers (emulated, in-process, after each change; each method cites its source): the Kubeflow
  training-operator for a PyTorchJob (`_training_operator`: restartPolicy, a deleted pod counted as failed, a
  finished job left alone), the batch/v1 Job controller (`_job_controller`: every deleted pod counted against
  backoffLimit, replacements at once under the default podReplacementPolicy TerminatingOrFailed: Jobs, "Delayed
  creation of replacement pods"), and HyperPod's operator (`_hyperpod_operator`, an assumption: AWS documents none).
  A replica recreated by its fixed name (<job>-master-0/<job>-worker-<i>; <job>-pod-<i>) waits until the old pod
  object is gone: a pod stuck Terminating on a dead node blocks it (kubeflow/trainer issues 2072, 2000).
Every request is recorded (`calls`: verb, path, status) for the replay's `kubernetes_call` lines.
"""

from __future__ import annotations

import copy
import json
import random
import re
import string
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
# (group, version, plural) → (kind, namespaced)
RESOURCES: dict[tuple[str, str, str], tuple[str, bool]] = {
    ("", "v1", "pods"): ("Pod", True),
    ("", "v1", "nodes"): ("Node", False),
    ("", "v1", "namespaces"): ("Namespace", False),
    ("batch", "v1", "jobs"): ("Job", True),
    ("kubeflow.org", "v1", "pytorchjobs"): ("PyTorchJob", True),
    ("sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs"): ("HyperPodPyTorchJob", True),
    ("coordination.k8s.io", "v1", "leases"): ("Lease", True),
}
JOB_RESOURCES = {"PyTorchJob": ("kubeflow.org", "v1", "pytorchjobs"),
                 "HyperPodPyTorchJob": ("sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs"),
                 "Job": ("batch", "v1", "jobs")}
CONTAINER = {"name": "trainer", "image": "public.ecr.aws/docker/library/python:3.13-slim"}
MICRO_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}(?:Z|[+-][0-9]{2}:[0-9]{2})")
DEFAULT_GRACE = 30  # PodSpec.terminationGracePeriodSeconds default
# the container whose exit code the training-operator reads (pytorch_types.go PyTorchJobDefaultContainerName)
PYTORCH_CONTAINER = "pytorch"
RESTART_POLICIES = ("OnFailure", "Never", "ExitCode", "Always")  # kubeflow common_types.go RestartPolicy
FINISHED = ("Succeeded", "Failed")
DEFAULT_BACKOFF_LIMIT = 6  # batch/v1 JobSpec.backoffLimit default (Job API reference)
# What a job's containers exit with when their pod is deleted (SIGTERM): 128 + 15 for a process the signal ends, as
# the container runtime reports it. An assumption of the emulator (a launcher that handles SIGTERM returns its own
# code): the `k8s_job` directive's `sigterm_exit_code` sets it.
SIGTERM_EXIT_CODE = 143


def utcnow() -> datetime:
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details or {}

    def status(self) -> dict:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": self.message,
                "reason": self.reason, "details": self.details, "code": self.code}


# --- RBAC


@dataclass(frozen=True)
class Subject:
    namespace: str
    name: str

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"


@dataclass
class Authorizer:
    """The RBAC rules that apply to one ServiceAccount, from manifest documents."""

    subject: Subject
    cluster_rules: list[dict] = field(default_factory=list)
    namespace_rules: dict[str, list[dict]] = field(default_factory=dict)

    @classmethod
    def from_documents(cls, documents: Iterable[dict], subject: Subject) -> Authorizer:
        docs = [doc for doc in documents if isinstance(doc, dict)]
        roles = {((doc.get("metadata") or {}).get("namespace"), doc["metadata"]["name"]): doc.get("rules") or []
                 for doc in docs if doc.get("kind") == "Role"}
        cluster_roles = {doc["metadata"]["name"]: doc.get("rules") or [] for doc in docs
                         if doc.get("kind") == "ClusterRole"}
        authorizer = cls(subject)
        for doc in docs:
            if doc.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
                continue
            if not any(s.get("kind") == "ServiceAccount" and s.get("name") == subject.name
                       and s.get("namespace") == subject.namespace for s in doc.get("subjects") or []):
                continue
            ref = doc.get("roleRef") or {}
            if doc["kind"] == "ClusterRoleBinding":
                if ref.get("kind") == "ClusterRole":
                    authorizer.cluster_rules += cluster_roles.get(ref.get("name"), [])
                continue
            namespace = (doc.get("metadata") or {}).get("namespace") or "default"
            rules = roles.get((namespace, ref.get("name")), []) if ref.get("kind") == "Role" \
                else cluster_roles.get(ref.get("name"), [])
            authorizer.namespace_rules.setdefault(namespace, []).extend(rules)
        return authorizer

    def allows(self, verb: str, group: str, resource: str, namespace: str | None, name: str | None) -> bool:
        rules = list(self.cluster_rules)
        if namespace:
            rules += self.namespace_rules.get(namespace, [])
        return any(_rule_matches(rule, verb, group, resource, name) for rule in rules)


def _rule_matches(rule: dict, verb: str, group: str, resource: str, name: str | None) -> bool:
    def has(values: Any, value: str) -> bool:
        return "*" in (values or []) or value in (values or [])

    if not (has(rule.get("apiGroups"), group) and has(rule.get("resources"), resource)
            and has(rule.get("verbs"), verb)):
        return False
    names = rule.get("resourceNames") or []
    return not names or (name is not None and verb not in ("list", "create", "watch") and name in names)


# --- selectors


def _labels_match(labels: dict, selector: str | None) -> bool:
    if not selector:
        return True
    for term in (part.strip() for part in selector.split(",")):
        if not term:
            continue
        if "!=" in term:
            key, value = (side.strip() for side in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (side.strip() for side in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def _fields_match(obj: dict, selector: str | None) -> bool:
    if not selector:
        return True
    for term in (part.strip() for part in selector.split(",")):
        negate = "!=" in term
        key, value = (side.strip() for side in term.replace("!=", "=").replace("==", "=").split("=", 1))
        actual = {"spec.nodeName": (obj.get("spec") or {}).get("nodeName") or "",
                  "metadata.name": obj["metadata"]["name"],
                  "metadata.namespace": obj["metadata"].get("namespace", "")}.get(key)
        if actual is None:
            raise ApiError(400, "BadRequest", f'field label not supported: {key}')
        if (actual == value) == negate:
            return False
    return True


# --- the server


class KubeApiServer:
    """The store, the emulated controllers, and the HTTP front. Seed it with the Python methods (unrestricted);
    the agent reaches it over HTTP with its ServiceAccount's bearer token (`token`)."""

    def __init__(self, documents: Iterable[dict], *, subject: Subject = Subject("medic-agent", "medic-agent"),
                 clock: Callable[[], datetime] = utcnow, seed: int = 7) -> None:
        self.subject = subject
        self.authorizer = Authorizer.from_documents(documents, subject)
        self.token = "sa-" + uuid.uuid4().hex
        self.clock = clock
        self.revision = 0
        self.objects: dict[tuple[tuple[str, str, str], str, str], dict] = {}
        self.calls: list[dict] = []
        self.lock = threading.RLock()
        self.random = random.Random(seed)  # noqa: S311 - pod name suffixes, not secrets
        self.sigterm_exit: dict[str, int] = {}  # job uid -> its containers' exit code on SIGTERM
        self.job_failures: dict[str, set[str]] = {}  # batch Job uid -> the pod uids counted in status.failed
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def set_documents(self, documents: Iterable[dict]) -> None:
        """Apply another manifest: the RBAC rules come from these documents from now on."""
        with self.lock:
            self.authorizer = Authorizer.from_documents(documents, self.subject)

    # lifecycle
    def start(self) -> KubeApiServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Answer at once: with Nagle's algorithm on, a kept-alive connection's small writes wait for the
            # client's delayed ACK (~40 ms each on Linux), which made every emulated call that slow.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                code, payload = server.handle(self.command, self.path, body, self.headers.get("Authorization"),
                                              self.headers.get("Content-Type"))
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve  # noqa: N815

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="kube-api", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start() first"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- HTTP
    def handle(self, method: str, raw_path: str, body: bytes, authorization: str | None,
               content_type: str | None = None) -> tuple[int, dict]:
        parts = urlsplit(raw_path)
        path = unquote(parts.path)
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        verb = "?"
        try:
            resource_key, namespace, name = self._route(path)
            verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
                    "DELETE": "delete" if name else "deletecollection"}.get(method, method.lower())
            if query.get("watch") in ("true", "1"):
                verb = "watch"
            if authorization != f"Bearer {self.token}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            group, _, plural = resource_key
            if not self.authorizer.allows(verb, group, plural, namespace, name):
                what = f'{plural}{"." + group if group else ""}'
                target = f'{what} "{name}" is forbidden' if name else f"{what} is forbidden"
                scope = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
                raise ApiError(403, "Forbidden", f'{target}: User "{self.subject.user}" cannot {verb} resource '
                                                 f'"{plural}" in API group "{group}"{scope}',
                               {"name": name or "", "group": group, "kind": plural})
            with self.lock:
                if verb == "patch":
                    code, payload = 200, self._patch(resource_key, namespace or "", name or "",
                                                     json.loads(body) if body else None, content_type)
                else:
                    code, payload = self._dispatch(verb, resource_key, namespace, name, query,
                                                   json.loads(body) if body else None)
        except ApiError as error:
            code, payload = error.code, error.status()
        except ValueError as error:
            code, payload = 400, ApiError(400, "BadRequest", f"bad request: {error}").status()
        with self.lock:
            self.calls.append({"verb": verb, "path": path, "status": code})
        return code, payload

    def _route(self, path: str) -> tuple[tuple[str, str, str], str | None, str | None]:
        segments = [segment for segment in path.split("/") if segment]
        if segments[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", segments[2:]
        elif segments[:1] == ["apis"] and len(segments) >= 3:
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 2:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        key = (group, version, rest[0])
        if key not in RESOURCES or RESOURCES[key][1] != (namespace is not None):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return key, namespace, rest[1] if len(rest) == 2 else None

    def _dispatch(self, verb: str, key: tuple[str, str, str], namespace: str | None, name: str | None,
                  query: dict, body: dict | None) -> tuple[int, dict]:
        if verb == "get":
            return 200, self._get(key, namespace or "", name or "")
        if verb == "list":
            items = [obj for (k, ns, _), obj in sorted(self.objects.items())
                     if k == key and (namespace is None or ns == namespace)
                     and _labels_match(obj["metadata"].get("labels") or {}, query.get("labelSelector"))
                     and _fields_match(obj, query.get("fieldSelector"))]
            kind = RESOURCES[key][0]
            return 200, {"kind": f"{kind}List", "apiVersion": _api_version(key),
                         "metadata": {"resourceVersion": str(self.revision)}, "items": items}
        if verb == "create":
            return 201, self.create(key, namespace or "", body or {})
        if verb == "update":
            return 200, self._update(key, namespace or "", name or "", body or {})
        if verb == "delete":
            if key == ("", "v1", "pods"):
                return 200, self._delete_pod(namespace or "", name or "", body or {})
            obj = self._get(key, namespace or "", name or "")
            del self.objects[(key, namespace or "", name or "")]
            self._bump()
            return 200, obj
        raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the requested resource "
                                               f"({verb})")

    # --- store
    def _bump(self) -> str:
        self.revision += 1
        return str(self.revision)

    def _get(self, key: tuple[str, str, str], namespace: str, name: str) -> dict:
        obj = self.objects.get((key, namespace, name))
        if obj is None:
            group, _, plural = key
            raise ApiError(404, "NotFound", f'{plural}{"." + group if group else ""} "{name}" not found',
                           {"name": name, "group": group, "kind": plural})
        return obj

    @staticmethod
    def _check_lease(key: tuple[str, str, str], body: dict) -> None:
        """A Lease's acquireTime/renewTime are metav1.MicroTime: the API server parses them as RFC3339Micro
        (exactly six fractional digits: apimachinery pkg/apis/meta/v1/micro_time.go) and refuses anything else."""
        if key != ("coordination.k8s.io", "v1", "leases"):
            return
        for field_name in ("acquireTime", "renewTime"):
            value = (body.get("spec") or {}).get(field_name)
            if value is not None and not MICRO_TIME.fullmatch(str(value)):
                raise ApiError(400, "BadRequest", f'Lease in version "v1" cannot be handled as a Lease: parsing time '
                                                  f'"{value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse')

    def create(self, key: tuple[str, str, str], namespace: str, body: dict) -> dict:
        self._check_lease(key, body)
        meta = dict(body.get("metadata") or {})
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value")
        if (key, namespace, name) in self.objects:
            group, _, plural = key
            raise ApiError(409, "AlreadyExists", f'{plural}{"." + group if group else ""} "{name}" already exists',
                           {"name": name, "group": group, "kind": plural})
        meta.update({"uid": str(uuid.uuid4()), "resourceVersion": self._bump(),
                     "creationTimestamp": rfc3339(self.clock())})
        if RESOURCES[key][1]:
            meta["namespace"] = namespace
        obj = {**body, "apiVersion": _api_version(key), "kind": RESOURCES[key][0], "metadata": meta}
        self.objects[(key, namespace, name)] = obj
        return obj

    def _update(self, key: tuple[str, str, str], namespace: str, name: str, body: dict) -> dict:
        current = self._get(key, namespace, name)
        self._check_lease(key, body)
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            group, _, plural = key
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {plural}{"." + group if group else ""} '
                                            f'"{name}": the object has been modified; please apply your changes to '
                                            "the latest version and try again",
                           {"name": name, "group": group, "kind": plural})
        meta = {**current["metadata"], **{k: v for k, v in (body.get("metadata") or {}).items()
                                          if k in ("labels", "annotations")}}
        meta["resourceVersion"] = self._bump()
        obj = {**current, **{k: v for k, v in body.items() if k not in ("metadata", "status")}, "metadata": meta}
        self.objects[(key, namespace, name)] = obj
        return obj

    # --- pods and the controllers
    def _patch(self, key: tuple[str, str, str], namespace: str, name: str, body: Any, content_type: str | None) -> dict:
        """PATCH with a JSON merge patch (application/merge-patch+json: RFC 7386, a null removes the key; API
        Concepts, "Patch" types), modelled for nodes only (the agent's cordon: "kubectl cordon" sets
        spec.unschedulable). A patch of another type is 415 UnsupportedMediaType here (an emulator limit: the real
        server takes json-patch and strategic-merge-patch too; the agent sends only merge patches). A patch naming a
        metadata.resourceVersion that is not the object's is 409 Conflict (API Concepts, "Resource versions"). The
        patch cannot change the name, uid or status."""
        if key != ("", "v1", "nodes"):
            raise ApiError(405, "MethodNotAllowed", "the emulator models PATCH of nodes only")
        if (content_type or "").split(";")[0].strip() != "application/merge-patch+json":
            raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted "
                                                        f"media types include: application/merge-patch+json "
                                                        f"(got {content_type})")
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "a merge patch is a JSON object")
        current = self._get(key, namespace, name)
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on nodes "{name}": the object has been '
                                            "modified; please apply your changes to the latest version and try again",
                           {"name": name, "group": "", "kind": "nodes"})
        patch = {k: v for k, v in body.items() if k != "status"}
        patch["metadata"] = {k: v for k, v in (body.get("metadata") or {}).items()
                             if k in ("labels", "annotations")}
        obj = _merge_patch(current, patch)
        obj["metadata"]["resourceVersion"] = self._bump()
        self.objects[(key, namespace, name)] = obj
        return obj

    def pod(self, namespace: str, name: str) -> dict | None:
        return self.objects.get((("", "v1", "pods"), namespace, name))

    def pods(self, namespace: str | None = None) -> list[dict]:
        return [obj for (key, ns, _), obj in sorted(self.objects.items())
                if key == ("", "v1", "pods") and (namespace is None or ns == namespace)]

    def node(self, name: str) -> dict | None:
        return self.objects.get((("", "v1", "nodes"), "", name))

    def nodes(self) -> list[dict]:
        return [obj for (key, _, _), obj in sorted(self.objects.items()) if key == ("", "v1", "nodes")]

    def _delete_pod(self, namespace: str, name: str, options: dict) -> dict:
        pod = self._get(("", "v1", "pods"), namespace, name)
        meta = pod["metadata"]
        wanted_uid = (options.get("preconditions") or {}).get("uid")
        if wanted_uid and wanted_uid != meta["uid"]:
            raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {wanted_uid}, UID in object "
                                            f"meta: {meta['uid']}", {"name": name, "kind": "pods"})
        grace = options.get("gracePeriodSeconds")
        if grace is None:
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", DEFAULT_GRACE)
        node = self.node((pod.get("spec") or {}).get("nodeName") or "")
        if grace == 0 or node is None:
            # force deletion (the object goes at once: watchers see it gone, never terminating), or a pod no kubelet
            # runs (unbound)
            self._remove(pod)
            self.reconcile()
            return pod
        deadline = self.clock() + timedelta(seconds=grace)
        if meta.get("deletionTimestamp") is None or deadline < _time(meta["deletionTimestamp"]):
            meta["deletionTimestamp"] = rfc3339(deadline)
            meta["deletionGracePeriodSeconds"] = grace
            meta["resourceVersion"] = self._bump()
        self.reconcile()  # the controllers see the pod terminating (a Running pod with a deletionTimestamp)
        if _ready(node) and self._same(pod):
            # A live kubelet stops the containers (SIGTERM, then SIGKILL at the deadline: one moment here), sets
            # the pod's terminal phase from their exit codes (Pod Lifecycle, "Pod phase": since Kubernetes 1.27 the
            # kubelet moves a deleted pod to Failed or Succeeded before it is removed from the API), and then the
            # object goes. The controllers see each step.
            self._terminate(pod, self._sigterm_exit(pod))
            self.reconcile()
            if self._same(pod):
                self._remove(pod)
                self.reconcile()
        return pod

    def _same(self, pod: dict) -> bool:
        meta = pod["metadata"]
        current = self.pod(meta.get("namespace", ""), meta["name"])
        return current is not None and current["metadata"]["uid"] == meta["uid"]

    def _remove(self, pod: dict) -> None:
        meta = pod["metadata"]
        del self.objects[(("", "v1", "pods"), meta.get("namespace", ""), meta["name"])]
        self._bump()

    def _terminate(self, pod: dict, exit_code: int) -> None:
        """The pod's containers have exited with `exit_code`: its terminal phase (all exited 0: Succeeded)."""
        containers = (pod.get("spec") or {}).get("containers") or []
        pod["status"] = {**(pod.get("status") or {}), "phase": "Succeeded" if exit_code == 0 else "Failed",
                         "containerStatuses": [{"name": container.get("name"), "image": container.get("image"),
                                                "imageID": "", "ready": False, "restartCount": 0,
                                                "state": {"terminated": {"exitCode": exit_code}}}
                                               for container in containers]}
        pod["metadata"]["resourceVersion"] = self._bump()

    def _sigterm_exit(self, pod: dict) -> int:
        ref = next((ref for ref in pod["metadata"].get("ownerReferences") or [] if ref.get("controller")), {})
        return self.sigterm_exit.get(str(ref.get("uid")), SIGTERM_EXIT_CODE)

    # seeding (the test's or the replay's hand, never the agent's)
    def add_namespace(self, name: str) -> None:
        with self.lock:
            if (("", "v1", "namespaces"), "", name) not in self.objects:
                self.create(("", "v1", "namespaces"), "", {"metadata": {"name": name}})

    def add_node(self, name: str, *, ready: bool = True, health: str | None = "Schedulable") -> dict:
        with self.lock:
            labels = {"kubernetes.io/hostname": name}
            if health is not None:
                labels[HEALTH_LABEL] = health
            return self.create(("", "v1", "nodes"), "", {
                "metadata": {"name": name, "labels": labels}, "spec": {},
                "status": {"conditions": [_ready_condition(ready)]}})

    def set_node(self, name: str, *, ready: bool | None = None, health: str | None = None) -> None:
        with self.lock:
            node = self._get(("", "v1", "nodes"), "", name)
            if ready is not None:
                node["status"]["conditions"] = [_ready_condition(ready)]
            if health is not None:
                node["metadata"]["labels"][HEALTH_LABEL] = health
            node["metadata"]["resourceVersion"] = self._bump()
            self.reconcile()

    def add_job(self, kind: str, namespace: str, name: str, replicas: int = 2, *, restart_policy: str = "OnFailure",
                backoff_limit: int = DEFAULT_BACKOFF_LIMIT, status: str | None = None,
                sigterm_exit_code: int = SIGTERM_EXIT_CODE) -> dict:
        """A job of `kind` with `replicas` pods, which its emulated controller creates and keeps (running), or, with
        `status` Succeeded | Failed, a job that has finished: its terminal condition, its pods left in their final
        phase (PyTorchJob: cleanPodPolicy None, the training-operator's default; Job: the controller keeps finished
        pods; HyperPodPyTorchJob: none, its operator's default cleanPodPolicy All per the HyperPod CLI's job
        model). `restart_policy` is a PyTorchJob's replica specs' (OnFailure, the operator's default, Never,
        ExitCode, Always); `backoff_limit` a batch Job's (default 6); `sigterm_exit_code` what the job's containers
        exit with when their pod is deleted (default 143: a process SIGTERM ends, 128 + 15)."""
        if restart_policy not in RESTART_POLICIES:
            raise ValueError(f"restart_policy must be one of {', '.join(RESTART_POLICIES)} (got {restart_policy!r})")
        if status not in (None, *FINISHED):
            raise ValueError(f"status must be one of {', '.join(FINISHED)} (got {status!r})")
        group, version, plural = JOB_RESOURCES[kind]
        now = rfc3339(self.clock())
        with self.lock:
            self.add_namespace(namespace)
            if kind == "PyTorchJob":
                template = {"spec": {"containers": [{**CONTAINER, "name": PYTORCH_CONTAINER}]}}
                spec: dict = {"runPolicy": {"cleanPodPolicy": "None"}, "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "restartPolicy": restart_policy, "template": template},
                    **({"Worker": {"replicas": replicas - 1, "restartPolicy": restart_policy, "template": template}}
                       if replicas > 1 else {})}}
                job_status: dict = {"startTime": now, "conditions": [_condition("Created", "True", now)]}
            elif kind == "HyperPodPyTorchJob":
                template = {"spec": {"containers": [CONTAINER]}}
                spec = {"replicaSpecs": [{"name": "pod", "replicas": replicas, "template": template}]}
                job_status = {"conditions": []}
            else:
                spec = {"parallelism": replicas, "completions": replicas, "backoffLimit": backoff_limit,
                        "template": {"spec": {"containers": [CONTAINER], "restartPolicy": "Never"}}}
                job_status = {"startTime": now, "active": 0, "failed": 0, "succeeded": 0}
            if status is not None:
                job_status["completionTime"] = now
                job_status["conditions"] = [*job_status.get("conditions", []), *_finished_conditions(kind, status, now)]
                if kind == "Job":
                    job_status.update({"succeeded": replicas} if status == "Succeeded" else
                                      {"failed": backoff_limit + 1})
            job = self.create((group, version, plural), namespace, {"metadata": {"name": name}, "spec": spec,
                                                                      "status": job_status})
            self.sigterm_exit[job["metadata"]["uid"]] = sigterm_exit_code
            if status is not None and kind != "HyperPodPyTorchJob":
                names = ([pod_name for pod_name, _ in _fixed_replicas(kind, job)] if kind == "PyTorchJob" else
                         [f"{name}-{self._suffix()}" for _ in range(replicas)])
                labels = dict(_fixed_replicas(kind, job)) if kind == "PyTorchJob" else {}
                for pod_name in names:
                    pod = self._create_pod(job, kind, pod_name, labels.get(pod_name, {}))
                    self._terminate(pod, 0 if status == "Succeeded" else 1)
            self.reconcile()
            return job

    def job(self, kind: str, namespace: str, name: str) -> dict | None:
        return self.objects.get((JOB_RESOURCES[kind], namespace, name))

    def job_pods(self, kind: str, namespace: str, name: str) -> list[dict]:
        job = self.job(kind, namespace, name)
        return self._owned(job) if job else []

    def _owned(self, job: dict) -> list[dict]:
        uid = job["metadata"]["uid"]
        return [pod for pod in self.pods(job["metadata"]["namespace"])
                if any(ref.get("uid") == uid for ref in pod["metadata"].get("ownerReferences") or [])]

    def add_pod(self, namespace: str, name: str, node: str, owner_references: list[dict] | None = None) -> dict:
        """A pod someone with `create pods` in the namespace made (a tenant's, no controller of Medic's world), bound
        to `node`, running, with whatever ownerReferences it wrote. Kubernetes restricts only `blockOwnerDeletion`
        ("To set this field, a user needs "delete" permission of the owner": API reference, OwnerReference v1 meta,
        kubernetes.io/docs/reference/kubernetes-api/definitions/owner-reference-v1-meta/); a reference whose owner
        does not exist "is treated as absent, and the dependent is subject to deletion" by the garbage collector
        (Kubernetes docs, "Garbage Collection", Owners and dependents), which sets a deletionTimestamp that a NotReady
        node's kubelet never confirms. The garbage collector is not emulated: `mark_terminating` stands for it."""
        with self.lock:
            self.add_namespace(namespace)
            if self.node(node) is None:
                raise ValueError(f"node {node} does not exist")
            return self.create(("", "v1", "pods"), namespace, {
                "metadata": {"name": name, "labels": {}, "ownerReferences": list(owner_references or [])},
                "spec": {"containers": [CONTAINER], "restartPolicy": "Always", "nodeName": node},
                "status": {"phase": "Running"}})

    def mark_terminating(self, namespace: str, name: str, since: datetime) -> None:
        """As the node lifecycle controller's taint-based eviction does for a pod on a node gone NotReady: the
        pod gets a deletionTimestamp (`since`) that no kubelet ever confirms."""
        with self.lock:
            pod = self._get(("", "v1", "pods"), namespace, name)
            pod["metadata"]["deletionTimestamp"] = rfc3339(since)
            pod["metadata"]["deletionGracePeriodSeconds"] = 30
            pod["metadata"]["resourceVersion"] = self._bump()
            self.reconcile()

    def reconcile(self) -> None:
        """Every job's controller on what the store holds now, again while a pass changes something (a controller
        watches what it created too), at most a few passes."""
        for _ in range(4):
            revision = self.revision
            for (key, _, _), job in list(self.objects.items()):
                kind = RESOURCES[key][0]
                if kind == "PyTorchJob":
                    self._training_operator(job)
                elif kind == "HyperPodPyTorchJob":
                    self._hyperpod_operator(job)
                elif kind == "Job":
                    self._job_controller(job)
            if self.revision == revision:
                return

    def _training_operator(self, job: dict) -> None:
        """kubeflow/training-operator v1.7-v1.9 for a PyTorchJob, as it reconciles (pkg/controller.v1/common/job.go
        ReconcileJobs, pod.go ReconcilePods, pytorch/pytorchjob_controller.go UpdateJobStatus):
        - a finished job (Succeeded or Failed condition True: pkg/util/status.go IsFinished) is left alone;
        - per replica type and index: a missing pod is created again by name ("Need to create new pod"); a pod in
          phase Failed is deleted to be recreated under restartPolicy OnFailure or Always, or ExitCode with a
          retryable exit code of its `pytorch` container (>= 128: pkg/util/train IsRetryableExitCode; none found:
          0xbeef, retryable), and fails the job under ExitCode otherwise;
        - replica statuses (pkg/core/status.go UpdateJobReplicaStatuses): Running and no deletionTimestamp is
          active, Running with one is failed, Succeeded/Failed as such;
        - the job's conditions: Master running → Running; every Master succeeded → Succeeded; failed > 0 and
          replicas > succeeded + running → Restarting, or Failed for good under restartPolicy Never."""
        status = job.setdefault("status", {})
        if _has_true(status, ("Succeeded", "Failed")):
            return
        now, name = rfc3339(self.clock()), job["metadata"]["name"]
        before = json.dumps(status, sort_keys=True)
        specs = job["spec"].get("pytorchReplicaSpecs") or {}
        replica_statuses = {}
        for replica_type, spec in specs.items():
            policy = spec.get("restartPolicy") or "OnFailure"
            counts = {"active": 0, "succeeded": 0, "failed": 0}
            for pod_name, labels in _fixed_replicas("PyTorchJob", job, only=replica_type):
                pod = self.pod(job["metadata"]["namespace"], pod_name)  # any pod of that name blocks it (AlreadyExists)
                if pod is None:
                    self._create_pod(job, "PyTorchJob", pod_name, labels)
                    continue
                phase = (pod.get("status") or {}).get("phase")
                if phase == "Failed":
                    exit_code = _exit_code(pod, PYTORCH_CONTAINER)
                    if policy in ("OnFailure", "Always") or (policy == "ExitCode" and exit_code >= 128):
                        if not pod["metadata"].get("deletionTimestamp"):
                            self._remove(pod)  # terminated already: its kubelet confirms at once
                        _set_condition(status, "Restarting", f"PyTorchJob {name} is restarting because "
                                                             f"{replica_type} replica(s) failed.", now)
                    elif policy == "ExitCode":
                        _set_condition(status, "Failed", f"PyTorchJob {name} is failing because {replica_type} "
                                                         f"replica(s) failed (exit code {exit_code}).", now)
                if phase == "Running":
                    counts["failed" if pod["metadata"].get("deletionTimestamp") else "active"] += 1
                elif phase == "Succeeded":
                    counts["succeeded"] += 1
                elif phase == "Failed":
                    counts["failed"] += 1
            replica_statuses[replica_type] = counts
            replicas = int(spec.get("replicas", 1))
            if replica_type == "Master" or "Master" not in specs:
                if counts["active"] > 0:
                    _set_condition(status, "Running", f"PyTorchJob {name} is running.", now)
                if replicas - counts["succeeded"] == 0:
                    _set_condition(status, "Succeeded", f"PyTorchJob {name} is successfully completed.", now)
                    status.setdefault("completionTime", now)
            if counts["failed"] > 0 and replicas > counts["succeeded"] + counts["active"]:
                if policy == "Never":
                    _set_condition(status, "Failed", f"PyTorchJob {name} is failed because {counts['failed']} "
                                                     f"{replica_type} replica(s) failed.", now)
                    status.setdefault("completionTime", now)
                else:
                    _set_condition(status, "Restarting", f"PyTorchJob {name} is restarting because "
                                                         f"{counts['failed']} {replica_type} replica(s) failed.", now)
        status["replicaStatuses"] = replica_statuses
        if json.dumps(status, sort_keys=True) != before:
            job["metadata"]["resourceVersion"] = self._bump()

    def _hyperpod_operator(self, job: dict) -> None:
        """HyperPod's training operator: AWS documents no reconcile rules; assumed, as the Kubeflow operator does, to
        recreate a missing replica by its name (<job>-pod-<i>) and to leave a finished job (a Complete or Failed
        condition: the HyperPodPyTorchJob CRD's terminal types) alone."""
        if _has_true(job.get("status") or {}, ("Complete", "Completed", "Succeeded", "Failed")):
            return
        for pod_name, labels in _fixed_replicas("HyperPodPyTorchJob", job):
            if self.pod(job["metadata"]["namespace"], pod_name) is None:  # a same-named pod still Terminating blocks it
                self._create_pod(job, "HyperPodPyTorchJob", pod_name, labels)

    def _job_controller(self, job: dict) -> None:
        """The batch/v1 Job controller (kubernetes pkg/controller/job/job_controller.go), default
        podReplacementPolicy TerminatingOrFailed and no podFailurePolicy:
        - a finished Job (Complete or Failed condition True) is left alone;
        - a pod is failed once it is Failed or has a deletionTimestamp without having Succeeded (isPodFailed),
          counted once in status.failed (the pod's tracking finalizer, compressed to one step here);
        - failed > backoffLimit fails the Job for good (exceedsBackoffLimit: FailureTarget, then Failed with reason
          BackoffLimitExceeded, its running pods terminated: Jobs, "Termination of Job pods");
        - otherwise replacements at once for terminating or failed pods (Jobs, "Delayed creation of replacement
          pods"), new random-suffix names, up to parallelism and the completions still missing.
        backoffLimitPerIndex and podFailurePolicy are not emulated."""
        status = job.setdefault("status", {})
        if _has_true(status, ("Complete", "Failed")):
            return
        before = json.dumps(status, sort_keys=True)
        counted = self.job_failures.setdefault(job["metadata"]["uid"], set())
        pods = self._owned(job)
        for pod in pods:
            phase = (pod.get("status") or {}).get("phase")
            failed = phase == "Failed" or (pod["metadata"].get("deletionTimestamp") and phase != "Succeeded")
            if failed and pod["metadata"]["uid"] not in counted:
                counted.add(pod["metadata"]["uid"])
                status["failed"] = int(status.get("failed", 0)) + 1
        succeeded = sum(1 for pod in pods if (pod.get("status") or {}).get("phase") == "Succeeded")
        status["succeeded"] = max(int(status.get("succeeded", 0)), succeeded)
        active = [pod for pod in pods if not pod["metadata"].get("deletionTimestamp")
                  and (pod.get("status") or {}).get("phase") in ("Running", "Pending")]
        now = rfc3339(self.clock())
        limit = int(job["spec"].get("backoffLimit", DEFAULT_BACKOFF_LIMIT))
        completions = int(job["spec"].get("completions", job["spec"].get("parallelism", 1)))
        if int(status.get("failed", 0)) > limit:
            message = "Job has reached the specified backoff limit"
            status["conditions"] = [*status.get("conditions", []),
                                    _condition("FailureTarget", "True", now, "BackoffLimitExceeded", message),
                                    _condition("Failed", "True", now, "BackoffLimitExceeded", message)]
            for pod in active:  # terminated: on a Ready node its kubelet confirms at once
                node = self.node((pod.get("spec") or {}).get("nodeName") or "")
                if node is None or _ready(node):
                    self._remove(pod)
                else:
                    pod["metadata"]["deletionTimestamp"] = now
            active = []
        elif status["succeeded"] >= completions:
            status["conditions"] = [*status.get("conditions", []), _condition("SuccessCriteriaMet", "True", now),
                                    _condition("Complete", "True", now)]
            status.setdefault("completionTime", now)
        else:
            wanted = min(int(job["spec"].get("parallelism", 1)), completions - status["succeeded"])
            for _ in range(wanted - len(active)):
                active.append(self._create_pod(job, "Job", f"{job['metadata']['name']}-{self._suffix()}", {}))
        status["active"] = len(active)
        if json.dumps(status, sort_keys=True) != before:
            job["metadata"]["resourceVersion"] = self._bump()

    def _suffix(self) -> str:
        return "".join(self.random.choice(string.ascii_lowercase + string.digits) for _ in range(5))

    def _create_pod(self, job: dict, kind: str, name: str, labels: dict) -> dict:
        meta = job["metadata"]
        all_labels = dict(labels)
        if kind == "Job":
            all_labels.update({"batch.kubernetes.io/job-name": meta["name"], "job-name": meta["name"],
                               "batch.kubernetes.io/controller-uid": meta["uid"], "controller-uid": meta["uid"]})
        node = self._schedulable_node()
        if kind == "PyTorchJob":  # the operator writes the replica spec's policy into the pod (core SetRestartPolicy)
            policy = next(iter((job["spec"].get("pytorchReplicaSpecs") or {}).values()), {}).get("restartPolicy")
            spec: dict = {"containers": [{**CONTAINER, "name": PYTORCH_CONTAINER}],
                          "restartPolicy": "Never" if policy == "ExitCode" else policy or "OnFailure"}
        else:
            spec = {"containers": [CONTAINER], "restartPolicy": "OnFailure" if kind != "Job" else "Never"}
        if node:
            spec["nodeName"] = node
        return self.create(("", "v1", "pods"), meta["namespace"], {
            "metadata": {"name": name, "labels": all_labels, "ownerReferences": [{
                "apiVersion": job["apiVersion"], "kind": kind, "name": meta["name"], "uid": meta["uid"],
                "controller": True, "blockOwnerDeletion": True}]},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}})

    def _schedulable_node(self) -> str | None:
        """The scheduler, roughly: the Ready, Schedulable node with the fewest pods."""
        nodes = [obj for (key, _, _), obj in sorted(self.objects.items()) if key == ("", "v1", "nodes")
                 and _ready(obj) and (obj["metadata"].get("labels") or {}).get(HEALTH_LABEL, "Schedulable")
                 == "Schedulable"]
        if not nodes:
            return None
        load = {node["metadata"]["name"]: 0 for node in nodes}
        for pod in self.pods():
            on = (pod.get("spec") or {}).get("nodeName")
            if on in load:
                load[on] += 1
        return min(load, key=lambda node: (load[node], node))

    def drain_calls(self, since: int = 0) -> list[dict]:
        with self.lock:
            return list(self.calls[since:])


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 MergePatch: an object patch merges key by key, a null removes the key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = _merge_patch(result.get(name), value)
    return result


def _fixed_replicas(kind: str, job: dict, only: str | None = None) -> list[tuple[str, dict]]:
    name = job["metadata"]["name"]
    if kind == "PyTorchJob":
        # kubeflow/common constants.go: the training-operator's pod labels
        out = []
        for replica_type, spec in (job["spec"].get("pytorchReplicaSpecs") or {}).items():
            if only is not None and replica_type != only:
                continue
            for index in range(int(spec.get("replicas", 1))):
                out.append((f"{name}-{replica_type.lower()}-{index}", {
                    "training.kubeflow.org/job-name": name,
                    "training.kubeflow.org/operator-name": "pytorchjob-controller",
                    "training.kubeflow.org/replica-type": replica_type.lower(),
                    "training.kubeflow.org/replica-index": str(index)}))
        return out
    replicas = sum(int(spec.get("replicas", 1)) for spec in job["spec"].get("replicaSpecs") or [])
    return [(f"{name}-pod-{index}", {}) for index in range(replicas)]


def _condition(kind: str, value: str, now: str, reason: str | None = None, message: str = "") -> dict:
    return {"type": kind, "status": value, "reason": reason or kind, "message": message,
            "lastUpdateTime": now, "lastTransitionTime": now}


def _finished_conditions(kind: str, status: str, now: str) -> list[dict]:
    """A finished job's terminal conditions, in each controller's own names."""
    if kind == "Job":
        return ([_condition("SuccessCriteriaMet", "True", now), _condition("Complete", "True", now)]
                if status == "Succeeded" else
                [_condition("FailureTarget", "True", now, "BackoffLimitExceeded"),
                 _condition("Failed", "True", now, "BackoffLimitExceeded",
                            "Job has reached the specified backoff limit")])
    if kind == "HyperPodPyTorchJob":
        return [_condition("Complete" if status == "Succeeded" else "Failed", "True", now)]
    return [_condition("Running", "False", now), _condition(status, "True", now)]


def _has_true(status: dict, kinds: tuple[str, ...]) -> bool:
    return any(condition.get("type") in kinds and condition.get("status") == "True"
               for condition in status.get("conditions") or [])


def _set_condition(status: dict, kind: str, message: str, now: str) -> None:
    """kubeflow/training-operator pkg/util/status.go setCondition: nothing changes once Failed; Running and
    Restarting replace each other; Succeeded or Failed set Running False; the same type is replaced."""
    conditions = status.get("conditions") or []
    if _has_true(status, ("Failed",)):
        return
    current = next((c for c in conditions if c.get("type") == kind), None)
    if current is not None and current.get("status") == "True":
        return
    kept = []
    for condition in conditions:
        if condition.get("type") == kind or (kind, condition.get("type")) in (("Restarting", "Running"),
                                                                              ("Running", "Restarting")):
            continue
        if kind in ("Failed", "Succeeded") and condition.get("type") == "Running":
            condition = {**condition, "status": "False"}
        kept.append(condition)
    status["conditions"] = [*kept, _condition(kind, "True", now, f"PyTorchJob{kind}", message)]


def _exit_code(pod: dict, container: str) -> int:
    for state in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (state.get("state") or {}).get("terminated")
        if state.get("name") == container and terminated is not None:
            return int(terminated.get("exitCode", 0))
    return 0xBEEF  # the operator's "no exit code seen" value (common/pod.go ReconcilePods)


def _api_version(key: tuple[str, str, str]) -> str:
    group, version, _ = key
    return f"{group}/{version}" if group else version


def _ready_condition(ready: bool) -> dict:
    return {"type": "Ready", "status": "True" if ready else "Unknown",
            "reason": "KubeletReady" if ready else "NodeStatusUnknown"}


def _ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
