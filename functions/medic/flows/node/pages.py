"""What a page says: pure text built from the decision, for a human woken at night."""

from __future__ import annotations

from medic.core.models import ClusterState, Outcome
from medic.core.pages import PageText, console_link, what_medic_did
from medic.core.record import Record
from medic.core.text import quoted, untrusted

NEXT_STEP = {
    Outcome.FAILED: "Check the node in the console; retry the action by hand or replace the node.",
    Outcome.SUPPRESSED: "Decide whether to act on the node by hand; Medic will not act on it now.",
    Outcome.DEFERRED: "Read the health reason and decide: reboot, replace, or leave the node.",
}


def node_page(record: Record, health_reason: str, region: str) -> PageText:
    """``health_reason``: HyperPod's words (the health event's HealthStatusReason), shown quoted; Medic's own
    account of a node found without one is passed as `MedicText`."""
    outcome = Outcome(record["outcome"])
    what = {
        Outcome.FAILED: f"{record['action']} FAILED",
        Outcome.SUPPRESSED: f"{record['action']} held back",
        Outcome.DEFERRED: "needs a human",
    }.get(outcome, outcome.value)
    subject = f"[Medic] {record['cluster']} {record['node_id']}: {record['fault']} - {what}"
    lines = [
        f"Cluster:        {record['cluster']}",
        f"Node:           {record['node_id']}",
        f"Instance group: {record['instance_group'] or 'unknown'}",
        f"Fault:          {record['fault']}",
        f"Health reason:  {untrusted(health_reason, 500)}",
        "",
        f"What Medic did: {what_medic_did(record)}",
        f"Why:            {record['reason']}",
        "",
        f"What to do:     {NEXT_STEP.get(outcome, 'Review the remediation log for this incident.')}",
        f"Console:        {console_link(region, record['cluster'])}",
        f"Incident:       {record['incident']} (event {record['event_id']}, mode {record['mode']})",
    ]
    return PageText(subject, lines)


def storm_page(record: Record, cluster_state: ClusterState, region: str, window_minutes: int) -> PageText:
    acted = ", ".join(f"{a.node_id} ({a.action} {a.at:%H:%M})" for a in cluster_state.actions) or "none"
    subject = f"[Medic] {record['cluster']}: node actions held back by guardrails"
    lines = [
        f"Cluster:        {record['cluster']}",
        f"Guardrail:      {record['reason']}",
        f"Suppressed now: {record['node_id']} ({record['fault']}, instance group {record['instance_group']})",
        f"Acted on:       {acted}",
        "",
        "Many nodes failing at once usually means a systemic fault (bad AMI, FSx or network",
        "outage) that replacing nodes will not fix. Medic sends this summary once per cluster",
        f"per {window_minutes} minutes; every further suppressed node is in the remediation log:",
        f"  filter message = 'remediation' and cluster = '{record['cluster']}' and outcome = 'suppressed'",
        "",
        "What to do:     Find the common cause; act on nodes by hand, or pause Medic while you do.",
        f"Console:        {console_link(region, record['cluster'])}",
    ]
    return PageText(subject, lines)


CLUSTER_EVENT_NEXT_STEP = {
    "capacity_shortfall": "Capacity is short for this instance type: wait and retry the replacement, use a "
                          "reservation or another Availability Zone, or shrink the instance group.",
    "lifecycle_script_failed": "Read the lifecycle script's log in the log group below, fix the script, then "
                               "replace the node.",
    "repair_failed": "Check the node in the console; retry the reboot or replacement by hand.",
}


def cluster_event_page(record: Record, description: str, failure_message: str, log_group: str,
                       region: str) -> PageText:
    where = record["node_id"] or record["instance_group"] or record["cluster"]
    subject = f"[Medic] {record['cluster']} {where}: {record['fault']}"
    lines = [
        f"Cluster:        {record['cluster']}",
        f"Node:           {record['node_id'] or '-'} (instance group {record['instance_group'] or '-'})",
        f"HyperPod says:  {quoted(description, 500)}",
        *([f"Failure:        {quoted(failure_message, 800)}"] if failure_message else []),
        "",
        f"What Medic did: {what_medic_did(record)}",
        f"Why:            {record['reason']}",
        "",
        f"What to do:     {CLUSTER_EVENT_NEXT_STEP.get(record['fault'], 'Read the event and the cluster logs.')}",
        f"Logs:           CloudWatch log group {log_group}",
        f"Console:        {console_link(region, record['cluster'])}",
        f"Incident:       {record['incident']} (event {record['event_id']}, mode {record['mode']})",
    ]
    return PageText(subject[:100], lines)
