"""Specification: the training-job restart rule, function and permissions."""

from __future__ import annotations

import json

import pytest

from infra.config import ConfigError, load_config
from tests.helpers import load_event
from tests.infra.conftest import ROOT, one, synthesize
from tests.infra.test_node_remediation_stack import matches


def test_the_training_job_rule_takes_failed_jobs_under_a_configured_prefix(raw):
    rule = one(raw, "AWS::Events::Rule", "TrainingJobRestartsRule")["Properties"]
    event = load_event("training-job-failed")
    assert matches(rule["EventPattern"], event)
    other = json.loads(json.dumps(event))
    other["detail"]["TrainingJobName"] = "research-xyz"
    assert not matches(rule["EventPattern"], other)
    stopped = json.loads(json.dumps(event))
    stopped["detail"]["TrainingJobStatus"] = "Stopped"
    assert not matches(rule["EventPattern"], stopped)


def test_restarts_may_create_only_jobs_under_the_prefix_and_pass_roles_only_to_sagemaker(raw):
    policy = one(raw, "AWS::IAM::Policy", "TrainingJobRestartsHandlerRole")["Properties"]["PolicyDocument"]
    create = next(s for s in policy["Statement"] if "sagemaker:CreateTrainingJob" in s["Action"])
    assert ":training-job/ft-*" in json.dumps(create["Resource"])
    pass_role = next(s for s in policy["Statement"] if s["Action"] == "iam:PassRole")
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}


def handler_policy(raw: dict) -> list[dict]:
    return one(raw, "AWS::IAM::Policy", "TrainingJobRestartsHandlerRole")["Properties"]["PolicyDocument"]["Statement"]


def test_restarts_pass_only_the_configured_execution_roles_and_list_only_the_configured_buckets(raw):
    # Given medic.yaml's role_arns and checkpoint_buckets
    statements = handler_policy(raw)
    pass_role = next(s for s in statements if s["Action"] == "iam:PassRole")
    list_bucket = next(s for s in statements if s["Action"] == "s3:ListBucket")
    # Then IAM names exactly those: no role/* of the account, no bucket *
    assert pass_role["Resource"] == "arn:aws:iam::123456789012:role/SageMakerTrainingRole"
    assert json.dumps(list_bucket["Resource"]).endswith(':s3:::ml-artifacts-123456789012"]]}')
    assert "role/*" not in json.dumps(statements) and "s3:::*" not in json.dumps(statements)


@pytest.mark.parametrize("key", ["role_arns", "checkpoint_buckets"])
def test_synth_stops_on_training_jobs_without_roles_or_buckets_naming_the_key_and_the_fix(tmp_path, key):
    config = (ROOT / "medic.yaml").read_text()
    line = next(line for line in config.splitlines() if line.strip().startswith(f"{key}:"))
    broken = tmp_path / "medic.yaml"
    broken.write_text(config.replace(line, ""))
    with pytest.raises(ConfigError) as error:
        load_config(broken)
    assert f"training_jobs.0.{key}: " in str(error.value) and "fix:" in str(error.value)


def test_restarts_may_create_jobs_on_the_configured_training_plans_only(tmp_path):
    # Given a config naming the training plan its jobs run on
    config = (ROOT / "medic.yaml").read_text().replace(
        "    checkpoint_buckets:", "    training_plans: [p5-december]\n    checkpoint_buckets:", 1)
    path = tmp_path / "plans.medic.yaml"
    path.write_text(config)
    _, template = synthesize(path, tmp_path / "cdk.out")
    statements = handler_policy(json.loads(template.read_text()))
    # Then CreateTrainingJob is allowed on that plan's ARN, and on no other plan
    plans = [s for s in statements if "training-plan" in json.dumps(s["Resource"])]
    assert len(plans) == 1 and plans[0]["Action"] == "sagemaker:CreateTrainingJob"
    assert json.dumps(plans[0]["Resource"]).endswith(':training-plan/p5-december"]]}')
