"""The probe aggregates steps in memory and publishes one PutMetricData per period, from rank 0 only."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
import time_machine
from medic_probe import Probe

from tests.probe.conftest import FakeCloudWatch, by_metric, dims

JOB = dims(Job="llama3-70b")
JOB_CLUSTER = dims(Job="llama3-70b", Cluster="ml-cluster")
JOB_NODE = dims(Job="llama3-70b", Node="ip-10-1-2-3")


class TestBatching:
    def test_given_many_steps_in_a_period_when_flushed_then_one_call_carries_the_period_aggregates(
            self, make_probe, fake):
        probe = make_probe(client=fake)
        for step in range(1, 1001):
            probe.step(step, loss=float(step), tokens_per_sec=1000.0 + step)

        assert probe.flush() is True

        assert len(fake.calls) == 1
        call = fake.calls[0]
        assert call["Namespace"] == "Medic/Training"
        metrics = by_metric(call)
        assert metrics[("Heartbeat", JOB)]["Value"] == 1000
        assert metrics[("Heartbeat", JOB)]["Unit"] == "Count"
        assert metrics[("Step", JOB)]["Value"] == 1000
        assert metrics[("NonFiniteLoss", JOB)]["Value"] == 0
        assert metrics[("Loss", JOB)]["StatisticValues"] == {
            "SampleCount": 1000.0, "Sum": 500500.0, "Minimum": 1.0, "Maximum": 1000.0}
        tps = metrics[("TokensPerSecond", JOB)]["StatisticValues"]
        assert tps["Sum"] / tps["SampleCount"] == pytest.approx(1500.5)
        assert (tps["Minimum"], tps["Maximum"]) == (1001.0, 2000.0)
        assert metrics[("TokensPerSecond", JOB)]["Unit"] == "Count/Second"
        assert metrics[("TokensPerSecond", JOB_NODE)]["StatisticValues"] == tps
        assert metrics[("TokensPerSecondBaseline", JOB)]["Value"] == pytest.approx(1500.5)  # first period
        assert metrics[("Session", JOB)]["Value"] == probe.session
        assert set(metrics) == {("Heartbeat", JOB), ("Step", JOB), ("NonFiniteLoss", JOB), ("Loss", JOB),
                                ("TokensPerSecond", JOB), ("TokensPerSecondBaseline", JOB),
                                ("TokensPerSecond", JOB_NODE), ("Session", JOB), ("FirstStep", JOB), ("Stalled", JOB)}
        assert metrics[("FirstStep", JOB)]["Value"] == 1  # the first step this process reported
        assert metrics[("Stalled", JOB)] | {"Timestamp": None} == {
            "MetricName": "Stalled", "Dimensions": [{"Name": "Job", "Value": "llama3-70b"}], "Timestamp": None,
            "Unit": "None", "Value": 0, "StorageResolution": 1}  # the verdict, at high resolution

    def test_given_a_cluster_when_flushed_then_job_metrics_go_under_job_and_job_cluster_and_throughput_per_node(
            self, make_probe, fake):
        probe = make_probe(client=fake, cluster="ml-cluster")
        probe.step(7, loss=2.5, tokens_per_sec=10.0)
        probe.checkpoint(7)

        probe.flush()

        metrics = by_metric(fake.calls[0])
        for name in ("Heartbeat", "Step", "NonFiniteLoss", "Loss", "TokensPerSecond", "LastCheckpointStep"):
            assert (name, JOB) in metrics
            assert (name, JOB_CLUSTER) in metrics
        assert ("TokensPerSecond", JOB_NODE) in metrics
        assert ("TokensPerSecondBaseline", JOB_CLUSTER) in metrics
        assert ("Session", JOB) in metrics and ("Session", JOB_CLUSTER) in metrics
        assert ("FirstStep", JOB_CLUSTER) in metrics and ("Stalled", JOB_CLUSTER) in metrics
        assert len(metrics) == 21

    def test_given_two_periods_when_flushed_each_time_then_aggregates_reset_but_step_and_checkpoint_persist(
            self, make_probe, fake):
        probe = make_probe(client=fake)
        for step in range(10):
            probe.step(step, loss=1.0)
        probe.checkpoint(9)
        probe.flush()
        probe.step(10, loss=3.0)
        probe.step(11, loss=5.0)

        probe.flush()

        second = by_metric(fake.calls[1])
        assert second[("Heartbeat", JOB)]["Value"] == 2
        assert second[("Step", JOB)]["Value"] == 11
        assert second[("Loss", JOB)]["StatisticValues"]["Sum"] == 8.0
        assert second[("LastCheckpointStep", JOB)]["Value"] == 9
        assert ("TokensPerSecond", JOB) not in second

    def test_given_steady_throughput_then_a_sudden_drop_when_flushed_then_the_baseline_lags_behind(
            self, make_probe, fake):
        # Given 30 periods at 1000 tokens/s
        probe = make_probe(client=fake)
        for period in range(30):
            probe.step(period, tokens_per_sec=1000.0)
            probe.flush()
        # When throughput halves for one period
        probe.step(30, tokens_per_sec=500.0)
        probe.flush()
        # Then the baseline still reads close to the recent level, so TokensPerSecond / baseline < 0.6
        last = by_metric(fake.calls[-1])
        baseline = last[("TokensPerSecondBaseline", JOB)]["Value"]
        assert 950 < baseline < 1000
        tps = last[("TokensPerSecond", JOB)]["StatisticValues"]
        assert tps["Sum"] / tps["SampleCount"] / baseline < 0.6

    def test_given_a_period_without_throughput_when_flushed_then_no_baseline_is_sent(self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(1, loss=1.0)
        probe.flush()
        assert ("TokensPerSecondBaseline", JOB) not in by_metric(fake.calls[0])

    def test_given_no_step_yet_when_flushed_then_nothing_is_published(self, make_probe, fake):
        probe = make_probe(client=fake)  # the model is still loading

        assert probe.flush() is False

        assert fake.attempts == 0

    def test_given_training_started_and_then_stalled_when_flushed_then_heartbeat_zero_and_the_last_step(
            self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(41, loss=1.0)
        probe.flush()

        probe.flush()  # a period without a step: the hang is a 0, not a gap

        stalled = by_metric(fake.calls[1])
        assert stalled[("Heartbeat", JOB)]["Value"] == 0
        assert stalled[("Step", JOB)]["Value"] == 41
        assert stalled[("NonFiniteLoss", JOB)]["Value"] == 0
        assert ("Loss", JOB) not in stalled

    def test_given_a_checkpoint_when_flushed_then_last_checkpoint_step_is_published(self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(100)
        probe.checkpoint(100)
        probe.step(101)
        probe.checkpoint(200)

        probe.flush()

        assert by_metric(fake.calls[0])[("LastCheckpointStep", JOB)]["Value"] == 200

    def test_given_a_custom_namespace_when_flushed_then_it_is_used(self, make_probe, fake):
        probe = make_probe(client=fake, namespace="Team/Training")
        probe.step(1)

        probe.flush()

        assert fake.calls[0]["Namespace"] == "Team/Training"

    def test_given_datapoints_when_flushed_then_they_carry_a_utc_timestamp_of_now(self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(1)
        with time_machine.travel(datetime(2026, 3, 4, 5, 6, 30, tzinfo=UTC), tick=False):
            probe.flush()

        stamps = {d["Timestamp"] for d in fake.calls[0]["MetricData"]}
        assert stamps == {datetime(2026, 3, 4, 5, 6, 30, tzinfo=UTC)}


class TestLifecycle:
    def test_given_unflushed_steps_when_closed_then_a_final_flush_publishes_them(self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(5, loss=1.0)

        probe.close()

        assert by_metric(fake.calls[0])[("Heartbeat", JOB)]["Value"] == 1
        assert probe.enabled is False

    def test_given_nothing_new_since_the_last_flush_when_closed_then_only_the_completion_marker_is_sent(
            self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(5)
        probe.flush()

        probe.close()
        probe.close()

        assert len(fake.calls) == 2
        # the marker, whose it is, and that a finished job is no stall (the hang alarm goes OK)
        assert set(by_metric(fake.calls[1])) == {("Completed", JOB), ("Session", JOB), ("Stalled", JOB)}
        assert by_metric(fake.calls[1])[("Stalled", JOB)]["Value"] == 0

    def test_given_nothing_new_since_the_last_flush_when_closed_as_not_completed_then_no_extra_call(
            self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(5)
        probe.flush()

        probe.close(completed=False)

        assert len(fake.calls) == 1

    def test_given_a_closed_probe_when_stepping_then_nothing_is_recorded_or_raised(self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.close()
        closing_calls = fake.attempts  # the completion marker (test_probe_completion.py)

        probe.step(1, loss=1.0)
        probe.checkpoint(1)

        assert probe.flush() is False
        assert fake.attempts == closing_calls == 1

    def test_given_a_with_block_when_it_exits_then_the_probe_flushes_and_closes(self, fake):
        with Probe(job="llama3-70b", client=fake, start=False) as probe:
            probe.step(3, tokens_per_sec=5.0)

        assert len(fake.calls) == 1
        assert probe.enabled is False

    def test_given_the_background_thread_when_periods_pass_then_it_flushes_by_itself(self, fake):
        with Probe(job="llama3-70b", client=fake, period_seconds=0.05) as probe:
            deadline = time.monotonic() + 3
            while len(fake.calls) < 2 and time.monotonic() < deadline:
                probe.step(1, loss=1.0)
                time.sleep(0.005)

            assert len(fake.calls) >= 2
            assert probe._thread is not None and probe._thread.daemon

        assert not probe._thread.is_alive()

    @pytest.mark.parametrize(("now_second", "expected"), [(10.0, 20.0), (0.0, 30.0), (45.0, 45.0), (29.9, 60.1)])
    def test_given_a_60s_period_when_scheduling_then_flushes_land_at_half_past_each_minute(self, now_second, expected):
        probe = Probe(job="llama3-70b", client=FakeCloudWatch(), start=False)
        instant = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp() + now_second
        with time_machine.travel(instant, tick=False):
            assert probe._delay() == pytest.approx(expected)
        probe.close()

    def test_given_a_non_positive_period_when_constructing_then_it_is_refused_up_front(self):
        with pytest.raises(ValueError, match="period_seconds"):
            Probe(job="j", period_seconds=0, start=False)

    def test_given_an_empty_job_when_constructing_then_it_is_refused_up_front(self):
        with pytest.raises(ValueError, match="job"):
            Probe(job="  ", start=False)


class TestRankGating:
    def test_given_rank_1_when_stepping_then_nothing_is_recorded_and_no_thread_runs(self, make_probe, fake):
        probe = make_probe(client=fake, rank=1, start=True)
        for step in range(100):
            probe.step(step, loss=1.0, tokens_per_sec=1.0)
        probe.checkpoint(99)

        assert probe.flush() is False
        assert probe.enabled is False
        assert probe._thread is None
        assert fake.attempts == 0

    @pytest.mark.parametrize(("env", "rank"), [
        ({"RANK": "3", "SLURM_PROCID": "1"}, 3),
        ({"SLURM_PROCID": "2"}, 2),
        ({"RANK": "not-a-rank", "SLURM_PROCID": "5"}, 5),
        ({}, 0),
    ])
    def test_given_launcher_environment_when_no_rank_is_passed_then_rank_comes_from_it(
            self, make_probe, fake, monkeypatch, env, rank):
        monkeypatch.delenv("RANK", raising=False)
        monkeypatch.delenv("SLURM_PROCID", raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)

        probe = make_probe(client=fake)

        assert probe.rank == rank
        assert probe.enabled is (rank == 0)

    def test_given_all_ranks_when_a_non_zero_rank_flushes_then_only_its_node_throughput_is_published(
            self, make_probe, fake):
        probe = make_probe(client=fake, rank=5, all_ranks=True, cluster="ml-cluster", node="ip-10-9-9-9")
        probe.step(1, loss=1.0, tokens_per_sec=100.0)
        probe.step(2, loss=1.0, tokens_per_sec=50.0)

        probe.flush()

        metrics = by_metric(fake.calls[0])
        assert list(metrics) == [("TokensPerSecond", dims(Job="llama3-70b", Node="ip-10-9-9-9"))]
        assert metrics[("TokensPerSecond", dims(Job="llama3-70b", Node="ip-10-9-9-9"))]["StatisticValues"][
            "Minimum"] == 50.0

    def test_given_all_ranks_and_no_throughput_when_a_non_zero_rank_flushes_then_no_call_is_made(
            self, make_probe, fake):
        probe = make_probe(client=fake, rank=5, all_ranks=True)
        probe.step(1, loss=1.0)

        assert probe.flush() is False
        assert fake.attempts == 0

    def test_given_slurm_when_no_node_is_passed_then_the_node_is_slurms_node_name(self, fake, monkeypatch):
        monkeypatch.setenv("SLURMD_NODENAME", "ip-10-1-77-8")

        with Probe(job="llama3-70b", client=fake, start=False) as probe:
            assert probe.node == "ip-10-1-77-8"

    def test_given_no_scheduler_when_no_node_is_passed_then_the_node_is_the_short_hostname(self, fake, monkeypatch):
        monkeypatch.delenv("SLURMD_NODENAME", raising=False)
        monkeypatch.delenv("SM_CURRENT_HOST", raising=False)
        monkeypatch.setattr("socket.gethostname", lambda: "ip-10-0-0-1.ec2.internal")

        with Probe(job="llama3-70b", client=fake, start=False) as probe:
            assert probe.node == "ip-10-0-0-1"


class TestSession:
    """Each process's probe has its own session, published with the job's metrics at every flush (issue 28, item 6):
    Medic counts a heartbeat only with exactly one session in its minute, and a recovery only from a new one."""

    def test_given_a_process_when_flushed_twice_then_both_flushes_carry_its_one_session(self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(1)
        probe.flush()
        probe.flush()  # a period without steps: Heartbeat 0, and the same session
        sessions = [by_metric(call)[("Session", JOB)]["Value"] for call in fake.calls]
        assert sessions == [probe.session, probe.session] and 1 <= probe.session <= 2**31
        assert by_metric(fake.calls[0])[("Session", JOB)]["Unit"] == "None"

    def test_given_a_restarted_process_then_its_probe_has_a_new_session(self, make_probe):
        assert len({make_probe().session for _ in range(20)}) == 20

    def test_given_a_rank_that_publishes_only_its_node_then_it_sends_no_session(self, make_probe, fake):
        probe = make_probe(client=fake, rank=3, all_ranks=True)
        probe.step(1, tokens_per_sec=10.0)
        probe.flush()
        assert ("Session", JOB) not in by_metric(fake.calls[0])
