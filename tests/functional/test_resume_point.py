"""Specification: where a restarted job resumed from is exact at any publish period (issue 31, item 4).

The real probe (probe/medic_probe) publishes into moto's CloudWatch at 1, 6 and 60 flushes a minute; Medic's
proof-of-recovery check reads where the restarted process started from its `FirstStep`. Before, Medic took the first
minute's lowest `Step` less the whole minute's Heartbeat: right only at one flush a minute, so a job that resumed
exactly at its checkpoint (step 301 after checkpoint 300) read as resumed behind it at 6 flushes a minute.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
import time_machine

from medic.adapters.metrics import TrainingMetrics
from medic.config import parse_config
from medic.flows.recovery.check import check_recoveries
from medic.flows.stall.response import respond_to_alarm
from medic.ledger.incidents import IncidentStore
from tests.functional.conftest import REGION, medic_world
from tests.functional.slurm_world import SlurmWorld
from tests.functional.test_alarm_handler import JOBS_CONFIG, alarm

PROBE_DIR = Path(__file__).resolve().parents[2] / "probe"
if str(PROBE_DIR) not in sys.path:
    sys.path.insert(0, str(PROBE_DIR))

from medic_probe import Probe  # noqa: E402

ALARM_AT = datetime.fromisoformat("2026-11-21T03:10:00+00:00")
CHECKPOINT = 300


class WithoutFirstStep:
    """The CloudWatch client of a probe from before FirstStep: the same calls, without that metric."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def put_metric_data(self, Namespace: str, MetricData: list[dict]) -> dict:  # noqa: N803 - boto3's names
        kept = [datum for datum in MetricData if datum["MetricName"] != "FirstStep"]
        return self._client.put_metric_data(Namespace=Namespace, MetricData=kept)


@pytest.fixture
def medic(aws):
    yield from medic_world(parse_config(JOBS_CONFIG), aws)


def process(first_step: int, steps_per_minute: int, publishes_per_minute: int, start: datetime, minutes: int,
            client: Any, checkpoint: int | None = None) -> None:
    """One training process: ``minutes`` minutes from ``start``, ``publishes_per_minute`` flushes a minute (mid-period,
    as the probe's thread does), stepping evenly from ``first_step``."""
    period = 60 / publishes_per_minute
    probe = Probe("llama3-70b", rank=0, client=client, period_seconds=period, start=False, hang_detection=False)
    step = first_step
    per_flush = steps_per_minute // publishes_per_minute
    for index in range(minutes * publishes_per_minute):
        for _ in range(per_flush):
            probe.step(step, loss=2.0)
            step += 1
        if checkpoint is not None and step > checkpoint and probe._last_checkpoint is None:
            probe.checkpoint(checkpoint)
        with time_machine.travel(start + timedelta(seconds=period * index + period / 2), tick=False):
            probe.flush()
    probe.close(completed=False)


def restarted_job(medic, tmp_path, publishes_per_minute: int, client: Any, resumed_at: int) -> dict:
    """The job trained to step 310 (checkpoint 300) until 02:50, stalled, was requeued at 03:10 and stepped again from
    ``resumed_at`` at 03:16; the recovery check's record at 03:20."""
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    medic.at(ALARM_AT.isoformat())
    medic.deps.metrics = TrainingMetrics(cloudwatch)
    process(1, 60, 1, ALARM_AT - timedelta(minutes=25), 5, cloudwatch, checkpoint=CHECKPOINT)  # to step 300 at 02:50
    slurm = SlurmWorld(medic, tmp_path)
    slurm.heartbeat()
    assert respond_to_alarm(alarm(), medic.deps)["outcome"] == "deferred"
    process(resumed_at, 60, publishes_per_minute, ALARM_AT + timedelta(minutes=6), 3, client)
    medic.at("2026-11-21T03:20:00+00:00")
    [record] = check_recoveries({"id": "run-1"}, medic.deps)
    assert IncidentStore(medic.deps.table).recoveries() == []
    return record


@pytest.mark.parametrize("publishes_per_minute", [1, 6, 60])
def test_a_job_that_resumed_at_its_checkpoint_is_recovered_at_any_publish_period(medic, tmp_path,
                                                                                publishes_per_minute):
    # Given the restarted process's first step is 301, right after its checkpoint 300, published N times a minute
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    record = restarted_job(medic, tmp_path, publishes_per_minute, cloudwatch, resumed_at=CHECKPOINT + 1)
    # Then it resumed from its checkpoint: recovered, no page
    assert (record["fault"], record["outcome"], record["paged"]) == ("recovered", "ignored", False)
    assert medic.pages() == []


@pytest.mark.parametrize("publishes_per_minute", [1, 6, 60])
def test_a_job_that_resumed_behind_its_checkpoint_is_paged_with_the_exact_loss_at_any_publish_period(
        medic, tmp_path, publishes_per_minute):
    # Given the restarted process started over from step 1 (it did not load its checkpoint)
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    record = restarted_job(medic, tmp_path, publishes_per_minute, cloudwatch, resumed_at=1)
    # Then it resumed from step 0: 300 steps lost, exactly
    assert (record["fault"], record["outcome"], record["paged"]) == ("resumed_behind", "failed", True)
    assert "from step 0 while the last checkpoint was step 300: 300 steps lost" in record["reason"]


def test_a_probe_without_first_step_is_read_as_before_right_at_one_flush_a_minute(medic, tmp_path):
    # Given a probe from before FirstStep, at its default period (one flush a minute)
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    record = restarted_job(medic, tmp_path, 1, WithoutFirstStep(cloudwatch), resumed_at=CHECKPOINT + 1)
    # Then the first minute's step less its steps still says where it resumed
    assert (record["fault"], record["outcome"]) == ("recovered", "ignored")


def test_a_probe_without_first_step_at_six_flushes_a_minute_reads_as_behind_which_first_step_fixes(medic, tmp_path):
    # Given the same job, its probe without FirstStep, six flushes a minute: the minute's lowest Step (its first
    # flush's) less the whole minute's steps lands below the checkpoint (the bug issue 31 reports)
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    record = restarted_job(medic, tmp_path, 6, WithoutFirstStep(cloudwatch), resumed_at=CHECKPOINT + 1)
    assert record["fault"] == "resumed_behind"
