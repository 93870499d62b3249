"""Specification: Medic's training alarms end to end — the probe's metrics in CloudWatch, the alarm's
state change through the synthesized rule to the alarm handler, the requeue through the Slurm agent,
and the proof-of-recovery schedule reading the metrics as the clock passes."""

from __future__ import annotations

from sim.scenario import SCENARIOS
from sim.scenarios.generate import T_ALARM, alarm
from tests.e2e.conftest import outcomes

SEND = "sqs:SendMessage"
INCIDENT = "job:slurm:pretrain-slurm:llama3-70b"
REQUEUED = [("requeue_job", "deferred"), ("requeue_job", "executed")]
AGENT_RAN = [["squeue", "--noheader", "--format=%i", "--name=llama3-70b"], ["scontrol", "requeue", "4211"]]


def recovery_runs(result) -> int:
    return sum(count for rule, count in result.schedule_runs.items() if "RecoverySchedule" in rule)


def test_m_a_stalled_job_is_requeued_and_its_recovery_is_recorded_without_a_page(replay):
    # Given llama3-70b training, then hung (the probe publishes no step), and its stall alarm at 03:11
    result = replay(SCENARIOS / "m-stall-recovered.jsonl")
    # Then the alarm requeues it through the agent (squeue by name, scontrol requeue 4211) ...
    assert outcomes(result) == [*REQUEUED, ("none", "ignored"), ("none", "ignored")]
    assert [run["argv"] for run in result.slurm_commands] == AGENT_RAN
    assert result.calls[SEND] == 1
    deferred, executed, recovered, closed = result.records
    assert {r["incident"] for r in result.records} == {INCIDENT}
    assert (deferred["trigger"], deferred["fault"], deferred["timestamp"][11:19]) == ("alarm", "stalled", "03:11:00")
    # ... and the 03:20 recovery check sees the steps the resumed job reported at 03:19: recovered, quietly
    assert (recovered["fault"], recovered["trigger"], recovered["timestamp"][11:19]) == (
        "recovered", "reconcile", "03:20:00")
    assert "25 steps in 9 min" in recovered["reason"] and "now at step 1225" in recovered["reason"]
    assert recovery_runs(result) == 4  # 03:05, 03:10, 03:15 (still waiting), 03:20
    assert "incident closed" in closed["reason"]
    assert result.pages == [] and not any(r["paged"] for r in result.records)


def test_n_no_progress_after_the_requeue_pages_once_and_stops_the_blind_restarts(replay):
    # Given the same stall, but the requeued job never reports a step, and the alarm later re-enters ALARM
    result = replay(SCENARIOS / "n-stall-no-progress.jsonl")
    # Then: one requeue, one no_progress page at the first check past the 20-minute deadline, and the next
    # ALARM is suppressed without a second requeue or page
    assert outcomes(result) == [*REQUEUED, ("none", "failed"), ("requeue_job", "suppressed")]
    no_progress, suppressed = result.records[2:]
    assert (no_progress["fault"], no_progress["paged"], no_progress["timestamp"][11:19]) == (
        "no_progress", True, "03:35:00")
    assert (suppressed["fault"], suppressed["paged"], suppressed["timestamp"][11:19]) == ("stalled", False, "03:52:00")
    assert "did not bring training back" in suppressed["reason"]
    assert len(result.pages) == 1 and result.pages[0]["record"]["fault"] == "no_progress"
    assert result.calls[SEND] == 1 and [run["argv"] for run in result.slurm_commands] == AGENT_RAN
    assert recovery_runs(result) == 12  # to 04:00: nothing more is concluded once the watch ended


def test_o_divergence_pages_once_with_the_last_checkpoint_and_restarts_nothing(replay):
    # Given the loss turning NaN at 03:02 (NonFiniteLoss 60) after a checkpoint at step 1200
    result = replay(SCENARIOS / "o-divergence.jsonl")
    # Then one page naming the checkpoint to roll back to; nothing requeued, restarted or replaced
    assert outcomes(result) == [("none", "deferred")]
    assert (result.records[0]["fault"], result.records[0]["paged"]) == ("diverged", True)
    assert len(result.pages) == 1
    assert "Last checkpoint:  step 1200" in result.pages[0]["message"]
    assert result.slurm_commands == [] and result.training_jobs == []
    assert SEND not in result.calls and "sagemaker:CreateTrainingJob" not in result.calls
    non_finite = [p for p in result.published if p["MetricName"] == "NonFiniteLoss" and p["Value"]]
    assert [(p["Timestamp"].strftime("%H:%M"), p["Value"]) for p in non_finite] == [("03:02", 60)]


def test_p_the_same_alarm_delivered_three_times_acts_once(replay):
    # Given the stall ALARM delivered twice as is and once more under another event id (same transition)
    result = replay(SCENARIOS / "p-alarm-repeat-delivery.jsonl")
    # Then one requeue, two duplicates, one command to the agent
    assert outcomes(result) == [*REQUEUED, ("none", "duplicate"), ("none", "duplicate")]
    assert len({r["event_id"] for r in result.records}) == 2
    assert result.calls[SEND] == 1 and [run["argv"] for run in result.slurm_commands] == AGENT_RAN
    assert result.pages == []


def test_only_medic_alarms_entering_alarm_or_ok_reach_the_handler(replay):
    # Given an INSUFFICIENT_DATA transition and another team's alarm under Medic's prefix
    result = replay([alarm("stall", "INSUFFICIENT_DATA", T_ALARM),
                     alarm("stall", "ALARM", T_ALARM, job="someone-elses-job")])
    # Then the rule delivers neither: no handler runs
    assert result.lines == [] and result.invocations == {}
