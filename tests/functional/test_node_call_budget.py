"""Specification: the AWS round trips of a node replacement (issue 14's budget; issue 31 item 6), counted as botocore
sends them. A warm container makes four: the ledger read, the node, the claim, the call. The first invocation of a
container adds only the mode switch's read: the agent's heartbeat, the operators' pauses that can hold the cluster
and the mode memory come with the ledger read, and the memory is written only when it keeps an older version."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from medic.adapters.mode import ModeSwitch
from medic.core.mode import Pause
from medic.core.models import ClusterInfo
from medic.ledger.clusters import ClusterInfoStore
from medic.ledger.modes import SeenModes
from medic.ledger.pauses import PauseStore
from tests.functional.conftest import CLUSTER, MODE_PARAMETER, Medic
from tests.helpers import node_event

NODE, OTHER = "i-0d4e5f60718293a4b", "i-0e5f60718293a4b5c"
BUDGET = ["dynamodb:BatchGetItem", "sagemaker:DescribeClusterNode", "dynamodb:TransactWriteItems",
          "sagemaker:BatchReplaceClusterNodes"]


@pytest.fixture
def deployed(medic: Medic) -> Iterator[tuple[Medic, list[str]]]:
    """Medic's node function as wired in the stack (the mode memory and the pauses in the ledger), in a stack deployed
    for more than a sweep: the reconciler kept the cluster's DescribeCluster and another function the mode; and
    every call botocore makes, as it makes it."""
    table = medic.deps.table
    medic.deps.mode = ModeSwitch(MODE_PARAMETER, "act", medic.ssm, memory=SeenModes(table, MODE_PARAMETER),
                                 pauses=PauseStore(table, MODE_PARAMETER), now=lambda: medic.clock[0])
    version = medic.ssm.get_parameter(Name=MODE_PARAMETER)["Parameter"]["Version"]
    SeenModes(table, MODE_PARAMETER).remember(medic.deps.mode.stack(), version, medic.clock[0])
    medic.deps.mode._cached = medic.deps.mode._known = None  # a fresh container: nothing read yet
    ClusterInfoStore(table).save(CLUSTER, ClusterInfo(16, "none", None, frozenset()), medic.clock[0])
    calls: list[str] = []
    clients = [table.client, medic.ssm, medic.sqs, medic.deps.pager.client, medic.deps.hyperpod.client]
    for client in clients:
        service = client.meta.service_model.service_name
        # before-parameter-build fires for every call, stubbed ones too (the Stubber answers at before-call)
        client.meta.events.register("before-parameter-build", lambda model, service=service, **_: calls.append(
            f"{service}:{model.name}"))
    yield medic, calls
    for client in clients:
        client.meta.events.unregister("before-parameter-build")


def replace(medic: Medic, calls: list[str], node_id: str, event: dict) -> tuple[dict, list[str]]:
    medic.hyperpod.node(node_id)
    medic.hyperpod.node_action("batch_replace_cluster_nodes", node_id)
    calls.clear()
    record = medic.handle(event)
    medic.hyperpod.assert_all_called()
    return record, list(calls)


def test_a_replacement_is_five_calls_first_in_a_container_and_four_warm(deployed, unhealthy_event):
    medic, calls = deployed
    # When a container's first event asks for a replacement
    record, first = replace(medic, calls, NODE, unhealthy_event)
    # Then it makes five calls: the mode switch's read, then the replacement's four (no Query of the pauses, no
    # GetItem of the agent's heartbeat, no write of the mode memory, which keeps this version already)
    assert record["outcome"] == "executed"
    assert first == ["ssm:GetParameter", *BUDGET]
    # When the next event comes to the warm container, within the switch's 30 s cache
    medic.clock[0] += timedelta(seconds=10)
    record, warm = replace(medic, calls, OTHER, node_event(unhealthy_event, instance_id=OTHER, event_id="second"))
    # Then four
    assert record["outcome"] == "executed"
    assert warm == BUDGET


def test_the_mode_memory_is_written_only_when_it_keeps_an_older_version(deployed, unhealthy_event):
    medic, calls = deployed
    # Given an operator's change of the switch that no function has kept yet
    medic.ssm.put_parameter(Name=MODE_PARAMETER, Value="act", Type="String", Overwrite=True)
    # When a container's first event reads it
    _, first = replace(medic, calls, NODE, unhealthy_event)
    # Then the memory is moved to it, after the ledger read said it keeps an older one
    assert first == ["ssm:GetParameter", "dynamodb:BatchGetItem", "dynamodb:PutItem", *BUDGET[1:]]
    kept = SeenModes(medic.deps.table, MODE_PARAMETER).last_known()
    assert kept is not None and kept[1] == medic.ssm.get_parameter(Name=MODE_PARAMETER)["Parameter"]["Version"]


def test_a_pause_of_the_cluster_read_with_the_ledger_holds_the_decision(deployed, unhealthy_event):
    medic, calls = deployed
    # Given an operator's pause of this cluster (medic pause --cluster), and one of another cluster
    pauses = PauseStore(medic.deps.table, MODE_PARAMETER)
    pauses.put(Pause(scope=CLUSTER, by="arn:aws:iam::123456789012:user/ops", reason="maintenance",
                     since=medic.clock[0] - timedelta(minutes=5)))
    pauses.put(Pause(scope="other-cluster", by="arn:aws:iam::123456789012:user/ops", reason="elsewhere",
                     since=medic.clock[0] - timedelta(minutes=5)))
    # When a node event comes
    medic.hyperpod.node(NODE)
    calls.clear()
    record = medic.handle(unhealthy_event)
    # Then the decision runs paused: recorded, nothing called; the pause came with the ledger read: decided on the
    # node's lookup, before any Query (the one page of the pause's window reads the pauses for its text, after)
    assert (record["mode"], record["outcome"]) == ("paused", "suppressed")
    assert "sagemaker:BatchReplaceClusterNodes" not in calls and "dynamodb:TransactWriteItems" not in calls
    assert calls[:3] == ["ssm:GetParameter", "dynamodb:BatchGetItem", "sagemaker:DescribeClusterNode"]
