"""EventBridge event patterns as CloudFormation deploys them, and the quota every one of them must fit.

EventBridge limits an event pattern to 2,048 characters by default: the quota "Event pattern size" ("Maximum size,
in characters, of an event pattern"; Amazon EventBridge quotas, docs.aws.amazon.com/eventbridge/latest/userguide/
eb-quota.html), adjustable on request up to the API's hard maximum of 4,096 (botocore's events model: the
EventPattern shape of PutRule and CreateArchive, ``max: 4096``). A rule or archive over it fails the deploy.
Medic checks against the default, so a stack that synthesizes deploys in any account.

What is measured: the pattern with the account id resolved (always 12 digits) as compact JSON, which is how
CloudFormation hands ``EventPattern`` to EventBridge (the string it sent is quoted back in an
InvalidEventPatternException: ``{"source":["test-source"],"detail":{...}}``, aws/serverless-application-model
issue 1455). Characters, not bytes: the quota counts characters.

Medic's rules that reach a handler exclude replayed events (``replay-name``: see ``exclude_replays``).
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_events as events
from constructs import Construct

from medic.config import ConfigError

EVENT_PATTERN_QUOTA = 2048
# EventBridge adds replay-name (the replay's name) to every event it replays from an archive, at the top level of
# the event; the managed rule of every archive excludes replays with exactly this pattern so that they are never
# archived again (EventBridge user guide, "Archiving and replaying events", "Preventing replayed events from being
# delivered to an archive"; Powertools' EventBridgeModel: `replay_name`, alias "replay-name", optional). A replay
# without Destination.FilterArns reaches every rule on the bus: Medic's acting rules take only live events.
NO_REPLAYS = {"replay-name": [{"exists": False}]}
ACCOUNT_ID_LENGTH = 12  # an AWS account id is 12 digits: the resolved pattern's length does not depend on which
# Which config keys make each rule's pattern grow (the construct that owns the rule → the keys).
_GROWS_WITH = {
    "NodeRemediation": "the names in clusters[].name",
    "ClusterEvents": "the names in clusters[].name",
    "TrainingJobRestarts": "the prefixes in training_jobs[].prefix",
    "ManagedJobRestarts": "the prefixes and queues in batch_jobs[], the prefixes in bedrock_jobs[]",
    "AlarmResponse": "the alarm names (jobs[].name, clusters[].name)",
}


class EventPatternTooLarge(ConfigError):
    """A rule's or the archive's pattern exceeds EventBridge's "Event pattern size" quota: the deploy would fail."""


def rule_pattern(rule: events.Rule) -> dict:
    """The rule's event pattern as the template will have it (tokens as CloudFormation intrinsics)."""
    cfn = rule.node.default_child
    assert isinstance(cfn, events.CfnRule)
    return Stack.of(rule).resolve(cfn.event_pattern)


def set_rule_pattern(rule: events.Rule, pattern: dict) -> None:
    """Deploy ``pattern`` as the rule's event pattern. CDK's EventPattern has no member for replay-name, so the
    L1 property carries the whole pattern from here on (events.Rule only renders its own on an unset property;
    nothing adds to a Medic rule's pattern after this)."""
    cfn = rule.node.default_child
    assert isinstance(cfn, events.CfnRule)
    cfn.event_pattern = pattern


def exclude_replays(rule: events.Rule) -> None:
    """The rule takes only live events: not one EventBridge replays from an archive (NO_REPLAYS)."""
    set_rule_pattern(rule, {**rule_pattern(rule), **NO_REPLAYS})


def deployed_text(pattern: Any) -> str:
    """The pattern as EventBridge receives it from CloudFormation (compact JSON), the account id resolved to
    12 characters. Any other intrinsic cannot be measured at synth: a clear error instead of a guess."""
    return json.dumps(_account_resolved(pattern), separators=(",", ":"), ensure_ascii=False)


def pattern_size(scope: Construct, pattern: Any) -> int:
    """Characters of ``pattern`` (tokens allowed) as EventBridge counts them against the quota."""
    return len(deployed_text(Stack.of(scope).resolve(pattern)))


def fits(scope: Construct, pattern: Any) -> bool:
    return pattern_size(scope, pattern) <= EVENT_PATTERN_QUOTA


def check_event_patterns(stack: Stack) -> None:
    """Every event pattern of the stack (rules and archives) within the quota, or one error naming each that is
    not, how long it is and which config keys make it long."""
    problems = []
    for construct in stack.node.find_all():
        if not isinstance(construct, events.CfnRule | events.CfnArchive) or construct.event_pattern is None:
            continue
        size = pattern_size(construct, construct.event_pattern)
        if size > EVENT_PATTERN_QUOTA:
            path = construct.node.path.removesuffix("/Resource")
            owner = path.split("/")[1] if path.count("/") else path
            kind = "rule" if isinstance(construct, events.CfnRule) else "archive"
            problems.append(f"the EventBridge {kind} {path} has a {size:,}-character event pattern "
                            f"({_GROWS_WITH.get(owner, 'the config')} make it long)")
    if problems:
        raise EventPatternTooLarge(
            f"{'; '.join(problems)}: over EventBridge's \"Event pattern size\" quota of {EVENT_PATTERN_QUOTA:,} "
            "characters (Amazon EventBridge quotas), so the deploy would fail. Use shorter names or fewer of them, "
            "or split the clusters and jobs across two stacks (-c stack_name=...).")


def _account_resolved(value: Any) -> Any:
    if isinstance(value, dict):
        if value == {"Ref": "AWS::AccountId"}:
            return "0" * ACCOUNT_ID_LENGTH
        intrinsic = next((key for key in value if key == "Ref" or key.startswith("Fn::")), None)
        if intrinsic is not None:
            raise ConfigError(f"an event pattern holds {json.dumps(value)}, which cannot be measured at synth "
                              "against EventBridge's \"Event pattern size\" quota (only the account id can)")
        return {key: _account_resolved(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_account_resolved(item) for item in value]
    return value
