"""Specification: a node action whose answer was lost (a timeout after sending) is recorded as unknown,
never repeated blindly, and settled by re-checking the node before any new call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

from medic.adapters.aws import CLIENT_CONFIG
from medic.adapters.hyperpod import HyperPod
from medic.config import parse_config
from medic.core.models import Action
from medic.core.repairs import RESULT_UNKNOWN
from tests.functional.conftest import CLUSTER, Account, Medic, medic_world
from tests.functional.test_reconcile import NODE, ONE_CLUSTER, REPLACE, claim_of, listed, records, sweep
from tests.helpers import node_event

ENDPOINT = "https://api.sagemaker.us-west-2.amazonaws.com/"
ACCEPTED = (200, {"Successful": [NODE]})


@pytest.fixture
def world(aws: Account) -> Iterator[Medic]:
    yield from medic_world(parse_config(ONE_CLUSTER), aws)


def answer_lost(medic: Medic, method: str = REPLACE, error: type[Exception] = ReadTimeoutError) -> list[str]:
    """The next such call is sent and its answer lost (as botocore raises it once its retries are done);
    returns the calls made, to count them. botocore's own retry behaviour is specified further down."""
    calls: list[str] = []
    client = medic.hyperpod.client

    def lost(**params: Any) -> None:
        calls.append(params["ClusterName"])
        del client.__dict__[method]  # once only
        raise error(endpoint_url=ENDPOINT, error=OSError("connection reset"))

    client.__dict__[method] = lost
    return calls


def timed_out_on_event(medic: Medic, event: dict) -> dict:
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    answer_lost(medic)
    return medic.handle(event)


@pytest.mark.parametrize("error", [ReadTimeoutError, ConnectionClosedError])
def test_given_the_replace_answer_is_lost_then_the_result_is_recorded_unknown_and_nobody_is_paged(
        world, unhealthy_event, error):
    world.hyperpod.node(NODE)
    world.hyperpod.size(16)
    calls = answer_lost(world, error=error)
    record = world.handle(unhealthy_event)
    # Then one call was made, the record says the result is unknown, and the claim keeps that
    assert calls == [CLUSTER]
    assert (record["action"], record["outcome"], record["paged"]) == ("replace_node", "deferred", False)
    assert record["reason"].startswith("Result unknown") and "never repeats it blindly" in record["reason"]
    assert claim_of(world).outcome == RESULT_UNKNOWN
    assert world.pages() == []


def test_given_a_connection_that_never_opened_then_nothing_was_sent_and_the_call_failed(world, unhealthy_event):
    # EndpointConnectionError: no connection, so no request reached HyperPod; botocore retried it already
    world.hyperpod.node(NODE)
    world.hyperpod.size(16)
    answer_lost(world, error=EndpointConnectionError)
    record = world.handle(unhealthy_event)
    assert (record["outcome"], record["paged"]) == ("failed", True)
    assert claim_of(world).outcome == "failed"


def test_given_an_unknown_result_when_the_event_comes_again_then_the_node_is_rechecked_not_called_again(
        world, unhealthy_event):
    timed_out_on_event(world, unhealthy_event)
    # When the same fault is reported again (redelivery, or HMA repeating itself)
    world.at("2026-11-20T08:16:05Z")
    world.hyperpod.node(NODE, status="ShuttingDown")  # the event path looks the node up
    again = world.handle(node_event(unhealthy_event, event_id="another-delivery"))
    # Then no second replace (the stub has none queued), and the record says it is handled
    world.hyperpod.assert_all_called()
    assert again["outcome"] == "duplicate"
    assert "(unknown)" in again["reason"]


def test_given_an_unknown_result_when_the_reconciler_finds_the_node_in_repair_then_it_confirms_without_calling(
        world, unhealthy_event):
    timed_out_on_event(world, unhealthy_event)
    listed(world, (NODE, "ShuttingDown"))
    world.hyperpod.node(NODE, status="ShuttingDown")  # the re-check
    sweep(world, "2026-11-20T08:15:00Z")
    world.hyperpod.assert_all_called()
    [record] = records(world)
    assert (record["action"], record["outcome"], record["paged"]) == ("replace_node", "executed", False)
    assert "timed out with its result unknown" in record["reason"] and "went through" in record["reason"]
    assert claim_of(world).outcome == "executed"


def test_given_an_unknown_result_when_the_node_shows_nothing_yet_then_the_reconciler_waits(world, unhealthy_event):
    timed_out_on_event(world, unhealthy_event)
    listed(world, (NODE, "Failure"))
    world.hyperpod.node(NODE, status="Failure")
    sweep(world, "2026-11-20T08:16:00Z")  # two minutes after the call: too early to tell
    world.hyperpod.assert_all_called()
    assert records(world) == []
    assert claim_of(world).outcome == RESULT_UNKNOWN


def test_given_an_unknown_result_when_the_node_is_still_failed_later_then_one_retry_and_no_more(
        world, unhealthy_event):
    timed_out_on_event(world, unhealthy_event)
    # When the reconciler re-checks after the settle time and the node is still in Failure
    listed(world, (NODE, "Failure"))
    world.hyperpod.node(NODE, status="Failure")
    retry = answer_lost(world)  # and the retry's answer is lost too
    sweep(world, "2026-11-20T08:19:00Z")
    assert retry == [CLUSTER]
    # Then the next re-check does not call a third time: it gives up and pages once
    listed(world, (NODE, "Failure"))
    world.hyperpod.node(NODE, status="Failure")
    sweep(world, "2026-11-20T08:24:00Z", run="run-2")
    world.hyperpod.assert_all_called()
    first, last = records(world)
    assert (first["outcome"], last["outcome"], last["paged"]) == ("deferred", "failed", True)
    assert "already retried 1 time(s)" in last["reason"]
    assert len(world.pages()) == 1


# --- the adapter: what botocore may retry and what it must not

def real_client(answers: list) -> tuple[Any, list[str]]:
    """A SageMaker client with Medic's retry settings whose HTTP layer plays the given answers in turn."""
    client = boto3.client("sagemaker", region_name="us-west-2", aws_access_key_id="testing",
                          aws_secret_access_key="testing",  # noqa: S106
                          config=CLIENT_CONFIG)
    sent: list[str] = []

    def send(request: Any, **kwargs: Any) -> AWSResponse:
        sent.append(request.url)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, body = answer
        return AWSResponse(request.url, status, {"Content-Type": "application/x-amz-json-1.1"},
                           _Raw(json.dumps(body).encode()))

    client.meta.events.register_first("before-send.sagemaker", send)
    return client, sent


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **kwargs: Any):
        yield self.body


def test_the_adapter_never_retries_a_node_action_whose_answer_was_lost():
    client, sent = real_client([ReadTimeoutError(endpoint_url=ENDPOINT), ACCEPTED])
    with pytest.raises(ReadTimeoutError):
        HyperPod(client).act(Action.REPLACE_NODE, CLUSTER, NODE)
    assert len(sent) == 1


def test_the_adapter_leaves_throttling_to_botocores_retries():
    throttled = (400, {"__type": "ThrottlingException", "message": "Rate exceeded"})
    client, sent = real_client([throttled, ACCEPTED])
    result = HyperPod(client).act(Action.REBOOT_NODE, CLUSTER, NODE)
    assert result.accepted and len(sent) == 2


def test_the_adapter_still_retries_reads_that_time_out():
    # Only the node actions are guarded: a lost answer to a read is safe to ask again
    node = {"NodeDetails": {"InstanceId": NODE, "InstanceGroupName": "gpu-workers",
                            "InstanceStatus": {"Status": "Running"}}}
    client, sent = real_client([ACCEPTED, ReadTimeoutError(endpoint_url=ENDPOINT), (200, node)])
    hyperpod = HyperPod(client)
    assert hyperpod.act(Action.REBOOT_NODE, CLUSTER, NODE).accepted  # the guard is in place from here
    assert hyperpod.describe_node(CLUSTER, NODE).status == "Running"
    assert len(sent) == 3
