"""The reconciler's repair watch: repairs that take longer than the repair window page once.

A node's repair is timed from Medic's own action when Medic started it (found by instance id, or by
NodeLogicalId for a replacement), else from when a sweep first saw it in a repair status (kept in the
ledger, ``repair#<cluster>``). Finished repairs are forgotten, so a later repair pages again.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from medic.core.mode import Mode
from medic.core.models import Action, Fault, NodeInfo, Outcome, Why
from medic.core.repairs import PendingClaim
from medic.core.timeline import node_timeline
from medic.flows.node.cluster_sweep import ClusterSweep
from medic.flows.node.loops import note_repair, repair_of
from medic.flows.node.sweep_policy import (
    FAILURE,
    MAX_REPAIR_WATCHES_PER_CLUSTER,
    RESERVE_SECONDS,
    repair_overdue,
    repair_since,
    repair_statuses,
    slow_repair_page,
    slow_repair_reason,
)
from medic.obs import emit_incident

# Medic's own action counts as the start of a repair a sweep finds only if it is this recent;
# an older action was an earlier repair (the sweep in between would have seen this one).
MEDIC_REPAIR_LINK = timedelta(minutes=15)


def sweep_repairs(sweep: ClusterSweep, nodes: list[NodeInfo], acted: dict, acted_logical: dict) -> None:
    """Repairs that take longer than the repair window page once; finished ones are forgotten."""
    name = sweep.cluster.name
    # Only a failed node's repair depends on the cluster's NodeRecovery: no DescribeCluster without one.
    failing = any(node.status == FAILURE for node in nodes)
    statuses = repair_statuses(sweep.node_recovery() if failing else "none")
    watches = sweep.node_store.repair_watches(name)
    in_repair = [node for node in nodes if node.status in statuses]
    sweep.report["in_repair"] = len(in_repair)
    writes = 0
    for node in in_repair:
        watch = watches.get(node.node_id)
        if watch is None:
            if writes >= MAX_REPAIR_WATCHES_PER_CLUSTER or sweep.remaining() < RESERVE_SECONDS:
                sweep.report["left_for_next_run"] += 1
                continue
            medic_at = acted.get(node.node_id) or (acted_logical.get(node.logical_id) if node.logical_id else None)
            medics = medic_at is not None and sweep.now - medic_at <= MEDIC_REPAIR_LINK
            since = repair_since(None, medic_at if medics else None, sweep.now)
            origin = _origin(sweep, node, acted) if medics else None
            sweep.node_store.watch_repair(name, node.node_id, node.status, since, medics, origin, node.slurm_node)
            writes += 1
            reported = False
        else:
            since, reported, medics = watch.since, watch.reported, watch.medics
        if reported or not repair_overdue(since, sweep.now, sweep.guardrails.repair_minutes):
            continue
        sweep.report["slow_repairs"] += 1
        about = sweep.about(node.node_id, node)
        record = about.record(fault=Fault.FAILED_NODES, action=Action.NONE, outcome=Outcome.DEFERRED,
                              why=Why.HUMAN_DECIDES,
                              reason=slow_repair_reason(node, since, sweep.now, sweep.guardrails.repair_minutes,
                                                        medics))
        key = f"{about.incident}:repair"

        def after(paged: bool, node_id: str = node.node_id, key: str = key) -> None:
            # Reported once paged, or when the mode pages nobody (a dry run): no later sweep pages it.
            if paged or not sweep.mode.pages or sweep.page_store.incident_paged(key):
                sweep.node_store.repair_reported(name, node_id, sweep.now)

        sweep.record(record, page=True, key=key, text=slow_repair_page(record, sweep.deps.region), after=after)
    for node_id, watch in watches.items():
        node = sweep.by_id.get(node_id)
        if node is None or node.status not in statuses:
            sweep.node_store.end_repair_watch(name, node_id)
            if watch.medics and watch.origin and node is not None:  # gone: a replaced instance, its successor tells
                _repair_timeline(sweep, watch.origin, node)
            elif not watch.medics and node is not None and node.status == RUNNING \
                    and _recovery_known(sweep) != "automatic":  # (on Automatic, HyperPod's repairs are followed)
                note_repair(sweep.deps, sweep.table, sweep.about(node_id, node), sweep.cluster, node.logical_id,
                            repair_of(sweep.incident(node_id), node_id, Fault.UNKNOWN.value, "unknown", "someone",
                                      sweep.now, watch.since), sweep.now, node)
            if watch.reported:
                sweep.page_store.release_page(f"{sweep.incident(node_id)}:repair")  # a later repair pages again


def _recovery_known(sweep: ClusterSweep) -> str:
    """The cluster's NodeRecovery as this sweep's snapshot says (the config's without one): no DescribeCluster of its
    own for a repair's history."""
    return (sweep.info.node_recovery if sweep.info is not None else None) or sweep.cluster.node_recovery


def _origin(sweep: ClusterSweep, node: NodeInfo, acted: dict) -> str | None:
    """The instance Medic acted on for this repair: the node itself (a reboot), else the replaced instance under
    the same NodeLogicalId (one GetItem, once per repair)."""
    if node.node_id in acted:
        return node.node_id
    return sweep.node_store.node_for_logical_id(sweep.cluster.name, node.logical_id) if node.logical_id else None


def _repair_timeline(sweep: ClusterSweep, origin: str, node: NodeInfo) -> None:
    """Medic's repair is over: its incident's line. Running again is the repair (and the end); Failure again is a
    repair that did not come, for a human (nulls). A node that left the cluster, or went on to another status (a
    deep health check), writes nothing: a replaced instance leaves (ShuttingDown, then gone) and its successor's
    repair watch ends the incident. The sweep sees Running up to one sweep period (5 minutes) after HyperPod
    finished: no API says when the status changed (DescribeClusterNode's LaunchTime is the instance's launch,
    before its lifecycle scripts ran)."""
    if node.status not in (RUNNING, FAILURE) or sweep.mode is Mode.DRY_RUN:  # a dry run acted on nothing
        return
    claim = sweep.node_store.node_claims(sweep.cluster.name, [origin]).get(origin)
    if claim is None or claim.outcome == Outcome.DRY_RUN.value:
        return
    repaired = sweep.now if node.status == RUNNING else None
    emit_incident(claim_timeline(sweep.incident(origin), sweep.cluster.name, claim, repaired, repaired))
    if repaired is not None:  # one more repair in the position's history
        note_repair(sweep.deps, sweep.table, sweep.about(node.node_id, node), sweep.cluster, node.logical_id,
                    repair_of(sweep.incident(origin), origin, claim.fault, claim.action, "medic", repaired,
                              claim.fault_at or claim.acted_at), sweep.now, node)


def claim_timeline(incident: str, cluster: str, claim: PendingClaim, repaired_at: datetime | None,
                   resolved_at: datetime | None) -> dict:
    """A node incident's line from Medic's claim (the fault, its time and receipt, the action)."""
    return node_timeline(incident=incident, cluster=cluster, node_id=claim.node_id, fault=claim.fault,
                         fault_at=claim.fault_at, detected_at=claim.detected_at or claim.acted_at,
                         acted_at=claim.acted_at, repaired_at=repaired_at, resolved_at=resolved_at)


RUNNING = "Running"
