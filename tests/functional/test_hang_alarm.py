"""Specification: the hang alarm (issue 31) — the probe's own verdict (`Stalled`) fires seconds after the last step
and takes the stall flow: the same incident, requeue through the agent, proof of recovery; its OK after the restart
is the proof's fast path. Against moto, with the real agent's parser and ledger code."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import boto3
import pytest

from medic.adapters.metrics import TrainingMetrics
from medic.config import parse_config
from medic.flows.stall.response import respond_to_alarm
from medic.ledger.incidents import IncidentStore
from tests.functional.conftest import CLUSTER, REGION, medic_world
from tests.functional.slurm_world import SlurmWorld, agent_parse
from tests.functional.test_alarm_handler import BEFORE, INCIDENT, JOB, JOBS_CONFIG, RESTARTED, alarm, probe_reports

HANG = f"medic-hang-{JOB}"
# The last step at 03:09:40; the probe flushes at hh:mm:30, so its 03:10:30 flush counted the steps of 03:09:30-40;
# its verdict at 03:10:50 (more than 60 s without a step), the hang alarm at 03:11:00.
LAST_STEP = datetime.fromisoformat("2026-11-21T03:09:40+00:00")
HANG_AT = "2026-11-21T03:11:00.000+0000"


@pytest.fixture
def medic(aws):
    yield from medic_world(parse_config(JOBS_CONFIG), aws)


@pytest.fixture
def slurm(medic, tmp_path) -> SlurmWorld:
    """llama3-70b trained 40 steps a minute until 03:09:40 (checkpoint 1200), its last flush at 03:10:30."""
    medic.at("2026-11-21T03:11:00+00:00")
    medic.deps.metrics = TrainingMetrics(boto3.client("cloudwatch", region_name=REGION))
    for minute in range(10, 0, -1):
        at = LAST_STEP.replace(second=30) - timedelta(minutes=minute - 1)
        probe_reports("Heartbeat", 40, at)
        probe_reports("Step", 1640 - 40 * (minute - 1), at)
    probe_reports("Heartbeat", 10, LAST_STEP.replace(second=30) + timedelta(minutes=1),  # 03:10:30: 03:09:30-40
                  session=BEFORE)
    probe_reports("LastCheckpointStep", 1200, LAST_STEP - timedelta(minutes=5))
    world = SlurmWorld(medic, tmp_path)
    world.heartbeat()
    return world


def test_a_hang_alarm_requeues_though_the_minutes_read_back_count_the_last_steps(slurm):
    # When the hang alarm fires at 03:11:00, 80 s after the last step (its minute's flush counted 10 steps)
    record = respond_to_alarm(alarm(HANG, at=HANG_AT), slurm.medic.deps)
    # Then the job is requeued through the agent, in the job's incident (the stall alarm's)
    assert (record["fault"], record["action"], record["outcome"], record["incident"]) == (
        "stalled", "requeue_job", "deferred", INCIDENT)
    [body] = slurm.queued()
    assert agent_parse(json.dumps(body), cluster=CLUSTER).action.job_name == JOB
    # And the proof of recovery watches it, with the fault's moment, step and checkpoint read back
    [watch] = IncidentStore(slurm.medic.deps.table).recoveries()
    assert (watch.incident, watch.checkpoint_step, watch.last_step) == (INCIDENT, 1200, 1640)
    assert watch.fault_at == datetime.fromisoformat("2026-11-21T03:10:00+00:00")  # the minute of the last steps


def test_a_stall_alarm_at_the_same_moment_reads_its_window_and_requeues_nothing(slurm):
    # (the contrast: the stall alarm's read-back over stall_minutes counts those steps: the job was stepping)
    record = respond_to_alarm(alarm(at=HANG_AT), slurm.medic.deps)
    assert (record["action"], record["outcome"]) == ("none", "ignored")
    assert slurm.queued() == []


def test_the_hang_alarm_going_ok_with_the_restarted_processs_steps_proves_the_recovery(slurm):
    respond_to_alarm(alarm(HANG, at=HANG_AT), slurm.medic.deps)
    restarted = slurm.medic.clock[0]
    # Given the restarted process steps from 1201 at 03:16 (its own session, FirstStep 1201)
    for minute in range(5, 7):
        at = restarted + timedelta(minutes=minute)
        probe_reports("Heartbeat", 40, at, session=RESTARTED)
        probe_reports("Step", 1200 + 40 * (minute - 4), at)
        probe_reports("FirstStep", 1201, at)
    # When its first flush turns the hang alarm OK at 03:17
    slurm.medic.at("2026-11-21T03:17:10+00:00")
    record = respond_to_alarm(alarm(HANG, state="OK", at="2026-11-21T03:17:10.000+0000"), slurm.medic.deps)
    # Then the incident closes, and the recovery is recorded, from the checkpoint: no page
    assert (record["outcome"], record["action"]) == ("ignored", "none")
    [recovered] = [line for line in slurm.medic.log.lines if line["fault"] == "recovered"]
    assert (recovered["incident"], recovered["trigger"]) == (INCIDENT, "alarm")
    assert "the hang alarm is OK again and the probe counted 80 steps since, now at step 1280" in recovered["reason"]
    assert not [line for line in slurm.medic.log.lines if line["fault"] == "resumed_behind"]
    assert IncidentStore(slurm.medic.deps.table).recoveries() == []
    assert slurm.medic.pages() == []
