"""Specification: AWS's documented example events (tests/fixtures/events/aws-docs-*.json, verbatim)
replayed through sim: the synthesized rules route them, the real handlers record them, and every call
and emulated answer holds to AWS's service model (sim/contract.py: a violation fails the replay)."""

from __future__ import annotations

import json

from tests.e2e.conftest import replayed
from tests.helpers import EVENTS, in_deploying_account

CONFIG = EVENTS / "aws-docs.medic.yaml"


def verbatim(name: str) -> str:
    return json.dumps(json.loads((EVENTS / f"{name}.json").read_text()))


def deployed_here(name: str) -> str:
    return json.dumps(in_deploying_account(json.loads((EVENTS / f"{name}.json").read_text())))


def test_the_documented_node_health_example_is_routed_and_rejected_for_its_instance_id_with_no_call():
    result = replayed([verbatim("aws-docs-node-health-event")], CONFIG)
    [record] = result.records
    assert (record["trigger"], record["outcome"]) == ("node_health", "rejected")
    assert "InstanceId" in record["reason"] and "ClusterArn" not in record["reason"]
    assert result.node_actions == []
    assert not any(call.startswith("sagemaker:Batch") for call in result.calls)


def test_the_documented_cluster_event_is_routed_and_recorded_not_rejected():
    result = replayed([deployed_here("aws-docs-cluster-event")], CONFIG)
    [record] = result.records
    assert record["trigger"] == "cluster_event"
    assert record["outcome"] != "rejected", record["reason"]
    assert (record["cluster"], record["node_id"], record["fault"]) == (
        "sample-cluster", "i-0391f86fa0fe0d465", "capacity_shortfall")
    assert result.node_actions == []
