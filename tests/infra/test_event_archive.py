"""Specification: the stack keeps every event some Medic rule takes, for event_archive_days, in an EventBridge
archive on the default bus; a read-back rule takes only Medic's backtest replays into an encrypted queue."""

from __future__ import annotations

import pytest

from medic.config import ConfigError, parse_config
from tests.helpers import load_event
from tests.infra.conftest import one, resources
from tests.infra.test_node_remediation_stack import matches

SAMPLES = ("hyperpod-node-health-unhealthy", "hyperpod-cluster-event-error", "training-job-failed")


@pytest.fixture(scope="module")
def archive(raw) -> dict:
    [archive] = resources(raw, "AWS::Events::Archive").values()
    return archive["Properties"]


@pytest.fixture(scope="module")
def readback(raw) -> dict:
    return one(raw, "AWS::Events::Rule", "EventArchiveReadbackRule")["Properties"]


def test_the_archive_pattern_is_exactly_the_union_of_medics_event_rules(raw, archive):
    # Not the mode watch's: a change of the mode is paged, not a remediation event a backtest replays
    rules = [res["Properties"]["EventPattern"] for lid, res in resources(raw, "AWS::Events::Rule").items()
             if "EventPattern" in res["Properties"]
             and not lid.startswith(("EventArchiveReadbackRule", "ModeWatchRule"))]
    assert len(rules) >= 4  # node health, cluster events, training jobs, alarms (and operator requeues)
    assert sorted(map(repr, archive["EventPattern"]["$or"])) == sorted(map(repr, rules))


def test_the_archive_listens_on_the_default_bus_and_keeps_30_days_by_default(archive):
    assert archive["RetentionDays"] == 30
    assert archive["SourceArn"]["Fn::Join"][1][-1] == ":event-bus/default"


@pytest.mark.parametrize("sample", SAMPLES)
def test_the_events_medic_acts_on_are_archived(archive, sample):
    assert matches(archive["EventPattern"], load_event(sample))


def test_an_event_no_rule_takes_is_not_archived(archive):
    event = load_event("hyperpod-node-health-unhealthy")
    event["detail"]["ClusterName"] = "someone-elses-cluster"
    assert not matches(archive["EventPattern"], event)


def test_the_readback_rule_takes_only_medics_backtest_replays(readback):
    event = load_event("hyperpod-node-health-unhealthy")
    assert not matches(readback["EventPattern"], event)  # a live event never reaches the read-back queue
    assert matches(readback["EventPattern"], {**event, "replay-name": "medic-backtest-20261203T101500Z"})
    assert not matches(readback["EventPattern"], {**event, "replay-name": "someone-elses-replay"})


def test_the_readback_target_is_an_encrypted_queue_with_a_dead_letter_queue(raw, readback):
    [target] = readback["Targets"]
    assert target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0].startswith("EventArchiveTargetDeadLetters")
    queue = raw["Resources"][target["Arn"]["Fn::GetAtt"][0]]["Properties"]
    assert "KmsMasterKeyId" in queue and queue["MessageRetentionPeriod"] == 86400


def test_the_stack_outputs_what_medic_backtest_needs(raw):
    assert {"EventArchiveArn", "BacktestRuleArn", "BacktestQueueUrl"} <= set(raw["Outputs"])


def minimal(**extra) -> dict:
    return {"clusters": [{"name": "c1", "id": "k3v9q2w8x1za", "orchestrator": "slurm"}], **extra}


def test_the_retention_comes_from_the_config():
    assert parse_config(minimal(event_archive_days=7)).event_archive_days == 7


@pytest.mark.parametrize("days", [0, -1, 3651, "a week"])
def test_a_retention_outside_1_to_3650_days_stops_synth_naming_the_key(days):
    with pytest.raises(ConfigError, match="event_archive_days"):
        parse_config(minimal(event_archive_days=days))


def test_only_the_readback_rule_may_send_to_its_queue(raw, readback):
    queue_id = readback["Targets"][0]["Arn"]["Fn::GetAtt"][0]
    [policy] = [res["Properties"]["PolicyDocument"] for res in resources(raw, "AWS::SQS::QueuePolicy").values()
                if res["Properties"]["Queues"] == [{"Ref": queue_id}]]
    [allow] = [s for s in policy["Statement"] if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "events.amazonaws.com"} and allow["Action"] == "sqs:SendMessage"
    assert allow["Condition"]["ArnEquals"]["aws:SourceArn"]["Fn::GetAtt"][0].startswith("EventArchiveReadbackRule")
