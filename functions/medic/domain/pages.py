"""What a page says: pure text built from the decision, for a human woken at night."""

from __future__ import annotations

from dataclasses import dataclass

from medic.domain.models import Action, ClusterState, Outcome

NEXT_STEP = {
    Outcome.FAILED: "Check the node in the console; retry the action by hand or replace the node.",
    Outcome.SUPPRESSED: "Decide whether to act on the node by hand; Medic will not act on it now.",
    Outcome.DEFERRED: "Read the health reason and decide: reboot, replace, or leave the node.",
}


@dataclass(frozen=True)
class PageText:
    subject: str
    body: str


def console_link(region: str, cluster: str) -> str:
    return (f"https://{region}.console.aws.amazon.com/sagemaker/home?region={region}"
            f"#/cluster-management/{cluster}")


def node_page(record: dict, health_reason: str, region: str) -> PageText:
    outcome = Outcome(record["outcome"])
    what = {
        Outcome.FAILED: f"{record['action']} FAILED",
        Outcome.SUPPRESSED: f"{record['action']} held back",
        Outcome.DEFERRED: "needs a human",
    }.get(outcome, outcome.value)
    subject = f"[Medic] {record['cluster']} {record['node_id']}: {record['fault']} - {what}"
    body = "\n".join([
        f"Cluster:        {record['cluster']}",
        f"Node:           {record['node_id']}",
        f"Instance group: {record['instance_group'] or 'unknown'}",
        f"Fault:          {record['fault']}",
        f"Health reason:  {health_reason[:500]}",
        "",
        f"What Medic did: {_did(record)}",
        f"Why:            {record['reason']}",
        "",
        f"What to do:     {NEXT_STEP.get(outcome, 'Review the remediation log for this incident.')}",
        f"Console:        {console_link(region, record['cluster'])}",
        f"Incident:       {record['incident']} (event {record['event_id']}, mode {record['mode']})",
    ])
    return PageText(subject, body)


def storm_page(record: dict, cluster_state: ClusterState, region: str, window_minutes: int) -> PageText:
    acted = ", ".join(f"{a.node_id} ({a.action} {a.at:%H:%M})" for a in cluster_state.actions) or "none"
    subject = f"[Medic] {record['cluster']}: node actions held back by guardrails"
    body = "\n".join([
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
    ])
    return PageText(subject, body)


def _did(record: dict) -> str:
    action, outcome = record["action"], record["outcome"]
    if action == Action.NONE.value:
        return "nothing (no automatic action for this fault)"
    if action == Action.RESTART_JOB.value and outcome == Outcome.SUPPRESSED.value:
        return "did not restart the job"
    return {
        Outcome.FAILED.value: f"tried {action}; the call failed",
        Outcome.SUPPRESSED.value: f"did not {action} (held back)",
        Outcome.DEFERRED.value: f"did not {action}",
    }.get(outcome, f"{action}: {outcome}")


JOB_NEXT_STEP = {
    "job_not_retryable": "Fix the job (code, data, config or permissions) and start it again.",
    "job_unknown": "Read the failure reason; restart the job from its checkpoint by hand if it is transient.",
}


def job_page(record: dict, failure_reason: str, region: str) -> PageText:
    job = record["job"]
    subject = f"[Medic] training job {job}: {record['fault']} - {record['outcome']}"
    next_step = JOB_NEXT_STEP.get(record["fault"], "Decide whether to restart the job by hand.")
    body = "\n".join([
        f"Job:            {job}",
        f"Lineage:        {record['incident']} (attempt {record['attempt']})",
        f"Failure:        {failure_reason[:800]}",
        "",
        f"What Medic did: {_did(record)}",
        f"Why:            {record['reason']}",
        "",
        f"What to do:     {next_step}",
        f"Console:        https://{region}.console.aws.amazon.com/sagemaker/home?region={region}#/jobs/{job}",
        f"Event:          {record['event_id']} (mode {record['mode']})",
    ])
    return PageText(subject, body)


ALARM_NEXT_STEP = {
    "stalled": "Look at the job's logs on the cluster; restart it from its checkpoint by hand once the cause is fixed.",
    "diverged": "Inspect the loss curve; resume from an earlier checkpoint with a lower learning rate or "
                "without the offending data.",
    "slowed": "Compare the nodes below; drain or replace the slowest one if it stays behind.",
    "failed_nodes": "Open the cluster in the console: find the failed nodes and why their repair is not progressing.",
    "no_progress": "Training did not resume after Medic's restart: read the job's logs; Medic will not restart "
                   "it again until its stall alarm has been OK.",
}


def alarm_page(record: dict, alarm: str, alarm_reason: str, details: list[str], region: str) -> PageText:
    """A page about a training or cluster alarm: what it watches, what it saw, what Medic did."""
    about = f"job {record['job']}" if record["job"] else f"cluster {record['cluster']}"
    if record["fault"] == "recovered" or record["outcome"] == "ignored":
        subject = f"[Medic] {about}: {alarm} resolved"
    else:
        subject = f"[Medic] {about}: {record['fault']}"
    body = [
        f"Cluster:        {record['cluster']}",
        f"Job:            {record['job'] or '-'}",
        f"Alarm:          {alarm}",
        f"Alarm says:     {alarm_reason[:500]}",
        *details,
        "",
        f"What Medic did: {_did(record)}",
        f"Why:            {record['reason']}",
        "",
        f"What to do:     {ALARM_NEXT_STEP.get(record['fault'], 'Nothing: this closes the incident.')}",
        f"Alarm console:  https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#alarmsV2:alarm/"
        f"{alarm}",
        f"Incident:       {record['incident']} (event {record['event_id']}, mode {record['mode']})",
    ]
    return PageText(subject[:100], "\n".join(body))


CLUSTER_EVENT_NEXT_STEP = {
    "capacity_shortfall": "Capacity is short for this instance type: wait and retry the replacement, use a "
                          "reservation or another Availability Zone, or shrink the instance group.",
    "lifecycle_script_failed": "Read the lifecycle script's log in the log group below, fix the script, then "
                               "replace the node.",
    "repair_failed": "Check the node in the console; retry the reboot or replacement by hand.",
}


def cluster_event_page(record: dict, description: str, failure_message: str, log_group: str,
                       region: str) -> PageText:
    where = record["node_id"] or record["instance_group"] or record["cluster"]
    subject = f"[Medic] {record['cluster']} {where}: {record['fault']}"
    body = "\n".join([
        f"Cluster:        {record['cluster']}",
        f"Node:           {record['node_id'] or '-'} (instance group {record['instance_group'] or '-'})",
        f"HyperPod says:  {description[:500]}",
        *([f"Failure:        {failure_message[:800]}"] if failure_message else []),
        "",
        f"What Medic did: {_did(record)}",
        f"Why:            {record['reason']}",
        "",
        f"What to do:     {CLUSTER_EVENT_NEXT_STEP.get(record['fault'], 'Read the event and the cluster logs.')}",
        f"Logs:           CloudWatch log group {log_group}",
        f"Console:        {console_link(region, record['cluster'])}",
        f"Incident:       {record['incident']} (event {record['event_id']}, mode {record['mode']})",
    ])
    return PageText(subject[:100], body)
