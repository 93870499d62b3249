"""An emulated Kubernetes API server: a local threaded HTTP server speaking the REST API for exactly the
endpoints Medic's EKS agent calls (agent/medic_agent/eks/kube.py), so the agent runs its real client code path
(the official `kubernetes` Python client) in tests and replays.

What it models, with the Kubernetes documentation it follows:
- Paths: /api/v1/... (core group) and /apis/<group>/<version>/..., namespaced `namespaces/<ns>/<resource>[/<name>]`
  and cluster-scoped `<resource>[/<name>]` (API Concepts, "Resource URIs").
- Verbs from the request (Authorization overview, "Determine the request verb"): GET item → get, GET collection
  → list, POST → create, PUT → update, DELETE item → delete.
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
- Pod deletion (Pod Lifecycle, "Termination of Pods" and "Forced Pod termination"): DELETE sets
  metadata.deletionTimestamp (now + grace period) and deletionGracePeriodSeconds; the kubelet of a Ready node
  then stops the pod and the object goes (here at once); on a NotReady node no kubelet confirms, so the pod stays
  Terminating; gracePeriodSeconds=0 removes the object at once. A second DELETE may only shorten the grace.
  A pod bound to no node goes at once.
- Controllers (emulated, in-process, after each change): a Job's controller replaces terminating or deleted pods
  at once (podReplacementPolicy TerminatingOrFailed, the default: Jobs, "Delayed creation of replacement pods"),
  new random-suffix names; the Kubeflow training-operator and HyperPod's operator recreate a missing replica by
  its fixed name (<job>-master-0/<job>-worker-<i>; <job>-pod-<i>) once the old pod object is gone — a pod stuck
  Terminating on a dead node blocks that (kubeflow/trainer issues 2072, 2000).
Every request is recorded (`calls`: verb, path, status) for the replay's `kubernetes_call` lines.
"""

from __future__ import annotations

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
                code, payload = server.handle(self.command, self.path, body, self.headers.get("Authorization"))
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
    def handle(self, method: str, raw_path: str, body: bytes, authorization: str | None) -> tuple[int, dict]:
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
    def pod(self, namespace: str, name: str) -> dict | None:
        return self.objects.get((("", "v1", "pods"), namespace, name))

    def pods(self, namespace: str | None = None) -> list[dict]:
        return [obj for (key, ns, _), obj in sorted(self.objects.items())
                if key == ("", "v1", "pods") and (namespace is None or ns == namespace)]

    def node(self, name: str) -> dict | None:
        return self.objects.get((("", "v1", "nodes"), "", name))

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
        if grace == 0 or node is None or _ready(node):
            # force deletion, an unbound pod, or a kubelet that confirms: the object goes
            del self.objects[(("", "v1", "pods"), namespace, name)]
            self._bump()
            self.reconcile()
            return pod
        deadline = self.clock() + timedelta(seconds=grace)
        if meta.get("deletionTimestamp") is None or deadline < _time(meta["deletionTimestamp"]):
            meta["deletionTimestamp"] = rfc3339(deadline)
            meta["deletionGracePeriodSeconds"] = grace
            meta["resourceVersion"] = self._bump()
        self.reconcile()
        return pod

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

    def add_job(self, kind: str, namespace: str, name: str, replicas: int = 2) -> dict:
        """A running job of `kind` with `replicas` pods, which its emulated controller creates and keeps."""
        group, version, plural = JOB_RESOURCES[kind]
        with self.lock:
            self.add_namespace(namespace)
            template = {"spec": {"containers": [CONTAINER], "restartPolicy": "OnFailure"}}
            if kind == "PyTorchJob":
                spec: dict = {"pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                    **({"Worker": {"replicas": replicas - 1, "restartPolicy": "OnFailure", "template": template}}
                       if replicas > 1 else {})}}
            elif kind == "HyperPodPyTorchJob":
                spec = {"replicaSpecs": [{"name": "pod", "replicas": replicas, "template": template}]}
            else:
                spec = {"parallelism": replicas, "completions": replicas, "backoffLimit": 6,
                        "template": {"spec": {"containers": [CONTAINER], "restartPolicy": "Never"}}}
            job = self.create((group, version, plural), namespace, {"metadata": {"name": name}, "spec": spec})
            self.reconcile()
            return job

    def job(self, kind: str, namespace: str, name: str) -> dict | None:
        return self.objects.get((JOB_RESOURCES[kind], namespace, name))

    def job_pods(self, kind: str, namespace: str, name: str) -> list[dict]:
        job = self.job(kind, namespace, name)
        uid = job["metadata"]["uid"] if job else None
        return [pod for pod in self.pods(namespace)
                if any(ref.get("uid") == uid for ref in pod["metadata"].get("ownerReferences") or [])]

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
        """Every job's controller, once: create the pods it is missing."""
        for (key, namespace, _), job in list(self.objects.items()):
            kind = RESOURCES[key][0]
            if kind not in JOB_RESOURCES:
                continue
            owned = [pod for pod in self.pods(namespace)
                     if any(ref.get("uid") == job["metadata"]["uid"] for ref in pod["metadata"].get("ownerReferences")
                            or [])]
            if kind == "Job":
                active = [pod for pod in owned if not pod["metadata"].get("deletionTimestamp")]
                for _ in range(int(job["spec"].get("parallelism", 1)) - len(active)):
                    suffix = "".join(self.random.choice(string.ascii_lowercase + string.digits) for _ in range(5))
                    self._create_pod(job, kind, f"{job['metadata']['name']}-{suffix}", {})
                continue
            for pod_name, labels in _fixed_replicas(kind, job):
                if self.pod(namespace, pod_name) is None:  # a same-named pod still Terminating blocks it
                    self._create_pod(job, kind, pod_name, labels)

    def _create_pod(self, job: dict, kind: str, name: str, labels: dict) -> None:
        meta = job["metadata"]
        all_labels = dict(labels)
        if kind == "Job":
            all_labels.update({"batch.kubernetes.io/job-name": meta["name"], "job-name": meta["name"],
                               "batch.kubernetes.io/controller-uid": meta["uid"], "controller-uid": meta["uid"]})
        node = self._schedulable_node()
        spec: dict = {"containers": [CONTAINER], "restartPolicy": "OnFailure" if kind != "Job" else "Never"}
        if node:
            spec["nodeName"] = node
        self.create(("", "v1", "pods"), meta["namespace"], {
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


def _fixed_replicas(kind: str, job: dict) -> list[tuple[str, dict]]:
    name = job["metadata"]["name"]
    if kind == "PyTorchJob":
        # kubeflow/common constants.go: the training-operator's pod labels
        out = []
        for replica_type, spec in (job["spec"].get("pytorchReplicaSpecs") or {}).items():
            for index in range(int(spec.get("replicas", 1))):
                out.append((f"{name}-{replica_type.lower()}-{index}", {
                    "training.kubeflow.org/job-name": name,
                    "training.kubeflow.org/operator-name": "pytorchjob-controller",
                    "training.kubeflow.org/replica-type": replica_type.lower(),
                    "training.kubeflow.org/replica-index": str(index)}))
        return out
    replicas = sum(int(spec.get("replicas", 1)) for spec in job["spec"].get("replicaSpecs") or [])
    return [(f"{name}-pod-{index}", {}) for index in range(replicas)]


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
