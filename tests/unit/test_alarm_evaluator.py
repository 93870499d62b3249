"""Specification: the replay's alarm evaluator behaves as CloudWatch documents it — M out of N with each
missing-data treatment (the user guide's two tables, row by row), statistics, metric math, the state change
event, and who may publish an alarm's notification."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.alarms import (
    ALARM,
    INSUFFICIENT,
    OK,
    AlarmBook,
    MathExpression,
    Sample,
    aggregate,
    evaluate_window,
    metric_key,
)
from sim.cfn import Physical, SimError, Template
from sim.policy import Request, decide

RETAIN = "retain"  # the tables' "Retain current state"
TREATMENTS = ("missing", "ignore", "breaching", "notBreaching")


def window(text: str) -> list[float | None]:
    """The tables' notation, most recent on the right: 0 not breaching, X breaching, - missing."""
    return [{"0": 0.0, "X": 1.0, "-": None}[c] for c in text.split()]


def state(text: str, periods: int, to_alarm: int, treat: str, current: str = "CURRENT") -> str:
    verdict = evaluate_window(window(text), periods=periods, to_alarm=to_alarm, breaches=lambda v: v > 0.5,
                              treat=treat, current=current)
    return RETAIN if verdict.state == "CURRENT" else verdict.state


# "How alarm state is evaluated when data is missing": Datapoints to Alarm and Evaluation Periods both 3,
# evaluation range 5; columns MISSING, IGNORE, BREACHING, NOT BREACHING.
THREE_OF_THREE = [
    ("0 - X - X", (OK, OK, OK, OK)),
    ("0 - - - -", (OK, OK, OK, OK)),
    ("- - - - -", (INSUFFICIENT, RETAIN, ALARM, OK)),
    ("0 X X - X", (ALARM, ALARM, ALARM, ALARM)),
    ("- - X - -", (ALARM, RETAIN, ALARM, OK)),  # the "premature alarm state" row
]
# The same page's 2 out of 3 table.
TWO_OF_THREE = [
    ("0 - X - X", (ALARM, ALARM, ALARM, ALARM)),
    ("0 0 X 0 X", (ALARM, ALARM, ALARM, ALARM)),
    ("0 - X - -", (OK, OK, ALARM, OK)),
    ("- - - - 0", (OK, OK, ALARM, OK)),
    ("- - - X -", (ALARM, RETAIN, ALARM, OK)),
]


@pytest.mark.parametrize("points,expected", THREE_OF_THREE)
def test_three_out_of_three_with_each_missing_data_treatment_is_cloudwatchs_documented_table(points, expected):
    assert tuple(state(points, 3, 3, treat) for treat in TREATMENTS) == expected


@pytest.mark.parametrize("points,expected", TWO_OF_THREE)
def test_two_out_of_three_with_each_missing_data_treatment_is_cloudwatchs_documented_table(points, expected):
    assert tuple(state(points, 3, 2, treat) for treat in TREATMENTS) == expected


def test_a_lone_recent_breaching_datapoint_does_not_alarm_prematurely_when_missing_data_is_missing():
    # "the alarm does not go immediately into ALARM state when the data is either - - - - X or - - - X -"
    assert state("- - - - X", 3, 3, "missing") == INSUFFICIENT
    assert state("- - - X -", 3, 3, "missing") == INSUFFICIENT


def test_an_unknown_treatment_fails_loudly():
    with pytest.raises(SimError, match="TreatMissingData"):
        state("0 0 0", 1, 1, "sometimes")


@given(st.lists(st.one_of(st.none(), st.floats(-5, 5)), min_size=1, max_size=12), st.integers(1, 10),
       st.sampled_from(TREATMENTS), st.sampled_from([OK, ALARM, INSUFFICIENT]))
def test_the_same_data_evaluated_twice_gives_the_same_state(points, periods, treat, current):
    periods = min(periods, len(points))
    first = evaluate_window(points, periods=periods, to_alarm=periods, breaches=lambda v: v > 0, treat=treat,
                            current=current)
    second = evaluate_window(points, periods=periods, to_alarm=periods, breaches=lambda v: v > 0, treat=treat,
                             current=first.state)
    assert second.state == first.state


# --- statistics and metric math


def test_statistics_over_statistic_sets_and_values():
    at = datetime(2026, 11, 21, 3, 0, tzinfo=UTC)
    samples = [Sample(at, 4, 10.0, 1.0, 4.0, None), Sample(at, 1, 7.0, 7.0, 7.0, (7.0,))]
    assert [aggregate(samples, stat) for stat in ("Sum", "SampleCount", "Average", "Minimum", "Maximum")] == [
        17.0, 5, 17.0 / 5, 1.0, 7.0]
    values = [Sample(at, 1, float(v), float(v), float(v), (float(v),)) for v in range(1, 101)]
    assert aggregate(values, "p99") == 99.0
    with pytest.raises(SimError, match="statistic sets"):
        aggregate(samples, "p90")  # CloudWatch needs the values for a percentile
    with pytest.raises(SimError, match="not emulated"):
        aggregate(samples, "TM(10%:90%)")


def test_if_follows_the_documented_examples():
    # "Using IF expressions": metric1 [1, 1, 0, 0, -], metric2 [30, -, 0, 0, 30], metric3 [0, 0, 20, -, 20]
    metric1, metric2, metric3 = {0: 1.0, 1: 1.0, 2: 0.0, 3: 0.0}, {0: 30.0, 2: 0.0, 3: 0.0, 4: 30.0}, \
        {0: 0.0, 1: 0.0, 2: 20.0, 4: 20.0}
    series = {"metric1": metric1, "metric2": metric2, "metric3": metric3}
    assert MathExpression("IF(metric1, metric2, metric3)").evaluate(series, 5) == {0: 30.0, 1: 0.0, 2: 20.0}
    assert MathExpression("IF(metric1, 5, metric3)").evaluate(series, 5) == {0: 5.0, 1: 5.0, 2: 20.0}
    assert MathExpression("IF(metric1, metric2, 5)").evaluate(series, 5) == {0: 30.0, 1: 0.0, 2: 5.0, 3: 5.0}


def test_comparison_and_logical_operators_treat_a_missing_value_as_zero():
    # "metric1 has values of [30, 20, 0, 0] and metric2 has values of [20, -, 20, -]"
    series = {"metric1": {0: 30.0, 1: 20.0, 2: 0.0, 3: 0.0}, "metric2": {0: 20.0, 2: 20.0}}
    assert MathExpression("(metric1 < metric2)").evaluate(series, 4) == {0: 0.0, 1: 0.0, 2: 1.0, 3: 0.0}
    assert MathExpression("(metric1 >= 30)").evaluate(series, 4) == {0: 1.0, 1: 0.0, 2: 0.0, 3: 0.0}
    assert MathExpression("(metric1 > 15 AND metric2 > 15)").evaluate(series, 4) == {0: 1.0, 1: 0.0, 2: 0.0,
                                                                                    3: 0.0}


def test_the_templates_expressions_fill_divide_and_take_the_maximum():
    series = {"tps": {0: 20.0, 1: 40.0}, "baseline": {0: 40.0, 2: 40.0}}
    # dividing by zero drops the point; FILL fills every period of the range
    assert MathExpression("IF(FILL(baseline, 0) > 0, tps / baseline, 1)").evaluate(series, 3) == {
        0: 0.5, 1: 1.0, 2: 0.0}
    assert MathExpression("MAX([tps, baseline])").evaluate(series, 3) == {0: 40.0, 1: 40.0, 2: 40.0}


def test_a_metric_math_function_the_evaluator_does_not_know_fails_loudly():
    with pytest.raises(SimError, match="ANOMALY_DETECTION_BAND is not emulated"):
        MathExpression("ANOMALY_DETECTION_BAND(m1, 2)")


# --- an alarm of a template: evaluation on the clock, the event, the notification's permission

TOPIC = "arn:aws:sns:us-west-2:123456789012:pages"
KEY_ARN = "arn:aws:kms:us-west-2:123456789012:key/k1"
DENY_WITHOUT_TLS = {"Sid": "AllowPublishThroughSSLOnly", "Effect": "Deny", "Principal": "*", "Action": "sns:Publish",
                    "Resource": {"Ref": "Topic"}, "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
ALLOW_CLOUDWATCH = {"Sid": "AllowCloudWatchAlarmsToPublish", "Effect": "Allow",
                    "Principal": {"Service": "cloudwatch.amazonaws.com"}, "Action": "sns:Publish",
                    "Resource": {"Ref": "Topic"},
                    "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}}
KEY_FOR_CLOUDWATCH = {"Effect": "Allow", "Principal": {"Service": "cloudwatch.amazonaws.com"},
                      "Action": ["kms:Decrypt", "kms:GenerateDataKey*"], "Resource": "*"}


def template(topic_statements: list[dict], key_statements: list[dict] | None = None) -> Template:
    raw = {"Resources": {
        "Key": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": {"Statement": key_statements or
                                                                                   [KEY_FOR_CLOUDWATCH]}}},
        "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"KmsMasterKeyId": {"Fn::GetAtt": ["Key", "Arn"]}}},
        "TopicPolicy": {"Type": "AWS::SNS::TopicPolicy", "Properties": {
            "PolicyDocument": {"Statement": topic_statements}, "Topics": [{"Ref": "Topic"}]}},
        "Errors": {"Type": "AWS::CloudWatch::Alarm", "Properties": {
            "AlarmActions": [{"Ref": "Topic"}], "AlarmDescription": "errors", "ComparisonOperator":
                "GreaterThanThreshold", "Dimensions": [{"Name": "FunctionName", "Value": "f"}], "EvaluationPeriods": 1,
            "MetricName": "Errors", "Namespace": "AWS/Lambda", "Period": 60, "Statistic": "Sum", "Threshold": 0,
            "TreatMissingData": "notBreaching"}},
    }}
    t = Template(raw, "us-west-2", "123456789012")
    t.physical.update({"Key": Physical("k1", {"Arn": KEY_ARN, "KeyId": "k1"}), "Topic": Physical(TOPIC)})
    return t


def errors_alarm_fires(book: AlarmBook):
    start = datetime(2026, 11, 20, 8, 10, tzinfo=UTC)
    assert book.evaluate(start) == []  # the first evaluation sets the state, silently
    book.store.put_value(metric_key("AWS/Lambda", "Errors", {"FunctionName": "f"}), start + timedelta(seconds=5), 1.0)
    [change] = book.evaluate(start + timedelta(minutes=1))
    return change


def test_a_state_change_is_delivered_as_aws_shapes_the_alarm_event():
    book = AlarmBook(template([DENY_WITHOUT_TLS, ALLOW_CLOUDWATCH]))
    change = errors_alarm_fires(book)
    event = book.event(change, "123456789012", "us-west-2")
    assert (event["source"], event["detail-type"], event["resources"]) == (
        "aws.cloudwatch", "CloudWatch Alarm State Change", [change.alarm.arn])
    detail = event["detail"]
    assert (detail["alarmName"], detail["state"]["value"], detail["previousState"]["value"]) == (
        change.alarm.name, ALARM, OK)
    assert detail["state"]["reason"].startswith("Threshold Crossed: 1 out of the last 1 datapoints [1.0 (20/11/26 "
                                                "08:10:00)] was greater than the threshold (0.0)")
    data = json.loads(detail["state"]["reasonData"])
    assert (data["statistic"], data["period"], data["recentDatapoints"], data["threshold"]) == ("Sum", 60, [1.0], 0.0)
    assert detail["state"]["timestamp"] == "2026-11-20T08:11:00.000+0000"
    [metric] = detail["configuration"]["metrics"]
    assert detail["configuration"]["description"] == "errors"
    assert metric["metricStat"] == {"metric": {"dimensions": {"FunctionName": "f"}, "name": "Errors",
                                               "namespace": "AWS/Lambda"}, "period": 60, "stat": "Sum"}
    # evaluated again on the same data: no second event
    assert book.evaluate(start_plus(1)) == []


def start_plus(minutes: int) -> datetime:
    return datetime(2026, 11, 20, 8, 10, tzinfo=UTC) + timedelta(minutes=minutes)


def test_an_alarm_may_publish_when_the_topic_and_key_policies_allow_cloudwatch():
    book = AlarmBook(template([DENY_WITHOUT_TLS, ALLOW_CLOUDWATCH]))
    book.check_publish(errors_alarm_fires(book), TOPIC, "123456789012")  # no error


def test_a_deny_only_topic_policy_blocks_the_alarms_notification_and_fails_the_replay():
    # a topic policy replaces SNS's default one: Deny-without-TLS alone allows nobody
    book = AlarmBook(template([DENY_WITHOUT_TLS]))
    with pytest.raises(SimError, match="implicit deny"):
        book.check_publish(errors_alarm_fires(book), TOPIC, "123456789012")


def test_a_key_policy_without_cloudwatch_blocks_the_notification_to_an_encrypted_topic():
    owner_only = {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "kms:*",
                  "Resource": "*"}
    book = AlarmBook(template([ALLOW_CLOUDWATCH], [owner_only]))
    with pytest.raises(SimError, match="may not use the key"):
        book.check_publish(errors_alarm_fires(book), TOPIC, "123456789012")


def test_a_source_account_condition_keeps_other_accounts_alarms_out():
    policy = {"Statement": [{**ALLOW_CLOUDWATCH, "Resource": TOPIC,
                             "Condition": {"StringEquals": {"aws:SourceAccount": "123456789012"}}}]}
    mine = Request("cloudwatch.amazonaws.com", "sns:Publish", TOPIC, {"aws:SourceAccount": "123456789012"})
    theirs = Request("cloudwatch.amazonaws.com", "sns:Publish", TOPIC, {"aws:SourceAccount": "999999999999"})
    assert decide([policy], mine)[0] and not decide([policy], theirs)[0]
    with pytest.raises(SimError, match="not evaluated"):
        dated = {**policy["Statement"][0], "Condition": {"DateGreaterThan": {"aws:CurrentTime": "x"}}}
        decide([{"Statement": [dated]}], mine)


@given(st.lists(st.tuples(st.integers(0, 14), st.sampled_from([0.0, 1.0, 3.0])), max_size=20),
       st.integers(1, 15))
def test_an_alarm_evaluated_twice_on_the_same_data_emits_no_second_event(datapoints, minute):
    # Given Errors datapoints anywhere in the first quarter hour, and the alarm evaluated at some minute
    book = AlarmBook(template([ALLOW_CLOUDWATCH]))
    start = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    book.evaluate(start)
    for offset, value in datapoints:
        book.store.put_value(metric_key("AWS/Lambda", "Errors", {"FunctionName": "f"}),
                             start + timedelta(minutes=offset, seconds=7), value)
    at = start + timedelta(minutes=minute)
    book.evaluate(at)
    state_after_first = book.alarms[0].state
    # When the same data is evaluated again at the same moment, then the state holds and nothing changes
    assert book.evaluate(at) == [] and book.alarms[0].state == state_after_first


# --- high-resolution alarms (issue 31): a 10-second period, evaluated every 10 seconds

def hang_template() -> Template:
    raw = {"Resources": {
        "Hang": {"Type": "AWS::CloudWatch::Alarm", "Properties": {
            "AlarmName": "medic-hang-j", "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "Dimensions": [{"Name": "Job", "Value": "j"}], "EvaluationPeriods": 1, "DatapointsToAlarm": 1,
            "MetricName": "Stalled", "Namespace": "Medic/Training", "Period": 10, "Statistic": "Maximum",
            "Threshold": 1, "TreatMissingData": "ignore"}},
        "Minute": {"Type": "AWS::CloudWatch::Alarm", "Properties": {
            "AlarmName": "minute", "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "Dimensions": [{"Name": "Job", "Value": "j"}], "EvaluationPeriods": 1, "MetricName": "Stalled",
            "Namespace": "Medic/Training", "Period": 60, "Statistic": "Maximum", "Threshold": 1,
            "TreatMissingData": "notBreaching"}},
    }}
    return Template(raw, "us-west-2", "123456789012")


def test_a_10_second_alarm_fires_at_the_first_10_second_evaluation_after_its_datapoint_and_keeps_its_state():
    book = AlarmBook(hang_template())
    start = start_plus(0)
    key = metric_key("Medic/Training", "Stalled", {"Job": "j"})
    book.store.put_value(key, start - timedelta(seconds=30), 0.0)
    assert book.evaluate(start) == []  # sets the states
    book.store.put_value(key, start + timedelta(seconds=12), 1.0)
    # at 08:10:20 the period [08:10:10, 08:10:20) holds the verdict: ALARM; the minute alarm is not evaluated then
    assert book.evaluate(start + timedelta(seconds=10)) == []
    [change] = book.evaluate(start + timedelta(seconds=20))
    assert (change.alarm.name, change.state, change.at) == ("medic-hang-j", ALARM, start + timedelta(seconds=20))
    # no datapoint since: missing data keeps the state (ignore), period after period
    assert [book.evaluate(start + timedelta(seconds=s)) for s in (30, 40, 50)] == [[], [], []]
    # the minute alarm is evaluated on the whole minute only
    [minute] = book.evaluate(start + timedelta(minutes=1))
    assert (minute.alarm.name, minute.state) == ("minute", ALARM)


def test_the_replay_ticks_every_10_seconds_only_while_a_probe_watches():
    from sim.cloudwatch import EmulatedCloudWatch

    class Metrics:
        watching = False

    cloudwatch = EmulatedCloudWatch.__new__(EmulatedCloudWatch)
    cloudwatch.world = type("World", (), {"metrics": Metrics()})()
    cloudwatch.next_evaluation = cloudwatch.last_evaluation = None
    cloudwatch.skipped = 0
    start = start_plus(0)
    assert cloudwatch.due(start, start + timedelta(minutes=2)) == [start_plus(1), start_plus(2)]
    Metrics.watching = True
    ticks = cloudwatch.due(start, start + timedelta(minutes=3))
    assert ticks == [start_plus(2) + timedelta(seconds=10 * k) for k in range(1, 7)]
    Metrics.watching = False
    assert cloudwatch.due(start, start + timedelta(minutes=4, seconds=30)) == [start_plus(4)]
