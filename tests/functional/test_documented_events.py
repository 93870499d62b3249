"""Specification: AWS's own documented example events (tests/fixtures/events/aws-docs-*.json, verbatim;
sources in that folder's README) go through the handlers for a config naming their cluster.

The documented ARNs carry the cluster name (``cluster/sample-cluster``) where real ARNs carry the
12-character id: that alone must never make Medic reject the event. The node health example's
``InstanceId`` (``i-12345678abcdefghi``) is no EC2 instance id, so no node call may follow from it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from medic.config import parse_config
from medic.flows.node.cluster_events import record_cluster_event
from tests.functional.conftest import Account, Medic, medic_world
from tests.helpers import in_deploying_account, load_event

CLUSTER = "sample-cluster"
VALID_NODE = "i-0391f86fa0fe0d465"  # the documented cluster event's instance
CONFIG = {"notify": {"emails": ["oncall@example.com"]},
          "clusters": [{"name": CLUSTER, "id": "s4mp1ec1u5tr", "orchestrator": "slurm"}]}


@pytest.fixture
def documented(aws: Account) -> Iterator[Medic]:
    yield from medic_world(parse_config(CONFIG), aws)


def test_the_documented_node_health_example_is_rejected_for_its_instance_id_not_its_cluster_arn(documented):
    # Given AWS's documented node health event, verbatim
    event = load_event("aws-docs-node-health-event")
    # When the node handler gets it
    record = documented.handle(event)
    # Then it is rejected, naming the instance id AWS's own APIs would refuse, and no call is made
    assert record["outcome"] == "rejected"
    assert "InstanceId" in record["reason"]
    assert "ClusterArn" not in record["reason"]
    documented.hyperpod.assert_all_called()


def test_the_documented_node_health_example_with_a_real_instance_id_is_acted_on(documented):
    """The ARN with the cluster name where the id goes is accepted for the configured cluster."""
    event = in_deploying_account(load_event("aws-docs-node-health-event"))
    event["detail"]["InstanceId"] = VALID_NODE
    documented.at("2021-10-25T01:52:12Z")
    documented.hyperpod.stubber.add_response("describe_cluster_node", {"NodeDetails": {
        "InstanceGroupName": "p5Inst", "InstanceId": VALID_NODE, "InstanceStatus": {"Status": "Running"}}},
        {"ClusterName": CLUSTER, "NodeId": VALID_NODE})
    documented.hyperpod.stubber.add_response("describe_cluster", {
        "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/s4mp1ec1u5tr", "ClusterName": CLUSTER,
        "ClusterStatus": "InService", "InstanceGroups": [{"InstanceGroupName": "p5Inst", "CurrentCount": 16}]},
        {"ClusterName": CLUSTER})
    documented.hyperpod.stubber.add_response("batch_replace_cluster_nodes", {"Successful": [VALID_NODE]},
                                             {"ClusterName": CLUSTER, "NodeIds": [VALID_NODE]})
    record = documented.handle(event)
    assert (record["outcome"], record["action"], record["node_id"]) == ("executed", "replace_node", VALID_NODE)
    documented.hyperpod.assert_all_called()


def test_the_documented_cluster_event_is_recorded_not_rejected(documented):
    # Given AWS's documented cluster event (a capacity failure on sample-cluster), verbatim
    event = in_deploying_account(load_event("aws-docs-cluster-event"))
    documented.at("2026-06-01T17:20:25Z")
    # When the cluster event handler gets it
    record = record_cluster_event(event, documented.deps)
    # Then it is recorded against the node's incident as a capacity shortfall, not rejected
    assert record["outcome"] != "rejected", record["reason"]
    assert (record["incident"], record["fault"]) == (f"node:{CLUSTER}:{VALID_NODE}", "capacity_shortfall")


def test_the_documented_cluster_event_verbatim_names_a_foreign_account_and_is_rejected_with_no_call(documented):
    # Given AWS's documented cluster event verbatim: its ClusterArn names account 111122223333
    event = load_event("aws-docs-cluster-event")
    documented.at("2026-06-01T17:20:25Z")
    # When the cluster event handler of a stack deployed in 123456789012 gets it
    record = record_cluster_event(event, documented.deps)
    # Then it is rejected, naming the foreign account, and nothing is called
    assert record["outcome"] == "rejected"
    assert "111122223333" in record["reason"]
    documented.hyperpod.assert_all_called()
