"""Specification: a node incident's timeline line, written by the reconciler when Medic's repair ends (emulated AWS:
moto for the ledger, botocore's Stubber for the node calls)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from medic.obs import logger as medic_logger
from tests.functional.test_reconcile import (  # noqa: F401 - world is a fixture
    NEW_NODE,
    NODE,
    REPLACE,
    die_after_claiming,
    listed,
    sweep,
    world,
)


class IncidentLog(logging.Handler):
    """The "message": "incident" lines, as the Powertools formatter writes them."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = json.loads(medic_logger.registered_formatter.format(record))
        if line.get("message") == "incident":
            self.lines.append(line)


@pytest.fixture
def incidents(world) -> Iterator[list[dict]]:  # noqa: F811
    log = IncidentLog()
    logging.getLogger("medic").addHandler(log)
    try:
        yield log.lines
    finally:
        logging.getLogger("medic").removeHandler(log)


def replaced(world, unhealthy_event) -> None:  # noqa: F811
    """Medic replaces NODE (NodeLogicalId worker-7) on its health event at 08:14:05; the new instance is Pending at
    the 08:19 sweep."""
    world.hyperpod.node(NODE, logical_id="worker-7")
    world.hyperpod.size(16)
    world.hyperpod.node_action(REPLACE, NODE)
    world.handle(unhealthy_event)
    listed(world, (NEW_NODE, "Pending"), logical_ids={NEW_NODE: "worker-7"})
    sweep(world, "2026-11-20T08:19:00Z")


def test_given_medic_replaced_a_node_when_a_sweep_sees_the_new_instance_running_then_the_incident_line_is_written(
        world, incidents, unhealthy_event):  # noqa: F811
    # Given Medic's replacement, still Pending at 08:19 (no line yet)
    replaced(world, unhealthy_event)
    assert incidents == []
    # When the 08:44 sweep sees the new instance Running
    listed(world, (NEW_NODE, "Running"), logical_ids={NEW_NODE: "worker-7"})
    sweep(world, "2026-11-20T08:44:00Z", run="run-2")
    # Then one node line, under the incident of the instance Medic acted on: repaired and resolved at that sweep
    [line] = incidents
    assert (line["incident"], line["kind"], line["node_id"], line["fault"]) == (
        f"node:pretrain-slurm:{NODE}", "node", NODE, "gpu_fatal")
    assert (line["fault_at"], line["acted_at"], line["repaired_at"], line["resolved_at"]) == (
        "2026-11-20T08:14:05+00:00", "2026-11-20T08:14:05+00:00", "2026-11-20T08:44:00+00:00",
        "2026-11-20T08:44:00+00:00")
    assert (line["time_to_act_s"], line["time_to_repair_s"], line["total_s"]) == (0, 29 * 60 + 55, 29 * 60 + 55)
    # ... and a later sweep writes no second line (the watch is over)
    listed(world, (NEW_NODE, "Running"), logical_ids={NEW_NODE: "worker-7"})
    sweep(world, "2026-11-20T08:49:00Z", run="run-3")
    assert len(incidents) == 1


def test_given_medic_replaced_a_node_when_the_new_instance_fails_then_the_line_says_no_repair_came(
        world, incidents, unhealthy_event):  # noqa: F811
    replaced(world, unhealthy_event)
    # When the 08:44 sweep finds the new instance in Failure (no NodeRecovery: Medic's to page, not a repair status)
    listed(world, (NEW_NODE, "Failure"), logical_ids={NEW_NODE: "worker-7"})
    world.hyperpod.stubber.add_response("describe_cluster_node", {"NodeDetails": {
        "InstanceGroupName": "gpu-workers", "InstanceId": NEW_NODE, "InstanceStatus": {"Status": "Failure"}}},
        {"ClusterName": "pretrain-slurm", "NodeId": NEW_NODE})
    sweep(world, "2026-11-20T08:44:00Z", run="run-2")
    # Then the incident's line has the action, and no repair and no resolution (a human owns it)
    [line] = incidents
    assert (line["time_to_act_s"], line["repaired_at"], line["resolved_at"], line["total_s"]) == (0, None, None, None)


def test_given_the_reconciler_gives_up_on_an_unconfirmed_replace_then_the_line_has_no_repair(
        world, incidents, unhealthy_event, monkeypatch):  # noqa: F811
    # Given a run that died after claiming the replace, and the node Running with no sign of it at 08:19
    die_after_claiming(world, unhealthy_event, monkeypatch)
    listed(world, (NODE, "Running"))
    world.hyperpod.node(NODE, status="Running")
    sweep(world, "2026-11-20T08:19:00Z")
    # Then the reconciler pages and the incident's line says: claimed, never repaired, not resolved
    [line] = incidents
    assert (line["incident"], line["kind"], line["acted_at"]) == (
        f"node:pretrain-slurm:{NODE}", "node", "2026-11-20T08:14:05+00:00")
    assert (line["repaired_at"], line["resolved_at"], line["time_to_repair_s"]) == (None, None, None)
