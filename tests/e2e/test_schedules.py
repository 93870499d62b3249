"""Specification of time in the replay: scheduled rules run as the clock passes their times (between
lines, and on ``advance``), with the event EventBridge sends; and the training metrics the probe and
``metric`` directives put into the emulated CloudWatch."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from sim.replay import Replay, run
from sim.scenario import DEMO_CONFIG
from sim.synth import load_config
from sim.world import World, parse_rate
from tests.e2e.conftest import sample
from tests.e2e.template_fixture import template

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


def at(text: str) -> dict:
    return {"sim": {"advance": text}}


def schedule_stack(expression: str = "rate(5 minutes)", target: dict | None = None) -> dict:
    """The hand-written stack plus a schedule rule → a stand-in function, as the CDK synthesizes one."""
    stack = template(load_config(DEMO_CONFIG))
    resources = stack["Resources"]
    resources["SweepFnABC"] = {"Type": "AWS::Lambda::Function", "Properties": {
        "Handler": "tests.e2e.standin_schedule.handler", "Runtime": "python3.13",
        "Role": {"Fn::GetAtt": ["NodeFnRoleABC", "Arn"]},
        "Environment": {"Variables": {"LEDGER_TABLE": {"Ref": "LedgerABC"}}}}}
    resources["SweepScheduleABC"] = {"Type": "AWS::Events::Rule", "Properties": {
        "ScheduleExpression": expression, "State": "ENABLED",
        "Targets": [{"Arn": {"Fn::GetAtt": ["SweepFnABC", "Arn"]}, "Id": "Target0", **(target or {})}]}}
    return stack


@pytest.fixture
def sweeps(monkeypatch):
    from tests.e2e import standin_schedule

    monkeypatch.setattr(standin_schedule, "runs", [])
    monkeypatch.setattr(standin_schedule, "fail", False)
    return standin_schedule


def replay_lines(stack: dict, items: list, err: io.StringIO | None = None):
    return run([item if isinstance(item, str) else json.dumps(item) for item in items], DEMO_CONFIG,
               template=stack, err=err or io.StringIO())


def test_a_rate_schedule_runs_every_period_from_the_first_line_with_the_scheduled_event_shape(sweeps):
    # Given a rate(5 minutes) rule, a clock set at 08:00 and moved to 08:12, then 08:15
    result = replay_lines(schedule_stack(), [at("2026-11-20T08:00:00Z"), at("2026-11-20T08:12:00Z"), at("+3m")])
    # Then it ran at 08:05, 08:10 and 08:15 (not at the start), each at its own time
    assert [f"{when:%H:%M:%S}" for when, _ in sweeps.runs] == ["08:05:00", "08:10:00", "08:15:00"]
    assert result.schedule_runs == {"SweepScheduleABC": 3}
    # And each run got what EventBridge sends a schedule's target
    _, event = sweeps.runs[0]
    rule = "arn:aws:events:us-west-2:123456789012:rule/Medic-SweepScheduleABC"
    assert {key: event[key] for key in ("version", "detail-type", "source", "account", "time", "region",
                                        "resources", "detail")} == {
        "version": "0", "detail-type": "Scheduled Event", "source": "aws.events", "account": "123456789012",
        "time": "2026-11-20T08:05:00Z", "region": "us-west-2", "resources": [rule], "detail": {}}
    assert len({event["id"] for _, event in sweeps.runs}) == 3
    assert [record["timestamp"][11:19] for record in result.records] == ["08:05:00", "08:10:00", "08:15:00"]


def test_runs_due_before_an_event_happen_before_it(sweeps):
    # Given the schedule's clock started by an event at 08:14:05 and a second event 11 minutes later
    first = sample("hyperpod-node-health-unhealthy")
    later = {**first, "id": "later", "time": "2026-11-20T08:25:05Z"}
    result = replay_lines(schedule_stack(), [first, later])
    # Then the runs at 08:19:05 and 08:24:05 come between the two events' records, and none at 08:14:05
    assert [f"{when:%H:%M:%S}" for when, _ in sweeps.runs] == ["08:19:05", "08:24:05"]
    assert [(r["incident"].split(":")[0], r["timestamp"][11:19]) for r in result.records] == [
        ("node", "08:14:05"), ("schedule", "08:19:05"), ("schedule", "08:24:05"), ("node", "08:25:05")]


def test_a_target_input_replaces_the_event(sweeps):
    stack = schedule_stack(target={"Input": json.dumps({"sweep": "all"})})
    replay_lines(stack, [at("2026-11-20T08:00:00Z"), at("+5m")])
    assert [event for _, event in sweeps.runs] == [{"sweep": "all"}]


def test_a_failing_scheduled_run_is_retried_then_reported_dropped(sweeps):
    sweeps.fail = True
    result = replay_lines(schedule_stack(), [at("2026-11-20T08:00:00Z"), at("+5m")])
    assert [f"{when:%H:%M:%S}" for when, _ in sweeps.runs] == ["08:05:00", "08:06:00", "08:08:00"]
    assert result.dropped == [{"function": "Medic-SweepFnABC", "id": sweeps.runs[0][1]["id"],
                               "detail-type": "Scheduled Event"}]


def test_cron_schedules_are_noted_and_never_run(sweeps):
    err = io.StringIO()
    result = replay_lines(schedule_stack("cron(0/5 * * * ? *)"), [at("2026-11-20T08:00:00Z"), at("+1h")], err)
    assert sweeps.runs == [] and result.schedule_runs == {}
    assert "schedule 'cron(0/5 * * * ? *)' never fires in the replay" in err.getvalue()


@pytest.mark.parametrize(("expression", "every"), [
    ("rate(1 minute)", timedelta(minutes=1)), ("rate(5 minutes)", timedelta(minutes=5)),
    ("rate(2 hours)", timedelta(hours=2)), ("rate(1 day)", timedelta(days=1)),
    ("rate(1 minutes)", None), ("rate(5 minute)", None), ("rate(0 minutes)", None), ("cron(* * * * ? *)", None),
])
def test_rate_expressions_parse_as_eventbridge_accepts_them(expression, every):
    assert parse_rate(expression) == every


def test_advance_is_checked(sweeps):
    result = replay_lines(schedule_stack(), [at("+5m"), at("2026-11-20T08:00:00Z"), at("2026-11-20T07:00:00Z"),
                                             at("tomorrow"), at("+1h")])
    assert [error.split(":")[0] for error in result.errors] == ["line 1", "line 3", "line 4"]
    assert "a relative time needs a clock" in result.errors[0]
    assert "the clock cannot go back" in result.errors[1]
    assert "+N(s|m|h|d)" in result.errors[2]
    assert len(sweeps.runs) == 12  # 08:05 .. 09:00


def test_a_long_gap_runs_only_the_latest_runs_of_a_schedule(sweeps, monkeypatch):
    monkeypatch.setattr("sim.replay.MAX_TICKS", 3)  # (2016 in earnest: a week of 5-minute runs)
    result = replay_lines(schedule_stack(), [at("2026-11-20T08:00:00Z"), at("+1h")])
    assert [f"{when:%H:%M}" for when, _ in sweeps.runs] == ["08:50", "08:55", "09:00"]
    assert "12 runs due before 2026-11-20T09:00:00+00:00; the replay skips the 9 oldest" in result.errors[0]


# Training metrics: the probe and metric directives
@pytest.fixture
def metrics_replay() -> Iterator[Replay]:
    config = load_config(DEMO_CONFIG)
    with World(template(config), config) as world:
        yield Replay(world, lambda line: None, io.StringIO(), io.StringIO())


def metric_values(name: str, stat: str, start: datetime, end: datetime, period: int = 60, **dimensions: str):
    response = boto3.client("cloudwatch").get_metric_data(StartTime=start, EndTime=end, ScanBy="TimestampAscending",
                                                          MetricDataQueries=[{
        "Id": "q", "MetricStat": {"Metric": {"Namespace": "Medic/Training", "MetricName": name, "Dimensions": [
            {"Name": key, "Value": value} for key, value in dimensions.items()]}, "Period": period, "Stat": stat}}])
    result = response["MetricDataResults"][0]
    return [(f"{when:%H:%M}", value) for when, value in zip(result["Timestamps"], result["Values"], strict=True)]


def test_the_probe_directive_publishes_what_the_probe_does_at_the_replay_clock(metrics_replay):
    replay = metrics_replay
    replay.line(1, json.dumps(at("2026-11-21T03:00:00Z")))
    replay.line(2, json.dumps({"sim": {"probe": {"job": "llama3-70b", "steps": 40, "step": 1240, "loss": 1.5,
                                                 "tokens_per_sec": 41000, "checkpoint": 1200}}}))
    replay.line(3, json.dumps(at("+5m")))
    replay.line(4, json.dumps({"sim": {"probe": {"job": "llama3-70b", "steps": 0}}}))  # alive, no step
    replay.line(5, json.dumps(at("+1m")))
    replay.line(6, json.dumps({"sim": {"probe": {"job": "llama3-70b", "steps": 3, "loss": "nan"}}}))
    assert replay.result.errors == []
    first = [(p["MetricName"], tuple(d["Name"] for d in p["Dimensions"])) for p in replay.result.published
             if p["Timestamp"] == datetime(2026, 11, 21, 3, 0, tzinfo=UTC)]
    assert first == [("Heartbeat", ("Job",)), ("Session", ("Job",)), ("Step", ("Job",)), ("NonFiniteLoss", ("Job",)),
                     ("Loss", ("Job",)),
                     ("TokensPerSecond", ("Job",)), ("TokensPerSecondBaseline", ("Job",)),
                     ("LastCheckpointStep", ("Job",)), ("FirstStep", ("Job",)), ("TokensPerSecond", ("Job", "Node"))]
    start, end = datetime(2026, 11, 21, 2, 59, tzinfo=UTC), datetime(2026, 11, 21, 3, 10, tzinfo=UTC)
    job = {"Job": "llama3-70b"}
    assert metric_values("Heartbeat", "Sum", start, end, **job) == [("03:00", 40.0), ("03:05", 0.0), ("03:06", 3.0)]
    assert metric_values("Step", "Maximum", start, end, **job) == [("03:00", 1240.0), ("03:05", 1240.0),
                                                                   ("03:06", 1243.0)]
    assert metric_values("NonFiniteLoss", "Sum", start, end, **job) == [("03:00", 0.0), ("03:05", 0.0),
                                                                        ("03:06", 3.0)]
    assert metric_values("LastCheckpointStep", "Maximum", start, end, **job)[0] == ("03:00", 1200.0)


def test_a_restarted_job_gets_a_fresh_probe_and_a_cluster_adds_a_dimension_set(metrics_replay):
    replay = metrics_replay
    replay.line(1, json.dumps(at("2026-11-21T03:00:00Z")))
    replay.line(2, json.dumps({"sim": {"probe": {"job": "j", "steps": 5, "step": 100, "checkpoint": 100}}}))
    replay.line(3, json.dumps({"sim": {"probe": {"job": "j", "steps": 2, "new_process": True}}}))
    replay.line(4, json.dumps({"sim": {"probe": {"job": "j", "cluster": "pretrain-slurm", "steps": 1}}}))
    steps = [(p["Value"], [d["Value"] for d in p["Dimensions"]]) for p in replay.result.published
             if p["MetricName"] == "Step"]
    assert steps == [(100, ["j"]), (2, ["j"]), (1, ["j"]), (1, ["j", "pretrain-slurm"])]
    checkpoints = [p["Value"] for p in replay.result.published if p["MetricName"] == "LastCheckpointStep"]
    assert checkpoints == [100]  # the new process has not saved one


def test_the_metric_directive_puts_one_datapoint(metrics_replay):
    replay = metrics_replay
    replay.line(1, json.dumps(at("2026-11-21T03:00:00Z")))
    replay.line(2, json.dumps({"sim": {"metric": {"job": "llama3-70b", "name": "Heartbeat", "value": 20}}}))
    replay.line(3, json.dumps({"sim": {"metric": {"job": "llama3-70b", "name": "TokensPerSecond", "value": 9.5,
                                                  "dimensions": {"Node": "ip-10-1-88-23"},
                                                  "timestamp": "2026-11-21T02:58:00Z"}}}))
    replay.line(4, json.dumps({"sim": {"metric": {"name": "cluster_failed_node_count", "value": 2,
                                                  "namespace": "/aws/sagemaker/Clusters",
                                                  "dimensions": {"ClusterId": "k3v9q2w8x1za"}}}}))
    assert replay.result.errors == []
    start, end = datetime(2026, 11, 21, 2, 50, tzinfo=UTC), datetime(2026, 11, 21, 3, 5, tzinfo=UTC)
    assert metric_values("Heartbeat", "Sum", start, end, Job="llama3-70b") == [("03:00", 20.0)]
    assert metric_values("TokensPerSecond", "Average", start, end, Job="llama3-70b", Node="ip-10-1-88-23") == [
        ("02:58", 9.5)]
    assert replay.result.published[-1]["namespace"] == "/aws/sagemaker/Clusters"


BAD_METRIC_DIRECTIVES = [
    ({"probe": {"steps": 3}}, "'job' must be the job's name"),
    ({"probe": {"job": "j", "step": 10}}, "give 'steps' >= 1"),
    ({"probe": {"job": "j", "steps": -1}}, "'steps' must be a whole number"),
    ({"probe": {"job": "j", "steps": 1, "loss": "high"}}, "'loss' must be a number, or \"nan\""),
    ({"probe": {"job": "j", "steps": 1, "tokens_per_sec": "nan"}}, "'tokens_per_sec' must be a finite number"),
    ({"probe": {"job": "j", "stepz": 1}}, "unknown key(s) stepz"),
    ({"metric": {"name": "Heartbeat"}}, "give one of 'value' or 'statistics'"),
    ({"metric": {"name": "Heartbeat", "value": 1, "timestamp": "soon"}}, "'timestamp' must be an ISO 8601 time"),
    ({"metric": {"value": 1}}, "'name' must be a metric name"),
]


def test_metric_directives_are_checked(metrics_replay):
    for lineno, (directive, _) in enumerate(BAD_METRIC_DIRECTIVES, 1):
        metrics_replay.line(lineno, json.dumps({"sim": directive}))
    errors = metrics_replay.result.errors
    assert len(errors) == len(BAD_METRIC_DIRECTIVES)
    for lineno, ((_, complaint), error) in enumerate(zip(BAD_METRIC_DIRECTIVES, errors, strict=True), 1):
        assert error.startswith(f"line {lineno}: directive ") and complaint in error, error
    assert metrics_replay.result.published == []
