"""Against moto's CloudWatch: what the probe publishes is findable by namespace, metric name and dimensions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import pytest
from medic_probe import Probe
from moto import mock_aws

REGION = "us-east-1"


@pytest.fixture
def cloudwatch(fake_aws_credentials):
    with mock_aws():
        yield boto3.client("cloudwatch", region_name=REGION)


def metric_value(cloudwatch, name: str, dimensions: dict[str, str], stat: str) -> list[float]:
    now = datetime.now(UTC)
    response = cloudwatch.get_metric_data(
        MetricDataQueries=[{
            "Id": "m",
            "MetricStat": {
                "Metric": {"Namespace": "Medic/Training", "MetricName": name,
                           "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()]},
                "Period": 3600, "Stat": stat,
            },
        }],
        StartTime=now - timedelta(minutes=30), EndTime=now + timedelta(minutes=30),
    )
    return response["MetricDataResults"][0]["Values"]


def listed(cloudwatch) -> set[tuple[str, frozenset]]:
    metrics = cloudwatch.list_metrics(Namespace="Medic/Training")["Metrics"]
    return {(m["MetricName"], frozenset((d["Name"], d["Value"]) for d in m["Dimensions"])) for m in metrics}


class TestAgainstMoto:
    def test_given_a_training_loop_when_flushed_then_cloudwatch_lists_every_metric_with_its_dimensions(
            self, cloudwatch):
        with Probe(job="llama3-70b", cluster="ml-cluster", node="ip-10-1-2-3", client=cloudwatch,
                   start=False) as probe:
            for step in range(1, 101):
                probe.step(step, loss=4.0 - step / 100, tokens_per_sec=2000.0)
            probe.step(101, loss=float("nan"))
            probe.checkpoint(100)
            assert probe.flush() is True

        job = frozenset({("Job", "llama3-70b")})
        job_cluster = frozenset({("Job", "llama3-70b"), ("Cluster", "ml-cluster")})
        job_node = frozenset({("Job", "llama3-70b"), ("Node", "ip-10-1-2-3")})
        expected = {(name, d) for name in ("Heartbeat", "Step", "Loss", "TokensPerSecond", "TokensPerSecondBaseline",
                                           "LastCheckpointStep", "NonFiniteLoss", "Session", "FirstStep", "Stalled")
                    for d in (job, job_cluster)}
        # the block ended without an exception: the probe's clean close adds the completion marker
        completed = {("Completed", job), ("Completed", job_cluster)}
        assert listed(cloudwatch) == expected | completed | {("TokensPerSecond", job_node)}
        assert metric_value(cloudwatch, "Heartbeat", {"Job": "llama3-70b"}, "Sum") == [101.0]
        assert metric_value(cloudwatch, "Step", {"Job": "llama3-70b", "Cluster": "ml-cluster"}, "Maximum") == [101.0]
        assert metric_value(cloudwatch, "NonFiniteLoss", {"Job": "llama3-70b"}, "Sum") == [1.0]
        assert metric_value(cloudwatch, "Loss", {"Job": "llama3-70b"}, "Average") == [pytest.approx(3.495)]
        assert metric_value(cloudwatch, "Loss", {"Job": "llama3-70b"}, "Minimum") == [3.0]
        assert metric_value(cloudwatch, "TokensPerSecond", {"Job": "llama3-70b", "Node": "ip-10-1-2-3"},
                            "Average") == [2000.0]
        assert metric_value(cloudwatch, "LastCheckpointStep", {"Job": "llama3-70b"}, "Maximum") == [100.0]
        assert metric_value(cloudwatch, "Completed", {"Job": "llama3-70b", "Cluster": "ml-cluster"}, "Maximum") == [1.0]

    def test_given_credentials_in_the_environment_when_no_client_is_injected_then_the_probe_makes_its_own(
            self, cloudwatch, monkeypatch):
        monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
        with Probe(job="gpt-small", node="algo-1", start=False) as probe:
            probe.step(1, loss=1.0)
            probe.step(2, loss=3.0)
            assert probe.flush() is True
            assert probe.enabled is True

        assert ("Loss", frozenset({("Job", "gpt-small")})) in listed(cloudwatch)
        assert metric_value(cloudwatch, "Loss", {"Job": "gpt-small"}, "Average") == [2.0]

    def test_given_a_restarted_job_when_both_runs_publish_then_they_share_one_metric_stream(self, cloudwatch):
        for run, first_step in enumerate((1, 51)):
            with Probe(job="llama3-70b", node=f"ip-10-0-0-{run}", client=cloudwatch, start=False) as probe:
                for step in range(first_step, first_step + 50):
                    probe.step(step)

        heartbeat_streams = {d for name, d in listed(cloudwatch) if name == "Heartbeat"}
        assert heartbeat_streams == {frozenset({("Job", "llama3-70b")})}
        assert metric_value(cloudwatch, "Heartbeat", {"Job": "llama3-70b"}, "Sum") == [100.0]
