"""The reconciler's side of following HyperPod's own repairs (flows/node/follow.py says what and why)."""

from __future__ import annotations

from datetime import timedelta

from medic.core.models import Action, NodeInfo, Outcome, Why
from medic.core.pages import PageText, console_link
from medic.core.record import Record
from medic.core.text import quoted
from medic.flows.node.cluster_sweep import ClusterSweep
from medic.flows.node.follow import followed_line
from medic.flows.node.loops import note_repair, repair_of
from medic.flows.node.policy import IN_REPAIR_STATUSES
from medic.flows.node.sweep_policy import FAILURE
from medic.ledger.follows import FollowedRepair, FollowStore
from medic.obs import emit_incident

RUNNING = "Running"
# Statuses that show HyperPod's repair under way (a replacement's old instance shuts down, its new one is Pending).
REPAIR_SHOWN = IN_REPAIR_STATUSES | {"ShuttingDown"}


def sweep_followed(sweep: ClusterSweep, nodes: list[NodeInfo]) -> None:
    """Each followed repair: seen under way, over (its incident's line), or past its bound with no repair shown (one
    page)."""
    store = FollowStore(sweep.table)
    followed = store.followed(sweep.cluster.name)
    if not followed:
        return
    by_logical = {node.logical_id: node for node in nodes if node.logical_id}
    bound = timedelta(minutes=sweep.guardrails.repair_minutes)
    for repair in followed:
        node = sweep.by_id.get(repair.node_id) or (by_logical.get(repair.logical_id) if repair.logical_id else None)
        replaced = node is not None and node.node_id != repair.node_id
        shown = node is None or replaced or node.status in REPAIR_SHOWN
        if shown and repair.repair_seen_at is None:
            store.repair_seen(sweep.cluster.name, repair.position, sweep.now)
        if node is not None and node.status == RUNNING and (replaced or repair.repair_seen_at is not None):
            if store.end(sweep.cluster.name, repair.position):
                sweep.report["hyperpod_repairs"] = sweep.report.get("hyperpod_repairs", 0) + 1
                emit_incident(followed_line(repair, sweep.now))
                note_repair(sweep.deps, sweep.table, sweep.about(node.node_id, node), sweep.cluster,
                            repair.logical_id, repair_of(repair.incident, repair.node_id, repair.fault,
                                                         "replace" if replaced else "reboot", "hyperpod", sweep.now,
                                                         repair.fault_at), sweep.now, node)
            continue
        if shown or repair.repair_seen_at is not None or repair.paged_at is not None:
            continue  # under way: a repair status that lasts is the repair watch's page
        if node is not None and node.status == FAILURE:
            continue  # HyperPod's to repair: the repair watch times a failed node on this cluster, and pages it
        if sweep.now - repair.detected_at <= bound:
            continue
        _page_no_repair(sweep, store, repair, node, bound)


def _page_no_repair(sweep: ClusterSweep, store: FollowStore, repair: FollowedRepair, node: NodeInfo | None,
                    bound: timedelta) -> None:
    minutes = int((sweep.now - repair.detected_at).total_seconds() // 60)
    status = node.status if node is not None else "unknown"
    says = f" HyperPod says: {quoted(node.status_message, 200)}." if node and node.status_message else ""
    about = sweep.about(repair.node_id, node).but(incident=repair.incident)
    record = about.record(fault=repair.fault, action=Action.NONE, outcome=Outcome.DEFERRED, why=Why.HUMAN_DECIDES,
                          reason=f"HyperPod's automatic node recovery has shown no repair of the node {minutes} min "
                                 f"after its {repair.fault} fault at {repair.fault_at:%H:%M} UTC (longer than the "
                                 f"{int(bound.total_seconds() // 60)}-minute repair window): its status is "
                                 f"{status}.{says}")

    def after(paged: bool) -> None:
        # Once paged, or when the mode pages nobody (a dry run): no later sweep pages it.
        if paged or not sweep.mode.pages:
            store.paged(sweep.cluster.name, repair.position, sweep.now)

    sweep.record(record, page=True, key=f"{repair.incident}:repair", text=_page(record, sweep.deps.region),
                 after=after)


def _page(record: Record, region: str) -> PageText:
    subject = f"[Medic] {record['cluster']} {record['node_id']}: HyperPod has not repaired the node"
    lines = [
        f"Cluster:        {record['cluster']}",
        f"Node:           {record['node_id']} (instance group {record['instance_group'] or 'unknown'})",
        f"What happened:  {record['reason']}",
        "",
        "What Medic did: nothing (the cluster's NodeRecovery is Automatic: the repair is HyperPod's)",
        "What to do:     Open the node in the console: check its status and the cluster events; reboot or replace "
        "it by hand (BatchRebootClusterNodes / BatchReplaceClusterNodes) if HyperPod does not.",
        f"Console:        {console_link(region, record['cluster'])}",
        f"Incident:       {record['incident']} (reconcile run {record['event_id']}, mode {record['mode']})",
    ]
    return PageText(subject[:100], lines)
