"""The reconciler's retry of replacements held back for capacity (issue 32, flows/node/capacity): each sweep, a node
whose replace could not be served is checked again, and once capacity is back it goes down the node path (the same
decision, claim and call as an event's), once (the ledger item is taken conditionally)."""

from __future__ import annotations

from medic.core.models import Fault
from medic.flows.node.capacity import replacement_capacity
from medic.flows.node.cluster_sweep import ClusterSweep
from medic.flows.node.remediation import decide_claim_act, finish_node_decision
from medic.ledger.capacity import CapacityStore


def retry_when_capacity_is_back(sweep: ClusterSweep) -> None:
    name, store = sweep.cluster.name, CapacityStore(sweep.table)
    for wait in store.waits(name):
        node = sweep.by_id.get(wait.node_id)
        if node is None or node.gone:  # replaced or removed meanwhile: nothing left to hold
            store.end_wait(name, wait.node_id)
            continue
        if not sweep.room() or replacement_capacity(sweep.deps, sweep.table, name, node.instance_group).short:
            continue  # still short: the page said so once; the next sweep looks again
        if not store.end_wait(name, wait.node_id):
            continue
        sweep.decisions += 1
        fault = Fault(wait.fault) if wait.fault in Fault.__members__.values() else Fault.UNKNOWN
        about = sweep.about(node.node_id, node)
        decision, view = decide_claim_act(sweep.deps, sweep.table, sweep.mode, sweep.cluster, node.node_id, fault,
                                          node, about, health_reason=wait.health_reason)
        finish_node_decision(about, fault, decision, sweep.deps, sweep.table, sweep.cluster, wait.health_reason, view)
