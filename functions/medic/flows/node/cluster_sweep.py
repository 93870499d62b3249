"""One reconciler sweep of one cluster: its state (the nodes by id, the cluster snapshot, the run's clock and
budget) and how it records and pages. The sweeps themselves: sweep.py (claims and failed nodes) and
sweep_repairs.py (repairs); the jobs on repaired nodes: the jobs-on-node port (medic.deps.JobsOnNode)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from medic.config_core import Cluster
from medic.core.mode import Mode
from medic.core.models import ClusterInfo, NodeInfo, Trigger
from medic.core.pages import PageText
from medic.core.record import About, Record
from medic.deps import Deps
from medic.flows.node.pages import node_page
from medic.flows.node.remediation import report_node_recovery_mismatch
from medic.flows.node.sweep_pages import SweepPages
from medic.flows.node.sweep_policy import MAX_NODE_DECISIONS_PER_CLUSTER, NO_HEALTH_REASON, RESERVE_SECONDS
from medic.ledger.nodes import NodeStore
from medic.ledger.pages import PageStore


@dataclass
class ClusterSweep:
    """One sweep of one cluster: what it knows (the nodes by id, the cluster snapshot, the run's clock and budget)
    and how it records and pages; the sweeps themselves are Sweep's (sweep.py) and sweep_repairs'."""

    deps: Deps
    mode: Mode
    run_id: str
    cluster: Cluster
    remaining: Callable[[], float]
    decisions: int = 0
    by_id: dict[str, NodeInfo] = field(default_factory=dict)
    info: ClusterInfo | None = None

    def __post_init__(self) -> None:
        self.table = self.deps.table.for_mode(self.mode)
        self.node_store, self.page_store = NodeStore(self.table), PageStore(self.table)
        self.outbox = SweepPages(self.deps, self.table, self.mode, self.cluster.name)
        self.guardrails = self.deps.config.guardrails_for(self.cluster)
        self.cooldown = timedelta(minutes=self.guardrails.node_cooldown_minutes)
        self.now = self.deps.now()
        self.report: dict[str, Any] = {
            "cluster": self.cluster.name, "nodes": 0, "failed": 0, "in_repair": 0, "confirmed": 0, "retried": 0,
            "gave_up": 0, "failures_reported": 0, "slow_repairs": 0, "pages": 0, "left_for_next_run": 0}

    def node_recovery(self) -> str:
        """The cluster's real NodeRecovery (this sweep's DescribeCluster), the config's when AWS does not say."""
        if self.info is None:
            self.info = self.deps.hyperpod.cluster_info(self.cluster.name)
            self.check_node_recovery(self.info)
        return self.info.node_recovery or self.cluster.node_recovery

    def check_node_recovery(self, info: ClusterInfo) -> None:
        if info.node_recovery is None:
            return
        if info.node_recovery == self.cluster.node_recovery:
            self.node_store.clear_config_mismatch(self.cluster.name)
            return
        report_node_recovery_mismatch(self.deps, self.table, self.mode, self.cluster, info, Trigger.RECONCILE,
                                      self.run_id)

    # --- records and pages

    def room(self) -> bool:
        if self.decisions < MAX_NODE_DECISIONS_PER_CLUSTER and self.remaining() >= RESERVE_SECONDS:
            return True
        self.report["left_for_next_run"] += 1
        return False

    def incident(self, node_id: str) -> str:
        return node_incident(self.cluster.name, node_id)

    def about(self, node_id: str, node: NodeInfo | None) -> About:
        return About(incident=node_incident(self.cluster.name, node_id), trigger=Trigger.RECONCILE,
                     event_id=self.run_id, mode=self.mode, cluster=self.cluster.name, node_id=node_id,
                     instance_group=node.instance_group if node else None)

    def record(self, record: Record, *, page: bool, key: str | None = None, text: PageText | None = None,
                after: Callable[[bool], None] = lambda paged: None) -> None:
        self.outbox.add(record, page=page, key=key, after=after,
                        text=text or node_page(record, NO_HEALTH_REASON, self.deps.region))


def node_incident(cluster: str, node_id: str) -> str:
    return f"node:{cluster}:{node_id}"
