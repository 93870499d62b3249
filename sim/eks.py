"""HyperPod EKS clusters in the emulated world: the real EKS agent (agent/medic_agent/eks) in-process, against
the emulated command queue and ledger, with its `kubernetes` client pointed at an emulated Kubernetes API
server (sim/kubeapi.py) per cluster, as sim/slurm.py runs the Slurm agent against a fake Slurm.

- Nodes: the API server's nodes follow the HyperPod cluster's nodes (`hyperpod-<instance id>`, the name HyperPod
  EKS gives a node: the SageMaker HyperPod developer guide's EKS examples list nodes as `hyperpod-i-...`); their
  Ready condition and `sagemaker.amazonaws.com/node-health-status` label follow the instance's status as
  NODE_STATES below says (the labels' meanings are AWS's; the mapping is the emulator's). An instance being
  provisioned (a replacement: Pending) has no Node until its kubelet registers; an instance that left the cluster
  (replaced away) keeps its Node, NotReady: nothing emulated deletes it. Synced before every agent cycle.
- Jobs: the `k8s_job` directive creates a job with its pods (its emulated controller keeps them, by its own rules:
  restartPolicy, backoffLimit, a finished status).
- Watched jobs (the agent's ConfigMap) and the RBAC the API server enforces come from the same list, rendered by
  agent/kubernetes/render.py: the config's `jobs:` entries on the cluster that name a `kind` (and `namespace`),
  plus every `k8s_job` unless it says `"watched": false`.
- Each Kubernetes call the agent makes is one `kubernetes_call` line: cluster, verb, path, status.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from sim.kubeapi import JOB_RESOURCES, KubeApiServer
from sim.slurm import _agent_logs, import_agent
from sim.synth import ROOT

LEASE_NAMESPACE = "medic-agent"
MAX_REPLICAS = 512
EXIT_CODE_KEY = "launcher_exits_128_or_more_on_sigterm"  # medic.yaml's job key (render.py, the agent's ConfigMap)
# HyperPod ClusterInstanceStatus → (Ready, node-health-status label; None: the label stays as it was). The labels'
# meanings are AWS's (SageMaker Developer Guide, "Resilience-related Kubernetes labels by SageMaker HyperPod",
# https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html): Schedulable
# passed basic checks; Unschedulable: deep health checks are running; UnschedulablePendingReplacement /
# UnschedulablePendingReboot: the node failed deep health checks or the health-monitoring agent's checks and
# *needs* that repair (done by HyperPod "if automatic node recovery is enabled"). None of them means "being
# rebooted": while an instance reboots or shuts down its kubelet is gone, so its Node is NotReady, and the label is
# left as it was (AWS documents no label for a repair in progress: the emulator's assumption). Which status goes
# with Failure's label is the emulator's choice too: AWS documents no mapping.
NODE_STATES: dict[str, tuple[bool, str | None]] = {
    "Running": (True, "Schedulable"),
    "DeepHealthCheckInProgress": (True, "Unschedulable"),
    "SystemUpdating": (False, None),
    "ShuttingDown": (False, None),
    "Pending": (False, None),
    "Failure": (False, "UnschedulablePendingReplacement"),
}
# An instance still being provisioned has no kubelet yet, so no Node object: the kubelet creates it when it
# registers (Kubernetes docs, Nodes, "Self-registration of Nodes", https://kubernetes.io/docs/concepts/architecture/
# nodes/#self-registration-of-nodes), here once HyperPod reports the instance Running.
NOT_REGISTERED = frozenset({"Pending"})


def _ready_now(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in node["status"]["conditions"])


def render_module() -> Any:
    if "medic_render" not in sys.modules:
        spec = importlib.util.spec_from_file_location("medic_render", ROOT / "agent" / "kubernetes" / "render.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["medic_render"] = module
        spec.loader.exec_module(module)
    return sys.modules["medic_render"]


@dataclass
class EksAgentHandle:
    cluster: str
    identity: str
    agent: Any  # medic_agent.eks.main.EksAgent
    running: bool = False


@dataclass
class EksCluster:
    name: str
    server: KubeApiServer
    jobs: dict[tuple[str, str, str], bool] = field(default_factory=dict)  # (namespace, kind, name) -> watched
    agents: list[EksAgentHandle] = field(default_factory=list)
    watched: tuple = ()


class EksWorld:
    def __init__(self, client: Callable[[str], Any], *, config_jobs: Callable[[str], list[dict]] = lambda name: [],
                 hyperpod_nodes: Callable[[str], dict[str, str]] = lambda name: {},
                 quarantines: Callable[[str], bool] = lambda name: False) -> None:
        self.client = client  # the harness's clients (the agent's calls are not the handlers')
        # the agent of a cluster as the identity of the harness clients' calls while it runs (World: sim/iam.py)
        self.acting: Callable[[str], contextlib.AbstractContextManager[None]] = lambda cluster: contextlib.nullcontext()
        self.config_jobs = config_jobs  # cluster -> [{namespace, kind, name}] from medic.yaml
        self.quarantines = quarantines  # cluster -> its quarantine_repeat_offenders (render.py's RBAC: patch nodes)
        self.hyperpod_nodes = hyperpod_nodes  # cluster -> {instance id: ClusterInstanceStatus}
        self.queues: dict[str, str] = {}  # cluster -> the agent's queue URL (from the stack)
        self.table = ""
        self.clusters: dict[str, EksCluster] = {}
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._drained: dict[str, int] = {}

    def close(self) -> None:
        for cluster in self.clusters.values():
            cluster.server.stop()
        self.clusters.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def cluster(self, name: str) -> EksCluster:
        if name not in self.clusters:
            server = KubeApiServer([]).start()
            self.clusters[name] = EksCluster(name, server)
            self._drained[name] = 0
            self._refresh(self.clusters[name])
        return self.clusters[name]

    def watched(self, name: str) -> list[dict]:
        """The agent's watched jobs (its ConfigMap): the config's on the cluster (with their
        launcher_exits_128_or_more_on_sigterm) and every watched `k8s_job` (false unless the config says)."""
        cluster = self.cluster(name)
        jobs = {(job["namespace"], job["kind"], job["name"]): bool(job.get(EXIT_CODE_KEY, False))
                for job in self.config_jobs(name)}
        for key, watched in cluster.jobs.items():
            if watched:
                jobs.setdefault(key, False)
        return [{"namespace": namespace, "kind": kind, "name": job, EXIT_CODE_KEY: exits_128}
                for (namespace, kind, job), exits_128 in sorted(jobs.items())]

    def _refresh(self, cluster: EksCluster) -> None:
        """The agent's ConfigMap and the API server's RBAC, from the same watched list (as render.py ships)."""
        import_agent()
        from medic_agent.eks.commands import WatchedJob

        watched = self.watched(cluster.name)
        cluster.server.set_documents(render_module().rbac(watched, quarantine=self.quarantines(cluster.name)))
        cluster.watched = tuple(WatchedJob(job["namespace"], job["kind"], job["name"], job[EXIT_CODE_KEY])
                                for job in watched)
        for handle in cluster.agents:
            handle.agent.watched = cluster.watched

    def sync_nodes(self, name: str) -> None:
        server = self.cluster(name).server
        instances = self.hyperpod_nodes(name)
        for instance, status in sorted(instances.items()):
            ready, health = NODE_STATES.get(status, (True, "Schedulable"))
            node_name = f"hyperpod-{instance}"  # HyperPod EKS's node name (see the module's docstring)
            node = server.node(node_name)
            if node is None:
                if status not in NOT_REGISTERED:  # its kubelet registers the Node
                    server.add_node(node_name, ready=ready, health=health or "Schedulable")
            elif _ready_now(node) != ready or (health is not None and node["metadata"]["labels"].get(
                    "sagemaker.amazonaws.com/node-health-status") != health):
                server.set_node(node_name, ready=ready, health=health)
        for node in server.nodes():  # an instance no longer in the cluster (replaced away): its kubelet is gone
            instance = node["metadata"]["name"].removeprefix("hyperpod-")
            if instance not in instances and _ready_now(node):
                server.set_node(node["metadata"]["name"], ready=False)

    def put_job(self, cluster: str, namespace: str, name: str, kind: str, replicas: int, watched: bool = True,
                **rules: Any) -> None:
        """The `k8s_job` directive; `rules`: restart_policy, backoff_limit, status, sigterm_exit_code (KubeApiServer
        add_job)."""
        if kind not in JOB_RESOURCES:
            raise ValueError(f"'kind' must be one of {', '.join(JOB_RESOURCES)} (got {kind!r})")
        model = self.cluster(cluster)
        self.sync_nodes(cluster)
        if model.server.job(kind, namespace, name) is not None:
            raise ValueError(f"{kind} {namespace}/{name} already exists on {cluster}")
        model.server.add_job(kind, namespace, name, replicas, **rules)
        model.jobs[(namespace, kind, name)] = watched
        self._refresh(model)

    def put_pod(self, cluster: str, namespace: str, name: str, instance: str, owner: dict | None,
                terminating_since: datetime | None) -> None:
        """The `k8s_pod` directive: a tenant's pod on the node of `instance` (it must be in the cluster), its
        controller ownerReference as `owner` says (uid "job": the named job's real uid), Terminating since
        `terminating_since` (a deletion no kubelet confirms: a finalizer, or a NotReady node)."""
        model = self.cluster(cluster)
        self.sync_nodes(cluster)
        node = f"hyperpod-{instance}"
        if model.server.node(node) is None:
            raise ValueError(f"node {node} is not on {cluster} (put the instance in the cluster with a `node` "
                             "directive first)")
        references = []
        if owner is not None:
            if owner["kind"] not in JOB_RESOURCES:
                raise ValueError(f"'owner.kind' must be one of {', '.join(JOB_RESOURCES)} (got {owner['kind']!r})")
            group, version, _ = JOB_RESOURCES[owner["kind"]]
            uid = owner["uid"]
            if uid == "job":
                job = model.server.job(owner["kind"], namespace, owner["name"])
                if job is None:
                    raise ValueError(f"no {owner['kind']} {namespace}/{owner['name']} on {cluster} to copy a uid from")
                uid = job["metadata"]["uid"]
            references.append({"apiVersion": f"{group}/{version}" if group else version, "kind": owner["kind"],
                               "name": owner["name"], "uid": uid, "controller": True})
        model.server.add_pod(namespace, name, node, references)
        if terminating_since is not None:
            model.server.mark_terminating(namespace, name, terminating_since)

    # the agents
    def _dir(self) -> Path:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="medic-sim-eks-")
        return Path(self._tmp.name)

    def agent(self, cluster: str, replica: int = 1) -> EksAgentHandle:
        """Replica ``replica`` (1-based) of the cluster's agent Deployment (created stopped); ValueError when the
        stack has no agent queue for the cluster."""
        model = self.cluster(cluster)
        while len(model.agents) < replica:
            if cluster not in self.queues:
                known = ", ".join(sorted(self.queues)) or "none"
                raise ValueError(f"the stack has no agent queue for EKS cluster {cluster!r} (agent queues: {known})")
            import_agent()
            from medic_agent.eks.kube import Kube
            from medic_agent.eks.main import EksAgent
            from medic_agent.ledger import Ledger
            from medic_agent.queue import Queue
            from medic_agent.state import State

            identity = f"medic-agent-7c9d5-{chr(ord('a') + len(model.agents))}"  # a Deployment pod's name
            agent = EksAgent(
                cluster=cluster,
                queue=Queue(self.queues[cluster], lambda: self.client("sqs"), wait_seconds=0, visibility_timeout=120),
                ledger=Ledger(self.table, lambda: self.client("dynamodb")),
                kube=Kube.for_server(model.server.url, model.server.token),
                state=State(str(self._dir() / f"state-{cluster}-{identity}.json")),
                watched=model.watched, identity=identity, lease_namespace=LEASE_NAMESPACE,
                # every 60 s of the replay's clock, at the cycles the replay runs, as the agent does by default
                # (--heartbeat-seconds 60, agent/medic_agent/handling.py; the node report goes with each heartbeat)
                heartbeat_seconds=60, seconds=lambda: datetime.now(UTC).timestamp(), standby_seconds=0)
            model.agents.append(EksAgentHandle(cluster, identity, agent))
        return model.agents[replica - 1]

    def cycle(self, out: TextIO) -> bool:
        """One cycle of every running agent (leader check, heartbeat, node report, poll); True when one handled a
        message."""
        handled = 0
        with _agent_logs(out):
            for model in self.clusters.values():
                running = [handle for handle in model.agents if handle.running]
                if running:
                    self.sync_nodes(model.name)
                for handle in running:
                    with self.acting(handle.cluster):  # its own policy: sim/iam.py
                        handled += handle.agent.poll()
        return handled > 0

    def heartbeat_at(self, handle: EksAgentHandle, out: TextIO) -> None:
        """The agent's heartbeat (and node report, as leader) at the current (replay) time."""
        with _agent_logs(out), self.acting(handle.cluster):
            handle.agent.check_leader()
            handle.agent._last_heartbeat = None
            handle.agent.heartbeat_if_due()

    def drain_calls(self) -> list[dict]:
        """The Kubernetes calls the agents made since the last drain: cluster, verb, path, status."""
        lines = []
        for name, model in self.clusters.items():
            calls = model.server.drain_calls(self._drained[name])
            self._drained[name] += len(calls)
            lines += [{"cluster": name, **call} for call in calls]
        return lines
