"""Specification: an event EventBridge replays from an archive never makes Medic act.

EventBridge adds `replay-name` (the replay's name) at the top level of every event it replays; a replay may carry a
new event id and the old time, so the ledger's once-per-event-id claim does not stop it. Medic's rules exclude
replays; an event that reaches a handler all the same is rejected with a record naming the field, and nothing is
called, claimed or paged."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from medic.flows.agent.restart import handle_requeue_event
from medic.flows.jobs.restart import restart_training_job
from medic.flows.node.cluster_events import record_cluster_event
from medic.flows.node.health_event import remediate_node
from medic.flows.stall.response import respond_to_alarm
from tests.functional.conftest import TABLE
from tests.helpers import in_deploying_account, load_event

REPLAY = "ops-investigation-2026-11-20"
FLOWS: dict[str, tuple[Callable, str]] = {
    "hyperpod-node-health-unhealthy": (remediate_node, "node_health"),
    "hyperpod-cluster-event-error": (record_cluster_event, "cluster_event"),
    "training-job-failed": (restart_training_job, "job_state"),
    "cloudwatch-alarm-state-change": (respond_to_alarm, "alarm"),
    "medic-requeue-job": (handle_requeue_event, "operator"),
}


@pytest.mark.parametrize("sample", sorted(FLOWS))
def test_a_replayed_event_is_rejected_with_its_record_and_nothing_is_done(medic, aws, sample):
    # Given an event Medic acts on when it is live, replayed from the archive under a new id
    flow, trigger = FLOWS[sample]
    live = in_deploying_account(load_event(sample))
    replayed = {**live, "id": "0f9e8d7c-6b5a-4938-8271-605f4e3d2c1b", "replay-name": REPLAY}
    # When it reaches the handler's flow
    record = flow(replayed, medic.deps)
    # Then it is rejected, the record naming the replay (quoted: the name is someone else's text), under its event id
    assert (record["outcome"], record["action"], record["trigger"]) == ("rejected", "none", trigger)
    assert record["event_id"] == replayed["id"]
    assert "replay-name" in record["reason"] and f'"{REPLAY}"' in record["reason"]
    assert "never on a replay" in record["reason"]
    # And nothing was called (the HyperPod stub expects no call), claimed in the ledger or paged
    medic.hyperpod.assert_all_called()
    assert aws.dynamodb.scan(TableName=TABLE)["Items"] == []
    assert medic.pages() == []


def test_the_same_event_live_is_not_rejected(medic):
    # The guard is on replay-name alone: the live node health event goes on to its decision
    medic.hyperpod.node("i-0d4e5f60718293a4b")
    medic.hyperpod.size(16)
    medic.hyperpod.node_action("batch_replace_cluster_nodes", "i-0d4e5f60718293a4b")
    record = remediate_node(in_deploying_account(load_event("hyperpod-node-health-unhealthy")), medic.deps)
    assert record["outcome"] != "rejected"
