"""Specification: the AWS Batch and Bedrock job restart rules (failures; Medic's restarts running), function and
permissions (ManagedJobRestarts)."""

from __future__ import annotations

import copy
import json

import pytest

from infra.config import ConfigError, load_config
from tests.helpers import load_event
from tests.infra.conftest import ROOT, one
from tests.infra.test_node_remediation_stack import matches


def batch_failure() -> dict:
    """AWS's documented sample (aws-docs-batch-job-state-change.json), made a FAILED job of medic.yaml's queue and
    prefix in the synthesized stack's account."""
    event = copy.deepcopy(load_event("aws-docs-batch-job-state-change"))
    event["detail"].update(status="FAILED", jobName="pt-llama-0007",
                           jobQueue="arn:aws:batch:us-west-2:123456789012:job-queue/gpu-training")
    return event


@pytest.fixture(scope="module")
def rule(raw) -> dict:
    return one(raw, "AWS::Events::Rule", "ManagedJobRestartsBatchRule")["Properties"]


def handler_policy(raw: dict) -> list[dict]:
    return one(raw, "AWS::IAM::Policy", "ManagedJobRestartsHandlerRole")["Properties"]["PolicyDocument"]["Statement"]


def test_the_batch_rule_takes_failed_jobs_of_a_configured_queue_and_prefix_only(rule):
    event = batch_failure()
    assert matches(rule["EventPattern"], event)
    for change in ({"status": "RUNNABLE"}, {"status": "SUCCEEDED"}, {"jobName": "research-0001"},
                   {"jobQueue": "arn:aws:batch:us-west-2:123456789012:job-queue/someone-elses"}):
        other = copy.deepcopy(event)
        other["detail"].update(change)
        assert not matches(rule["EventPattern"], other), change
    foreign = copy.deepcopy(event)
    foreign["account"] = "999999999999"
    assert not matches(rule["EventPattern"], foreign)


def test_the_documented_sample_as_aws_sends_it_is_not_taken(rule):
    # RUNNABLE, another account's queue: nothing for Medic
    assert not matches(rule["EventPattern"], load_event("aws-docs-batch-job-state-change"))


def test_batch_iam_names_exactly_the_configured_queues_definitions_and_buckets(raw):
    # Given medic.yaml's batch_jobs: queue gpu-training, job definition pretrain-mnp, bucket ml-checkpoints-...
    statements = handler_policy(raw)
    text = json.dumps(statements)
    submit = next(s for s in statements if s["Action"] == "batch:SubmitJob")
    resources = json.dumps(submit["Resource"])
    # Then SubmitJob names exactly that queue and every revision of that definition, nothing else
    assert len(submit["Resource"]) == 2
    assert ":job-queue/gpu-training" in resources and ":job-definition/pretrain-mnp:*" in resources
    assert "job-queue/*" not in text and "job-definition/*" not in text
    # And ListBucket exactly the checkpoint bucket (never an object read)
    list_bucket = next(s for s in statements if s["Action"] == "s3:ListBucket")
    assert json.dumps(list_bucket["Resource"]).endswith(':s3:::ml-checkpoints-123456789012"]]}')
    assert "s3:GetObject" not in text
    # And the only unscoped Batch action is the read-only DescribeJobs (X-Ray's are every function's)
    unscoped = {action for s in statements if s["Resource"] == "*"
                for action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert {action for action in unscoped if action.startswith("batch:")} == {"batch:DescribeJobs"}


def test_bedrock_iam_passes_exactly_the_configured_roles_and_only_to_bedrock(raw):
    # Given medic.yaml's bedrock_jobs: role_arns [BedrockCustomization] (SubmitJob passes no role: the Batch job
    # definition holds it, so this is the only PassRole of the function)
    statements = handler_policy(raw)
    [pass_role] = [s for s in statements if s["Action"] == "iam:PassRole"]
    assert pass_role["Resource"] == "arn:aws:iam::123456789012:role/BedrockCustomization"
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}}
    [bedrock] = [s for s in statements if "bedrock:CreateModelCustomizationJob" in s["Action"]]
    assert sorted(bedrock["Action"]) == ["bedrock:CreateModelCustomizationJob", "bedrock:GetModelCustomizationJob",
                                         "bedrock:ListTagsForResource", "bedrock:TagResource"]
    assert "bedrock:*" not in json.dumps(statements) and "role/*" not in json.dumps(statements)


def test_the_bedrock_rule_takes_failed_jobs_under_a_configured_prefix_only(raw):
    rule = one(raw, "AWS::Events::Rule", "ManagedJobRestartsBedrockRule")["Properties"]
    event = copy.deepcopy(load_event("aws-docs-bedrock-model-customization-job-state-change"))
    event["detail"]["jobName"] = "cpt-llama-0003"
    assert matches(rule["EventPattern"], event)
    for change in ({"jobStatus": "Completed"}, {"jobName": "abcd-wxyz"}):
        other = copy.deepcopy(event)
        other["detail"].update(change)
        assert not matches(rule["EventPattern"], other), change


def test_the_batch_clone_rule_takes_only_restarts_of_a_configured_prefix_running_in_its_queue(raw):
    # Given medic.yaml's batch_jobs (prefix pt-llama-, queue gpu-training): Medic names its restarts <base>-r<k>
    rule = one(raw, "AWS::Events::Rule", "ManagedJobRestartsBatchCloneRule")["Properties"]
    event = batch_failure()
    event["detail"].update(status="RUNNING", jobName="pt-llama-0007-r1")
    assert matches(rule["EventPattern"], event)
    # Then not the job itself running, a failure, another prefix's or queue's job, another account's
    for change in ({"jobName": "pt-llama-0007"}, {"status": "FAILED"}, {"jobName": "research-0001-r1"},
                   {"jobQueue": "arn:aws:batch:us-west-2:123456789012:job-queue/someone-elses"}):
        other = copy.deepcopy(event)
        other["detail"].update(change)
        assert not matches(rule["EventPattern"], other), change
    assert not matches(rule["EventPattern"], {**event, "account": "999999999999"})


def test_the_bedrock_clone_rule_takes_only_restarts_of_a_configured_prefix_in_progress(raw):
    rule = one(raw, "AWS::Events::Rule", "ManagedJobRestartsBedrockCloneRule")["Properties"]
    event = copy.deepcopy(load_event("aws-docs-bedrock-model-customization-job-state-change"))
    event["detail"].update(jobName="cpt-llama-0003-r1", jobStatus="InProgress")
    event["account"] = "123456789012"
    assert matches(rule["EventPattern"], event)
    for change in ({"jobName": "cpt-llama-0003"}, {"jobStatus": "Completed"}, {"jobName": "abcd-wxyz-r1"}):
        other = copy.deepcopy(event)
        other["detail"].update(change)
        assert not matches(rule["EventPattern"], other), change


def test_the_handler_has_its_dead_letter_queue(raw):
    config = one(raw, "AWS::Lambda::EventInvokeConfig", "ManagedJobRestartsHandlerFunctionEventInvokeConfig")
    assert config["Properties"]["MaximumRetryAttempts"] == 2
    for rule in ("ManagedJobRestartsBatchRule", "ManagedJobRestartsBedrockRule", "ManagedJobRestartsBatchCloneRule",
                 "ManagedJobRestartsBedrockCloneRule"):
        target = one(raw, "AWS::Events::Rule", rule)["Properties"]["Targets"][0]
        assert "ManagedJobRestartsHandlerDeadLetters" in json.dumps(target["DeadLetterConfig"])


@pytest.mark.parametrize(("key", "message"), [
    ("job_queues", "batch_jobs.0.job_queues"),
    ("job_definitions", "batch_jobs.0.job_definitions"),
    ("checkpoint_buckets", "checkpoint_buckets: required"),
])
def test_synth_stops_on_batch_jobs_without_queues_definitions_or_checkpoints_naming_the_key(tmp_path, key, message):
    config = (ROOT / "medic.yaml").read_text()
    lines = config.splitlines()
    batch = lines.index("batch_jobs:")
    start = next(i for i, line in enumerate(lines) if i > batch and line.strip().startswith(f"{key}:"))
    end = start + 1
    while end < len(lines) and lines[end].startswith("      - {"):
        end += 1
    broken = tmp_path / "medic.yaml"
    broken.write_text("\n".join(lines[:start] + lines[end:]) + "\n")
    with pytest.raises(ConfigError) as error:
        load_config(broken)
    assert message in str(error.value)


def test_a_queue_given_as_an_arn_is_refused_naming_the_value(tmp_path):
    config = (ROOT / "medic.yaml").read_text().replace(
        "job_queues: [gpu-training]", "job_queues: ['arn:aws:batch:us-west-2:123456789012:job-queue/gpu-training']")
    broken = tmp_path / "medic.yaml"
    broken.write_text(config)
    with pytest.raises(ConfigError) as error:
        load_config(broken)
    assert "batch_jobs.0.job_queues" in str(error.value) and "not an AWS Batch name" in str(error.value)
