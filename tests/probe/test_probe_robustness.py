"""The probe never hurts the training loop: bad values, NaN losses, failing publishes, no credentials, no boto3."""

from __future__ import annotations

import logging
import math
import sys
import threading
import time

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from hypothesis import given, settings
from hypothesis import strategies as st
from medic_probe import Probe

from tests.probe.conftest import FakeCloudWatch, by_metric, dims

JOB = dims(Job="llama3-70b")


def throttled() -> ClientError:
    return ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "PutMetricData")


class TestNonFiniteLoss:
    def test_given_nan_and_inf_losses_when_flushed_then_they_are_counted_and_never_sent(self, make_probe, fake):
        probe = make_probe(client=fake)
        for step, loss in enumerate([1.0, math.nan, 3.0, math.inf, -math.inf, 1e300, 5.0]):
            probe.step(step, loss=loss)

        probe.flush()  # the fake refuses NaN/inf/out-of-range values as CloudWatch does

        metrics = by_metric(fake.calls[0])
        assert metrics[("NonFiniteLoss", JOB)]["Value"] == 4
        assert metrics[("Loss", JOB)]["StatisticValues"] == {
            "SampleCount": 3.0, "Sum": 9.0, "Minimum": 1.0, "Maximum": 5.0}
        assert metrics[("Heartbeat", JOB)]["Value"] == 7

    def test_given_only_nan_losses_when_flushed_then_no_loss_metric_and_the_count(self, make_probe, fake):
        probe = make_probe(client=fake)
        for step in range(3):
            probe.step(step, loss=float("nan"))

        probe.flush()

        metrics = by_metric(fake.calls[0])
        assert ("Loss", JOB) not in metrics
        assert metrics[("NonFiniteLoss", JOB)]["Value"] == 3

    def test_given_a_nan_period_then_a_healthy_one_when_flushed_then_the_count_goes_back_to_zero(
            self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(1, loss=math.nan)
        probe.flush()
        probe.step(2, loss=0.5)

        probe.flush()

        assert by_metric(fake.calls[1])[("NonFiniteLoss", JOB)]["Value"] == 0

    def test_given_finite_losses_whose_sum_overflows_cloudwatch_range_when_flushed_then_the_mean_is_sent(
            self, make_probe, fake):
        probe = make_probe(client=fake)
        big = 2.0**359
        for step in range(4):
            probe.step(step, loss=big)

        probe.flush()

        assert by_metric(fake.calls[0])[("Loss", JOB)]["Value"] == big

    def test_given_tiny_losses_when_flushed_then_they_are_sent_as_zero(self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(1, loss=1e-200)

        probe.flush()

        assert by_metric(fake.calls[0])[("Loss", JOB)]["StatisticValues"]["Sum"] == 0.0

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.one_of(st.floats(), st.integers(-(10**6), 10**6), st.none()), max_size=50))
    def test_given_any_losses_when_flushed_then_every_value_is_accepted_and_every_loss_is_accounted_for(
            self, losses):
        fake = FakeCloudWatch()
        probe = Probe(job="llama3-70b", client=fake, start=False)
        for step, loss in enumerate(losses):
            probe.step(step, loss=loss, tokens_per_sec=loss)

        probe.flush()
        probe.close(completed=False)

        if not losses:
            assert fake.attempts == 0
            return
        metrics = by_metric(fake.calls[0])  # the fake validated every value: no NaN, no inf, in range
        given_losses = [float(x) for x in losses if x is not None]
        finite = [x for x in given_losses if abs(x) < 2.0**360]
        sent = metrics.get(("Loss", JOB))
        if sent is not None and "Value" in sent:  # the sum overflowed CloudWatch's range: the mean went alone
            assert finite and sent["Value"] == pytest.approx(sum(finite) / len(finite))
        else:
            assert (0 if sent is None else sent["StatisticValues"]["SampleCount"]) == len(finite)
        assert metrics[("NonFiniteLoss", JOB)]["Value"] == len(given_losses) - len(finite)
        assert metrics[("Heartbeat", JOB)]["Value"] == len(losses)


class TestBadInputs:
    def test_given_values_that_are_not_numbers_when_stepping_then_they_are_ignored_counted_and_never_raised(
            self, make_probe, fake):
        probe = make_probe(client=fake)

        probe.step(None)
        probe.step("12", loss="0.5")
        probe.step(3, loss=True, tokens_per_sec=object())
        probe.step(4, loss=[1.0], tokens_per_sec=-10.0)
        probe.step(5.5, loss=None, tokens_per_sec=None)
        probe.checkpoint("latest")
        probe.checkpoint(None)

        assert probe.bad_inputs == 10
        probe.flush()
        metrics = by_metric(fake.calls[0])
        assert metrics[("Heartbeat", JOB)]["Value"] == 5  # every call was a sign of life
        assert metrics[("Step", JOB)]["Value"] == 4
        assert ("Loss", JOB) not in metrics
        assert ("TokensPerSecond", JOB) not in metrics
        assert ("LastCheckpointStep", JOB) not in metrics

    def test_given_number_like_values_when_stepping_then_they_are_taken(self, make_probe, fake):
        class Scalar:  # numpy scalars, 0-d tensors (after .item() preferably)
            def __init__(self, value: float) -> None:
                self.value = value

            def __float__(self) -> float:
                return self.value

            def __index__(self) -> int:
                return int(self.value)

        probe = make_probe(client=fake)
        probe.step(Scalar(7), loss=Scalar(0.25), tokens_per_sec=3)
        probe.step(8.0, loss=1, tokens_per_sec=Scalar(5.0))
        probe.checkpoint(Scalar(8))

        probe.flush()

        assert probe.bad_inputs == 0
        metrics = by_metric(fake.calls[0])
        assert metrics[("Step", JOB)]["Value"] == 8
        assert metrics[("Loss", JOB)]["StatisticValues"]["Sum"] == 1.25
        assert metrics[("TokensPerSecond", JOB)]["StatisticValues"]["Sum"] == 8.0
        assert metrics[("LastCheckpointStep", JOB)]["Value"] == 8

    def test_given_a_value_whose_conversion_raises_when_stepping_then_it_is_ignored(self, make_probe, fake):
        class Broken:
            def __float__(self) -> float:
                raise RuntimeError("CUDA error: device-side assert triggered")

        probe = make_probe(client=fake)

        probe.step(1, loss=Broken())

        assert probe.bad_inputs == 1


class TestFailureIsolation:
    def test_given_a_client_that_raises_when_flushed_then_the_failure_is_counted_logged_and_not_raised(
            self, make_probe, caplog):
        fake = FakeCloudWatch(always_fail=throttled())
        probe = make_probe(client=fake)
        probe.step(1, loss=1.0)

        with caplog.at_level(logging.WARNING, logger="medic_probe"):
            assert probe.flush() is False

        assert probe.publish_failures == 1
        assert probe.published == 0
        assert any(r.name == "medic_probe" and "Throttling" in r.getMessage() for r in caplog.records)
        probe.step(2, loss=1.0)  # the training loop carries on
        assert probe.enabled is True

    def test_given_a_failed_period_when_the_next_flush_succeeds_then_it_carries_the_new_period_only(
            self, make_probe):
        fake = FakeCloudWatch(errors=[EndpointConnectionError(endpoint_url="https://monitoring")])
        probe = make_probe(client=fake)
        probe.step(1)
        probe.step(2)
        probe.flush()
        probe.step(3)

        assert probe.flush() is True

        assert probe.publish_failures == 1
        metrics = by_metric(fake.calls[0])
        assert metrics[("Heartbeat", JOB)]["Value"] == 1
        assert metrics[("Step", JOB)]["Value"] == 3

    def test_given_a_client_that_keeps_failing_when_the_thread_runs_then_it_keeps_trying_every_period(self):
        fake = FakeCloudWatch(errors=[throttled(), RuntimeError("boom"), throttled()])
        with Probe(job="llama3-70b", client=fake, period_seconds=0.02) as probe:
            deadline = time.monotonic() + 3
            while probe.published < 1 and time.monotonic() < deadline:
                probe.step(1, loss=1.0)
                time.sleep(0.005)

            assert probe.publish_failures == 3
            assert probe.published >= 1
            assert probe._thread.is_alive()

    def test_given_a_publish_that_hangs_when_steps_continue_then_step_does_not_wait_for_it(self, make_probe):
        release = threading.Event()
        entered = threading.Event()

        class HangingClient:
            def put_metric_data(self, **kwargs):
                entered.set()
                release.wait(2)

        probe = make_probe(client=HangingClient())
        probe.step(1)
        flusher = threading.Thread(target=probe.flush)
        flusher.start()
        assert entered.wait(1)

        started = time.perf_counter()
        for step in range(2, 1002):
            probe.step(step, loss=1.0)
        elapsed = time.perf_counter() - started

        release.set()
        flusher.join(2)
        assert elapsed < 0.1  # 1000 steps while the publish is stuck
        assert probe.bad_inputs == 0

    def test_given_a_publish_that_hangs_when_closing_then_close_gives_up_after_its_timeout(self, make_probe):
        release = threading.Event()
        entered = threading.Event()

        class HangingClient:
            def put_metric_data(self, **kwargs):
                entered.set()
                release.wait(2)

        probe = make_probe(client=HangingClient())
        probe.step(1)
        flusher = threading.Thread(target=probe.flush)
        flusher.start()
        assert entered.wait(1)
        probe.step(2)

        started = time.perf_counter()
        probe.close(timeout=0.1)
        elapsed = time.perf_counter() - started

        release.set()
        flusher.join(2)
        assert elapsed < 0.5


class TestNoCredentials:
    def test_given_no_credentials_when_flushed_then_the_probe_turns_itself_off_without_a_client(
            self, make_probe, no_aws_credentials, monkeypatch):
        created = []
        monkeypatch.setattr(boto3.session.Session, "client", lambda *a, **k: created.append(a) or FakeCloudWatch())
        probe = make_probe()
        probe.step(1, loss=1.0)

        assert probe.flush() is False

        assert created == []
        assert probe.enabled is False
        assert "credentials" in probe.disabled_reason
        assert probe.publish_failures == 0
        probe.step(2, loss=1.0)  # a no-op now
        probe.close()

    def test_given_no_credentials_when_the_thread_starts_then_it_decides_alone_and_exits(self, no_aws_credentials):
        probe = Probe(job="llama3-70b", period_seconds=60)
        probe._thread.join(2)

        assert not probe._thread.is_alive()
        assert probe.enabled is False
        probe.step(1, loss=1.0)
        probe.close()

    def test_given_credentials_but_no_region_when_flushed_then_the_probe_turns_itself_off(
            self, make_probe, fake_aws_credentials, monkeypatch):
        monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
        monkeypatch.delenv("AWS_REGION", raising=False)
        probe = make_probe()
        probe.step(1)

        assert probe.flush() is False

        assert probe.enabled is False
        assert "region" in probe.disabled_reason

    def test_given_boto3_not_installed_when_flushed_then_the_probe_turns_itself_off(self, make_probe, monkeypatch):
        monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 raises ImportError
        probe = make_probe()
        probe.step(1)

        assert probe.flush() is False

        assert probe.enabled is False
        assert "boto3" in probe.disabled_reason

    def test_given_boto3_not_installed_and_emf_when_flushed_then_it_still_publishes(
            self, make_probe, monkeypatch, capsys):
        monkeypatch.setitem(sys.modules, "boto3", None)
        probe = make_probe(emf=True)
        probe.step(1)

        assert probe.flush() is True

        assert '"Heartbeat":1' in capsys.readouterr().out

    def test_given_a_fresh_interpreter_when_the_probe_is_imported_then_boto3_is_not(self):
        import subprocess

        from tests.probe.conftest import PROBE_DIR

        code = "import sys, medic_probe; print('boto3' in sys.modules, 'botocore' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={"PYTHONPATH": str(PROBE_DIR)})
        assert out.stdout.strip() == "False False"
