"""Specification: the delivery windows the handlers' age bound is derived from are the stack's own (issue 28 item 1);
each function has its reserved concurrency, so a flood of one kind of event cannot starve the others (item 13);
the mode parameter is granted where the stack is deployed, not where it was synthesized (item 13)."""

from __future__ import annotations

import json

from infra.components.function import RESERVED_CONCURRENCY
from infra.components.shared import Shared
from medic.config import (
    DEAD_LETTER_RETENTION,
    EVENT_AGE_LIMIT,
    EVENT_SOURCE_LAG,
    EVENTBRIDGE_MAX_EVENT_AGE,
    LAMBDA_MAX_EVENT_AGE,
    parse_config,
)
from tests.infra.conftest import resources

UNRESERVED_MINIMUM = 100  # Lambda keeps this much of the account's concurrency unreserved


def seconds(delta) -> int:
    return int(delta.total_seconds())


def test_every_event_rule_target_retries_for_exactly_the_window_the_age_bound_counts(raw):
    # Given every rule that delivers events (not schedules) to a Medic function
    functions = resources(raw, "AWS::Lambda::Function")
    windows = set()
    for rule in resources(raw, "AWS::Events::Rule").values():
        properties = rule["Properties"]
        if "ScheduleExpression" in properties:
            continue
        for target in properties.get("Targets", []):
            if target["Arn"].get("Fn::GetAtt", [""])[0] in functions:
                windows.add(target["RetryPolicy"]["MaximumEventAgeInSeconds"])
    # Then each retries a delivery for EventBridge's window, the one the handlers' bound adds up
    assert windows == {seconds(EVENTBRIDGE_MAX_EVENT_AGE)} == {86400}


def test_every_function_keeps_an_async_event_for_exactly_the_window_the_age_bound_counts(raw):
    configs = resources(raw, "AWS::Lambda::EventInvokeConfig").values()
    assert {config["Properties"]["MaximumEventAgeInSeconds"] for config in configs} == {seconds(LAMBDA_MAX_EVENT_AGE)}
    assert EVENT_AGE_LIMIT == EVENTBRIDGE_MAX_EVENT_AGE + LAMBDA_MAX_EVENT_AGE + EVENT_SOURCE_LAG


def test_every_dead_letter_queue_keeps_an_event_for_the_redrive_window(raw):
    functions = resources(raw, "AWS::Lambda::Function").values()
    dlq_ids = {function["Properties"]["DeadLetterConfig"]["TargetArn"]["Fn::GetAtt"][0] for function in functions}
    queues = resources(raw, "AWS::SQS::Queue")
    assert {queues[lid]["Properties"]["MessageRetentionPeriod"] for lid in dlq_ids} == {
        seconds(DEAD_LETTER_RETENTION)}


def test_every_function_has_its_reserved_concurrency_within_what_lambda_lets_an_account_reserve(raw):
    functions = resources(raw, "AWS::Lambda::Function")
    reserved = {lid: function["Properties"].get("ReservedConcurrentExecutions") for lid, function in functions.items()}
    # Each of Medic's functions, none forgotten
    assert None not in reserved.values(), reserved
    assert sorted(reserved.values()) == sorted(RESERVED_CONCURRENCY.values())
    node = next(value for lid, value in reserved.items() if lid.startswith("NodeRemediationHandler"))
    assert node == RESERVED_CONCURRENCY["node_health"]
    # The sum docs/deploy.md's precondition names: the account needs it plus Lambda's 100 unreserved
    assert sum(reserved.values()) + UNRESERVED_MINIMUM == 146


def test_reserved_concurrency_can_be_turned_off_for_a_small_account():
    config = parse_config({"clusters": [{"name": "c1", "id": "abcdefabcdef", "orchestrator": "slurm"}],
                           "reserved_concurrency": False})
    shared = Shared(config=config, key=None, table=None, topic=None, mode=None, layers=())  # type: ignore[arg-type]
    assert [shared.reserved(name) for name in RESERVED_CONCURRENCY] == [None] * len(RESERVED_CONCURRENCY)


def test_the_mode_parameter_is_granted_in_the_deployed_region_and_account(raw):
    grants = [statement["Resource"] for policy in resources(raw, "AWS::IAM::Policy").values()
              for statement in policy["Properties"]["PolicyDocument"]["Statement"]
              if statement["Action"] == "ssm:GetParameter"]
    assert grants
    for resource in grants:
        text = json.dumps(resource)
        # CloudFormation's pseudo parameters, resolved where it deploys; never the synthesizing credentials' region
        assert '{"Ref": "AWS::Region"}' in text and '{"Ref": "AWS::AccountId"}' in text, text
        assert "us-west-2" not in text and "123456789012" not in text, text
