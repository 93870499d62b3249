"""Specification: the training-job restart rule, function and permissions."""

from __future__ import annotations

import json

from tests.helpers import load_event
from tests.infra.conftest import one
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
