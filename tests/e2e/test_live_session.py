"""The live session's seams (sim/live.py), without a real Slurm or torch: the clock at a multiple of the wall clock,
input as it comes, the probe's EMF lines as CloudWatch Logs ingests them, writes by another process reaching the
streams, and the in-process agent on a real Slurm's programs. tests/real runs them all with the real parts."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sim.live import LiveSession, ScaledClock
from sim.slurm import RealSlurm
from sim.synth import ROOT

CONFIG = ROOT / "tests" / "real" / "medic.real.yaml"
ORIGIN = datetime(2026, 11, 21, 3, 0, tzinfo=UTC)


def probe_emf_line(job: str, steps: int, checkpoint: int) -> str:
    """What the real probe writes on stdout in EMF mode after ``steps`` steps and a checkpoint."""
    sys.path.insert(0, str(ROOT / "probe"))
    from medic_probe import Probe

    probe = Probe(job, emf=True, rank=0, start=False)
    for step in range(1, steps + 1):
        probe.step(step, loss=1.5, tokens_per_sec=1000.0)
    probe.checkpoint(checkpoint)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        probe.flush()
    probe._active = False  # nothing at exit
    return out.getvalue().strip()


def test_the_scaled_clock_maps_wall_time_onto_the_emulated_clock():
    clock = ScaledClock(30, origin=ORIGIN, wall_origin=1_000.0)
    assert clock.at(1_000.0) == ORIGIN
    assert clock.at(1_002.0) == ORIGIN + timedelta(minutes=1)
    assert clock.wall_seconds(timedelta(minutes=10)) == 20.0
    # By default a whole multiple of 60/factor wall seconds maps to a whole minute
    default = ScaledClock(30)
    assert default.wall_origin % 2 == 0 and default.origin.second == 0 and default.origin.microsecond == 0


@pytest.mark.parametrize("factor", [0, 0.5, 4000, True, "30"])
def test_a_clock_factor_out_of_range_is_refused_by_name(factor):
    with pytest.raises(ValueError, match="the clock's factor must be a number from 1 to 3600"):
        ScaledClock(factor)


@pytest.fixture(scope="module")
def live():
    with LiveSession(CONFIG, ScaledClock(60, origin=ORIGIN)) as session:
        yield session


def test_the_probes_emf_line_is_ingested_at_its_time_on_the_emulated_clock(live):
    # Given an EMF line the real probe wrote (its _aws.Timestamp is the job's wall clock)
    line = probe_emf_line("tiny-gloo", steps=40, checkpoint=25)
    stamp = json.loads(line)["_aws"]["Timestamp"] / 1000
    # When the session ingests it
    put = live.ingest_emf(line)
    # Then each metric is a datapoint at the emulated time of that wall moment, as the probe's PutMetricData would be
    at = live.clock.at(stamp)
    by_name = {(datum["MetricName"], tuple(d["Name"] for d in datum["Dimensions"])): datum for datum in put}
    assert by_name[("Heartbeat", ("Job",))]["Value"] == 40.0
    assert by_name[("LastCheckpointStep", ("Job",))]["Value"] == 25.0
    assert by_name[("TokensPerSecond", ("Job", "Node"))]["Value"] == 1000.0
    assert {datum["Timestamp"] for datum in put} == {at}
    # And CloudWatch (what Medic's handlers read) holds it there
    stats = live.world.client("cloudwatch").get_metric_statistics(
        Namespace="Medic/Training", MetricName="Heartbeat", Dimensions=[{"Name": "Job", "Value": "tiny-gloo"}],
        StartTime=at - timedelta(minutes=1), EndTime=at + timedelta(minutes=1), Period=60, Statistics=["Sum"])
    assert [point["Sum"] for point in stats["Datapoints"]] == [40.0]


@pytest.mark.parametrize("line, error", [
    ("not json", "EMF line not ingested"),
    ('{"_aws": {"Timestamp": "soon", "CloudWatchMetrics": []}}', "epoch milliseconds"),
    ('{"_aws": {"Timestamp": 1, "CloudWatchMetrics": []}}', "out of the emulated clock's range"),
    (json.dumps({"_aws": {"Timestamp": int(time.time() * 1000), "CloudWatchMetrics": [
        {"Namespace": "N", "Dimensions": [["Job"]], "Metrics": [{"Name": "Heartbeat"}]}]}, "Heartbeat": 1}),
     "dimension(s) Job have no string value"),
    (json.dumps({"_aws": {"Timestamp": int(time.time() * 1000), "CloudWatchMetrics": []}}),
     "non-empty list of directives"),
], ids=["not-json", "timestamp-not-a-number", "timestamp-out-of-range", "dimension-without-value", "no-directive"])
def test_a_bad_emf_line_is_an_error_naming_what_is_wrong_and_no_metric(live, line, error):
    before = len(live.world.metrics.published)
    assert live.ingest_emf(line) == []
    assert error in live.result.errors[-1]
    assert len(live.world.metrics.published) == before


def test_input_is_taken_as_it_comes_at_the_live_clock(live):
    # Given the session running
    live.tick()
    before = live.replay.now
    time.sleep(0.1)
    # When a line comes in, then time passes
    live.feed('{"sim": {"unknown_directive": {}}}')
    live.tick()
    # Then the line was read now (its error says so), and the clock moved on with the wall clock, at its factor
    assert "unknown directive 'unknown_directive'" in live.result.errors[-1]
    assert live.replay.now >= before + timedelta(seconds=5)


def test_a_write_by_another_process_reaches_the_stream_on_the_emulated_clock(live):
    # Given another process (as the real agent would) writing the agent's heartbeat through the session's endpoint
    code = f"""
import boto3
client = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                       region_name="{live.region}").client("dynamodb", endpoint_url="{live.endpoint}")
client.put_item(TableName="{live.table}", Item={{"pk": {{"S": "agent#pretrain-slurm"}}, "sk": {{"S": "heartbeat"}},
    "at": {{"S": "2026-01-01T00:00:00+00:00"}}, "host": {{"S": "vm"}}, "version": {{"S": "0"}},
    "role": {{"S": "primary"}}, "expires_at": {{"N": "1900000000"}}}})
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60,
                   env={"PATH": "/usr/bin:/bin", "AWS_EC2_METADATA_DISABLED": "true"})
    # When time passes
    live.tick()
    # Then the stream delivered it to Medic's handler, which saw it when the emulated AWS wrote it (not the writer's
    # clock, and not the wall clock: the emulated clock started at 03:00 on 21 November 2026)
    seen = live.world.client("dynamodb").get_item(TableName=live.table, Key={
        "pk": {"S": "agentseen#pretrain-slurm"}, "sk": {"S": "heartbeat"}}).get("Item")
    assert seen is not None, live.result.errors
    seen_at = datetime.fromisoformat(next(value["S"] for key, value in seen.items()
                                          if key.endswith("_at") and "S" in value and value["S"].startswith("20")))
    assert ORIGIN <= seen_at <= live.now


def test_the_in_process_agent_on_a_real_slurm_runs_its_programs_and_records_them(tmp_path: Path):
    # Given a Slurm bin directory (here, a scontrol that says which slurm.conf it was given)
    scontrol = tmp_path / "scontrol"
    scontrol.write_text('#!/bin/sh\necho "conf=$SLURM_CONF args=$*"\n')
    scontrol.chmod(0o755)
    runs: list[dict] = []
    runner = RealSlurm("pretrain-slurm", {"SLURM_CONF": "/etc/slurm-test.conf", "PATH": "/usr/bin:/bin"}, runs, "vm")
    # When the agent runs a command and its role check through it
    done = runner([str(scontrol), "requeue", "7"], capture_output=True, text=True, check=False)
    runner([str(scontrol), "ping"], capture_output=True, text=True, check=False)
    # Then the real program ran with the cluster's environment, and the command (not the ping) is recorded
    assert done.stdout.strip() == "conf=/etc/slurm-test.conf args=requeue 7"
    assert runs == [{"cluster": "pretrain-slurm", "host": "vm", "argv": ["scontrol", "requeue", "7"], "exit": 0,
                     "output": "conf=/etc/slurm-test.conf args=requeue 7"}]


def test_a_cluster_whose_agent_already_runs_on_the_fake_cannot_switch_to_a_real_slurm(live):
    live.world.slurm.agent("pretrain-slurm")
    with pytest.raises(ValueError, match="already run against the fake Slurm"):
        live.use_real_slurm("pretrain-slurm", "/usr/bin", {}, "vm")
