"""``medic history``: the remediation records, from CloudWatch Logs or from a ``sim replay`` output file.

Every decision is one JSON log line with ``"message": "remediation"`` in a Medic function's log group
(functions/medic/obs.py); ``sim replay`` prints the same records as ``{"kind": "record", ...}`` lines.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from botocore.exceptions import ClientError

from medic.core.models import Outcome, RemediationRecord, Why
from medic.core.timeline import job_incidents
from medic_cli.context import CliError
from medic_cli.render import parse_time, table, when

RECORD_FIELDS = tuple(RemediationRecord.model_fields)
WHYS = tuple(why.value for why in Why)
MAX_EVENTS = 20_000  # per log group: a bound on what one command reads
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# Values that can go into a CloudWatch Logs filter pattern as a quoted string without escaping.
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9:._/-]{1,256}$")


@dataclass(frozen=True)
class Filters:
    since: datetime | None = None
    until: datetime | None = None
    cluster: str | None = None
    node: str | None = None
    job: str | None = None
    outcomes: frozenset[str] = frozenset()
    whys: frozenset[str] = frozenset()  # the outcomes' sub-reasons (core.models.Why)
    needs_human: bool = False  # only the records that say a human must act

    def matches(self, record: dict) -> bool:
        at = record.get("_at")
        if self.since and at and at < self.since:
            return False
        if self.until and at and at > self.until:
            return False
        if self.cluster and record.get("cluster") != self.cluster:
            return False
        if self.node and record.get("node_id") != self.node:
            return False
        if self.job and record.get("job") != self.job and record.get("incident") not in job_incidents(self.job):
            return False  # --job ROOT also matches the restarts of its lineage (incident job:ROOT, batch-job:ROOT)
        if self.needs_human and record.get("needs_human") is not True:
            return False
        if self.whys and record.get("why") not in self.whys:
            return False
        return not self.outcomes or record.get("outcome") in self.outcomes

    def log_pattern(self) -> str:
        """A CloudWatch Logs JSON filter pattern that narrows the search on the service side."""
        terms = ['$.message = "remediation"']
        for path, value in (("cluster", self.cluster), ("node_id", self.node)):
            if value and _SAFE_VALUE.match(value):
                terms.append(f'$.{path} = "{value}"')
        if self.job and _SAFE_VALUE.match(self.job):
            incidents = " || ".join(f'$.incident = "{incident}"' for incident in job_incidents(self.job))
            terms.append(f'($.job = "{self.job}" || {incidents})')
        return "{ " + " && ".join(terms) + " }"


def parse_outcomes(values: Iterable[str]) -> frozenset[str]:
    """``--outcome`` values (repeatable, comma-separated) → the outcomes; a word that is no outcome is refused, naming
    the valid ones (a typo would otherwise list nothing, as if nothing had happened)."""
    outcomes = frozenset(o.strip() for value in values for o in value.split(",") if o.strip())
    unknown = sorted(outcomes - {outcome.value for outcome in Outcome})
    if unknown:
        raise CliError(f"--outcome {', '.join(map(repr, unknown))}: not an outcome; the outcomes are "
                       f"{', '.join(outcome.value for outcome in Outcome)}")
    return outcomes
def parse_whys(values: list[str]) -> frozenset[str]:
    """``--why`` values (repeatable or comma-separated), each one of core.models.Why's, or CliError naming it."""
    whys = frozenset(value.strip() for given in values for value in given.split(",") if value.strip())
    unknown = sorted(whys - set(WHYS))
    if unknown:
        raise CliError(f"--why {', '.join(unknown)}: not a sub-reason of any outcome (one of {', '.join(WHYS)})")
    return whys


def parse_since(value: str, now: datetime) -> datetime:
    """``24h``, ``30m``, ``7d``, ``2w``, ``90s`` before now, or an ISO time."""
    match = _DURATION.match(value)
    if match:
        return now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    moment = parse_time(value)
    if moment is None:
        raise CliError(f"--since {value!r}: expected a duration such as 24h, 30m, 7d, or an ISO time")
    return moment


# --- sources

def log_events(logs: Any, groups: Iterable[str], filters: Filters,
               warn: TextIO | None = None) -> Iterator[tuple[str, dict]]:
    """(log group, event) of FilterLogEvents over each log group inside the window, at most MAX_EVENTS a group;
    a log group that does not exist (yet) is skipped, saying so."""
    for group in groups:
        request: dict[str, Any] = {"logGroupName": group, "filterPattern": filters.log_pattern()}
        if filters.since:
            request["startTime"] = int(filters.since.timestamp() * 1000)
        if filters.until:
            request["endTime"] = int(filters.until.timestamp() * 1000)
        seen = 0
        try:
            for page in logs.get_paginator("filter_log_events").paginate(**request):
                for event in page.get("events", []):
                    seen += 1
                    yield group, event
                if seen >= MAX_EVENTS:
                    print(f"medic: {group}: stopped after {seen} log events; narrow with --since or filters",
                          file=warn or sys.stderr)
                    break
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                print(f"medic: log group {group} does not exist (yet): skipped", file=warn or sys.stderr)
                continue
            raise


def from_logs(logs: Any, groups: Iterable[str], filters: Filters, warn: TextIO | None = None) -> list[dict]:
    """FilterLogEvents over each log group, newest window only (--since), parsed and filtered here too."""
    records = []
    for group, event in log_events(logs, groups, filters, warn):
        record = parse_line(event.get("message", ""))
        if record is None:
            continue
        at = datetime.fromtimestamp(event["timestamp"] / 1000, UTC) if "timestamp" in event else None
        record["_at"] = at or record.get("_at")
        record["log_group"] = group
        records.append(record)
    return [record for record in records if filters.matches(record)]


def read_lines(path: str, stdin: TextIO | None = None) -> list[str]:
    """The lines of a file (``-``: standard input), or CliError naming the file."""
    if path == "-":
        return (stdin or sys.stdin).read().splitlines()
    try:
        return Path(path).read_text().splitlines()
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror}") from None


def from_file(path: str, filters: Filters, stdin: TextIO | None = None) -> list[dict]:
    """Records from a ``sim replay`` output (JSON Lines; pages and other lines are skipped)."""
    lines = read_lines(path, stdin)
    records = [record for record in (parse_line(line) for line in lines) if record is not None]
    return [record for record in records if filters.matches(record)]


def json_object(line: str) -> dict | None:
    """The JSON object a line carries (after any prefix, such as a log line's timestamp), unwrapped once when it
    is a log line whose message is itself an object (Lambda's JSON log format); None when there is none."""
    start = line.find("{")
    if start < 0:
        return None
    try:
        data = json.loads(line[start:])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("message"), dict):
        data = data["message"]
    return data


def parse_line(line: str) -> dict | None:
    """A remediation record from one line: a sim ``record`` line, a bare record (``medic history --json``)
    or a Powertools log line with ``"message": "remediation"``; None for anything else."""
    data = json_object(line)
    if data is None:
        return None
    kind = data.get("kind")
    if "_aws" in data:  # an EMF metric line: it carries some record fields as dimensions, but is no record
        return None
    is_record = (kind == "record" or data.get("message") == "remediation"
                 or (kind is None and "message" not in data and {"incident", "outcome", "action"} <= data.keys()))
    if not is_record:
        return None
    record = {name: data.get(name) for name in RECORD_FIELDS}
    if "jobs" in data:  # node actions on Slurm only: absent elsewhere, null when unknown
        record["jobs"] = data["jobs"]
    record["_at"] = parse_time(data.get("timestamp"))
    return record


def newest(records: list[dict], limit: int | None) -> list[dict]:
    """Oldest first (a log reads top to bottom), keeping the newest ``limit``."""
    ordered = sorted(records, key=lambda record: record.get("_at") or datetime.min.replace(tzinfo=UTC))
    return ordered[-limit:] if limit else ordered


# --- output

def as_json(record: dict) -> dict:
    out = {name: record.get(name) for name in RECORD_FIELDS}
    if "jobs" in record:
        out["jobs"] = record["jobs"]
    out["timestamp"] = record["_at"].isoformat() if record.get("_at") else None
    if record.get("log_group"):
        out["log_group"] = record["log_group"]
    return out


def as_table(records: list[dict]) -> str:
    rows = [(when(r.get("_at")), r.get("trigger"), r.get("cluster"),
             r.get("node_id") or r.get("job") or r.get("incident"), r.get("instance_group"), r.get("fault"),
             r.get("action"), r.get("outcome"), r.get("why"), _human(r.get("needs_human")), r.get("paged"),
             r.get("attempt"), jobs_text(r), r.get("reason"))
            for r in records]
    return table(("time (UTC)", "trigger", "cluster", "node/job", "group", "fault", "action", "outcome", "why",
                  "human", "paged", "try", "jobs", "reason"), rows)


def jobs_text(record: dict) -> str:
    """A node action's `jobs` as a cell: the jobs it hit, `none`, `unknown` (null), or `-` (not a node action)."""
    if "jobs" not in record:
        return "-"
    jobs = record["jobs"]
    if jobs is None:
        return "unknown"
    if not isinstance(jobs, list) or not jobs:
        return "none"
    return ", ".join(f"{job.get('id')} ({job.get('name')})" if isinstance(job, dict) else str(job) for job in jobs)


def _human(needs: object) -> str:
    return {True: "yes", False: "no"}.get(needs, "-")  # type: ignore[call-overload]


def summary(records: list[dict]) -> str:
    counts: dict[str, int] = {}
    for record in records:
        counts[str(record.get("outcome"))] = counts.get(str(record.get("outcome")), 0) + 1
    parts = ", ".join(f"{count} {outcome}" for outcome, count in sorted(counts.items()))
    pages = sum(1 for record in records if record.get("paged"))
    humans = sum(1 for record in records if record.get("needs_human") is True)
    return f"{len(records)} decision(s): {parts or 'none'}; {pages} paged; {humans} need a human (--needs-human)"

