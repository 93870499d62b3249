"""Specification: each decision is one log line and EMF metrics; actions also measure event-to-action time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import time_machine

from medic.core.record import complete
from medic.obs import emit_record, note_event

RECORD = {"incident": "node:pretrain-slurm:i-0d4e5f60718293a4b", "trigger": "node_health", "event_id": "e1",
          "cluster": "pretrain-slurm", "node_id": "i-0d4e5f60718293a4b", "fault": "gpu_fatal",
          "action": "replace_node", "outcome": "executed", "reason": "r", "mode": "act", "attempt": 1}


def emf_lines(text: str) -> list[dict]:
    return [line for line in map(json.loads, text.strip().splitlines()) if "_aws" in line]


def test_an_action_measures_the_time_from_the_event_to_the_action(capsys):
    # Given an event that happened at 08:14:05
    note_event({"time": "2026-11-20T08:14:05Z"})
    # When Medic acts on it 42 seconds later
    with time_machine.travel(datetime(2026, 11, 20, 8, 14, 47, tzinfo=UTC), tick=False):
        emit_record(complete(RECORD))
    # Then an EventToActionSeconds metric of 42 s is written, carrying the cluster for the per-cluster query
    [latency] = [line for line in emf_lines(capsys.readouterr().out) if "EventToActionSeconds" in line]
    assert latency["EventToActionSeconds"] == [42.0]
    assert latency["cluster"] == "pretrain-slurm" and latency["action"] == "replace_node"


def test_a_decision_without_an_action_measures_nothing(capsys):
    note_event({"time": (datetime.now(UTC) - timedelta(seconds=5)).isoformat()})
    emit_record(complete({**RECORD, "action": "none", "outcome": "ignored"}))
    names = [key for line in emf_lines(capsys.readouterr().out) for key in line if key != "_aws"]
    assert "EventToActionSeconds" not in names and "Remediations" in names


def test_an_event_without_a_usable_time_measures_nothing(capsys):
    note_event({"time": "yesterday"})
    emit_record(complete(RECORD))
    assert all("EventToActionSeconds" not in line for line in emf_lines(capsys.readouterr().out))
