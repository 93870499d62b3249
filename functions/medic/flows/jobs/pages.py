"""What a training job's page says: pure text for a human woken at night."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medic.core.pages import PageText, what_medic_did
from medic.core.text import quoted

JOB_NEXT_STEP = {
    "job_not_retryable": "Fix the job (code, data, config or permissions) and start it again.",
    "job_unknown": "Read the failure reason; restart the job from its checkpoint by hand if it is transient.",
}


def job_page(record: Mapping[str, Any], failure_reason: str, region: str, *, kind: str = "training job",
             console: str | None = None, extra: tuple[str, ...] = ()) -> PageText:
    """``failure_reason``: the job's FailureReason, the user script's own output at the end: shown quoted.
    ``kind`` and ``console``: the service's words and console link (SageMaker's by default); ``extra``: lines the
    service adds before the console (Batch: that its own retries already ran)."""
    job = record["job"]
    subject = f"[Medic] {kind} {job}: {record['fault']} - {record['outcome']}"
    sagemaker_console = f"https://{region}.console.aws.amazon.com/sagemaker/home?region={region}#/jobs/{job}"
    next_step = JOB_NEXT_STEP.get(record["fault"], "Decide whether to restart the job by hand.")
    lines = [
        f"Job:            {job}",
        f"Lineage:        {record['incident']} (attempt {record['attempt']})",
        f"Failure:        {quoted(failure_reason, 800)}",
        "",
        f"What Medic did: {what_medic_did(record)}",
        f"Why:            {record['reason']}",
        "",
        f"What to do:     {next_step}",
        *extra,
        f"Console:        {console or sagemaker_console}",
        f"Event:          {record['event_id']} (mode {record['mode']})",
    ]
    return PageText(subject, lines)
