"""Specification: each function may do exactly what its job needs, on named resources."""

from __future__ import annotations

import json

import pytest

from tests.infra.conftest import resources

COMMON = {"dynamodb:BatchGetItem", "dynamodb:ConditionCheckItem", "dynamodb:DeleteItem", "dynamodb:GetItem",
          "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem", "kms:Decrypt", "kms:DescribeKey",
          "kms:Encrypt", "kms:GenerateDataKey", "logs:CreateLogStream", "logs:PutLogEvents", "sns:Publish",
          "sqs:SendMessage", "ssm:GetParameter", "xray:PutTelemetryRecords", "xray:PutTraceSegments"}
EXTRA = {
    "NodeRemediationHandler": {"sagemaker:BatchRebootClusterNodes", "sagemaker:BatchReplaceClusterNodes",
                               "sagemaker:DescribeCluster", "sagemaker:DescribeClusterNode",
                               "sagemaker:DescribeTrainingPlan"},  # the capacity check before a replace (issue 32)
    "ClusterEventsHandler": set(),
    # and its canary (issue 29, item 6): PutEvents on the default bus, its source and detail-type only
    "ReconcilerHandler": {"sagemaker:BatchRebootClusterNodes", "sagemaker:BatchReplaceClusterNodes",
                          "sagemaker:DescribeCluster", "sagemaker:DescribeClusterNode", "sagemaker:ListClusterNodes",
                          "events:PutEvents", "sagemaker:DescribeTrainingPlan",
                          # a training job's restart after its capacity backoff (issue 32)
                          "sagemaker:DescribeTrainingJob", "sagemaker:ListTags", "sagemaker:CreateTrainingJob",
                          "sagemaker:AddTags", "iam:PassRole", "s3:ListBucket"},
    "SlurmJobRequeueRequeueHandler": set(),
    # the node call that waited for the agent's drain is made from the drain's result (issue 27)
    "SlurmJobRequeueAgentResultsHandler": {"dynamodb:DescribeStream", "dynamodb:GetRecords",
                                           "dynamodb:GetShardIterator", "dynamodb:ListStreams",
                                           "sqs:GetQueueAttributes", "sqs:GetQueueUrl",
                                           "kms:GenerateDataKey*", "kms:ReEncrypt*",
                                           "sagemaker:BatchRebootClusterNodes", "sagemaker:BatchReplaceClusterNodes",
                                           "sagemaker:DescribeClusterNode"},
    "AlarmResponseHandler": {"cloudwatch:GetMetricData", "cloudwatch:ListMetrics"},
    # a restart's incident line waits for its clone to train: the recovery check reads it (issue 29)
    "AlarmResponseRecoveryCheck": {"cloudwatch:GetMetricData", "cloudwatch:ListMetrics",
                                   "sagemaker:DescribeTrainingJob"},
    "TrainingJobRestartsHandler": {"iam:PassRole", "s3:ListBucket", "sagemaker:AddTags",
                                   "sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob",
                                   "sagemaker:ListTags"},
}
UNSCOPED_ALLOWED = {"xray:PutTelemetryRecords", "xray:PutTraceSegments", "cloudwatch:GetMetricData",
                    "cloudwatch:ListMetrics", "dynamodb:ListStreams"}  # none support resource-level permissions


def statements(raw: dict, owner: str) -> list[dict]:
    (policy,) = [res for lid, res in resources(raw, "AWS::IAM::Policy").items() if lid.startswith(owner + "Role")]
    return policy["Properties"]["PolicyDocument"]["Statement"]


def actions_of(statement: dict) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


@pytest.mark.parametrize("owner", sorted(EXTRA))
def test_each_function_has_exactly_the_actions_it_needs(raw, owner):
    granted = set().union(*(actions_of(s) for s in statements(raw, owner)))
    assert granted == COMMON | EXTRA[owner]


@pytest.mark.parametrize("owner", sorted(EXTRA))
def test_only_actions_without_resource_level_permissions_are_granted_on_star(raw, owner):
    for statement in statements(raw, owner):
        if statement["Resource"] == "*":
            assert actions_of(statement) <= UNSCOPED_ALLOWED, statement


def test_functions_can_be_invoked_only_by_their_rules(raw):
    for permission in resources(raw, "AWS::Lambda::Permission").values():
        properties = permission["Properties"]
        assert properties["Principal"] == "events.amazonaws.com"
        assert properties["SourceArn"]["Fn::GetAtt"][1] == "Arn"


def test_no_secret_looking_values_in_function_environments(raw):
    for function in resources(raw, "AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        for name in variables:
            assert not any(word in name.upper() for word in ("SECRET", "PASSWORD", "TOKEN", "KEY_ID", "ACCESS_KEY"))
        assert "aws_secret_access_key" not in json.dumps(variables).lower()


def test_the_recovery_check_reads_only_the_configured_prefixes_training_jobs(raw):
    # A restart's incident line waits for its clone to train (issue 29): DescribeTrainingJob, on the prefixes only
    [statement] = [s for s in statements(raw, "AlarmResponseRecoveryCheck") if "sagemaker:DescribeTrainingJob"
                   in actions_of(s)]
    assert actions_of(statement) == {"sagemaker:DescribeTrainingJob"}
    resources_ = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    assert resources_ and all(":training-job/" in json.dumps(resource) for resource in resources_)


def test_the_reconciler_may_put_only_the_canary_on_the_default_bus(raw):
    # Given the reconciler's PutEvents grant (issue 29, item 6)
    [grant] = [s for s in statements(raw, "ReconcilerHandler") if "events:PutEvents" in actions_of(s)]
    # Then it names the account's default bus and only the canary's source and detail-type (EventBridge's condition
    # keys events:source, events:detail-type): no event any other rule takes
    assert actions_of(grant) == {"events:PutEvents"}
    assert grant["Resource"]["Fn::Join"][1][-1] == ":event-bus/default"
    assert grant["Condition"] == {"StringEquals": {"events:source": "medic.canary",
                                                   "events:detail-type": "Medic Canary"}}
