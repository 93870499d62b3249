"""Specification: `medic release NODE --cluster C` of a node Medic quarantined (issue 32, item 3) is one "Medic Release
Node" request: Medic releases it once in the ledger, records who asked, and the cluster's agent resumes the node only
while it is drained with Medic's quarantine reason. A second request is a `duplicate` (one release); an unknown node or
cluster is `rejected`, naming what is quarantined. Against moto (SQS, DynamoDB Streams), the real agent in-process."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from medic.flows.agent.command_sweep import sweep_commands
from medic.handlers import agent_results, requeue_request
from medic.ledger.agents import AgentStore
from medic.ledger.quarantine import Quarantine, QuarantineStore
from tests.functional.conftest import CLUSTER
from tests.functional.slurm_world import SlurmWorld, agent_parse
from tests.functional.test_agent_results import LambdaContext

NODE = "ip-10-1-37-73"
POSITION = "node-75e2a56cdb953f843b2a"
ANA = "arn:aws:sts::123456789012:assumed-role/medic-operators/ana"
QUARANTINED = "Medic: quarantined after repeated repairs, medic release returns it"


@pytest.fixture
def slurm(medic, tmp_path, monkeypatch) -> SlurmWorld:
    world = SlurmWorld(medic, tmp_path)
    monkeypatch.setattr(agent_results, "dependencies", lambda: medic.deps)
    monkeypatch.setattr(requeue_request, "dependencies", lambda: medic.deps)
    world.heartbeat()
    # Given Medic quarantined the node position after its repair loop, an hour ago
    assert QuarantineStore(medic.deps.table).hold(Quarantine(
        cluster=CLUSTER, position=POSITION, node_id="i-0ec750d3a09b8e4de", node_name=NODE,
        since=medic.clock[0] - timedelta(hours=1), why="Repaired 4 times in 7 days."))
    return world


def release(slurm: SlurmWorld, event_id: str, **detail: Any) -> dict:
    """The event `medic release` puts on the bus, through the requeue function's handler (its rule takes both)."""
    event = {"version": "0", "id": event_id, "detail-type": "Medic Release Node", "source": "medic.operator",
             "account": "123456789012", "time": slurm.medic.clock[0].strftime("%Y-%m-%dT%H:%M:%SZ"),
             "region": "us-west-2", "resources": [],
             "detail": {"cluster": CLUSTER, "node": NODE, "requested_by": ANA, **detail}}
    return requeue_request.handler(event, LambdaContext())


def test_a_release_is_queued_once_with_who_asked_and_the_agent_resumes_only_medics_quarantine(slurm):
    # When an operator releases the node
    record = release(slurm, "0b000000-0000-4000-8000-000000000001", reason="PSU swapped by AWS support")
    # Then one release_node is queued, which the agent itself accepts, and the record says who asked and why (quoted)
    [body] = slurm.queued()
    command = agent_parse(json.dumps(body), cluster=CLUSTER)
    assert (command.kind, command.target, command.incident) == ("release_node", f"node:{NODE}",
                                                                f"quarantine:{CLUSTER}:{POSITION}")
    assert (record["outcome"], record["action"], record["trigger"]) == ("deferred", "release_node", "operator")
    assert record["requester"]["claimed_by"] == ANA and ANA in record["reason"]
    assert '"PSU swapped by AWS support"' in record["reason"]
    # And the ledger no longer holds the position: released, by whom
    [held] = QuarantineStore(slurm.medic.deps.table).all(CLUSTER)
    assert (held.held, held.released_by) == (False, ANA)
    # When the agent runs it on a node drained with Medic's quarantine reason
    shown = (f"NodeName={NODE} Arch=x86_64\n   State=IDLE+DRAIN ThreadsPerCore=2\n"
             f"   Reason={QUARANTINED} [root@2026-11-20T10:24:05]\n")
    slurm.slurm.answers["scontrol show node"] = (0, shown, "")
    slurm.stream_event()
    slurm.run_agent()
    before = len(slurm.medic.log.lines)
    agent_results.handler(slurm.stream_event(), LambdaContext())
    # Then it resumed the node, and the final record says so
    assert slurm.slurm.argvs[-1] == ["scontrol", "update", f"NodeName={NODE}", "State=RESUME"]
    [final] = slurm.medic.log.lines[before:]
    assert (final["action"], final["outcome"]) == ("release_node", "executed")
    assert f"returned {NODE} to service" in final["reason"]


def test_releasing_twice_is_one_release(slurm):
    first = release(slurm, "0b000000-0000-4000-8000-000000000002")
    second = release(slurm, "0b000000-0000-4000-8000-000000000003")
    assert (first["outcome"], second["outcome"], second["action"]) == ("deferred", "duplicate", "none")
    assert "already released" in second["reason"] and ANA in second["reason"]
    assert len(slurm.queued()) == 1


def test_an_unknown_node_or_cluster_is_rejected_naming_what_is_quarantined(slurm):
    unknown = release(slurm, "0b000000-0000-4000-8000-000000000004", node="ip-10-1-99-99")
    assert (unknown["outcome"], unknown["action"]) == ("rejected", "none")
    assert "has not quarantined ip-10-1-99-99" in unknown["reason"] and f"{NODE} ({POSITION})" in unknown["reason"]
    elsewhere = release(slurm, "0b000000-0000-4000-8000-000000000005", cluster="pretrain-slrum")
    assert elsewhere["outcome"] == "rejected" and "not managed by Medic" in elsewhere["reason"]
    hostile = release(slurm, "0b000000-0000-4000-8000-000000000006", node="ip-10-1-37-73; scontrol delete")
    assert hostile["outcome"] == "rejected" and "detail.node" in hostile["reason"]
    assert slurm.queued() == [] and QuarantineStore(slurm.medic.deps.table).held(CLUSTER)


def test_a_fourth_repair_is_quarantined_only_with_the_option_and_once(medic, tmp_path, monkeypatch):
    from medic.config import parse_config
    from medic.core.mode import Mode
    from medic.core.models import NodeInfo, Trigger
    from medic.core.record import About
    from medic.flows.node.loops import note_repair, repair_of
    from medic.wiring import QUARANTINE
    from tests.functional.conftest import CONFIG

    world = SlurmWorld(medic, tmp_path)
    world.heartbeat()
    medic.deps.quarantine = QUARANTINE
    node = NodeInfo(node_id="i-0ec750d3a09b8e4de", instance_group="workers", status="Running", logical_id=POSITION,
                    slurm_node=NODE)
    about = About(incident="reconcile", trigger=Trigger.RECONCILE, event_id="run-1", mode=Mode.ACT, cluster=CLUSTER)
    now = medic.clock[0]

    def repairs(cluster, count: int, first: int = 0) -> list:
        return [note_repair(medic.deps, medic.deps.table, about, cluster, POSITION,
                            repair_of(f"node:{CLUSTER}:i-{n}", node.node_id, "gpu_reboot", "reboot_node", "hyperpod",
                                      now + timedelta(minutes=n), now + timedelta(minutes=n - 10)), now, node)
                for n in range(first, first + count)]

    # Without the option: the loop's page at the third repair, nothing at the fourth
    plain = parse_config(CONFIG).cluster(CLUSTER)
    assert [r is not None for r in repairs(plain, 4)] == [False, False, True, False]
    assert world.queued() == [] and QuarantineStore(medic.deps.table).held(CLUSTER) == []
    # With it (turned on after those four): the next repair quarantines the node (one command the agent accepts), a
    # later one nothing more
    option = parse_config({**CONFIG, "clusters": [{**CONFIG["clusters"][0], "quarantine_repeat_offenders": True},
                                                  *CONFIG["clusters"][1:]]}).cluster(CLUSTER)
    [held, again] = repairs(option, 2, first=4)
    assert (held["action"], held["outcome"], held["incident"]) == ("quarantine_node", "deferred",
                                                                   f"quarantine:{CLUSTER}:{POSITION}")
    assert again is None
    [body] = world.queued()
    assert (agent_parse(json.dumps(body), cluster=CLUSTER).kind, body["node"]) == ("quarantine_node", NODE)
    [one] = QuarantineStore(medic.deps.table).held(CLUSTER)
    assert (one.node_name, one.node_id) == (NODE, node.node_id) and "Repaired 5 times" in one.why
    # When the operator releases it before the agent took the quarantine: the quarantine never runs (withdrawn, as
    # the command sweep withdraws one: the agent's claim fails), the release runs, and nothing is left to expire
    monkeypatch.setattr(requeue_request, "dependencies", lambda: medic.deps)
    assert release(world, "0b000000-0000-4000-8000-000000000007")["outcome"] == "deferred"
    world.run_agent()
    world.run_agent()
    assert ["scontrol", "update", f"NodeName={NODE}", "State=DRAIN"] not in [argv[:4] for argv in world.slurm.argvs]
    assert body["command_id"] not in {one.command_id for one in AgentStore(medic.deps.table).open_commands()}
    medic.clock[0] += timedelta(minutes=30)
    assert "quarantine_node" not in [r["action"] for r in sweep_commands({"id": "sweep-1"}, medic.deps)]
