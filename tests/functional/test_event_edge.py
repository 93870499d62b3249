"""Specification: what every event must be to act at all (issue 28 items 1, 10, 11). Of now: not older than
EventBridge's and Lambda's retries can deliver one (unless an operator's override vouches for a redrive), not dated
ahead of Medic's clock; with a time zone; of the stack's partition, account and region. Anything else is one
`rejected` record naming why, and no call."""

from __future__ import annotations

import copy
import logging
from datetime import UTC, datetime, timedelta

import pytest

from medic.config import EVENT_AGE_LIMIT, EVENT_CLOCK_SKEW, REDELIVERY_WINDOW
from medic.core.models import Edge
from medic.flows.node.health_event import NodeHealthEvent
from medic.flows.stall.response import respond_to_alarm
from medic.obs import REDRIVE_MESSAGE
from sim.world import ttl_sweep
from tests.functional.conftest import TABLE
from tests.helpers import load_event, node_event

NODE = "i-0123456789abcdef0"
T0 = datetime(2026, 11, 20, 8, 14, 5, tzinfo=UTC)


def reboot_event(event_id: str = "5c1f4a2e-7d3b-4f0e-9a61-2b8c0d9e1f10", at: datetime = T0) -> dict:
    event = node_event(load_event("hyperpod-node-health-unhealthy"), instance_id=NODE, event_id=event_id,
                       reason="HyperPod Health Monitoring Agent (HMA) has detected fault type NvidiaErrorReboot on "
                              "this node and is unhealthy.")
    event["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return event


def with_override(event: dict, **changes: str) -> dict:
    """The runbook's redrive (docs/operator-runbook.md): the event as it was, plus the operator's override naming
    its id."""
    return {**event, "medic-redrive": {"event": event["id"], "by": "alice@example.com",
                                       "reason": "DLQ after the DynamoDB outage", **changes}}


def reboots(medic) -> None:
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action("batch_reboot_cluster_nodes", NODE)


def assert_rejected(medic, record: dict, *words: str) -> None:
    assert (record["outcome"], record["action"], record["fault"], record["paged"]) == (
        "rejected", "none", "invalid", False), record
    for word in words:
        assert word in record["reason"], record["reason"]
    medic.hyperpod.assert_all_called()  # no call was queued and none was made
    assert medic.pages() == []


# --- item 1: old events


def test_a_node_event_redriven_eight_days_later_is_rejected_naming_its_age(medic):
    # Given a reboot-class fault event from eight days ago (a dead-letter queue redriven as is)
    medic.at((T0 + timedelta(days=8)).isoformat())
    # When it reaches the handler
    record = medic.handle(reboot_event())
    # Then it is rejected, naming its age and the bound, and nothing is called
    assert_rejected(medic, record, "time:", "8 d old", "1 d 7 h", "medic-redrive")


def test_the_age_bound_is_the_delivery_windows_of_the_stack_plus_the_sources_lag(medic):
    # Given an event just within the bound (31 h: EventBridge's 24 h, Lambda's 6 h, an hour's lag)
    assert EVENT_AGE_LIMIT == timedelta(hours=31)
    medic.at((T0 + EVENT_AGE_LIMIT).isoformat())
    reboots(medic)
    # Then it still acts; a second later it would not
    assert medic.handle(reboot_event())["outcome"] == "executed"
    medic.at((T0 + EVENT_AGE_LIMIT + timedelta(seconds=1)).isoformat())
    assert_rejected(medic, medic.handle(reboot_event("6d2e5b3f-8e4c-4a1f-b072-3c9d1e0f2a21")), "1 d 7 h")


def test_an_event_dated_1970_is_rejected_even_with_an_override(medic):
    record = medic.handle(with_override(reboot_event(at=datetime(1970, 1, 1, tzinfo=UTC))))
    assert_rejected(medic, record, "older than any dead-letter queue keeps one", "not even an operator's override")


def test_an_operators_override_lets_a_redriven_event_act_once_and_is_logged(medic, caplog):
    # Given the event redriven eight days later with the override the runbook adds
    medic.at((T0 + timedelta(days=8)).isoformat())
    reboots(medic)
    # When it reaches the Lambda entry point
    from medic.handlers import node_health

    caplog.set_level(logging.WARNING, logger="medic")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(node_health, "dependencies", lambda: medic.deps)
        record = node_health.handler(with_override(reboot_event()), LambdaContext())
    # Then it acts, and the override is on the log with who gave it and why
    assert (record["action"], record["outcome"]) == ("reboot_node", "executed")
    [line] = [r for r in caplog.records if r.getMessage() == REDRIVE_MESSAGE]
    assert line.override_by == '"alice@example.com"' and "DynamoDB outage" in line.override_reason
    # And the same redrive again is a duplicate: the event's claim outlives the override's window
    again = medic.handle(with_override(reboot_event()))
    assert (again["action"], again["outcome"]) == ("none", "duplicate")


@pytest.mark.parametrize("override", [
    {"event": "another-event-id"},  # made for another event
    {"reason": ""},  # no reason given
    {"by": None},  # nobody
], ids=["other-event", "no-reason", "nobody"])
def test_an_override_that_does_not_vouch_for_this_event_lets_nothing_act(medic, override):
    medic.at((T0 + timedelta(days=3)).isoformat())
    event = with_override(reboot_event())
    event["medic-redrive"] = {key: value for key, value in {**event["medic-redrive"], **override}.items()
                              if value is not None}
    assert_rejected(medic, medic.handle(event), "time:")


def test_the_events_claim_outlives_dynamodbs_ttl_so_a_redrive_with_an_override_is_a_duplicate(medic):
    # Given the event acted, and eight days later DynamoDB's TTL deleted every item expired by then
    ledger_ttl(medic)
    reboots(medic)
    assert medic.handle(reboot_event())["outcome"] == "executed"
    medic.at((T0 + timedelta(days=8)).isoformat())
    ttl_sweep(medic.deps.table.client, medic.clock[0])
    # When an operator redrives a copy of it with the override (the DLQ still held it)
    record = medic.handle(with_override(reboot_event()))
    # Then its claim is still there: a duplicate, no second reboot
    assert (record["action"], record["outcome"]) == ("none", "duplicate")
    medic.hyperpod.assert_all_called()


def test_past_the_last_day_a_queue_keeps_an_event_no_override_makes_it_act(medic):
    medic.at((T0 + REDELIVERY_WINDOW + timedelta(seconds=1)).isoformat())
    assert_rejected(medic, medic.handle(with_override(reboot_event())), "not even an operator's override")


# --- item 1: future events


def test_an_event_dated_ahead_of_medics_clock_beyond_the_skew_is_rejected(medic):
    # Given a Healthy report dated a week ahead (it would hide the node's faults until then)
    healthy = node_event(reboot_event(), status="Healthy", reason="", time="2026-11-27T08:14:05Z")
    # When it arrives now
    record = NodeHealthEventHandler.call(medic, healthy)
    # Then it is rejected naming the time; nothing is remembered of it
    assert_rejected(medic, record, "dated 7 d after Medic's clock", "5 min")
    assert medic.deps.table.get({"pk": {"S": f"node#pretrain-slurm#{NODE}"}, "sk": {"S": "healthy"}}) is None
    # And the node's real fault an hour later acts (it used to be `ignored`, older than that "last healthy report")
    medic.at((T0 + timedelta(hours=1)).isoformat())
    reboots(medic)
    fault = reboot_event("7f3a9c1e-2b4d-4e6f-8a0b-1c2d3e4f5a6b", at=T0 + timedelta(hours=1))
    assert medic.handle(fault)["outcome"] == "executed"


def test_an_event_dated_within_the_clocks_skew_is_taken(medic):
    reboots(medic)
    early = reboot_event(at=T0 + EVENT_CLOCK_SKEW - timedelta(seconds=1))
    assert NodeHealthEventHandler.call(medic, early)["outcome"] == "executed"


# --- item 10: partitions, accounts, regions


@pytest.mark.parametrize("partition", ["aws-us-gov", "aws-iso-b", "aws-cn"])
def test_a_node_event_naming_another_partition_is_rejected(medic, partition):
    event = reboot_event()
    event["detail"]["ClusterArn"] = event["detail"]["ClusterArn"].replace("arn:aws:", f"arn:{partition}:")
    event["resources"] = [event["detail"]["ClusterArn"]]
    assert_rejected(medic, medic.handle(event), partition, "not the stack's partition aws")


def test_the_cluster_arns_partition_is_checked_when_resources_does_not_name_it(medic):
    event = reboot_event()
    event["detail"]["ClusterArn"] = event["detail"]["ClusterArn"].replace("arn:aws:", "arn:aws-us-gov:")
    assert_rejected(medic, medic.handle(event), "ClusterArn", "aws-us-gov")


def test_in_a_stack_in_govcloud_govclouds_events_act(medic):
    # Given a stack deployed in aws-us-gov (the partition of its page topic's ARN) and an event from there
    medic.deps.partition, medic.deps.region = "aws-us-gov", "us-gov-west-1"
    event = reboot_event()
    arn = "arn:aws-us-gov:sagemaker:us-gov-west-1:123456789012:cluster/k3v9q2w8x1za"
    event.update(region="us-gov-west-1", resources=[arn])
    event["detail"]["ClusterArn"] = arn
    reboots(medic)
    # Then it acts
    assert medic.handle(event)["outcome"] == "executed"


@pytest.mark.parametrize("change,words", [
    ({"account": "999999999999"}, "account \"999999999999\""),
    ({"region": "eu-west-1"}, "region \"eu-west-1\""),
    ({"resources": ["arn:aws:cloudwatch:us-west-2:999999999999:alarm:medic-stall-llama3-70b"]}, "resources"),
    ({"resources": ["arn:aws-iso-b:cloudwatch:us-west-2:123456789012:alarm:medic-stall-llama3-70b"]}, "aws-iso-b"),
    ({"resources": []}, "resources"),
], ids=["account", "region", "arn-account", "arn-partition", "no-arn"])
def test_an_alarm_event_not_of_the_stacks_own_alarm_is_rejected(medic, change, words):
    event = {**copy.deepcopy(load_event("cloudwatch-alarm-state-change")), **change}
    medic.at(event["time"])
    assert_rejected(medic, respond_to_alarm(event, medic.deps), words)


# --- item 11: times without a zone


def test_a_node_event_whose_time_has_no_zone_is_rejected_never_a_crash(medic):
    event = reboot_event()
    event["time"] = "2026-11-20T08:14:05"
    assert_rejected(medic, medic.handle(event), "time:", "no time zone")


def test_an_alarm_whose_state_time_has_no_zone_is_rejected_never_a_crash(medic):
    event = copy.deepcopy(load_event("cloudwatch-alarm-state-change"))
    event["detail"]["state"]["timestamp"] = "2026-11-21T03:10:00.000"
    medic.at(event["time"])
    assert_rejected(medic, respond_to_alarm(event, medic.deps), "detail.state.timestamp", "no time zone")


def test_without_a_clock_the_model_checks_only_what_needs_none():
    # `medic explain` reads an event with no clock or stack: a replay and a zoneless time are still refused
    event = reboot_event(at=datetime(1970, 1, 1, tzinfo=UTC))
    assert NodeHealthEvent.model_validate(event).id == event["id"]
    with pytest.raises(ValueError, match="no time zone"):
        NodeHealthEvent.model_validate({**event, "time": "1970-01-01T00:00:00"})
    with pytest.raises(ValueError, match="dated"):
        NodeHealthEvent.model_validate({**event, "time": "2027-01-01T00:00:00Z"},
                                       context={"edge": Edge(now=T0, partition="aws")})


class NodeHealthEventHandler:
    """The node handler without the harness moving the clock to the event's time (a future-dated event arrives now,
    whatever it says)."""

    @staticmethod
    def call(medic, event: dict) -> dict:
        from medic.flows.node.health_event import remediate_node

        return remediate_node(event, medic.deps)


class LambdaContext:
    function_name = "medic-node-health"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-west-2:123456789012:function:medic-node-health"
    aws_request_id = "00000000-0000-0000-0000-00000000e001"


def ledger_ttl(medic) -> None:
    """The ledger table as the stack creates it: TTL on `expires_at` (infra/components/ledger.py)."""
    medic.deps.table.client.update_time_to_live(TableName=TABLE, TimeToLiveSpecification={
        "Enabled": True, "AttributeName": "expires_at"})
