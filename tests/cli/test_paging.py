"""``medic test-page`` and the paging part of ``medic status`` (issue 29, item 5): a page marked as a test goes out
through the stack's topic, and the operator learns which subscriptions would not receive it (pending confirmation:
SNS ListSubscriptionsByTopic's SubscriptionArn ``PendingConfirmation``)."""

from __future__ import annotations

import json

import boto3
from botocore.stub import ANY, Stubber

from tests.cli.conftest import CALLER, REGION, Deployed

TOPIC = "arn:aws:sns:us-west-2:123456789012:Medic-Paging"  # the emulated stack's PagingTopicArn output


def subscriptions_answer(*subscriptions: tuple[str, str, bool]) -> dict:
    """A ListSubscriptionsByTopic response as SNS shapes it: (protocol, endpoint, confirmed) each."""
    return {"Subscriptions": [
        {"SubscriptionArn": f"{TOPIC}:0f1e2d3c-{n:04d}" if confirmed else "PendingConfirmation",
         "Owner": "123456789012", "Protocol": protocol, "Endpoint": endpoint, "TopicArn": TOPIC}
        for n, (protocol, endpoint, confirmed) in enumerate(subscriptions)]}


def stubbed_sns(*answers: tuple[str, dict]) -> tuple[object, Stubber]:
    sns = boto3.client("sns", region_name=REGION)
    stubber = Stubber(sns)
    for operation, answer in answers:
        params = {"TopicArn": TOPIC} if operation == "list_subscriptions_by_topic" else {
            "TopicArn": TOPIC, "Subject": ANY, "Message": ANY, "MessageAttributes": ANY}
        stubber.add_response(operation, answer, params)
    return sns, stubber


def test_given_a_confirmed_queue_subscription_when_test_page_then_a_page_marked_test_reaches_it(deployed: Deployed):
    # Given the stack's topic with one confirmed subscriber (an SQS queue: moto delivers what is published)
    sns, sqs = boto3.client("sns", region_name=REGION), boto3.client("sqs", region_name=REGION)
    assert sns.create_topic(Name="Medic-Paging")["TopicArn"] == TOPIC
    queue = sqs.create_queue(QueueName="oncall")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=TOPIC, Protocol="sqs", Endpoint=queue_arn)
    # When the operator sends a test page
    result = deployed.cli("test-page", "--note", "drill for team B")
    # Then it went out through the topic, clearly a test, naming who sent it; and every subscription is confirmed
    assert result.code == 0, result.err
    [message] = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    envelope = json.loads(message["Body"])
    assert envelope["Subject"] == "[Medic] TEST page from stack Medic (no incident)"
    assert envelope["Message"].startswith("THIS IS A TEST PAGE. Nothing is wrong, and Medic did nothing.")
    assert f"Sent by:        {CALLER}" in envelope["Message"] and "drill for team B" in envelope["Message"]
    assert json.loads(envelope["MessageAttributes"]["record"]["Value"])["test"] is True
    assert "1 confirmed, 0 pending confirmation" in result.out


def test_given_a_subscription_pending_confirmation_when_test_page_then_it_is_named_and_the_exit_status_is_1(
        deployed: Deployed):
    # Given the topic's only subscription, an email whose owner never confirmed it
    sns, stubber = stubbed_sns(("publish", {"MessageId": "5c1f4a2e-7d3b-4f0e-9a61-2b8c0d9e1f10"}),
                               ("list_subscriptions_by_topic",
                                subscriptions_answer(("email", "oncall@example.com", False))))
    context = deployed.new_context()
    context._clients["sns"] = sns
    # When the operator sends a test page
    with stubber:
        result = deployed.cli("test-page", "--json", context=context)
    # Then the page went out, but nobody will read it: the email is pending confirmation, and the exit status says so
    assert result.code == 1
    answer = json.loads(result.out)
    assert (answer["message_id"], answer["confirmed"], answer["pending_confirmation"]) == (
        "5c1f4a2e-7d3b-4f0e-9a61-2b8c0d9e1f10", 0, 1)
    assert answer["subscriptions"] == [{"protocol": "email", "endpoint": "oncall@example.com", "confirmed": False}]


def test_given_pending_and_confirmed_subscriptions_when_status_then_the_unconfirmed_ones_are_shown(deployed: Deployed):
    # Given one confirmed email and one pending https endpoint on the stack's topic
    sns, stubber = stubbed_sns(("list_subscriptions_by_topic", subscriptions_answer(
        ("email", "oncall@example.com", True), ("https", "https://hooks.example.com/medic", False))))
    context = deployed.new_context()
    context._clients["sns"] = sns
    # When the operator asks for the status
    with stubber:
        result = deployed.cli("status", context=context)
    # Then the paging section names the one that receives nothing yet
    assert result.code == 0, result.err
    assert "  ok  email  oncall@example.com" in result.out
    assert ("  NO  https  https://hooks.example.com/medic  (pending confirmation: its owner must follow the link in "
            "AWS's confirmation message; it receives nothing until then)") in result.out
    assert "1 confirmed, 1 pending confirmation" in result.out


def test_given_the_topic_cannot_be_listed_when_status_then_it_says_why_and_prints_the_rest(deployed: Deployed):
    # Given no such topic (or no sns:ListSubscriptionsByTopic): moto answers NotFound
    result = deployed.cli("status")
    # Then status still prints, saying why it cannot tell who receives pages
    assert result.code == 0, result.err
    assert f"cannot list the subscriptions of {TOPIC}: NotFound" in result.out
