"""Specification: what `cdk deploy` creates for node remediation (rule, function, ledger, paging, mode)."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match
from moto.events.models import EventPattern

from tests.helpers import load_event
from tests.infra.conftest import one, resources

ACCOUNT = "123456789012"
NODE_ACTIONS = ["sagemaker:DescribeCluster", "sagemaker:DescribeClusterNode",
                "sagemaker:BatchRebootClusterNodes", "sagemaker:BatchReplaceClusterNodes"]


def resolved(value, account: str = ACCOUNT):
    """A pattern with the deploying account's pseudo parameter filled in, as CloudFormation does."""
    if value == {"Ref": "AWS::AccountId"}:
        return account
    if isinstance(value, dict):
        return {key: resolved(item, account) for key, item in value.items()}
    if isinstance(value, list):
        return [resolved(item, account) for item in value]
    return value


def matches(pattern: dict, event: dict) -> bool:
    """EventBridge's matching as moto implements it (its TestEventPattern API drops the result)."""
    return EventPattern.load(json.dumps(resolved(pattern))).matches_event(event)


@pytest.fixture(scope="module")
def node_rule(raw) -> dict:
    return one(raw, "AWS::Events::Rule", "NodeRemediationRule")["Properties"]


def test_the_node_rule_takes_the_sample_node_health_event(node_rule):
    assert matches(node_rule["EventPattern"], load_event("hyperpod-node-health-unhealthy"))


def test_the_node_rule_ignores_clusters_medic_does_not_manage(node_rule):
    event = load_event("hyperpod-node-health-unhealthy")
    event["detail"]["ClusterName"] = "someone-elses-cluster"
    assert not matches(node_rule["EventPattern"], event)


def test_the_node_rule_ignores_events_from_another_account(node_rule):
    event = load_event("hyperpod-node-health-unhealthy")
    event["account"] = "999999999999"
    assert not matches(node_rule["EventPattern"], event)


def test_the_node_rule_ignores_other_hyperpod_events(node_rule):
    assert not matches(node_rule["EventPattern"], load_event("hyperpod-cluster-state-change"))


def test_the_rule_target_retries_for_a_day_then_keeps_the_event_in_a_dead_letter_queue(node_rule, raw):
    (target,) = node_rule["Targets"]
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}
    dlq = target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
    assert raw["Resources"][dlq]["Type"] == "AWS::SQS::Queue"


def test_the_node_function_runs_python_313_with_powertools_and_a_new_boto3(raw):
    function = one(raw, "AWS::Lambda::Function", "NodeRemediationHandler")["Properties"]
    assert function["Runtime"] == "python3.13"
    assert function["Handler"] == "medic.handlers.node_health.handler"
    layers = json.dumps(function["Layers"])
    assert "SsmParameterValueawsservicepowertoolspythonarm64python313" in layers  # test_powertools_layer.py
    assert "Boto3Layer" in layers
    assert function["DeadLetterConfig"]["TargetArn"]["Fn::GetAtt"][0].startswith("NodeRemediationHandlerDeadLetters")
    assert set(function["Environment"]["Variables"]) >= {"MEDIC_CONFIG", "LEDGER_TABLE", "PAGE_TOPIC_ARN",
                                                         "MODE_PARAMETER"}


def test_the_boto3_layer_knows_the_hyperpod_node_actions():
    from infra.components.boto3_layer import stage_boto3

    staged = stage_boto3()
    models = list((staged / "python" / "botocore" / "data" / "sagemaker").glob("*/service-2.json*"))
    assert models, "botocore's SageMaker model is missing from the layer"
    import gzip

    text = b"".join(gzip.open(m).read() if m.suffix == ".gz" else m.read_bytes() for m in models)
    assert b'"BatchReplaceClusterNodes"' in text and b'"BatchRebootClusterNodes"' in text


def test_async_invocations_retry_twice(template):
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {"MaximumRetryAttempts": 2})


def test_node_actions_are_allowed_only_on_the_configured_clusters(raw):
    policy = one(raw, "AWS::IAM::Policy", "NodeRemediationHandlerRole")["Properties"]["PolicyDocument"]
    statements = [s for s in policy["Statement"] if "sagemaker:BatchReplaceClusterNodes" in s["Action"]]
    assert len(statements) == 1
    assert sorted(statements[0]["Action"]) == sorted(NODE_ACTIONS)
    arns = [json.dumps(arn) for arn in statements[0]["Resource"]]
    assert len(arns) == 2
    assert any(":cluster/k3v9q2w8x1za" in arn for arn in arns)
    assert any(":cluster/p7r2m4x9c1qa" in arn for arn in arns)
    for statement in policy["Statement"]:
        if statement["Resource"] == "*":  # only X-Ray, which has no resource-level permissions
            assert all(action.startswith("xray:") for action in statement["Action"])


def test_the_ledger_is_on_demand_with_ttl_pitr_and_the_customer_key(template):
    template.has_resource_properties("AWS::DynamoDB::Table", {
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        "SSESpecification": {"SSEEnabled": True, "SSEType": "KMS",
                             "KMSMasterKeyId": {"Fn::GetAtt": [Match.string_like_regexp("^EncryptionKey"), "Arn"]}},
    })


def test_the_paging_topic_uses_the_rotating_customer_key_and_tls_only(template, raw):
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    template.has_resource_properties("AWS::SNS::Topic", {
        "KmsMasterKeyId": {"Fn::GetAtt": [Match.string_like_regexp("^EncryptionKey"), "Arn"]}})
    policy = json.dumps(resources(raw, "AWS::SNS::TopicPolicy"))
    assert '"aws:SecureTransport": "false"' in policy


def test_alarms_and_eventbridge_may_use_the_key(raw):
    key = one(raw, "AWS::KMS::Key", "EncryptionKey")["Properties"]["KeyPolicy"]
    principals = {json.dumps(s["Principal"]) for s in key["Statement"]}
    assert any("cloudwatch.amazonaws.com" in p for p in principals)
    assert any("events.amazonaws.com" in p for p in principals)


def test_every_address_in_notify_is_subscribed(template):
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"})


def test_the_mode_parameter_starts_at_the_configured_mode(template):
    template.has_resource_properties("AWS::SSM::Parameter", {"Name": "/medic/Medic/mode", "Value": "act",
                                                             "AllowedPattern": "^(act|dry_run|paused)$"})


def test_every_queue_is_encrypted_with_the_customer_key(raw):
    for queue in resources(raw, "AWS::SQS::Queue").values():
        assert queue["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0].startswith("EncryptionKey")
