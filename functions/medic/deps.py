"""What a flow is given: the adapters, the ledger table, the config and the ports, in one `Deps` (the composition
root, medic.wiring, builds it once per container).

The adapters only some handlers use (training, Batch and Bedrock jobs, checkpoints, training metrics, agent queues) are
imported and built on first use: a handler that never touches them never imports them (nor the models
behind them) at cold start.

A port is where two flows meet: the flow below declares what it needs here, the flow above implements it,
and the wiring plugs the implementation in, so no flow imports one above it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from medic.adapters.hyperpod import HyperPod
from medic.adapters.mode import ModeSwitch
from medic.adapters.pager import Pager
from medic.config_core import Cluster, CoreConfig
from medic.core import clock
from medic.core.mode import Mode
from medic.core.models import Action, Edge, NodeInfo, Outcome
from medic.core.record import About, Record
from medic.core.repairs import DrainNote
from medic.ledger.table import Table

if TYPE_CHECKING:
    from medic.adapters.agent_queue import AgentQueues
    from medic.adapters.batch import BatchJobs
    from medic.adapters.bedrock import BedrockJobs
    from medic.adapters.checkpoints import Checkpoints
    from medic.adapters.metrics import TrainingMetrics
    from medic.adapters.training import TrainingJobs
    from medic.config_training import JobSections


class _OnFirstUse:
    """A dataclass field whose default is built (and its module imported) on first access; a value passed to
    the constructor is used as is. (A data descriptor as a field default: dataclasses reads the default from
    ``__get__(None, cls)`` and the generated ``__init__`` assigns through ``__set__``.)"""

    def __init__(self, build: Callable[[], Any]) -> None:
        self.build = build
        self.slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance.__dict__.get(self.slot)
        if value is None:
            value = instance.__dict__[self.slot] = self.build()
        return value

    def __set__(self, instance: Any, value: Any) -> None:
        instance.__dict__[self.slot] = None if value is self else value


def _training() -> TrainingJobs:
    from medic.adapters.training import TrainingJobs

    return TrainingJobs()


def _batch() -> BatchJobs:
    from medic.adapters.batch import BatchJobs

    return BatchJobs()


def _bedrock() -> BedrockJobs:
    from medic.adapters.bedrock import BedrockJobs

    return BedrockJobs()


def _checkpoints() -> Checkpoints:
    from medic.adapters.checkpoints import Checkpoints

    return Checkpoints()


def _metrics() -> TrainingMetrics:
    from medic.adapters.metrics import TrainingMetrics

    return TrainingMetrics()


def _agents() -> AgentQueues:
    from medic.adapters.agent_queue import AgentQueues

    return AgentQueues.from_json(os.environ.get("AGENT_QUEUES"))


class NodeSweep(Protocol):
    """What the reconciler's sweep of one cluster knows, as the jobs-on-node port reads it."""

    deps: Deps
    mode: Mode
    run_id: str
    cluster: Cluster
    table: Table
    now: datetime
    by_id: dict[str, NodeInfo]


class JobsOnNode(Protocol):
    """The node flow's port to the jobs on a node it repairs: tell the scheduler before the call, see to the jobs
    after the repair. The agent flow implements it for Slurm (flows/agent/slurm_node.py); on EKS the agent's node
    reports see to the pods (flows/agent/eks_nodes.py), so the node flow has nothing to do there."""

    def before_repair(self, deps: Deps, table: Table, cluster: Cluster, node: NodeInfo | None, node_id: str,
                      incident: str, action: Action, fault: str, event_id: str | None, now: datetime,
                      agent_seen_at: datetime | None) -> DrainNote | None:
        """What the scheduler was told before the node action (None: nothing to tell it). Never waits.
        ``agent_seen_at``: the agent's last heartbeat, read with the node path's other ledger items."""

    def after_the_call(self, drain: DrainNote, outcome: Outcome, table: Table, cluster: Cluster,
                       node_id: str) -> DrainNote:
        """The drain note once the node call answered (a failed call repairs nothing)."""

    def drain_overdue(self, deps: Deps, table: Table, cluster: Cluster, node_id: str, node_name: str,
                      command_id: str, now: datetime) -> DrainNote:
        """The drain did not come by its deadline and the call goes ahead without it: withdraw the drain so it never
        runs during the repair (unless the agent took it already), and say what that means for the jobs."""

    def page_jobs_unknown(self, deps: Deps, table: Table, cluster: Cluster, record: Record,
                          node_name: str | None) -> bool:
        """The one "the jobs on this node need a look" page of a node incident (``record``: the node decision's)."""

    def follow_up(self, sweep: NodeSweep, nodes: list[NodeInfo]) -> None:
        """Each sweep: see to the nodes Medic repaired and the jobs the repairs hit."""

    def while_hyperpod_repairs(self, deps: Deps, table: Table, cluster: Cluster, node: NodeInfo, incident: str,
                               fault: str, event_id: str | None, now: datetime) -> None:
        """HyperPod repairs the node by itself (automatic node recovery): learn the jobs on it, changing nothing, so
        the follow-up sees to them as after Medic's own repairs. Never waits, never raises for AWS errors."""


class NoJobsOnNode:
    """An orchestrator whose jobs the node flow does not see to: nothing to tell, nothing to follow up."""

    def before_repair(self, deps: Deps, table: Table, cluster: Cluster, node: NodeInfo | None, node_id: str,
                      incident: str, action: Action, fault: str, event_id: str | None, now: datetime,
                      agent_seen_at: datetime | None) -> DrainNote | None:
        return None

    def after_the_call(self, drain: DrainNote, outcome: Outcome, table: Table, cluster: Cluster,
                       node_id: str) -> DrainNote:
        return drain

    def drain_overdue(self, deps: Deps, table: Table, cluster: Cluster, node_id: str, node_name: str,
                      command_id: str, now: datetime) -> DrainNote:
        return DrainNote(f"No drain of {node_name} was reported.", node_name)

    def page_jobs_unknown(self, deps: Deps, table: Table, cluster: Cluster, record: Record,
                          node_name: str | None) -> bool:
        return False

    def follow_up(self, sweep: NodeSweep, nodes: list[NodeInfo]) -> None:
        return None

    def while_hyperpod_repairs(self, deps: Deps, table: Table, cluster: Cluster, node: NodeInfo, incident: str,
                               fault: str, event_id: str | None, now: datetime) -> None:
        return None


NO_JOBS_ON_NODE = NoJobsOnNode()


class NodeQuarantine(Protocol):
    """The node flow's port to keep a node in a repair loop out of service after its next repair (issue 32,
    `quarantine_repeat_offenders`): the agent flow implements it for Slurm (drain) and EKS (cordon),
    flows/agent/quarantine.py."""

    def hold(self, deps: Deps, table: Table, cluster: Cluster, node: NodeInfo, position: str, why: str,
             about: About, now: datetime) -> dict | None:
        """Quarantine the node (once per held position): its record, None when held already."""


class NoQuarantine:
    """No way to quarantine (a Deps built without the agent flow): the loop's page is all."""

    def hold(self, deps: Deps, table: Table, cluster: Cluster, node: NodeInfo, position: str, why: str,
             about: About, now: datetime) -> dict | None:
        return None


@dataclass
class Deps:
    # The sections every flow reads (clusters, guardrails, watched jobs, the deploy mode); the job sections are in
    # jobs_config.
    config: CoreConfig
    hyperpod: HyperPod
    table: Table
    pager: Pager
    mode: ModeSwitch
    region: str
    # Orchestrator ("slurm", "eks") -> the jobs-on-node port; one the wiring does not name has none (NoJobsOnNode).
    jobs_on_node: Mapping[str, JobsOnNode]
    now: Callable[[], datetime] = clock.now
    # The deploying account (from the page topic's ARN): events naming another account's cluster are rejected.
    account: str = ""
    # The stack's partition (from the same ARN): aws, aws-us-gov, aws-cn, aws-iso-b, ...; events naming another are
    # rejected.
    partition: str = "aws"
    # The stack's name (MEDIC_STACK: the reconciler's only), which its canary carries to the stack's own canary rule.
    stack: str = ""
    training: TrainingJobs = _OnFirstUse(_training)  # type: ignore[assignment]
    batch: BatchJobs = _OnFirstUse(_batch)  # type: ignore[assignment]
    bedrock: BedrockJobs = _OnFirstUse(_bedrock)  # type: ignore[assignment]
    checkpoints: Checkpoints = _OnFirstUse(_checkpoints)  # type: ignore[assignment]
    metrics: TrainingMetrics = _OnFirstUse(_metrics)  # type: ignore[assignment]
    # AGENT_QUEUES (cluster name -> agent queue URL, Slurm and EKS agents alike), read on first use; unset: none
    agents: AgentQueues = _OnFirstUse(_agents)  # type: ignore[assignment]
    # A node position in a repair loop kept out of service (the wiring's: through the agent flow)
    quarantine: NodeQuarantine = NoQuarantine()  # noqa: RUF009 - stateless

    @cached_property
    def jobs_config(self) -> JobSections:
        """The job sections (training_jobs, batch_jobs, bedrock_jobs, job_failure_rules, and guardrails): `config`
        itself when it is whole (a test's MedicConfig), else validated from the MEDIC_CONFIG it was read from, once,
        where a job flow first reads it. A handler whose events never reach a job flow never builds the job models."""
        from medic.config_training import JobSections

        return self.config if isinstance(self.config, JobSections) else JobSections.from_env(self.config.source)

    def edge(self) -> dict[str, Edge]:
        """The validation context every event is parsed with (core.models.MedicEvent): now, and where the stack
        runs."""
        return {"edge": Edge(now=self.now(), partition=self.partition, account=self.account, region=self.region)}

    def jobs_on(self, cluster: Cluster) -> JobsOnNode:
        return self.jobs_on_node.get(cluster.orchestrator, NO_JOBS_ON_NODE)


