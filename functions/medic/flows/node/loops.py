"""Repair loops (issue 32): a node position (NodeLogicalId: a replacement keeps it) repaired again and again, by
Medic, by HyperPod's automatic node recovery or by a person, is a fault no repair fixes (a bad rack, cabling, a
flaky part the replacement pool hands back). Each repair that ends is noted (ledger.loops) by the one place that
saw it end: Medic's own (sweep_repairs), HyperPod's followed one (sweep_follow, follow.end_on_healthy), another a
sweep saw on a cluster Medic repairs itself. Reaching `guardrails.repair_loop_count` within
`guardrails.repair_loop_days` pages once (per window) with the position's history: faults, actions, who acted,
how long each took."""

from __future__ import annotations

from datetime import datetime, timedelta

from medic.config_core import Cluster
from medic.core.models import Action, Fault, Outcome, Why
from medic.core.pages import PageSource, PageText, PageWindow, console_link
from medic.core.record import About, Record
from medic.deps import Deps
from medic.ledger.loops import History, LoopStore, Repair
from medic.ledger.table import Table
from medic.outbox.pages import page_incident
from medic.outbox.records import emit

WHO = {"medic": "Medic", "hyperpod": "HyperPod (automatic node recovery)",
       "someone": "not Medic (a person, or HyperPod at someone's request)"}


def note_repair(deps: Deps, table: Table, about: About, cluster: Cluster, logical_id: str | None, repair: Repair,
                now: datetime) -> dict | None:
    """Note a repair that ended; the loop's record (paged once per window) when the position is in a loop."""
    if not logical_id:
        return None  # no position to follow across replacements
    guardrails = deps.config.guardrails_for(cluster)
    window = timedelta(days=guardrails.repair_loop_days)
    history = LoopStore(table).add(cluster.name, logical_id, repair, now, window)
    if history is None or len(history.repairs) < guardrails.repair_loop_count:
        return None
    if not LoopStore(table).claim_page(cluster.name, logical_id, now, window):
        return None
    loop = about.but(incident=f"loop:{cluster.name}:{logical_id}")  # the node id: its instance now
    record = loop.record(fault=Fault.REPAIR_LOOP, action=Action.NONE, outcome=Outcome.DEFERRED,
                         why=Why.HUMAN_DECIDES,
                         reason=f"Node position {logical_id} (NodeLogicalId) was repaired {len(history.repairs)} times "
                                f"in {guardrails.repair_loop_days} days (repair_loop_count "
                                f"{guardrails.repair_loop_count}): {_summary(history)}. Another repair is unlikely to "
                                "fix it; a human decides.")
    text = _page(record, history, deps.region)
    return emit(record.paged_if(page_incident(deps, table, record, text, claim=f"{loop.incident}@{now:%Y%m%dT%H%M}",
                                              window=PageWindow.cluster(PageSource.NODE, cluster.name))))


def repair_of(incident: str, node_id: str, fault: str, action: str, by: str, ended_at: datetime,
              started_at: datetime | None) -> Repair:
    minutes = int((ended_at - started_at).total_seconds() // 60) if started_at is not None else None
    verb = {Action.REBOOT_NODE.value: "reboot", Action.REPLACE_NODE.value: "replace"}.get(action, action)
    return Repair(incident=incident, fault=fault, action=verb, by=by, ended_at=ended_at.isoformat(),
                  minutes=max(0, minutes) if minutes is not None else None, node_id=node_id,
                  started_at=started_at.isoformat() if started_at is not None else None)


def _line(repair: Repair) -> str:
    took = f"{repair.minutes} min" if repair.minutes is not None else "duration unknown"
    return (f"{repair.ended_at[:16].replace('T', ' ')} UTC  {repair.node_id}  {repair.fault}, {repair.action} by "
            f"{WHO.get(repair.by, repair.by)}, {took}")


def _summary(history: History) -> str:
    return "; ".join(f"{r.fault} ({r.action} by {r.by}, back {r.ended_at[:16].replace('T', ' ')})"
                     for r in history.repairs[-5:])


def _page(record: Record, history: History, region: str) -> PageText:
    subject = f"[Medic] {record['cluster']}: node {history.position} keeps failing ({len(history.repairs)} repairs)"
    lines = [
        f"Cluster:        {record['cluster']}",
        f"Node position:  {history.position} (NodeLogicalId; now instance {record['node_id']})",
        f"What happened:  {record['reason']}",
        "History (repair ended, instance, fault, action, who, how long):",
        *[f"  {_line(repair)}" for repair in history.repairs],
        "",
        "What Medic did: nothing more (each repair brought the node back, and it failed again)",
        "What to do:     Take the node out of service and look at the hardware behind it (ask AWS support about the "
        "instance's host); `medic history --cluster C` lists each repair.",
        f"Console:        {console_link(region, record['cluster'])}",
        f"Incident:       {record['incident']} (mode {record['mode']})",
    ]
    return PageText(subject[:100], lines)

