"""Specification: training metrics that are anyone's to write do not decide for Medic (issue 28, item 6).

Anyone allowed `cloudwatch:PutMetricData` on the probe's namespace can write a heartbeat. Medic counts a minute's
probe datapoints only when exactly one probe session (the probe's `Session`, a random number per process) published
in it; proves a recovery only with steps from a session that started after its restart; and restarts a job for a
stall at most once per `stall_restart_interval_minutes`. Against moto (CloudWatch, DynamoDB, SQS, SNS) with the real
agent's parser."""

from __future__ import annotations

from datetime import datetime, timedelta

import boto3
import pytest

from medic.config import parse_config
from medic.flows.recovery.check import check_recoveries
from medic.flows.stall.response import respond_to_alarm
from medic.ledger.incidents import IncidentStore
from tests.functional.conftest import medic_world
from tests.functional.slurm_world import SlurmWorld
from tests.functional.test_alarm_handler import (
    ALARM_AT,
    BEFORE,
    JOB,
    JOBS_CONFIG,
    REGION,
    RESTARTED,
    alarm,
    probe_reports,
    trained_world,
)

FORGER = 3_000_003  # a session value no probe of the job drew


@pytest.fixture
def medic(aws):
    yield from medic_world(parse_config(JOBS_CONFIG), aws)


@pytest.fixture
def slurm(medic, tmp_path) -> SlurmWorld:
    """The watched job trained (its own probe session) until 02:50, then went silent."""
    return trained_world(medic, tmp_path)


def requeued_at_0310(slurm) -> datetime:
    slurm.heartbeat()
    record = respond_to_alarm(alarm(), slurm.medic.deps)
    assert record["outcome"] == "deferred"
    return slurm.medic.clock[0]


def steps(at: datetime, count: int = 20, step: int = 1300, session: int | None = None, **kwargs) -> None:
    if session == 0:  # forged without any session: a bare Heartbeat, as `aws cloudwatch put-metric-data` writes it
        boto3.client("cloudwatch", region_name=REGION).put_metric_data(Namespace="Medic/Training", MetricData=[
            {"MetricName": "Heartbeat", "Dimensions": [{"Name": "Job", "Value": JOB}], "Value": count,
             "Timestamp": at}])
    else:
        probe_reports("Heartbeat", count, at, session=session)
    probe_reports("Step", step, at)


def test_a_forged_heartbeat_without_a_session_is_no_proof_of_recovery(slurm):
    # Given Medic requeued the job at 03:10, the restarted process never stepped, and someone wrote heartbeats
    restarted = requeued_at_0310(slurm)
    for minute in range(6, 9):
        steps(restarted + timedelta(minutes=minute), session=0)
    # When the recovery check runs after the deadline
    slurm.medic.at("2026-11-21T03:31:00+00:00")
    [record] = check_recoveries({"id": "run-1"}, slurm.medic.deps)
    # Then no recovery: one page, which says the steps reported did not count and why
    assert (record["fault"], record["outcome"], record["paged"]) == ("no_progress", "failed", True)
    assert "60 in minutes without exactly one probe session" in record["reason"]


def test_the_stalled_processs_own_session_is_no_proof_of_recovery(slurm):
    # Given the old process (hung, then brought back by nobody) reporting steps after Medic's restart
    restarted = requeued_at_0310(slurm)
    for minute in range(6, 9):
        steps(restarted + timedelta(minutes=minute), session=BEFORE)
    slurm.medic.at("2026-11-21T03:31:00+00:00")
    [record] = check_recoveries({"id": "run-1"}, slurm.medic.deps)
    assert record["fault"] == "no_progress"
    assert "60 from the probe session of the process before the restart" in record["reason"]


def test_the_restarted_processs_new_session_proves_the_recovery(slurm):
    restarted = requeued_at_0310(slurm)
    for minute in range(6, 9):
        steps(restarted + timedelta(minutes=minute), session=RESTARTED)
    slurm.medic.at("2026-11-21T03:20:00+00:00")
    [record] = check_recoveries({"id": "run-1"}, slurm.medic.deps)
    assert (record["fault"], record["outcome"], record["paged"]) == ("recovered", "ignored", False)


def test_a_minute_two_sessions_reported_in_does_not_count(slurm):
    # Given the restarted process stepping, and a forger writing heartbeats with a session of its own in the
    # same minutes: CloudWatch sees two sessions there (Minimum != Maximum)
    restarted = requeued_at_0310(slurm)
    for minute in range(6, 9):
        steps(restarted + timedelta(minutes=minute), session=RESTARTED)
        steps(restarted + timedelta(minutes=minute), session=FORGER)
    slurm.medic.at("2026-11-21T03:20:00+00:00")
    # Then nothing counts yet: the check keeps waiting (and would page at the deadline)
    assert check_recoveries({"id": "run-1"}, slurm.medic.deps) == []


def test_an_ok_alarm_after_forged_heartbeats_is_no_proof_either(slurm):
    restarted = requeued_at_0310(slurm)
    steps(restarted + timedelta(minutes=6), session=0)
    slurm.medic.at("2026-11-21T03:18:00+00:00")
    ok = respond_to_alarm(alarm(state="OK", at="2026-11-21T03:18:00.000+0000"), slurm.medic.deps)
    assert "not proof of recovery" in ok["reason"]
    assert [watch.job for watch in IncidentStore(slurm.medic.deps.table).recoveries()] == [JOB]


def test_back_dated_heartbeats_without_a_session_do_not_make_a_job_that_never_stepped_look_stalled(medic, tmp_path):
    # Given a watched job that has not stepped yet (its probe publishes nothing until the first step), and three
    # datapoints someone wrote: a heartbeat back-dated two hours, a step, and an empty heartbeat in the window
    world = SlurmWorld(medic, tmp_path)
    medic.at(ALARM_AT)
    alarm_at = datetime.fromisoformat(ALARM_AT)
    steps(alarm_at - timedelta(hours=2), count=5, step=5, session=0)
    steps(alarm_at - timedelta(minutes=3), count=0, step=5, session=0)
    world.heartbeat()
    # When its stall alarm fires (missing data breaches)
    record = respond_to_alarm(alarm(), medic.deps)
    # Then Medic requeues nothing: it cannot tell whether the job runs, and tells a human once
    assert (record["action"], record["outcome"], record["paged"]) == ("none", "deferred", True)
    assert "without exactly one probe session" in record["reason"]
    assert world.depth() == 0


def test_forged_heartbeats_in_the_window_do_not_hide_a_stall_medic_can_see(slurm):
    # Given the job trained until 02:50 (its own session), and bare heartbeats written in the stall window
    alarm_at = datetime.fromisoformat(ALARM_AT)
    for minute in range(1, 5):
        steps(alarm_at - timedelta(minutes=minute), session=0)
    slurm.heartbeat()
    # When the stall alarm fires
    record = respond_to_alarm(alarm(), slurm.medic.deps)
    # Then the forged steps do not count: the job is requeued
    assert record["outcome"] == "deferred" and slurm.depth() == 1


def test_a_stall_soon_after_a_restart_is_held_back_and_paged(slurm):
    # Given Medic requeued the job at 03:10 and it recovered (its new session stepped), and the alarm went OK
    restarted = requeued_at_0310(slurm)
    for minute in range(6, 9):
        steps(restarted + timedelta(minutes=minute), session=RESTARTED)
    slurm.medic.at("2026-11-21T03:20:00+00:00")
    check_recoveries({"id": "run-1"}, slurm.medic.deps)
    respond_to_alarm(alarm(state="OK", at="2026-11-21T03:20:00.000+0000"), slurm.medic.deps)
    # When it stalls again at 03:40, within stall_restart_interval_minutes (60) of the restart
    slurm.medic.at("2026-11-21T03:40:00+00:00")
    slurm.heartbeat()
    depth = slurm.depth()
    again = respond_to_alarm(alarm(at="2026-11-21T03:40:00.000+0000"), slurm.medic.deps)
    # Then no second requeue: held back, and a human is paged
    assert (again["outcome"], again["paged"]) == ("suppressed", True)
    assert "less than 60 min ago (stall_restart_interval_minutes)" in again["reason"]
    assert slurm.depth() == depth
    # And an hour after the restart, a new stall is requeued again
    respond_to_alarm(alarm(state="OK", at="2026-11-21T03:50:00.000+0000"), slurm.medic.deps)
    slurm.medic.at("2026-11-21T04:20:00+00:00")
    slurm.heartbeat()
    for minute in range(20, 24):  # it trained again since (its session), then stopped
        steps(datetime.fromisoformat("2026-11-21T03:00:00+00:00") + timedelta(minutes=minute + 40),
              session=RESTARTED)
    assert respond_to_alarm(alarm(at="2026-11-21T04:20:00.000+0000"), slurm.medic.deps)["outcome"] == "deferred"


def test_a_forged_completion_marker_does_not_make_medic_stand_down_on_a_stall(slurm):
    # Given the job trained until 02:50 (its own session), then someone wrote a completion marker at 02:55 with no
    # probe session (a marker makes Medic take the silence for a finished job)
    boto3.client("cloudwatch", region_name=REGION).put_metric_data(Namespace="Medic/Training", MetricData=[
        {"MetricName": "Completed", "Dimensions": [{"Name": "Job", "Value": JOB}], "Value": 1,
         "Timestamp": datetime.fromisoformat(ALARM_AT) - timedelta(minutes=15)}])
    slurm.heartbeat()
    # When the stall alarm fires
    record = respond_to_alarm(alarm(), slurm.medic.deps)
    # Then the marker does not count: the stall is requeued
    assert (record["fault"], record["outcome"]) == ("stalled", "deferred")
