"""What a training-progress incident's page says (a stall, a divergence, a slowdown, a restart that did
not bring training back): pure text, shared by the stall response and the recovery check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medic.core.pages import PageText, what_medic_did
from medic.core.text import MedicText, quoted, single_line

ALARM_NEXT_STEP = {
    "stalled": "Look at the job's logs on the cluster; restart it from its checkpoint by hand once the cause is fixed.",
    "diverged": "Inspect the loss curve; resume from an earlier checkpoint with a lower learning rate or "
                "without the offending data.",
    "slowed": "Compare the nodes below; drain or replace the slowest one if it stays behind.",
    "failed_nodes": "Open the cluster in the console: find the failed nodes and why their repair is not progressing.",
    "no_progress": "Training did not resume after Medic's restart: read the job's logs; Medic will not restart "
                   "it again until its stall alarm has been OK.",
}


def alarm_page(record: Mapping[str, Any], alarm: str, alarm_reason: str, details: list[str], region: str) -> PageText:
    """A page about a training or cluster alarm: what it watches, what it saw, what Medic did. ``alarm_reason``: the
    alarm's StateReason (anyone allowed SetAlarmState writes it), shown quoted; Medic's own account of what happened
    is passed as `MedicText`."""
    about = f"job {record['job']}" if record["job"] else f"cluster {record['cluster']}"
    if record["fault"] == "recovered" or record["outcome"] == "ignored":
        subject = f"[Medic] {about}: {alarm} resolved"
    else:
        subject = f"[Medic] {about}: {record['fault']}"
    body = [
        f"Cluster:        {record['cluster']}",
        f"Job:            {record['job'] or '-'}",
        f"Alarm:          {alarm}",
        (f"What happened:  {single_line(alarm_reason)}" if isinstance(alarm_reason, MedicText)
         else f"Alarm says:     {quoted(alarm_reason, 500)}"),
        *details,
        "",
        f"What Medic did: {what_medic_did(record)}",
        f"Why:            {record['reason']}",
        "",
        f"What to do:     {ALARM_NEXT_STEP.get(record['fault'], 'Nothing: this closes the incident.')}",
        f"Alarm console:  https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#alarmsV2:alarm/"
        f"{alarm}",
        f"Incident:       {record['incident']} (event {record['event_id']}, mode {record['mode']})",
    ]
    return PageText(subject[:100], body)
