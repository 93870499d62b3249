"""Read-only views of the ledger for operators, and the one item the CLI writes (a mode change).

The stores of medic.ledger read single keys for the handlers; an operator wants the whole picture (open
incidents, recent actions, budgets), so this module scans the table itself. The ledger is small by
design: every item expires within days (TTL), except the mode changes written here.

Key layout (functions/medic/ledger/README.md; a ``dry_run#`` prefix marks a dry run's own copy):
  node#<cluster>#<node>/state      last action on a node (fault, action, outcome, acted_at, attempt)
  cluster#<cluster>/actions        the cluster's node actions of the last two hours (the budget)
  incident#<incident>/page         the incident paged a human and is not closed yet
  incident#<incident>/escalated    no more automatic restarts until the incident closes
  alarm#<alarm>/open               an alarm's open incident
  recovery#watch/<incident>        waiting for training to resume after a restart
  lineage#<root>/restarts          restarts of a training job lineage
  repair#<cluster>/<node>          a node the reconciler saw in repair (status, since, started_by, reported_at)
  modechange#<stack>/<ISO time>    written by ``medic pause|resume|mode``: mode, previous, who, reason
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from medic.config import Guardrails, MedicConfig
from medic_cli.render import parse_time

DRY_RUN_PREFIX = "dry_run#"


@dataclass(frozen=True)
class ModeChange:
    stack: str
    at: datetime
    mode: str
    previous: str | None
    who: str
    reason: str

    def as_json(self) -> dict:
        return {"stack": self.stack, "at": self.at.isoformat(), "mode": self.mode, "previous": self.previous,
                "who": self.who, "reason": self.reason}


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


@dataclass
class Snapshot:
    """Everything ``medic status`` shows from the ledger, read in one scan."""

    items: list[dict] = field(default_factory=list)

    def of(self, dry_run: bool = False) -> Iterator[tuple[str, str, dict]]:
        """(pk without the dry-run prefix, sk, item) for one namespace."""
        for item in self.items:
            pk, sk = item["pk"]["S"], item["sk"]["S"]
            if pk.startswith(DRY_RUN_PREFIX) != dry_run:
                continue
            yield pk.removeprefix(DRY_RUN_PREFIX), sk, item


def scan(client: Any, table: str) -> Snapshot:
    items: list[dict] = []
    for page in client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        items.extend(page.get("Items", []))
    return Snapshot(items)


def _s(item: dict, name: str) -> str | None:
    value = item.get(name, {})
    return value.get("S") if isinstance(value, dict) else None


def _n(item: dict, name: str) -> int | None:
    value = item.get(name, {})
    try:
        return int(value["N"]) if isinstance(value, dict) and "N" in value else None
    except ValueError:
        return None


def open_incidents(snapshot: Snapshot, guardrails_of: Any, now: datetime) -> list[dict]:
    """Incidents still waiting on someone: paged and not closed, escalated, open alarms, recovery watches,
    and nodes Medic acted on that are still inside their repair window."""
    incidents: dict[str, dict] = {}

    def note(incident: str, state: str, since: datetime | None) -> None:
        entry = incidents.setdefault(incident, {"incident": incident, "states": [], "since": since})
        entry["states"].append(state)
        if since and (entry["since"] is None or since < entry["since"]):
            entry["since"] = since

    for pk, sk, item in snapshot.of():
        kind, _, rest = pk.partition("#")
        if kind == "incident" and sk == "page":
            note(rest.removesuffix(":recovery"), "paged, not closed", parse_time(_s(item, "paged_at")))
        elif kind == "incident" and sk == "escalated":
            note(rest, "escalated (no more automatic restarts)", parse_time(_s(item, "escalated_at")))
        elif kind == "alarm" and sk == "open":
            note(_s(item, "incident") or f"alarm:{rest}", f"alarm {rest} in ALARM", parse_time(_s(item, "opened_at")))
        elif kind == "recovery" and rest == "watch":
            deadline = parse_time(_s(item, "deadline"))
            note(sk, f"waiting for training to resume (until {deadline:%H:%M} UTC)" if deadline
                 else "waiting for training to resume", parse_time(_s(item, "restarted_at")))
        elif kind == "node" and sk == "state":
            cluster, _, node = rest.partition("#")
            acted, action, outcome = parse_time(_s(item, "acted_at")), _s(item, "action"), _s(item, "outcome")
            repair = timedelta(minutes=guardrails_of(cluster).repair_minutes)
            if outcome == "executed" and acted and now - acted < repair:
                note(f"node:{cluster}:{node}", f"{action} in progress (since Medic acted)", acted)
            elif outcome == "in_flight":
                note(f"node:{cluster}:{node}", f"{action} claimed, call not confirmed yet (in flight)", acted)
            elif outcome == "unknown":
                note(f"node:{cluster}:{node}", f"{action} sent, answer lost: the reconciler re-checks the node",
                     acted)
        elif kind == "repair":
            started_by = _s(item, "started_by") or "?"
            state = f"in repair ({_s(item, 'status') or '?'}, started by {started_by})"
            if _s(item, "reported_at"):
                state += ", longer than repair_minutes: paged"
            note(f"node:{rest}:{sk}", state, parse_time(_s(item, "since")))
    return sorted(incidents.values(), key=lambda entry: entry["since"] or now, reverse=True)


def recent_actions(snapshot: Snapshot, since: datetime) -> list[dict]:
    """Medic's last action per node, and job lineage restarts, since then (both namespaces)."""
    actions = []
    for dry_run in (False, True):
        for pk, sk, item in snapshot.of(dry_run):
            kind, _, rest = pk.partition("#")
            if kind == "node" and sk == "state":
                at = parse_time(_s(item, "acted_at"))
                cluster, _, node = rest.partition("#")
                subject = node
            elif kind == "lineage" and sk == "restarts":
                at = parse_time(_s(item, "last_restart_at"))
                cluster, subject = None, rest
            else:
                continue
            if at is None or at < since:
                continue
            actions.append({
                "at": at, "cluster": cluster, "subject": subject,
                "action": _s(item, "action") or "restart_job",
                "fault": _s(item, "fault"),
                "outcome": _s(item, "outcome") or ("dry_run" if dry_run else "executed"),
                "attempt": _n(item, "attempt") or _n(item, "restarts"),
                "dry_run": dry_run,
            })
    return sorted(actions, key=lambda action: action["at"], reverse=True)


def cluster_names(snapshot: Snapshot) -> list[str]:
    names = set()
    for dry_run in (False, True):
        for pk, sk, _ in snapshot.of(dry_run):
            if pk.startswith("cluster#") and sk == "actions":
                names.add(pk.removeprefix("cluster#"))
    return sorted(names)


def budgets(snapshot: Snapshot, config: MedicConfig | None, now: datetime, dry_run: bool) -> list[Budget]:
    """Guardrail budget left per cluster: max_node_actions_per_hour minus Medic's node actions in the last
    hour (as medic.domain.policy counts them: strictly inside the window)."""
    actions: dict[str, list[datetime]] = {}
    for pk, sk, item in snapshot.of(dry_run):
        if pk.startswith("cluster#") and sk == "actions":
            moments = [parse_time(a.get("M", {}).get("at", {}).get("S")) for a in item.get("actions", {}).get("L", [])]
            actions[pk.removeprefix("cluster#")] = [moment for moment in moments if moment]
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


# --- mode changes

def _mode_pk(stack: str) -> str:
    return f"modechange#{stack}"


def record_mode_change(client: Any, table: str, change: ModeChange) -> None:
    item = {"pk": {"S": _mode_pk(change.stack)}, "sk": {"S": change.at.isoformat()},
            "mode": {"S": change.mode}, "who": {"S": change.who}, "reason": {"S": change.reason},
            "at": {"S": change.at.isoformat()}}
    if change.previous is not None:
        item["previous"] = {"S": change.previous}
    client.put_item(TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)")


def mode_changes(client: Any, table: str, stack: str, limit: int = 1) -> list[ModeChange]:
    """The latest mode changes, newest first."""
    response = client.query(TableName=table, KeyConditionExpression="pk = :pk", ScanIndexForward=False,
                            ExpressionAttributeValues={":pk": {"S": _mode_pk(stack)}}, Limit=limit,
                            ConsistentRead=True)
    changes = []
    for item in response.get("Items", []):
        at = parse_time(item["sk"]["S"])
        if at is None:
            continue
        changes.append(ModeChange(stack=stack, at=at, mode=_s(item, "mode") or "?", previous=_s(item, "previous"),
                                  who=_s(item, "who") or "?", reason=_s(item, "reason") or ""))
    return changes
