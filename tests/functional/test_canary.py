"""Specification: the canary (issue 29, item 6) against emulated AWS (moto for EventBridge, the ledger and SNS): the
reconciler's event comes back through the canary rule to the node remediation function's handler, which notes it;
an event Medic did not send never makes the pipeline look alive; the age the alarm watches grows while none comes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from medic.adapters.events import EventBus
from medic.config import CANARY_LATE, parse_config
from medic.flows.canary.arrival import record_canary
from medic.flows.canary.pipeline import canary_age, send_canary
from medic.handlers import node_health
from medic.ledger.canary import CanaryStore
from tests.functional.conftest import CONFIG, REGION, TABLE, Account, Medic, medic_world
from tests.functional.test_node_entrypoint import LambdaContext

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


class Bus:
    """The default bus with the stack's canary rule (the synthesized pattern) into a queue, to read the canaries back
    as EventBridge delivers them (moto matches the pattern and delivers the whole event)."""

    def __init__(self) -> None:
        self.events, self.sqs = boto3.client("events", region_name=REGION), boto3.client("sqs", region_name=REGION)
        self.queue = self.sqs.create_queue(QueueName="canary-target")["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.events.put_rule(Name="medic-canary", EventPattern=json.dumps({
            "source": ["medic.canary"], "detail-type": ["Medic Canary"], "account": ["123456789012"],
            "detail": {"stack": ["Medic"]}}))
        self.events.put_targets(Rule="medic-canary", Targets=[{"Id": "handler", "Arn": arn}])

    def delivered(self) -> list[dict]:
        messages = self.sqs.receive_message(QueueUrl=self.queue, MaxNumberOfMessages=10).get("Messages", [])
        return [json.loads(message["Body"]) for message in messages]


@pytest.fixture
def world(aws: Account) -> Iterator[Medic]:
    yield from medic_world(parse_config(CONFIG), aws)


def run(medic: Medic, minute: float, bus: EventBus | None = None) -> dict:
    medic.clock[0] = START + timedelta(minutes=minute)
    medic.deps.stack = "Medic"
    return send_canary(medic.deps, bus or EventBus(boto3.client("events", region_name=REGION)))


def test_a_canary_travels_the_rule_to_the_handler_which_notes_its_arrival(world: Medic, monkeypatch):
    # Given the canary rule on the default bus
    bus = Bus()
    # When the reconciler runs at 08:00: nothing arrived yet, so the age is 0; it puts a canary
    sent = run(world, 0)
    assert sent["sent"] and sent["age_s"] == 0
    # Then the rule delivers it as EventBridge does, and the node remediation function's handler notes it
    [delivered] = bus.delivered()
    # (moto's delivery to a queue leaves out `account`, which every EventBridge event carries: "Amazon EventBridge
    # events", EventBridge user guide)
    event = {**delivered, "account": "123456789012"}
    assert (event["source"], event["detail-type"], event["detail"]["canary"]) == (
        "medic.canary", "Medic Canary", sent["canary"])
    assert event["detail"]["ledger"] == TABLE and event["detail"]["stack"] == "Medic"
    world.clock[0] = START + timedelta(seconds=2)
    monkeypatch.setattr(node_health, "dependencies", lambda: world.deps)
    arrived = node_health.handler(event, LambdaContext())  # the node function's entry point dispatches it
    assert arrived["arrived"] and arrived["latency_s"] == 2
    [line] = [line for line in world.log.messages if line.get("message") == "canary"]
    assert (line["canary"], line["latency_s"]) == (sent["canary"], 2)
    # And the next run measures from that arrival; nothing was acted on, nobody paged
    assert run(world, 5)["age_s"] == 298
    assert world.log.lines == [] and world.pages() == []


def test_an_event_medic_did_not_send_is_never_counted_as_the_pipeline_working(world: Medic):
    # Given Medic's canary is out, and someone else puts one with another id (anyone may PutEvents medic.canary)
    Bus()
    sent = run(world, 0)
    forged = {"version": "0", "id": "1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9", "detail-type": "Medic Canary",
              "source": "medic.canary", "account": "123456789012", "time": "2026-11-20T08:00:01Z",
              "region": REGION, "resources": [],
              "detail": {"stack": "Medic", "ledger": TABLE, "canary": "0f0f0f0f-0f0f-4f0f-8f0f-0f0f0f0f0f0f",
                         "sent_at": "2026-11-20T08:00:00+00:00"}}
    # Then it is not an arrival: the ledger still waits for Medic's own
    assert record_canary(forged, world.deps)["arrived"] is False
    assert CanaryStore(world.deps.table).load().arrived_at is None
    assert sent["sent"]


def test_while_no_canary_comes_back_the_age_grows_past_the_alarms_bound(world: Medic):
    # Given the reconciler's PutEvents refused (its role lost events:PutEvents): moto has no bus policy, so a bus
    # that refuses stands in
    class Refusing(EventBus):
        def put(self, *args, **kwargs):  # noqa: ANN002, ANN003
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, "PutEvents")

    ages = [run(world, minute, Refusing()) for minute in (0, 5, 10, 15, 20)]
    # Then each run says so and counts it; the age since the first canary grows past CANARY_LATE (15 min)
    assert [result["sent"] for result in ages] == [False] * 5
    state = CanaryStore(world.deps.table).load()
    assert canary_age(state, START + timedelta(minutes=20)) == timedelta(minutes=20) > CANARY_LATE


def test_the_node_health_handler_takes_a_canary_to_the_canary_flow_not_the_node_path(world: Medic, monkeypatch):
    monkeypatch.setattr(node_health, "dependencies", lambda: world.deps)
    Bus()
    sent = run(world, 0)
    world.clock[0] = START + timedelta(seconds=1)
    event = {"version": "0", "id": "7e8f9a0b-1c2d-4e3f-8a4b-5c6d7e8f9a0b", "detail-type": "Medic Canary",
             "source": "medic.canary", "account": "123456789012", "time": "2026-11-20T08:00:00Z", "region": REGION,
             "resources": [], "detail": {"stack": "Medic", "ledger": TABLE, "canary": sent["canary"],
                                         "sent_at": "2026-11-20T08:00:00+00:00"}}
    # Then the canary is noted; no HyperPod call was made (the Stubber expects none: any call would fail)
    assert node_health.handler(event, LambdaContext())["arrived"] is True
    assert world.log.lines == []
