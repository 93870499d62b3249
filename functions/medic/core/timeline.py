"""Incident timelines (pure): when a fault happened, was detected, acted on, repaired, resumed and resolved,
and what it cost in training work. One ``"message": "incident"`` line per incident Medic closes."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

# Each duration is measured from fault_at to its moment (seconds); null where either moment did not happen.
DURATIONS = {"time_to_detect_s": "detected_at", "time_to_act_s": "acted_at", "time_to_repair_s": "repaired_at",
             "time_to_resume_s": "resumed_at", "total_s": "resolved_at"}
MOMENTS = ("fault_at", "detected_at", "acted_at", "repaired_at", "resumed_at", "resolved_at")
# A managed job's incident is `<service's prefix><lineage root>`: SageMaker training jobs `job:`, AWS Batch jobs
# `batch-job:`, Amazon Bedrock customization jobs `bedrock-job:` (their `kind`: training_job, batch_job,
# bedrock_job). `medic history --job` and `medic report --job` take a root.
JOB_INCIDENT_PREFIXES = ("job:", "batch-job:", "bedrock-job:")


def job_incidents(root: str) -> tuple[str, ...]:
    """Every incident a job lineage's root can name, one per service."""
    return tuple(prefix + root for prefix in JOB_INCIDENT_PREFIXES)


class Timeline(NamedTuple):
    incident: str
    kind: str  # node | training_job | batch_job | bedrock_job | stall | divergence | slowdown
    fault: str
    fault_at: datetime | None  # the event's time; for a stall, the probe's last heartbeat before it
    detected_at: datetime | None  # when Medic received it
    cluster: str | None = None
    job: str | None = None
    node_id: str | None = None
    acted_at: datetime | None = None  # Medic's action (the call, the queued command); None: no action
    repaired_at: datetime | None = None  # node Running again, clone InProgress, requeued job running
    resumed_at: datetime | None = None  # the probe's first step after the restart; a clone's `Training` status
    resolved_at: datetime | None = None  # the incident closed; None: Medic gave up (a human owns it)
    last_step: float | None = None  # the probe's last step before the fault
    checkpoint_step: float | None = None  # the last checkpoint step before the fault
    resumed_step: float | None = None  # the step training resumed from after the restart (None: not known)
    steps_per_minute: float | None = None  # the job's recent step rate before the fault
    job_started_at: datetime | None = None  # when the job that failed started (its goodput's wall time from then)


def incident_line(timeline: Timeline) -> dict:
    """The incident's fields, its moments (ISO 8601), the durations from the fault, and the work lost."""
    line: dict = {"incident": timeline.incident, "kind": timeline.kind, "cluster": timeline.cluster,
                  "job": timeline.job, "node_id": timeline.node_id, "fault": timeline.fault}
    for moment in MOMENTS:
        at = getattr(timeline, moment)
        line[moment] = at.isoformat() if at is not None else None
    for duration, moment in DURATIONS.items():
        line[duration] = _seconds(timeline.fault_at, getattr(timeline, moment))
    lost = lost_steps(timeline.last_step, timeline.checkpoint_step, timeline.resumed_step)
    line["lost_steps"] = lost
    line["lost_minutes"] = (round(lost / timeline.steps_per_minute, 2)
                            if lost is not None and timeline.steps_per_minute else None)
    line["job_started_at"] = timeline.job_started_at.isoformat() if timeline.job_started_at else None
    return line


def lost_steps(last_step: float | None, checkpoint_step: float | None,
               resumed_step: float | None = None) -> float | None:
    """The work the restart redoes, up to the last step before the fault: from the last checkpoint, or from the step
    training really resumed at when that is below it (it resumed behind its checkpoint: from scratch, or an older
    one); None when neither start is known."""
    start = checkpoint_step
    if resumed_step is not None and (checkpoint_step is None or resumed_step < checkpoint_step):
        start = resumed_step
    if last_step is None or start is None:
        return None
    return max(0.0, last_step - start)


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    # A moment read off a one-minute metric can precede the fault's own stamp by less than a minute: never negative.
    return round(max(0.0, (end - start).total_seconds()), 3)


def node_timeline(*, incident: str, cluster: str, node_id: str, fault: str, fault_at: datetime | None,
                  detected_at: datetime | None, acted_at: datetime | None, repaired_at: datetime | None,
                  resolved_at: datetime | None) -> dict:
    """A node incident's line: the health event (fault_at), Medic's receipt of it and its reboot or replace call,
    the node seen Running again by a reconciler sweep (repaired and resolved: no probe step is tied to a node).
    ``node_id`` is the instance Medic acted on (a replacement runs under a new id, the incident keeps the old)."""
    return incident_line(Timeline(incident=incident, kind="node", fault=fault, fault_at=fault_at,
                                  detected_at=detected_at, cluster=cluster, node_id=node_id, acted_at=acted_at,
                                  repaired_at=repaired_at, resolved_at=resolved_at))


def job_timeline(*, incident: str, job: str, fault: str, fault_at: datetime | None, detected_at: datetime,
                 restarted_at: datetime | None, resumed_at: datetime | None = None,
                 job_started_at: datetime | None = None, kind: str = "training_job") -> dict:
    """A training job's incident line. With a restart, written once the clone trains (or never will): the clone is
    InProgress as soon as CreateTrainingJob returns (repaired then), training again at its first `Training`
    secondary status (resumed and resolved then; null when it ended or gave up before: the next failure of the
    clone is a new attempt of the same incident). Without one (gave up, not retryable, suppressed, failed), written
    when the failure's handling ends: the action, the repair and the resolution are null: a human owns it."""
    return incident_line(Timeline(incident=incident, kind=kind, fault=fault, fault_at=fault_at,
                                  detected_at=detected_at, job=job, acted_at=restarted_at,
                                  repaired_at=restarted_at, resumed_at=resumed_at, resolved_at=resumed_at,
                                  job_started_at=job_started_at))


def alarm_timeline(*, incident: str, kind: str, fault: str, cluster: str, job: str | None,
                   fault_at: datetime | None, detected_at: datetime | None, resolved_at: datetime) -> dict:
    """A page-only alarm incident's line (divergence, slowdown): the alarm's ALARM (fault_at), Medic's receipt of
    it (detected_at), its OK (resolved_at); Medic acts on neither, so acted, repaired and resumed are null."""
    return incident_line(Timeline(incident=incident, kind=kind, fault=fault, fault_at=fault_at,
                                  detected_at=detected_at, cluster=cluster, job=job, resolved_at=resolved_at))
