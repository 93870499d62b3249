"""Everything an operator's overview (``medic status``) reads from the ledger, in one scan.

The handlers read single keys; an operator wants the whole picture: open incidents, recent actions,
budgets, in both namespaces (real and dry run). The ledger is small by design (every item expires within
days), so one consistent scan reads it all; each store picks its own items out of the scan and parses
them (its `*_among` reads), so this module only gathers, as node_event does for the node path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from medic.core.mode import Mode
from medic.core.models import ClusterState
from medic.core.progress import RecoveryWatch
from medic.ledger.incidents import Escalation, IncidentStore, OpenAlarm
from medic.ledger.jobs import JobStore, LineageRestarts
from medic.ledger.nodes import NodeInRepair, NodeMemory, NodeStore
from medic.ledger.pages import PagedIncident, PageStore
from medic.ledger.table import Table


class LedgerMemory(NamedTuple):
    """What one namespace of the ledger holds about incidents, actions and budgets."""

    nodes: tuple[NodeMemory, ...]  # each node's last action
    clusters: Mapping[str, ClusterState]  # each cluster's recent node actions (its budget), by name
    repairs: tuple[NodeInRepair, ...]  # nodes a sweep saw in repair
    pages: tuple[PagedIncident, ...]  # incidents that paged and are not closed
    escalations: tuple[Escalation, ...]
    open_alarms: tuple[OpenAlarm, ...]
    recoveries: tuple[RecoveryWatch, ...]  # restarts waiting for training to resume
    lineages: tuple[LineageRestarts, ...]  # job lineages' restarts


class LedgerOverview(NamedTuple):
    real: LedgerMemory
    dry_run: LedgerMemory  # the dry run's own copy

    def of(self, dry_run: bool) -> LedgerMemory:
        return self.dry_run if dry_run else self.real


def read_overview(table: Table) -> LedgerOverview:
    items = table.scan()
    return LedgerOverview(real=_memory(table.for_mode(Mode.ACT), items),
                          dry_run=_memory(table.for_mode(Mode.DRY_RUN), items))


def _memory(table: Table, items: list[dict]) -> LedgerMemory:
    nodes, incidents = NodeStore(table), IncidentStore(table)
    return LedgerMemory(
        nodes=tuple(nodes.node_states_among(items)), clusters=nodes.cluster_states_among(items),
        repairs=tuple(nodes.repair_watches_among(items)), pages=tuple(PageStore(table).paged_incidents_among(items)),
        escalations=tuple(incidents.escalations_among(items)), open_alarms=tuple(incidents.open_alarms_among(items)),
        recoveries=tuple(incidents.recoveries_among(items)), lineages=tuple(JobStore(table).lineages_among(items)))
