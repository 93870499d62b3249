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


def test_the_archive_takes_each_kind_of_event_a_rule_takes_by_source_and_detail_type(archive):
    # bounded whatever the config (tests/infra/test_event_patterns.py: every rule is within it, every pattern fits)
    kinds = {(source, kind) for branch in archive["EventPattern"]["$or"]
             for source in branch["source"] for kind in branch["detail-type"]}
    assert kinds == {("aws.sagemaker", "SageMaker HyperPod Cluster Node Health Event"),
                     ("aws.sagemaker", "SageMaker HyperPod Cluster Event"),
                     ("aws.sagemaker", "SageMaker Training Job State Change"),
                     ("aws.batch", "Batch Job State Change"),
                     ("aws.bedrock", "Model Customization Job State Change"),
                     ("aws.cloudwatch", "CloudWatch Alarm State Change"),
                     ("medic.operator", "Medic Requeue Job"), ("medic.operator", "Medic Release Node")}
    assert archive["EventPattern"]["account"] == [{"Ref": "AWS::AccountId"}]


def test_the_archive_listens_on_the_default_bus_and_keeps_30_days_by_default(archive):
    assert archive["RetentionDays"] == 30
    assert archive["SourceArn"]["Fn::Join"][1][-1] == ":event-bus/default"


@pytest.mark.parametrize("sample", SAMPLES)
def test_the_events_medic_acts_on_are_archived(archive, sample):
    assert matches(archive["EventPattern"], load_event(sample))


def test_another_clusters_events_are_archived_too_for_a_candidate_config_that_adds_it(archive):
    event = load_event("hyperpod-node-health-unhealthy")
    event["detail"]["ClusterName"] = "a-cluster-the-candidate-adds"
    assert matches(archive["EventPattern"], event)


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
