"""Specification: HyperPod cluster events are recorded against the node's incident; a replacement
Medic started that failed for capacity closes Medic's action as failed and pages once."""

from __future__ import annotations

import copy

import pytest

from medic.flows.node.cluster_events import record_cluster_event
from medic.ledger.nodes import NodeStore
from tests.functional.conftest import CLUSTER
from tests.helpers import load_event

NODE = "i-0a1b2c3d4e5f60718"  # the instance in the sample cluster event
CAPACITY = "We currently do not have sufficient capacity to launch new ml.p5.48xlarge instances. Please try again."


def cluster_event(**changes) -> dict:
    event = copy.deepcopy(load_event("hyperpod-cluster-event-error"))
    event["detail"]["EventDetails"].update(changes)
    return event


def deliver(medic, event: dict) -> dict:
    """The event as the handler gets it: when it happened (the clock moves to its time) or later."""
    return record_cluster_event(medic.arrives(event), medic.deps)


def replaced_by_medic(medic, node: str = NODE) -> None:
    """Medic replaced the node at 09:00 (the event path, against the Stubber)."""
    from tests.helpers import node_event

    medic.at("2026-11-20T09:00:00Z")
    medic.hyperpod.node(node)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action("batch_replace_cluster_nodes", node)
    assert medic.handle(node_event(load_event("hyperpod-node-health-unhealthy"), instance_id=node))[
        "outcome"] == "executed"
    medic.log.lines.clear()


def test_a_replacement_medic_started_that_fails_for_capacity_is_closed_as_failed_and_pages_once(medic):
    # Given Medic replaced the node two minutes earlier
    replaced_by_medic(medic)
    # When HyperPod reports that the new instance could not be launched for lack of capacity
    medic.at("2026-11-20T09:02:41Z")
    record = deliver(medic, cluster_event())
    # Then Medic's action is recorded as failed, with the capacity message, on the node's incident
    assert (record["incident"], record["action"], record["outcome"], record["fault"]) == (
        f"node:{CLUSTER}:{NODE}", "replace_node", "failed", "capacity_shortfall")
    assert "sufficient capacity" in record["reason"] and record["trigger"] == "cluster_event"
    # And one page says so, with the log group to read
    [page] = medic.pages()
    assert CAPACITY in page["Message"]
    assert f"/aws/sagemaker/Clusters/{CLUSTER}/k3v9q2w8x1za" in page["Message"]
    # And the ledger no longer counts the replacement as done
    state, _ = NodeStore(medic.deps.table).load(CLUSTER, NODE)
    assert state.outcome == "failed"
    # And the same failure reported again (another event) pages no more
    again = deliver(medic, cluster_event(EventId="2a3b4c5d-0000-4000-8000-000000000001"))
    assert (again["outcome"], again["paged"]) == ("deferred", False)
    assert medic.pages() == []


def test_an_event_medic_did_not_cause_is_deferred_to_a_human_with_one_page(medic):
    record = deliver(medic, cluster_event())
    assert (record["action"], record["outcome"], record["paged"]) == ("none", "deferred", True)
    [page] = medic.pages()
    assert "capacity_shortfall" in page["Subject"]


@pytest.mark.parametrize("description,message,fault", [
    ("Lifecycle script on_create.sh failed on instance", "", "lifecycle_script_failed"),
    ("Node replacement failed for instance", "", "repair_failed"),
    ("Reboot of instance failed", "", "repair_failed"),
    ("Instance creation in Cluster pretrain-slurm failed", CAPACITY, "capacity_shortfall"),
    ("Something else went wrong", "", "cluster_error"),
])
def test_cluster_events_are_classified(medic, description, message, fault):
    event = cluster_event(Description=description)
    event["detail"]["EventDetails"]["EventDetails"]["EventMetadata"]["Instance"]["FailureMessage"] = message
    assert deliver(medic, event)["fault"] == fault


def test_a_redelivered_event_is_recorded_once(medic):
    first = deliver(medic, cluster_event())
    second = deliver(medic, cluster_event())
    assert (first["outcome"], second["outcome"]) == ("deferred", "duplicate")
    assert len(medic.pages()) == 1


def test_events_of_clusters_medic_does_not_manage_are_ignored(medic):
    record = deliver(medic, cluster_event(ClusterName="someone-else"))
    assert record["outcome"] == "ignored" and medic.pages() == []


@pytest.mark.parametrize("change", [{"InstanceId": "i-0abc; rm -rf /"}, {"EventLevel": "Panic"},
                                    {"ClusterArn": "arn:aws:s3:::bucket"}, {"EventId": None}])
def test_a_malformed_cluster_event_is_rejected_without_any_action(medic, change):
    record = deliver(medic, cluster_event(**change))
    assert (record["outcome"], record["action"]) == ("rejected", "none")
    assert medic.pages() == []


def test_dry_run_records_without_paging_or_touching_medics_action(medic):
    replaced_by_medic(medic)
    medic.set_mode("dry_run")
    record = deliver(medic, cluster_event())
    assert record["paged"] is False and medic.pages() == []
    state, _ = NodeStore(medic.deps.table).load(CLUSTER, NODE)
    assert state.outcome == "in_flight"  # Medic's accepted replace, as its run left it for the sweep to settle


# --- a replacement is a new instance: the event about it concerns Medic's repair through NodeLogicalId

LOGICAL = "6d7e8f90-a1b2-4c3d-8e4f-5a6b7c8d9e0f"  # the sample event's EventMetadata.Instance.NodeLogicalId
OLD = "i-0d4e5f60718293a4b"


def replaced_with_logical_id(medic) -> None:
    from tests.helpers import node_event

    medic.at("2026-11-20T09:00:00Z")
    medic.hyperpod.node(OLD, logical_id=LOGICAL)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action("batch_replace_cluster_nodes", OLD)
    assert medic.handle(node_event(load_event("hyperpod-node-health-unhealthy"), instance_id=OLD))[
        "outcome"] == "executed"
    medic.log.lines.clear()


@pytest.mark.parametrize("instance_id", [NODE, None], ids=["new-instance-id", "no-instance-id-yet"])
def test_a_capacity_failure_of_the_replacement_instance_closes_medics_replace_as_failed(medic, instance_id):
    """BatchReplaceClusterNodes provisions a new instance id; the event carries the persisting NodeLogicalId."""
    replaced_with_logical_id(medic)
    event = cluster_event()
    if instance_id is None:
        del event["detail"]["EventDetails"]["InstanceId"]
    medic.at("2026-11-20T09:02:41Z")
    record = deliver(medic, event)
    assert (record["incident"], record["action"], record["outcome"]) == (
        f"node:{CLUSTER}:{OLD}", "replace_node", "failed")
    assert NodeStore(medic.deps.table).load(CLUSTER, OLD)[0].outcome == "failed"
    assert len(medic.pages()) == 1


@pytest.mark.parametrize("arn", ["arn:aws:sagemaker:us-west-2:999999999999:cluster/k3v9q2w8x1za",
                                 "arn:aws:sagemaker:us-east-1:123456789012:cluster/k3v9q2w8x1za"])
def test_a_cluster_event_naming_a_foreign_cluster_arn_is_rejected_and_changes_nothing(medic, arn):
    replaced_by_medic(medic)
    record = deliver(medic, cluster_event(ClusterArn=arn))
    assert (record["outcome"], record["paged"]) == ("rejected", False)
    assert NodeStore(medic.deps.table).load(CLUSTER, NODE)[0].outcome == "in_flight"  # untouched
    assert medic.pages() == []
