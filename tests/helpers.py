"""Test helpers: the sample events exactly as AWS delivers them, with fields varied."""

from __future__ import annotations

import copy
import json
from pathlib import Path

EVENTS = Path(__file__).parent / "fixtures" / "events"


def load_event(name: str) -> dict:
    return json.loads((EVENTS / f"{name}.json").read_text())


DOCUMENTED_ACCOUNT = "111122223333"  # the account AWS's documented example events name
DEPLOYING_ACCOUNT = "123456789012"  # the tests' and the replay's (moto's default account)


def in_deploying_account(event: dict) -> dict:
    """AWS's documented example event as it would reach a stack deployed in the tests' account: the
    account (envelope and ARNs) replaced, nothing else. Verbatim, its account is foreign and Medic
    rejects it (issue 12 item 7)."""
    return json.loads(json.dumps(event).replace(DOCUMENTED_ACCOUNT, DEPLOYING_ACCOUNT))


def node_event(base: dict, *, instance_id: str | None = None, reason: str | None = None,
               status: str | None = None, time: str | None = None, event_id: str | None = None,
               cluster: str | None = None) -> dict:
    """The sample node health event with some fields changed."""
    event = copy.deepcopy(base)
    detail = event["detail"]
    if instance_id is not None:
        detail["InstanceId"] = instance_id
    if reason is not None:
        detail["HealthSummary"]["HealthStatusReason"] = reason
    if status is not None:
        detail["HealthSummary"]["HealthStatus"] = status
    if time is not None:
        event["time"] = time
    if event_id is not None:
        event["id"] = event_id
    if cluster is not None:  # AWS's documented examples carry the cluster name where the ARN has its id
        detail["ClusterName"] = cluster
        detail["ClusterArn"] = f"{detail['ClusterArn'].rsplit('/', 1)[0]}/{cluster}"
    return event


def hma_reason(fault_type: str) -> str:
    return f"HyperPod Health Monitoring Agent (HMA) has detected fault type {fault_type} on this node and is unhealthy."


def handler_role_policy(role: str, table: str, topic: str, mode_parameter: str,
                        dead_letters: str | None = None) -> dict:
    """An AWS::IAM::Policy on a hand-written template's function role with what Shared.grant_ledger_paging_mode
    grants every handler (the ledger, its delete-prefix condition, the pager, the mode), and Lambda's send to the
    function's dead-letter queue: the replay checks each call against the role's policies (sim/iam.py), so a
    template without it has every call denied."""
    from infra.components.shared import LEDGER_ACTIONS, LEDGER_DELETED_PREFIXES, LEDGER_NAMESPACES

    ledger = {"Fn::GetAtt": [table, "Arn"]}
    deleted = [f"{namespace}{prefix}*" for namespace in LEDGER_NAMESPACES for prefix in LEDGER_DELETED_PREFIXES]
    parameter = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":ssm:", {"Ref": "AWS::Region"}, ":",
                                   {"Ref": "AWS::AccountId"}, f":parameter{mode_parameter}"]]}
    return {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": role}], "PolicyDocument": {
        "Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": LEDGER_ACTIONS, "Resource": ledger},
            {"Effect": "Allow", "Action": "dynamodb:DeleteItem", "Resource": ledger,
             "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": deleted}}},
            {"Effect": "Allow", "Action": "sns:Publish", "Resource": {"Ref": topic}},
            {"Effect": "Allow", "Action": "ssm:GetParameter", "Resource": parameter},
            *([{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": {"Fn::GetAtt": [dead_letters, "Arn"]}}]
              if dead_letters else [])]}}}
