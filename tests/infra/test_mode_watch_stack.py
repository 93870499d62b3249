"""Specification: the mode switch is watched (issue 28, item 8). Every change of the mode parameter reaches a
function of its own through a rule on SSM's "Parameter Store Change" for exactly that parameter; the function may
read the parameter's history and page; a failed read of the switch anywhere pages through an alarm."""

from __future__ import annotations

from tests.helpers import load_event
from tests.infra.conftest import one, resources
from tests.infra.test_node_remediation_stack import matches


def test_the_rule_takes_changes_of_the_mode_parameter_alone_in_this_account(raw):
    pattern = one(raw, "AWS::Events::Rule", "ModeWatchRule")["Properties"]["EventPattern"]
    assert (pattern["source"], pattern["detail-type"]) == (["aws.ssm"], ["Parameter Store Change"])
    assert pattern["account"] == [{"Ref": "AWS::AccountId"}]
    assert pattern["detail"] == {"name": ["/medic/Medic/mode", "medic/Medic/mode"]}
    event = load_event("ssm-parameter-store-change")
    assert matches(pattern, event)
    assert not matches(pattern, {**event, "detail": {**event["detail"], "name": "/medic/Other/mode"}})


def test_the_watch_reads_the_parameters_history_and_nothing_else_of_ssm(raw):
    [policy] = [res for lid, res in resources(raw, "AWS::IAM::Policy").items() if lid.startswith("ModeWatchHandler")]
    ssm = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if "ssm:" in str(s["Action"])]
    actions = sorted(a for s in ssm for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
    assert actions == ["ssm:GetParameter", "ssm:GetParameterHistory"]
    # one statement, on the parameter where the stack is deployed (not the synthesizing account and region)
    (statement,) = ssm
    assert "ModeParameter" in str(statement["Resource"]) and "AWS::Region" in str(statement["Resource"])
    assert "AWS::AccountId" in str(statement["Resource"])


def test_a_failed_read_of_the_switch_pages_through_an_alarm(raw):
    alarm = one(raw, "AWS::CloudWatch::Alarm", "OperationsModeReadFailures")["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Period"]) == ("Medic", "ModeReadFailures", 60)
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["AlarmActions"] == [{"Ref": next(iter(resources(raw, "AWS::SNS::Topic")))}]
