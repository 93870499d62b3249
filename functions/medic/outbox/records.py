"""Building and emitting remediation records, shared by every handler."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from medic.core.models import Action, EventEnvelope, Fault, JobRef, Outcome, RemediationRecord, Trigger
from medic.core.text import short, validation_problems
from medic.obs import emit_record


def complete(fields: dict) -> dict:
    """The record with every schema field present (null where not applicable), every text encodable:
    a lone surrogate from an event would make the log line unwritable, and the decision unrecorded."""
    record = RemediationRecord.model_validate(fields).model_dump(mode="json")
    if "jobs" in fields:  # node actions on Slurm only: the jobs on the node ([]: none; None: unknown)
        jobs = fields["jobs"]
        record["jobs"] = None if jobs is None else [JobRef.model_validate(job).model_dump() for job in jobs]
    return {key: _encodable(value) if isinstance(value, str) else value for key, value in record.items()}


def _encodable(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


def emit(fields: dict) -> dict:
    record = complete(fields)
    emit_record(record)
    return record


def rejected(raw: Any, error: ValidationError, mode: str, trigger: Trigger, what: str) -> dict:
    """A record for an event Medic cannot use: it names the bad fields and acts on nothing."""
    try:
        event_id = short(EventEnvelope.model_validate(raw).id, 80)
    except ValidationError:
        event_id = "unknown"
    problems = validation_problems(error)
    return emit({"incident": f"event:{event_id}", "trigger": trigger, "event_id": event_id,
                 "fault": Fault.INVALID.value, "action": Action.NONE, "outcome": Outcome.REJECTED,
                 "reason": short(f"Invalid {what}: {problems}", 500), "mode": mode})


