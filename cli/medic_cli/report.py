"""``medic report``: per-job goodput and the incidents behind it, from the incident lines.

Each incident Medic closes is one JSON log line with ``"message": "incident"`` (functions/medic/obs.py,
``emit_incident``); ``sim replay`` prints the same as ``{"kind": "incident", "incident_kind": ...}`` lines.

Goodput of a job over the window = productive time / wall time, the wall time from the window's start or, without
the probe, the job's own start when later (the earliest ``job_started_at`` of its lines: a training job's, from its
state change event). Without the probe's metrics (a file), productive
time is the wall time less what its incidents cost: each incident's downtime (from ``fault_at`` until training ran
again: ``resumed_at``, else ``repaired_at``, else ``resolved_at``, else the end of the window; overlapping
incidents counted once) plus its re-done work (``lost_minutes``). With the probe's metrics (live), productive time
is the minutes the probe counted steps in (``Medic/Training`` Heartbeat > 0) less the re-done work. A slowdown
costs no downtime (the job kept stepping, slower: the probe's minutes show it); a node incident belongs to no
job (its downtime is listed under its kind, not in any job's goodput).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from medic.core.timeline import JOB_INCIDENT_PREFIXES, job_incidents
from medic_cli.history import json_object, log_events, read_lines
from medic_cli.render import parse_time, table, when

MOMENTS = ("fault_at", "detected_at", "acted_at", "repaired_at", "resumed_at", "resolved_at")
DURATIONS = ("time_to_detect_s", "time_to_act_s", "time_to_repair_s", "time_to_resume_s", "total_s")
FIELDS = ("incident", "kind", "cluster", "job", "node_id", "fault", *MOMENTS, *DURATIONS, "lost_steps",
          "lost_minutes", "job_started_at")
NO_DOWNTIME = frozenset({"slowdown"})  # the job kept stepping: degraded, not down
PROBE_NAMESPACE = "Medic/Training"


@dataclass(frozen=True)
class Filters:
    since: datetime | None = None
    until: datetime | None = None
    cluster: str | None = None
    job: str | None = None

    def matches(self, incident: dict) -> bool:
        """An incident that overlaps the window (closed after its start, faulted before its end), of the cluster
        (a training job's incident names none: --cluster leaves it out) and of the job (or its lineage)."""
        closed, fault = incident.get("_at"), incident.get("_fault") or incident.get("_at")
        if self.since and closed and closed < self.since:
            return False
        if self.until and fault and fault > self.until:
            return False
        if self.cluster and incident.get("cluster") != self.cluster:
            return False
        return not self.job or incident.get("job") == self.job or incident.get("incident") in job_incidents(self.job)

    def log_pattern(self) -> str:
        return '{ $.message = "incident" }'


# --- sources

def parse_line(line: str) -> dict | None:
    """An incident from one line: a sim ``incident`` line, a Powertools ``"message": "incident"`` log line, or a
    ``medic report --json`` incident; None for anything else."""
    data = json_object(line)
    if data is None or "_aws" in data:  # an EMF metric line is no incident
        return None
    if data.get("kind") == "incident":  # sim: the line's kind; the incident's own is incident_kind
        data = {**data, "kind": data.get("incident_kind")}
    elif data.get("message") != "incident":
        return None
    incident = {name: data.get(name) for name in FIELDS}
    incident["_fault"] = parse_time(incident["fault_at"])
    # when it closed: the log line's time, else its latest moment (a sim line has no timestamp)
    moments = [moment for moment in (parse_time(incident[name]) for name in MOMENTS) if moment is not None]
    incident["_at"] = parse_time(data.get("timestamp")) or (max(moments) if moments else None)
    return incident


def line_times(lines: Iterable[str]) -> list[datetime]:
    """Every timestamp a replay's output carries (records, alarms, incidents' moments): the replay's span."""
    times: list[datetime] = []
    for line in lines:
        start = line.find("{")
        try:
            data = json.loads(line[start:]) if start >= 0 else None
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        for key in ("timestamp", *MOMENTS):
            moment = parse_time(data.get(key)) if isinstance(data.get(key), str) else None
            if moment is not None:
                times.append(moment)
    return times


def from_file(path: str, filters: Filters, stdin: TextIO | None = None) -> tuple[list[dict], list[datetime]]:
    """The incidents of a ``sim replay`` output (or logs saved as JSON Lines), and the span of all its times."""
    lines = read_lines(path, stdin)
    incidents = [incident for incident in (parse_line(line) for line in lines) if incident is not None]
    return [incident for incident in incidents if filters.matches(incident)], line_times(lines)


def from_logs(logs: Any, groups: Iterable[str], filters: Filters, warn: TextIO | None = None) -> list[dict]:
    """FilterLogEvents (``"message": "incident"``) over each log group inside the window."""
    incidents = [incident for _, event in log_events(logs, groups, filters, warn)
                 if (incident := parse_line(event.get("message", ""))) is not None]
    return [incident for incident in incidents if filters.matches(incident)]


def probe_minutes(cloudwatch: Any, job: str, since: datetime, until: datetime) -> int | None:
    """The minutes the probe counted steps in (Medic/Training Heartbeat Sum > 0, one-minute datapoints); None when
    the job has no probe (no datapoint at all)."""
    query = {"Id": "steps", "ReturnData": True, "MetricStat": {
        "Metric": {"Namespace": PROBE_NAMESPACE, "MetricName": "Heartbeat",
                   "Dimensions": [{"Name": "Job", "Value": job}]}, "Period": 60, "Stat": "Sum"}}
    values: list[float] = []
    for page in cloudwatch.get_paginator("get_metric_data").paginate(
            MetricDataQueries=[query], StartTime=since, EndTime=until):
        for result in page.get("MetricDataResults", []):
            values.extend(result.get("Values", []))
    return sum(1 for value in values if value > 0) if values else None


# --- the arithmetic (pure)

def downtime(incident: dict, end: datetime) -> tuple[datetime, datetime] | None:
    """From the fault until training ran again (resumed, else repaired, else resolved, else ``end``: it did not
    come back inside the window); None for an incident with no downtime or no fault time."""
    start = incident.get("_fault")
    if start is None or incident.get("kind") in NO_DOWNTIME:
        return None
    back = next((moment for moment in (parse_time(incident.get(key)) for key in
                                       ("resumed_at", "repaired_at", "resolved_at")) if moment is not None), end)
    return (start, max(start, min(back, end)))


def job_start(incidents: list[dict], start: datetime, end: datetime) -> datetime:
    """Where a job's wall time starts: its own start when its lines say it (the earliest ``job_started_at``: a
    lineage's root's) and it came inside the window, else the window's start."""
    started = [moment for moment in (parse_time(incident.get("job_started_at")) for incident in incidents)
               if moment is not None]
    return min(max(start, min(started)), end) if started else start


def merged_seconds(spans: Iterable[tuple[datetime, datetime]], start: datetime, end: datetime) -> float:
    """The seconds the spans cover inside [start, end], overlaps counted once."""
    clipped = sorted((max(a, start), min(b, end)) for a, b in spans if b > start and a < end)
    total, current = 0.0, None
    for a, b in clipped:
        if current is None or a > current[1]:
            if current is not None:
                total += (current[1] - current[0]).total_seconds()
            current = [a, b]
        else:
            current[1] = max(current[1], b)
    if current is not None:
        total += (current[1] - current[0]).total_seconds()
    return total


def lost_seconds(incident: dict, end: datetime) -> float:
    """One incident's cost: its downtime and its re-done work."""
    span = downtime(incident, end)
    down = (span[1] - span[0]).total_seconds() if span else 0.0
    return down + 60 * float(incident.get("lost_minutes") or 0)


def report(incidents: list[dict], start: datetime, end: datetime,
           productive_minutes: Callable[[str], int | None] = lambda job: None) -> dict:
    """Goodput per job over [start, end], time lost per incident kind, the top causes, and the incidents."""
    wall = max(0.0, (end - start).total_seconds())
    jobs: dict[str, list[dict]] = {}
    for incident in incidents:
        key = str(incident.get("incident") or "")
        prefix = next((prefix for prefix in JOB_INCIDENT_PREFIXES if key.startswith(prefix)), None)
        name = incident.get("job") or (key.removeprefix(prefix) if prefix else None)
        if name:
            jobs.setdefault(name, []).append(incident)
    job_rows = []
    for name, own in sorted(jobs.items()):
        minutes = productive_minutes(name)
        since = start if minutes is not None else job_start(own, start, end)
        job_wall = max(0.0, (end - since).total_seconds())
        spans = [span for span in (downtime(incident, end) for incident in own) if span]
        down = merged_seconds(spans, since, end)
        redo = 60 * sum(float(incident.get("lost_minutes") or 0) for incident in own)
        productive = (60 * minutes if minutes is not None else job_wall - down) - redo
        productive = max(0.0, min(job_wall, productive))
        job_rows.append({"job": name, "cluster": next((i["cluster"] for i in own if i.get("cluster")), None),
                         "since": since.isoformat(), "wall_s": round(job_wall, 3), "productive_s": round(productive, 3),
                         "lost_s": round(job_wall - productive, 3), "downtime_s": round(down, 3),
                         "redone_s": round(redo, 3),
                         "goodput": round(productive / job_wall, 4) if job_wall else None,
                         "from": "probe" if minutes is not None else "incidents", "incidents": len(own)})
    return {"window": {"from": start.isoformat(), "until": end.isoformat(), "wall_s": round(wall, 3)},
            "jobs": job_rows, "kinds": _grouped(incidents, "kind", end), "causes": _grouped(incidents, "fault", end),
            "incidents": [{**{name: incident.get(name) for name in FIELDS},
                           "lost_s": round(lost_seconds(incident, end), 3)}
                          for incident in sorted(incidents, key=_fault_order)]}


def _grouped(incidents: list[dict], key: str, end: datetime) -> list[dict]:
    groups: dict[str, list[dict]] = {}
    for incident in incidents:
        groups.setdefault(str(incident.get(key)), []).append(incident)
    rows = []
    for value, own in groups.items():
        totals = [incident["total_s"] for incident in own if isinstance(incident.get("total_s"), (int, float))]
        rows.append({key: value, "incidents": len(own),
                     "lost_s": round(sum(lost_seconds(incident, end) for incident in own), 3),
                     "unresolved": sum(1 for incident in own if incident.get("resolved_at") is None),
                     "total_s_p50": round(statistics.median(totals), 3) if totals else None})
    return sorted(rows, key=lambda row: (-row["lost_s"], -row["incidents"], row[key]))


def _fault_order(incident: dict) -> datetime:
    return incident.get("_fault") or incident.get("_at") or datetime.min.replace(tzinfo=UTC)


# --- output

def as_text(result: dict, source: str, top: int = 5) -> str:
    window = result["window"]
    lines = [f"Goodput from {when(parse_time(window['from']))} to {when(parse_time(window['until']))} UTC "
             f"({_span(window['wall_s'])}) from {source}"]
    if result["jobs"]:
        lines.append(table(("job", "cluster", "goodput", "wall", "productive", "lost", "down", "redone", "incidents",
                            "from"),
                           [(row["job"], row["cluster"], _percent(row["goodput"]), _span(row["wall_s"]),
                             _span(row["productive_s"]),
                             _span(row["lost_s"]), _span(row["downtime_s"]), _span(row["redone_s"]),
                             row["incidents"], row["from"]) for row in result["jobs"]]))
    else:
        lines.append("No job had an incident in the window.")
    lines += ["", "Time lost per incident kind"]
    lines.append(table(("kind", "incidents", "lost", "unresolved", "total p50"),
                       [(row["kind"], row["incidents"], _span(row["lost_s"]), row["unresolved"],
                         _span(row["total_s_p50"])) for row in result["kinds"]]) if result["kinds"] else "  none")
    lines += ["", "Top causes"]
    lines.append(table(("fault", "incidents", "lost", "unresolved"),
                       [(row["fault"], row["incidents"], _span(row["lost_s"]), row["unresolved"])
                        for row in result["causes"][:top]]) if result["causes"] else "  none")
    lines += ["", "Incidents (seconds from the fault; - never came)"]
    lines.append(table(("fault at (UTC)", "kind", "job/node", "fault", "detect", "act", "repair", "resume", "total",
                        "lost steps", "incident"),
                       [(when(parse_time(i["fault_at"])), i["kind"], i["job"] or i["node_id"], i["fault"],
                         *(_seconds(i[name]) for name in DURATIONS), _seconds(i["lost_steps"]), i["incident"])
                        for i in result["incidents"]]) if result["incidents"] else "  none")
    return "\n".join(lines)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _span(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    delta = timedelta(seconds=round(seconds))
    hours, rest = divmod(int(delta.total_seconds()), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
