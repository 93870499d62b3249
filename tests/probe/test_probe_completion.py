"""The completion marker: a clean close() publishes `Completed` = 1 once (rank 0, the job's dimensions); a close with
an exception in flight, a `with` block left by an exception, and the atexit hook publish none.

Medic's stall alarm fires on a finished job too (its Heartbeat stops, and missing data is breaching): the marker is
how Medic tells "finished" from "died". A marker where there was no clean finish would hide a real failure, so only
an unmistakably clean end publishes it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from medic_probe import Probe

from tests.probe.conftest import FakeCloudWatch, by_metric, dims
from tests.probe.test_probe_emf import assert_valid_emf, emf_lines

JOB = dims(Job="llama3-70b")
JOB_CLUSTER = dims(Job="llama3-70b", Cluster="ml-cluster")
JOB_NODE = dims(Job="llama3-70b", Node="ip-10-1-2-3")


def markers(fake: FakeCloudWatch) -> list[dict]:
    return [datum for call in fake.calls for datum in call["MetricData"] if datum["MetricName"] == "Completed"]


class TestACleanClose:
    def test_given_steps_since_the_last_flush_when_closed_then_one_call_carries_them_and_the_marker(
            self, make_probe, fake):
        probe = make_probe(client=fake, cluster="ml-cluster")
        probe.step(41, loss=1.5, tokens_per_sec=100.0)

        probe.close()

        [call] = fake.calls
        metrics = by_metric(call)
        assert metrics[("Heartbeat", JOB)]["Value"] == 1 and metrics[("Step", JOB)]["Value"] == 41
        for job_dims in (JOB, JOB_CLUSTER):
            marker = metrics[("Completed", job_dims)]
            assert (marker["Value"], marker["Unit"]) == (1, "Count")
            assert marker["Timestamp"] == metrics[("Heartbeat", JOB)]["Timestamp"]
        assert ("Completed", JOB_NODE) not in metrics
        assert probe.completed is True and probe.enabled is False

    def test_given_a_probe_that_never_stepped_when_closed_then_it_still_says_it_finished(self, make_probe, fake):
        # A job restarted from its final checkpoint has nothing left to train: it ends cleanly without a step
        probe = make_probe(client=fake)

        probe.close()

        [call] = fake.calls
        assert set(by_metric(call)) == {("Completed", JOB), ("Session", JOB)}  # the marker, and whose
        assert by_metric(call)[("Session", JOB)]["Value"] == probe.session
        assert probe.completed is True

    def test_given_a_closed_probe_when_closed_again_then_the_marker_is_not_sent_twice(self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(1)

        probe.close()
        probe.close()
        probe.close(completed=True)

        assert len(markers(fake)) == 1

    def test_given_a_with_block_left_normally_when_it_exits_then_the_marker_is_sent(self, fake):
        with Probe(job="llama3-70b", client=fake, start=False) as probe:
            probe.step(3)

        assert len(markers(fake)) == 1 and probe.completed is True

    def test_given_sys_exit_0_inside_a_with_block_when_it_exits_then_that_is_a_clean_end(self, fake):
        with pytest.raises(SystemExit), Probe(job="llama3-70b", client=fake, start=False) as probe:
            probe.step(3)
            sys.exit(0)

        assert len(markers(fake)) == 1


class TestNotACleanClose:
    def test_given_an_exception_leaving_a_with_block_when_it_exits_then_no_marker(self, fake):
        with pytest.raises(RuntimeError), Probe(job="llama3-70b", client=fake, start=False) as probe:
            probe.step(3)
            raise RuntimeError("NCCL error: unhandled system error")

        assert markers(fake) == [] and probe.completed is False
        assert by_metric(fake.calls[0])[("Heartbeat", JOB)]["Value"] == 1  # what was left is still published
        assert probe.enabled is False

    @pytest.mark.parametrize("status", [1, 2, "fatal: bad config"])
    def test_given_sys_exit_with_a_failure_status_inside_a_with_block_when_it_exits_then_no_marker(
            self, fake, status):
        with pytest.raises(SystemExit), Probe(job="llama3-70b", client=fake, start=False) as probe:
            probe.step(3)
            sys.exit(status)

        assert markers(fake) == []

    def test_given_close_in_an_except_block_when_it_runs_then_no_marker(self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(3)
        try:
            raise OSError("data loader died")
        except OSError:
            probe.close()

        assert markers(fake) == [] and len(fake.calls) == 1

    def test_given_close_in_a_finally_block_while_an_exception_propagates_when_it_runs_then_no_marker(
            self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(3)

        with pytest.raises(KeyboardInterrupt):
            try:
                raise KeyboardInterrupt
            finally:
                probe.close()

        assert markers(fake) == []

    def test_given_completed_false_when_closed_then_no_marker_even_without_an_exception(self, make_probe, fake):
        # A script that stops early on a preemption signal it handled, and wants to be restarted
        probe = make_probe(client=fake)
        probe.step(3)

        probe.close(completed=False)

        assert markers(fake) == [] and by_metric(fake.calls[0])[("Heartbeat", JOB)]["Value"] == 1

    def test_given_completed_true_when_closed_while_an_exception_is_handled_then_the_caller_decides(
            self, make_probe, fake):
        probe = make_probe(client=fake)
        try:
            raise StopIteration  # e.g. the loader ran out: the script treats it as the end of training
        except StopIteration:
            probe.close(completed=True)

        assert len(markers(fake)) == 1

    def test_given_a_rank_other_than_0_when_closed_cleanly_then_it_publishes_no_marker(self, make_probe, fake):
        probe = make_probe(client=fake, rank=3, all_ranks=True)
        probe.step(1, tokens_per_sec=10.0)

        probe.close()

        assert set(by_metric(fake.calls[0])) == {("TokensPerSecond", JOB_NODE)}
        assert probe.completed is False

    def test_given_the_closing_publish_fails_when_closed_then_completed_stays_false(self, make_probe):
        failing = FakeCloudWatch(always_fail=ConnectionError("endpoint unreachable"))
        probe = make_probe(client=failing)
        probe.step(1)

        probe.close()

        assert probe.completed is False and probe.publish_failures == 1

    def test_given_a_probe_without_credentials_when_closed_then_nothing_is_published(
            self, make_probe, no_aws_credentials):
        probe = make_probe()
        probe.step(1)
        probe.flush()  # finds no credentials: the probe turns itself off

        probe.close()

        assert probe.enabled is False and probe.completed is False


class TestEmf:
    def test_given_emf_when_closed_cleanly_then_the_line_carries_the_marker_under_the_job_dimensions(
            self, make_probe, capsys):
        probe = make_probe(emf=True, cluster="ml-cluster")
        probe.step(7, loss=1.0, tokens_per_sec=5.0)

        probe.close()

        (doc,) = emf_lines(capsys.readouterr().out)
        assert_valid_emf(doc)
        job_directive = doc["_aws"]["CloudWatchMetrics"][0]
        assert job_directive["Dimensions"] == [["Job"], ["Job", "Cluster"]]
        assert {"Name": "Completed", "Unit": "Count"} in job_directive["Metrics"]
        assert doc["Completed"] == 1 and doc["Heartbeat"] == 1

    def test_given_emf_and_nothing_new_when_closed_cleanly_then_the_line_carries_the_marker_alone(
            self, make_probe, capsys):
        probe = make_probe(emf=True)
        probe.step(7)
        probe.flush()
        capsys.readouterr()

        probe.close()

        (doc,) = emf_lines(capsys.readouterr().out)
        assert_valid_emf(doc)
        assert [d["Metrics"] for d in doc["_aws"]["CloudWatchMetrics"]] == [
            [{"Name": "Stalled", "Unit": "None", "StorageResolution": 1}, {"Name": "Completed", "Unit": "Count"},
             {"Name": "Session", "Unit": "None"}]]
        assert doc["Stalled"] == 0  # a finished job is no stall


def run_script(body: str) -> list[dict]:
    """A training script in a real interpreter (EMF to stdout): its probe lines, however it ended."""
    script = "from medic_probe import Probe\nimport sys\n" + body
    env = {**os.environ, "PYTHONPATH": str(os.path.dirname(os.path.dirname(sys.modules["medic_probe"].__file__))),
           "RANK": "0"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=30,
                            check=False)
    return emf_lines(result.stdout)


class TestAtInterpreterExit:
    @pytest.mark.parametrize(("ending", "marked"), [
        ("probe.close()\n", True),                                    # the script says it finished
        ("", False),                                                  # never closed: atexit publishes, no marker
        ("raise RuntimeError('rank 3 lost')\n", False),               # unhandled exception, then atexit
        ("sys.exit(1)\n", False),                                     # a failure status, then atexit
        ("import os; os._exit(0)\n", False),                          # no atexit at all: nothing left is published
    ])
    def test_given_how_the_script_ends_when_the_interpreter_exits_then_only_a_clean_close_marks_completion(
            self, ending, marked):
        docs = run_script("probe = Probe(job='exit-job', emf=True, period_seconds=3600)\n"
                          "for step in range(5):\n"
                          "    probe.step(step, loss=1.5)\n" + ending)

        assert any("Completed" in doc for doc in docs) is marked
        if ending.startswith("import os"):
            assert docs == []
        else:
            assert [doc.get("Heartbeat") for doc in docs] == [5]

    def test_given_a_with_block_that_raises_in_a_script_when_it_ends_then_no_marker(self):
        docs = run_script("with Probe(job='exit-job', emf=True, period_seconds=3600) as probe:\n"
                          "    probe.step(1)\n"
                          "    raise MemoryError('CUDA out of memory')\n")

        assert len(docs) == 1 and "Completed" not in docs[0]
