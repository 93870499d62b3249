"""Alarm incidents (from an alarm's ALARM to its OK), escalations, and proof-of-recovery watches."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

from medic.config_core import DEDUPE_DAYS
from medic.core.progress import RecoveryWatch
from medic.ledger.pages import page_key
from medic.ledger.table import NODE_STATE_DAYS, Key, Table, expires, readable

RECOVERY_PARTITION = "recovery#watch"  # one partition: a handful of open watches at most
TIMELINE_NUMBERS = ("last_step", "checkpoint_step", "steps_per_minute")  # RecoveryWatch's optional numbers


class OpenAlarm(NamedTuple):
    alarm: str
    incident: str
    opened_at: datetime


class Escalation(NamedTuple):
    incident: str
    escalated_at: datetime


class IncidentStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def _alarm_key(self, alarm: str) -> Key:
        return self.table.key(f"alarm#{alarm}", "open")

    def _escalation_key(self, incident: str) -> Key:
        return self.table.key(f"incident#{incident}", "escalated")

    def _recovery_key(self, incident: str) -> Key:
        return self.table.key(RECOVERY_PARTITION, incident)

    def claim_report(self, incident: str, now: datetime) -> bool:
        """True the first time an incident is reported: a condition every run sees again (a cluster's watched runs
        unreadable) is recorded once per incident, not once per run."""
        return self.table.put_if({**self.table.key(f"incident#{incident}", "report"),
                                  "reported_at": {"S": now.isoformat()}, "expires_at": expires(now)},
                                 "attribute_not_exists(pk)")

    def claim_alarm_transition(self, alarm: str, state: str, state_timestamp: str, now: datetime) -> bool:
        """True for the first delivery of an alarm entering a state (its state timestamp names the transition)."""
        return self.table.put_if(
            {**self.table.key(f"alarm#{alarm}", f"transition#{state}#{state_timestamp}"),
             "claimed_at": {"S": now.isoformat()}, "expires_at": expires(now, days=DEDUPE_DAYS)},
            "attribute_not_exists(pk)")  # kept as long as the alarm's event can come back (medic.config)

    def alarm_incident(self, alarm: str) -> dict[str, str] | None:
        """The open incident of an alarm (from its ALARM until its OK), or None."""
        item = self.table.get(self._alarm_key(alarm))
        return {key: value["S"] for key, value in item.items() if "S" in value} if item else None

    def open_alarm_incident(self, alarm: str, incident: str, now: datetime, fault_at: datetime | None = None) -> None:
        """The alarm's incident is open from its first ALARM: when Medic received it (opened_at) and when the alarm
        went into ALARM (fault_at, the state's timestamp: the incident's timeline)."""
        values = {":i": {"S": incident}, ":now": {"S": now.isoformat()}, ":exp": expires(now)}
        update = "SET incident = :i, opened_at = if_not_exists(opened_at, :now), expires_at = :exp"
        if fault_at is not None:
            values[":fault"] = {"S": fault_at.isoformat()}
            update += ", fault_at = if_not_exists(fault_at, :fault)"
        self.table.update(self._alarm_key(alarm), update, values)

    def close_alarm_incident(self, alarm: str, incident: str) -> None:
        """OK after ALARM: the next ALARM is a new incident that may restart and page again."""
        for key in (self._alarm_key(alarm), page_key(self.table, incident),
                    page_key(self.table, f"{incident}:recovery"), self._escalation_key(incident),
                    self._recovery_key(incident)):
            self.table.delete(key)

    def escalate(self, incident: str, now: datetime) -> None:
        """A restart did not bring training back: no more automatic restarts until the incident closes."""
        self.table.put({**self._escalation_key(incident), "escalated_at": {"S": now.isoformat()},
                        "expires_at": expires(now)})

    def is_escalated(self, incident: str) -> bool:
        return self.table.exists(self._escalation_key(incident))

    def watch_recovery(self, watch: RecoveryWatch) -> None:
        timeline = {name: {"N": repr(float(value))} for name in TIMELINE_NUMBERS
                    if (value := getattr(watch, name)) is not None and math.isfinite(value)}
        if watch.fault_at is not None:
            timeline["fault_at"] = {"S": watch.fault_at.isoformat()}
        if watch.held_by is not None:
            timeline["held_by"] = {"S": watch.held_by}
        if watch.acted_at is not None:
            timeline["acted_at"] = {"S": watch.acted_at.isoformat()}
        for name in ("repair", "repair_fault"):
            if (text := getattr(watch, name)) is not None:
                timeline[name] = {"S": text}
        if watch.detected_at is not None:
            timeline["detected_at"] = {"S": watch.detected_at.isoformat()}
        self.table.put({
            **self._recovery_key(watch.incident), "job": {"S": watch.job}, "cluster": {"S": watch.cluster},
            "restarted_at": {"S": watch.restarted_at.isoformat()}, "deadline": {"S": watch.deadline.isoformat()},
            "attempt": {"N": str(watch.attempt)}, **timeline, "expires_at": expires(watch.deadline, NODE_STATE_DAYS)})

    def release_recovery(self, incident: str, held_by: str, start: datetime, deadline: datetime) -> bool:
        """The repair that held the job's watch is over (the node is back, or Slurm started the job again): its window
        starts now. True once (only a watch still held by that repair)."""
        return self.table.update_if(
            self._recovery_key(incident), "SET restarted_at = :start, deadline = :deadline, expires_at = :exp "
                                          "REMOVE held_by", "held_by = :held",
            {":start": {"S": start.isoformat()}, ":deadline": {"S": deadline.isoformat()}, ":held": {"S": held_by},
             ":exp": expires(deadline, NODE_STATE_DAYS)}) is not None

    def note_restart(self, incident: str, attempt: int, acted_at: datetime) -> bool:
        """Medic restarted the job its open watch proves (a node repair's requeue): its attempt and moment; the
        window stays as it is. False when no watch is open for the incident."""
        return self.table.update_if(
            self._recovery_key(incident), "SET attempt = :attempt, acted_at = :at", "attribute_exists(pk)",
            {":attempt": {"N": str(attempt)}, ":at": {"S": acted_at.isoformat()}}) is not None

    def recoveries(self) -> list[RecoveryWatch]:
        """Every open recovery watch."""
        return [_recovery_watch(item) for item in self.table.partition(RECOVERY_PARTITION)]

    # an operator's overview: this store's items among a scan of the whole table (Table.scan), unreadable ones left out
    def open_alarms_among(self, items: Iterable[dict]) -> list[OpenAlarm]:
        """Every alarm's open incident."""
        found = []
        for alarm, _, item in self.table.among(items, "alarm#", "open"):
            incident = readable(_open_alarm, alarm, item)
            if incident is not None:
                found.append(incident)
        return found

    def escalations_among(self, items: Iterable[dict]) -> list[Escalation]:
        """Every escalated incident (no more automatic restarts until it closes)."""
        found = []
        for incident, _, item in self.table.among(items, "incident#", "escalated"):
            escalation = readable(_escalation, incident, item)
            if escalation is not None:
                found.append(escalation)
        return found

    def recoveries_among(self, items: Iterable[dict]) -> list[RecoveryWatch]:
        """Every open recovery watch."""
        watches = (readable(_recovery_watch, item) for rest, _, item in self.table.among(items, RECOVERY_PARTITION)
                   if not rest)
        return [watch for watch in watches if watch is not None]

    def end_recovery(self, incident: str) -> None:
        self.table.delete(self._recovery_key(incident))

    def end_recovery_of(self, incident: str, attempt: int) -> None:
        """The watch of restart `attempt` ends (that restart was not carried out); another attempt's watch stays."""
        item = self.table.get(self._recovery_key(incident))
        if item is not None and item.get("attempt", {}).get("N") == str(attempt):
            self.table.delete(self._recovery_key(incident))


def _recovery_watch(item: dict) -> RecoveryWatch:
    return RecoveryWatch(
        incident=item["sk"]["S"], job=item["job"]["S"], cluster=item["cluster"]["S"],
        restarted_at=datetime.fromisoformat(item["restarted_at"]["S"]),
        deadline=datetime.fromisoformat(item["deadline"]["S"]), attempt=int(item["attempt"]["N"]),
        fault_at=datetime.fromisoformat(item["fault_at"]["S"]) if "fault_at" in item else None,
        held_by=item["held_by"]["S"] if "held_by" in item else None,
        acted_at=datetime.fromisoformat(item["acted_at"]["S"]) if "acted_at" in item else None,
        repair=item["repair"]["S"] if "repair" in item else None,
        repair_fault=item["repair_fault"]["S"] if "repair_fault" in item else None,
        detected_at=datetime.fromisoformat(item["detected_at"]["S"]) if "detected_at" in item else None,
        **{name: float(item[name]["N"]) for name in TIMELINE_NUMBERS if name in item})


def _open_alarm(alarm: str, item: dict) -> OpenAlarm:
    return OpenAlarm(alarm, item["incident"]["S"], datetime.fromisoformat(item["opened_at"]["S"]))


def _escalation(incident: str, item: dict) -> Escalation:
    return Escalation(incident, datetime.fromisoformat(item["escalated_at"]["S"]))
