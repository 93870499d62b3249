"""Operators' views of the ledger: what ``medic status`` shows from it, and the mode changes' JSON.

The ledger's stores read and parse every item (medic.ledger.overview gathers them in one scan; the keys and
item shapes: functions/medic/ledger/README.md); this module only judges and presents what they return.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from medic.config import Guardrails, MedicConfig
from medic.ledger.modes import ModeChange
from medic.ledger.overview import LedgerOverview


def mode_change_json(change: ModeChange) -> dict:
    return {"stack": change.stack, "at": change.at.isoformat(), "mode": change.mode, "previous": change.previous,
            "who": change.who, "reason": change.reason}


@dataclass
class Budget:
    cluster: str
    limit: int
    used: int  # node actions in the rolling hour
    in_repair: int  # node actions inside the repair window (the breaker's count)
    repair_minutes: int
    max_fraction_in_repair: float
    next_free_at: datetime | None  # when the oldest action of the hour leaves the window

    @property
    def left(self) -> int:
        return max(self.limit - self.used, 0)

    def as_json(self) -> dict:
        return {"cluster": self.cluster, "max_node_actions_per_hour": self.limit, "used_last_hour": self.used,
                "left": self.left, "in_repair": self.in_repair, "repair_minutes": self.repair_minutes,
                "max_fraction_in_repair": self.max_fraction_in_repair,
                "next_free_at": self.next_free_at.isoformat() if self.next_free_at else None}


def open_incidents(overview: LedgerOverview, guardrails_of: Callable[[str], Guardrails], now: datetime) -> list[dict]:
    """Incidents still waiting on someone: paged and not closed, escalated, open alarms, recovery watches,
    and nodes Medic acted on that are still inside their repair window."""
    incidents: dict[str, dict] = {}

    def note(incident: str, state: str, since: datetime | None) -> None:
        entry = incidents.setdefault(incident, {"incident": incident, "states": [], "since": since})
        entry["states"].append(state)
        if since and (entry["since"] is None or since < entry["since"]):
            entry["since"] = since

    memory = overview.real
    for page in memory.pages:
        note(page.incident.removesuffix(":recovery"), "paged, not closed", page.paged_at)
    for escalation in memory.escalations:
        note(escalation.incident, "escalated (no more automatic restarts)", escalation.escalated_at)
    for alarm in memory.open_alarms:
        note(alarm.incident, f"alarm {alarm.alarm} in ALARM", alarm.opened_at)
    for watch in memory.recoveries:
        if watch.held:  # a node repair owns the job: its window starts when the node is back
            note(watch.incident, f"held by the repair of {watch.held_by}: its recovery window starts when the node "
                                 "is back", watch.restarted_at)
        else:
            note(watch.incident, f"waiting for training to resume (until {watch.deadline:%H:%M} UTC)",
                 watch.restarted_at)
    for node in memory.nodes:
        state, incident = node.state, f"node:{node.cluster}:{node.node_id}"
        repair = timedelta(minutes=guardrails_of(node.cluster).repair_minutes)
        if state.outcome == "executed" and now - state.acted_at < repair:
            note(incident, f"{state.action} in progress (since Medic acted)", state.acted_at)
        elif state.outcome == "in_flight":
            note(incident, f"{state.action} claimed, call not confirmed yet (in flight)", state.acted_at)
        elif state.outcome == "unknown":
            note(incident, f"{state.action} sent, answer lost: the reconciler re-checks the node", state.acted_at)
        elif state.outcome == "awaiting_drain":
            note(incident, f"{state.action} claimed, waiting for the agent's drain of the node in Slurm",
                 state.acted_at)
    for repair in memory.repairs:
        watch = repair.watch
        text = f"in repair ({watch.status}, started by {'medic' if watch.medics else 'hyperpod'})"
        if watch.reported:
            text += ", longer than repair_minutes: paged"
        note(f"node:{repair.cluster}:{watch.node_id}", text, watch.since)
    return sorted(incidents.values(), key=lambda entry: entry["since"] or now, reverse=True)


def recent_actions(overview: LedgerOverview, since: datetime) -> list[dict]:
    """Medic's last action per node, and job lineage restarts, since then (both namespaces)."""
    actions = []
    for dry_run in (False, True):
        memory = overview.of(dry_run)
        for node in memory.nodes:
            state = node.state
            if state.acted_at >= since:
                actions.append({"at": state.acted_at, "cluster": node.cluster, "subject": node.node_id,
                                "action": state.action, "fault": state.fault, "outcome": state.outcome,
                                "attempt": state.attempt or None, "dry_run": dry_run})
        for lineage in memory.lineages:
            if lineage.last_restart_at >= since:
                actions.append({"at": lineage.last_restart_at, "cluster": None, "subject": lineage.lineage,
                                "action": "restart_job", "fault": None,
                                "outcome": "dry_run" if dry_run else "executed", "attempt": lineage.restarts,
                                "dry_run": dry_run})
    return sorted(actions, key=lambda action: action["at"], reverse=True)


def budgets(overview: LedgerOverview, config: MedicConfig | None, now: datetime, dry_run: bool) -> list[Budget]:
    """Guardrail budget left per cluster: max_node_actions_per_hour minus Medic's node actions in the last
    hour (as medic.flows.node.policy counts them: strictly inside the window)."""
    actions = {name: [action.at for action in state.actions] for name, state in overview.of(dry_run).clusters.items()}
    names = [cluster.name for cluster in config.clusters] if config else sorted(actions)
    result = []
    for name in names:
        guardrails = guardrails_for(config, name)
        hour = [at for at in actions.get(name, []) if at > now - timedelta(hours=1)]
        in_repair = [at for at in actions.get(name, []) if at > now - timedelta(minutes=guardrails.repair_minutes)]
        result.append(Budget(
            cluster=name, limit=guardrails.max_node_actions_per_hour, used=len(hour), in_repair=len(in_repair),
            repair_minutes=guardrails.repair_minutes, max_fraction_in_repair=guardrails.max_fraction_in_repair,
            next_free_at=min(hour) + timedelta(hours=1) if hour else None))
    return result


def guardrails_for(config: MedicConfig | None, cluster_name: str) -> Guardrails:
    """The cluster's guardrails from the config (with its overrides); the defaults without a config."""
    if config is None:
        return Guardrails()
    cluster = config.cluster(cluster_name)
    return config.guardrails_for(cluster) if cluster else config.guardrails
