"""Emitting remediation records: `emit` writes a `Record` (core/record.py, the one typed builder) as one
remediation log line and returns the line's fields; `rejected` records an event Medic cannot use."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from medic.core.mode import Mode
from medic.core.models import Action, EventEnvelope, Fault, Outcome, Trigger
from medic.core.record import About, Record
from medic.core.text import short, validation_problems
from medic.obs import emit_record


def emit(record: Record) -> dict:
    """One remediation log line (and its metrics) for the record; returns the line's fields."""
    line = dict(record.fields)
    emit_record(line)
    return line


def rejected(raw: Any, error: ValidationError, mode: Mode, trigger: Trigger, what: str) -> dict:
    """A record for an event Medic cannot use: it names the bad fields and acts on nothing."""
    try:
        event_id = short(EventEnvelope.model_validate(raw).id, 80)
    except ValidationError:
        event_id = "unknown"
    about = About(incident=f"event:{event_id}", trigger=trigger, event_id=event_id, mode=mode)
    return emit(about.record(fault=Fault.INVALID, action=Action.NONE, outcome=Outcome.REJECTED,
                             reason=short(f"Invalid {what}: {validation_problems(error)}", 500)))
