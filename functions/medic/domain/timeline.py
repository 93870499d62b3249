"""Incident timelines (pure): when a fault happened, was detected, acted on, repaired, resumed and resolved,
and what it cost in training work. One ``"message": "incident"`` line per incident Medic closes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# Each duration is measured from fault_at to its moment (seconds); null where either moment did not happen.
DURATIONS = {"time_to_detect_s": "detected_at", "time_to_act_s": "acted_at", "time_to_repair_s": "repaired_at",
             "time_to_resume_s": "resumed_at", "total_s": "resolved_at"}
MOMENTS = ("fault_at", "detected_at", "acted_at", "repaired_at", "resumed_at", "resolved_at")


@dataclass(frozen=True)
class Timeline:
    incident: str
    kind: str  # node | training_job | stall | divergence | slowdown
    fault: str
    fault_at: datetime | None  # the event's time; for a stall, the probe's last heartbeat before it
    detected_at: datetime | None  # when Medic received it
    cluster: str | None = None
    job: str | None = None
    node_id: str | None = None
    acted_at: datetime | None = None  # Medic's action (the call, the queued command); None: no action
    repaired_at: datetime | None = None  # node Running again, clone InProgress, requeued job running
    resumed_at: datetime | None = None  # the probe's first step after the restart
    resolved_at: datetime | None = None  # the incident closed; None: Medic gave up (a human owns it)
    last_step: float | None = None  # the probe's last step before the fault
    checkpoint_step: float | None = None  # the last checkpoint step before the fault
    steps_per_minute: float | None = None  # the job's recent step rate before the fault


def incident_line(timeline: Timeline) -> dict:
    """The incident's fields, its moments (ISO 8601), the durations from the fault, and the work lost."""
    line: dict = {"incident": timeline.incident, "kind": timeline.kind, "cluster": timeline.cluster,
                  "job": timeline.job, "node_id": timeline.node_id, "fault": timeline.fault}
    for moment in MOMENTS:
        at = getattr(timeline, moment)
        line[moment] = at.isoformat() if at is not None else None
    for duration, moment in DURATIONS.items():
        line[duration] = _seconds(timeline.fault_at, getattr(timeline, moment))
    lost = lost_steps(timeline.last_step, timeline.checkpoint_step)
    line["lost_steps"] = lost
    line["lost_minutes"] = (round(lost / timeline.steps_per_minute, 2)
                            if lost is not None and timeline.steps_per_minute else None)
    return line


def lost_steps(last_step: float | None, checkpoint_step: float | None) -> float | None:
    """The work since the last checkpoint, which a restart from it redoes; None when either is unknown."""
    if last_step is None or checkpoint_step is None:
        return None
    return max(0.0, last_step - checkpoint_step)


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    # A moment read off a one-minute metric can precede the fault's own stamp by less than a minute: never negative.
    return round(max(0.0, (end - start).total_seconds()), 3)
