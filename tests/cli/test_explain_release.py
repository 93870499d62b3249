"""``medic explain`` of an operator's "Medic Release Node" request: the requeue function's own decision
(flows/agent/quarantine.release_refused) from the ledger's quarantine items, and what it would do, acting on nothing."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from medic.ledger.quarantine import Quarantine, QuarantineStore
from tests.cli.conftest import CLUSTER, NOW, Deployed

NODE = "ip-10-1-37-73"
POSITION = "node-75e2a56cdb953f843b2a"
ANA = "arn:aws:sts::123456789012:assumed-role/medic-operators/ana"


def release(node: str = NODE, cluster: str = CLUSTER, **detail: object) -> dict:
    """What `medic release NODE --cluster C` puts on the default bus (sim/scenarios/generate.py release_request)."""
    return {"version": "0", "id": "5b0e8f4c-1d2a-4e3b-9c4d-7a6b5c4d3e2f", "detail-type": "Medic Release Node",
            "source": "medic.operator", "account": "123456789012", "time": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": "us-west-2", "resources": [],
            "detail": {"cluster": cluster, "node": node, "requested_by": ANA, **detail}}


@pytest.fixture
def quarantined(deployed: Deployed) -> Deployed:
    """Medic quarantined a node of the cluster two hours ago (as the node flow holds it)."""
    assert QuarantineStore(deployed.ledger()).hold(Quarantine(
        cluster=CLUSTER, position=POSITION, node_id="i-0ec750d3a09b8e4de", node_name=NODE,
        since=NOW - timedelta(hours=2), why="Repaired 4 times in 7 days (repair_loop_count 3): gpu_reboot ..."))
    return deployed


def explain(deployed: Deployed, event: dict) -> dict:
    path = deployed.tmp_path / "release.json"
    path.write_text(json.dumps(event))
    before = deployed.items()
    result = deployed.cli("explain", str(path), "--json", "--config", str(deployed.config_file))
    assert result.code == 0, result.err
    assert deployed.items() == before  # explain acts on nothing
    return json.loads(result.out)


def test_a_release_of_a_quarantined_node_would_be_queued_for_its_agent(quarantined: Deployed):
    # Given a node Medic quarantined, when the operator's release request is explained (by its node name)
    result = explain(quarantined, release(reason="PSU swapped"))
    # Then: release_node, deferred for the agent, naming who asked and why, as the requeue function would record it
    record = result["record"]
    assert (record["action"], record["outcome"], record["why"]) == ("release_node", "deferred", "queued_for_agent")
    assert record["incident"] == f"quarantine:{CLUSTER}:{POSITION}" and record["node_id"] == "i-0ec750d3a09b8e4de"
    assert record["reason"].startswith(f"Released node position {POSITION} ({NODE}) on {CLUSTER}")
    assert f'at the request of "{ANA}"' in record["reason"] and 'Their reason: "PSU swapped".' in record["reason"]
    assert result["would"][0].startswith(f"release position {POSITION} in ledger")
    assert any(step.startswith(f"send release_node for {NODE} to the agent of {CLUSTER}") for step in result["would"])
    assert result["facts"]["requested by"] == f'"{ANA}" (as the sender says: not verified)'


def test_a_node_medic_did_not_quarantine_is_rejected_naming_what_is_held(quarantined: Deployed):
    record = explain(quarantined, release(node="ip-10-1-99-99"))["record"]
    assert (record["action"], record["outcome"]) == ("none", "rejected")
    assert record["reason"] == (f"Refused: Medic has not quarantined ip-10-1-99-99 on {CLUSTER} (quarantined there: "
                                f"{NODE} ({POSITION})).")


def test_a_node_released_already_is_a_duplicate(quarantined: Deployed):
    assert QuarantineStore(quarantined.ledger()).release(CLUSTER, POSITION, "bo", "c-1", NOW - timedelta(minutes=5))
    record = explain(quarantined, release())["record"]
    assert (record["action"], record["outcome"]) == ("none", "duplicate")
    assert "was already released" in record["reason"] and '"bo"' in record["reason"]


def test_under_dry_run_it_would_not_release(quarantined: Deployed):
    quarantined.set_mode("dry_run")
    record = explain(quarantined, release())["record"]
    assert (record["action"], record["outcome"]) == ("release_node", "dry_run")
    assert record["reason"] == f"Would release {NODE} ({POSITION}) on {CLUSTER} (mode dry_run): still quarantined."


def test_a_malformed_request_is_rejected_naming_the_field(quarantined: Deployed):
    record = explain(quarantined, release(node="no such node!"))["record"]
    assert record["outcome"] == "rejected" and "detail.node" in record["reason"]
