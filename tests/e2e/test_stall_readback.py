"""Specification: a stall ALARM is checked against the heartbeat before Medic acts, end to end: the probe's
metrics in the emulated CloudWatch, the alarm through the synthesized rule, the alarm handler reading the
heartbeat back (GetMetricData) and requeuing nothing while the job steps."""

from __future__ import annotations

from sim.scenarios.generate import SLURM_JOB, T_ALARM, alarm, clock, minutes, probe
from tests.e2e.conftest import outcomes

SEND = "sqs:SendMessage"


def test_a_stall_alarm_while_the_probe_counts_steps_requeues_nothing_and_records_the_numbers(replay):
    # Given llama3-70b stepping at 03:00 and again at 03:05 (20 steps, now at step 1260)
    result = replay([
        clock(T_ALARM), {"sim": {"slurm_job": SLURM_JOB}}, {"sim": {"agent": {"cluster": "pretrain-slurm",
                                                                               "heartbeat": True}}},
        probe(steps=40, step=1240, loss=1.87, tokens_per_sec=41000.0, checkpoint=1200),
        clock(T_ALARM + minutes(5)), probe(steps=20, step=1260, loss=1.86, tokens_per_sec=41000.0),
        # When its stall alarm enters ALARM at 03:11 all the same (a late datapoint, a gap in publishing)
        alarm("stall", "ALARM", T_ALARM + minutes(11)),
    ])
    # Then Medic read the heartbeat back and left the job alone: no command to the agent, no page
    assert outcomes(result) == [("none", "ignored")]
    [record] = result.records
    assert (record["fault"], record["paged"]) == ("stalled", False)
    assert "20 steps in the last 10 min" in record["reason"] and "step 1260" in record["reason"]
    assert result.calls["cloudwatch:GetMetricData"] == 1
    assert SEND not in result.calls and result.slurm_commands == [] and result.pages == []


def test_a_stall_alarm_of_a_job_that_has_not_started_requeues_nothing(replay):
    # Given llama3-70b configured and its agent alive, but the job not started: its probe never reported
    result = replay([
        clock(T_ALARM), {"sim": {"slurm_job": SLURM_JOB}}, {"sim": {"agent": {"cluster": "pretrain-slurm",
                                                                               "heartbeat": True}}},
        # When its stall alarm enters ALARM (missing data is breaching for a stall alarm, so silence before the
        # first step trips it too, as on a new deploy)
        alarm("stall", "ALARM", T_ALARM + minutes(11)),
    ])
    # Then Medic read the heartbeat back over the window and the day before it (one GetMetricData), found no
    # step ever, and left the job alone: no command, no restart spent, no page
    assert outcomes(result) == [("none", "ignored")]
    assert "has not started" in result.records[0]["reason"]
    assert result.calls["cloudwatch:GetMetricData"] == 1
    assert SEND not in result.calls and result.slurm_commands == [] and result.pages == []
