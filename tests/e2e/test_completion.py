"""Specification: a watched job that finishes cleanly is not restarted, end to end: the real probe's close() publishes
its completion marker into the emulated CloudWatch, the synthesized stall alarm fires on the silence that follows,
and the alarm handler (and the proof-of-recovery check) read the marker back and stand down; a crash, and a later
run under the same Job name, are stalls as before."""

from __future__ import annotations

from datetime import timedelta

from sim.scenario import SCENARIOS
from sim.scenarios.generate import SLURM_JOB, T_ALARM, clock, every_minute, minutes, probe
from tests.e2e.conftest import outcomes
from tests.e2e.test_alarms import AGENT_RAN, REQUEUED, STALL, no_hand_written_alarm_event, transitions

SEND = "sqs:SendMessage"
SLURM = [{"sim": {"slurm_job": SLURM_JOB}}, {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}}]
# llama3-70b training 40 steps a minute from 03:00 to 03:05, checkpoint at step 1200 (the scenarios' healthy start)
TRAINING = [clock(T_ALARM), *SLURM,
            *every_minute(T_ALARM, T_ALARM + minutes(5), steps=40, step=1240, loss=1.87, tokens_per_sec=41000.0,
                          checkpoint=1200)]
LAST_FLUSH = T_ALARM + minutes(5) + timedelta(seconds=40)


def published(result, name: str) -> list[tuple[str, float]]:
    return [(point["Timestamp"].strftime("%H:%M:%S"), point["Value"]) for point in result.published
            if point["MetricName"] == name and {d["Name"] for d in point["Dimensions"]} == {"Job"}]


def test_zm_a_job_that_finished_cleanly_is_recorded_finished_when_its_stall_alarm_fires_and_nothing_is_requeued(
        replay):
    # Given llama3-70b training until 03:05, then its script's probe.close() at 03:05:40 (10 last steps, the final
    # checkpoint), and Slurm's job 4211 COMPLETED; no alarm event in the file
    path = SCENARIOS / "zm-finished-job-stall-ignored.jsonl"
    assert no_hand_written_alarm_event(path)
    result = replay(path)
    # Then the probe's last publish carried the completion marker with the final flush
    assert published(result, "Completed") == [("03:05:40", 1.0)]
    assert published(result, "Heartbeat")[-1] == ("03:05:40", 10.0)
    # ... the finished job's silence trips the stall alarm as a dead job's would (missing data is breaching)
    assert transitions(result) == [(STALL, "OK", "ALARM", "03:18:00")]
    # ... and Medic, reading the heartbeat back, finds the marker as the job's latest report: ignored, no requeue,
    # no command to the agent, no page, no restart spent or watched
    assert outcomes(result) == [("none", "ignored")]
    [record] = result.records
    assert (record["fault"], record["trigger"], record["paged"], record["timestamp"][11:19]) == (
        "completed", "alarm", False, "03:18:00")
    assert "completion marker (a clean close) at 2026-11-21 03:05 UTC at step 1450" in record["reason"]
    assert result.calls["cloudwatch:GetMetricData"] == 1
    assert SEND not in result.calls and result.slurm_commands == [] and result.pages == []
    assert result.incidents == []


def test_a_later_run_under_the_same_job_name_that_stalls_is_requeued_despite_the_earlier_marker(replay):
    # Given the run of (zm) finished at 03:05:40, then job 4300 runs llama3-70b again from 03:40 to 03:44 and hangs
    rerun = {"cluster": "pretrain-slurm", "id": 4300, "name": "llama3-70b"}
    result = replay([
        *TRAINING, clock(LAST_FLUSH), probe(steps=10, checkpoint=1450, close="clean"),
        {"sim": {"slurm_job": {**SLURM_JOB, "state": "COMPLETED"}}},
        clock(T_ALARM + minutes(39)), {"sim": {"slurm_job": rerun}},
        *every_minute(T_ALARM + minutes(40), T_ALARM + minutes(44), steps=40, step=1490, new_process=True),
        clock(T_ALARM + minutes(60)),
    ])
    # Then the first silence is the finished run's (ignored); the rerun's steps turn the alarm OK, and its own
    # silence is a stall: requeued through the agent, the earlier marker notwithstanding
    assert transitions(result) == [(STALL, "OK", "ALARM", "03:18:00"), (STALL, "ALARM", "OK", "03:41:00"),
                                   (STALL, "OK", "ALARM", "03:57:00")]
    assert outcomes(result) == [("none", "ignored"), ("none", "ignored"), *REQUEUED]
    assert [record["fault"] for record in result.records] == ["completed", "stalled", "stalled", "stalled"]
    assert [run["argv"] for run in result.slurm_commands] == [AGENT_RAN[0], ["scontrol", "requeue", "4300"]]
    assert result.pages == []


def test_a_script_that_raised_out_of_its_with_block_publishes_no_marker_and_its_stall_is_requeued(replay):
    # Given the same training, but the script's `with Probe(...)` block is left by an exception at 03:05:40
    result = replay([*TRAINING, clock(LAST_FLUSH), probe(steps=10, close="exception"), clock(T_ALARM + minutes(20))])
    # Then what was left is published, without the marker, and the stall is handled as a stall
    assert published(result, "Completed") == []
    assert published(result, "Heartbeat")[-1] == ("03:05:40", 10.0)
    assert transitions(result) == [(STALL, "OK", "ALARM", "03:18:00")]
    assert outcomes(result)[:2] == REQUEUED
    assert result.records[0]["fault"] == "stalled"


def test_a_requeued_job_with_nothing_left_to_train_concludes_completed_instead_of_paging_no_progress(replay):
    # Given the stall of (m): silent from 03:06, requeued at 03:18; the requeued run resumes from its final checkpoint,
    # has nothing left to train, and its script closes the probe cleanly at 03:24: the marker, no step
    result = replay([*TRAINING, clock(T_ALARM + minutes(24)), probe(new_process=True, close="clean"),
                     clock(T_ALARM + minutes(45))])
    # Then the 03:25 recovery check concludes the job finished: no no_progress page at the 03:40 deadline
    assert published(result, "Completed") == [("03:24:00", 1.0)]
    assert transitions(result) == [(STALL, "OK", "ALARM", "03:18:00")]
    assert outcomes(result) == [*REQUEUED, ("none", "ignored")]
    concluded = result.records[2]
    assert (concluded["fault"], concluded["trigger"], concluded["paged"], concluded["timestamp"][11:19]) == (
        "completed", "reconcile", False, "03:25:00")
    assert "Training finished after Medic's restart at 03:18 UTC" in concluded["reason"]
    assert result.pages == []
    [incident] = result.incidents
    assert (incident["incident_kind"], incident["resumed_at"], incident["resolved_at"]) == (
        "stall", None, "2026-11-21T03:25:00+00:00")


def test_the_probe_directive_refuses_an_unknown_close_and_stepping_a_closed_process(replay):
    # Given a close that is neither clean, exception nor killed, and a closed process stepping again without new_process
    result = replay([clock(T_ALARM), probe(steps=1, close="sigkill"), probe(steps=1, close="clean"),
                     probe(steps=5)])
    # Then both bad lines are named, and the closed process published nothing more
    assert [error.split(":")[0] for error in result.errors] == ["line 2", "line 4"]
    assert "'close' must be one of clean, exception, killed (got 'sigkill')" in result.errors[0]
    assert '"new_process": true' in result.errors[1]
    assert published(result, "Heartbeat") == [("03:00:00", 1.0)]
