"""Specification, end to end: no event acts out of its time, its partition or without a time zone (issue 28 items 1,
10, 11: scenarios zza-zzd), and the emulator delivers events and expires items as AWS does (item 14)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sim.cloudwatch import MAX_EVALUATIONS, EmulatedCloudWatch
from sim.scenario import SCENARIOS
from sim.scenarios.generate import T0, event
from sim.world import ttl_sweep
from tests.e2e.conftest import node_action_calls, outcomes
from tests.e2e.test_harness import world, world_with  # noqa: F401 - the stand-in world fixtures

REBOOT = "sagemaker:BatchRebootClusterNodes"
REPLACE = "sagemaker:BatchReplaceClusterNodes"


def reasons(result) -> list[str]:
    return [record["reason"] for record in result.records]


def test_zza_a_redrive_eight_days_later_acts_only_under_the_operators_override(replay):
    # Given a node health event redriven from its dead-letter queue eight days after it happened, as is, then with the
    # operator's override; and an event dated 1970
    result = replay(SCENARIOS / "zza-dlq-redrive-days-later.jsonl")
    # Then the plain redrive is rejected naming its age, the override reboots the node once, 1970 is rejected
    assert outcomes(result) == [("none", "rejected"), ("reboot_node", "executed"), ("none", "rejected")]
    plain, _, epoch = reasons(result)
    assert "time:" in plain and "8 d old" in plain and "1 d 7 h" in plain and "medic-redrive" in plain
    assert "not even an operator's override" in epoch
    assert node_action_calls(result) == {REBOOT: 1}
    assert result.pages == [] and result.dropped == []


def test_zzb_a_healthy_report_dated_a_month_ahead_hides_no_fault(replay):
    result = replay(SCENARIOS / "zzb-future-dated-healthy.jsonl")
    # Then it is rejected, and the node's next fault is an escalation (replace), not a stale event
    assert outcomes(result) == [("reboot_node", "executed"), ("none", "rejected"), ("replace_node", "executed")]
    assert "dated 29 d 23 h after Medic's clock" in reasons(result)[1]
    assert node_action_calls(result) == {REBOOT: 1, REPLACE: 1}


def test_zzc_events_of_another_partition_or_account_act_on_nothing(replay):
    result = replay(SCENARIOS / "zzc-foreign-partition-and-account.jsonl")
    assert [record["outcome"] for record in result.records] == ["rejected"] * 3
    job, alarm, node = reasons(result)
    assert "aws-iso-b" in job and "account \"999999999999\"" in alarm and "aws-us-gov" in node
    assert result.training_jobs == [] and node_action_calls(result) == {} and result.pages == []


def test_zzd_times_without_a_zone_are_rejected_never_a_crash(replay):
    result = replay(SCENARIOS / "zzd-time-without-zone.jsonl")
    assert [record["outcome"] for record in result.records] == ["rejected", "rejected"]
    node, alarm = reasons(result)
    assert "time:" in node and "no time zone" in node
    assert "detail.state.timestamp" in alarm and "no time zone" in alarm
    assert result.dropped == [] and result.pages == [] and node_action_calls(result) == {}


# --- the emulator (item 14)


def test_an_event_older_than_the_clock_arrives_now_and_keeps_its_time(replay):
    # Given the clock at 09:14 (an event), then an event of another node dated 08:14 (a late redelivery)
    late = event("i-0a1b2c3d4e5f60718", T0, fault="NvidiaErrorReboot")
    result = replay([event(at=T0 + timedelta(hours=1), fault="NvidiaErrorReboot"), late])
    # Then it is handled at the clock, with its own time: an hour old, within the bound, it acts
    first, second = result.records
    assert second["timestamp"].startswith((T0 + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S"))
    assert outcomes(result) == [("reboot_node", "executed"), ("reboot_node", "executed")]


def test_a_far_future_event_arrives_now_and_the_replay_goes_on(replay):
    # Given an event dated in the year 9999 between two events a minute apart
    far = event("i-0a1b2c3d4e5f60718", datetime(9999, 12, 31, 23, 0, tzinfo=UTC), fault="NvidiaErrorReboot")
    result = replay([event(fault="NvidiaErrorReboot"), far,
                     event("i-0b1c2d3e4f5061728", T0 + timedelta(minutes=1), fault="NvidiaErrorReboot")])
    # Then it arrives at the clock (rejected as dated ahead), the clock stays, and the next event acts at its time
    assert outcomes(result) == [("reboot_node", "executed"), ("none", "rejected"), ("reboot_node", "executed")]
    assert "after Medic's clock" in result.records[1]["reason"]
    assert result.records[2]["timestamp"].startswith((T0 + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S"))
    assert result.errors == []


def test_the_clock_stops_before_the_end_of_time(replay):
    result = replay([event(fault="NvidiaErrorReboot"), {"sim": {"advance": "+3000000d"}},
                     {"sim": {"advance": "9999-01-01T00:00:00Z"}}])
    assert len(result.errors) == 2
    assert all("the clock stops at 9000-01-01" in error or "past the end of time" in error for error in result.errors)


def test_alarms_evaluate_at_most_a_week_of_minutes_when_the_clock_jumps(world):  # noqa: F811 - the fixture
    cloudwatch = EmulatedCloudWatch(world)
    minutes = cloudwatch.due(T0, T0 + timedelta(days=30))
    assert len(minutes) == MAX_EVALUATIONS and minutes[-1] == (T0 + timedelta(days=30)).replace(second=0)
    assert cloudwatch.skipped == 30 * 24 * 60 - MAX_EVALUATIONS
    assert cloudwatch.due(T0, T0 + timedelta(days=30, minutes=2)) == [minutes[-1] + timedelta(minutes=m)
                                                                      for m in (1, 2)]


def test_the_ttl_sweep_deletes_what_dynamodbs_ttl_would_and_nothing_else(world):  # noqa: F811 - the fixture
    # Given items with every kind of TTL attribute in the stack's ledger (TTL on expires_at)
    dynamodb = world.client("dynamodb")
    table = world.functions["NodeFnABC"].environment["LEDGER_TABLE"]
    now = T0 + timedelta(days=8)
    items = {"expired": {"N": str(int((now - timedelta(seconds=1)).timestamp()))},
             "due-now": {"N": str(int(now.timestamp()))},
             "later": {"N": str(int((now + timedelta(days=1)).timestamp()))},
             "a-string": {"S": str(int((now - timedelta(days=1)).timestamp()))},
             "six-years-past": {"N": str(int((now - timedelta(days=6 * 365)).timestamp()))},
             "none": None}
    for sk, expiry in items.items():
        dynamodb.put_item(TableName=table, Item={"pk": {"S": "t"}, "sk": {"S": sk},
                                                 **({"expires_at": expiry} if expiry else {})})
    # When DynamoDB's TTL process runs
    deleted = ttl_sweep(dynamodb, now)
    # Then only the Number TTLs at or before now (and not more than five years past) are gone
    left = sorted(item["sk"]["S"] for item in dynamodb.scan(TableName=table)["Items"] if item["pk"]["S"] == "t")
    assert (deleted, left) == (2, ["a-string", "later", "none", "six-years-past"])
