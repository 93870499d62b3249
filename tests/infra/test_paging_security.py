"""Specification: Medic's own health alarms can page. The topic's policy replaces SNS's default one, so it must
allow CloudWatch to publish, for Medic's alarms of this account only; and every AWS service that uses Medic's key
on its behalf is held to this account's resources (confused-deputy prevention)."""

from __future__ import annotations

import pytest

from tests.infra.conftest import resources

ACCOUNT = {"Ref": "AWS::AccountId"}


def topic_policy(raw: dict) -> list[dict]:
    (policy,) = resources(raw, "AWS::SNS::TopicPolicy").values()
    return policy["Properties"]["PolicyDocument"]["Statement"]


def paging_topic(raw: dict) -> str:
    (topic,) = resources(raw, "AWS::SNS::Topic")
    return topic


def arn_pattern(service: str, resource: str) -> dict:
    return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":{service}:", {"Ref": "AWS::Region"}, ":",
                              {"Ref": "AWS::AccountId"}, f":{resource}"]]}


def test_cloudwatch_may_publish_to_the_paging_topic_for_this_account_only(raw):
    # Before: the only statement was enforce_ssl's Deny; CloudWatch got "no resource-based policy allows"
    allows = [s for s in topic_policy(raw) if s["Effect"] == "Allow"]
    (statement,) = [s for s in allows if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}]
    assert statement["Action"] == "sns:Publish"
    assert statement["Resource"] == {"Ref": paging_topic(raw)}
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": ACCOUNT}


def test_exactly_the_alarms_that_page_through_the_topic_may_publish(raw):
    topic = {"Ref": paging_topic(raw)}
    paging = sorted(name for name, alarm in resources(raw, "AWS::CloudWatch::Alarm").items()
                    if topic in alarm["Properties"].get("AlarmActions", []))
    assert len(paging) >= 30  # errors, throttles and duration per function, each dead-letter queue, PageFailures
    (statement,) = [s for s in topic_policy(raw) if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}]
    allowed = statement["Condition"]["ArnEquals"]["aws:SourceArn"]
    assert sorted(arn["Fn::GetAtt"][0] for arn in allowed) == paging
    assert all(arn["Fn::GetAtt"][1] == "Arn" for arn in allowed)


def test_publishing_without_tls_is_still_refused(raw):
    (deny,) = [s for s in topic_policy(raw) if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} and deny["Principal"] == "*"


def test_nothing_else_is_let_in_by_the_topic_policy(raw):
    # Medic's functions publish through their roles' own policies (same account): no other principal here
    principals = [s["Principal"] for s in topic_policy(raw) if s["Effect"] == "Allow"]
    assert principals == [{"Service": "cloudwatch.amazonaws.com"}]


def key_statements(raw: dict) -> dict[str, dict]:
    (key,) = resources(raw, "AWS::KMS::Key").values()
    return {s["Principal"]["Service"]: s for s in key["Properties"]["KeyPolicy"]["Statement"]
            if "Service" in s["Principal"]}


def test_cloudwatch_uses_the_key_only_for_alarms_of_this_account(raw):
    statement = key_statements(raw)["cloudwatch.amazonaws.com"]
    assert set(statement["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT},
                                      "ArnLike": {"aws:SourceArn": arn_pattern("cloudwatch", "alarm:*")}}


@pytest.mark.parametrize("service", ["events.amazonaws.com", "sns.amazonaws.com"])
def test_services_that_write_dead_letters_use_the_key_only_for_this_accounts_queues(raw, service):
    # Another account's queue cannot borrow Medic's key through EventBridge or SNS (confused deputy); the condition
    # is on what the SQS request to KMS always carries (the queue's ARN as encryption context), not on
    # aws:SourceAccount/aws:SourceArn, which AWS documents as unsupported for EventBridge to encrypted topics
    statement = key_statements(raw)[service]
    assert set(statement["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    assert statement["Condition"] == {"ArnLike": {"kms:EncryptionContext:aws:sqs:arn": arn_pattern("sqs", "*")}}


def test_no_service_holds_the_key_unconditioned(raw):
    assert set(key_statements(raw)) == {"events.amazonaws.com", "cloudwatch.amazonaws.com", "sns.amazonaws.com"}
    assert all("Condition" in statement for statement in key_statements(raw).values())
