"""emf=True: one CloudWatch Embedded Metric Format JSON line on stdout per flush, no AWS SDK involved."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

from tests.probe.conftest import PROBE_DIR


def emf_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def assert_valid_emf(doc: dict) -> None:
    """The EMF specification's rules that CloudWatch Logs checks before extracting metrics."""
    meta = doc["_aws"]
    assert isinstance(meta["Timestamp"], int) and meta["Timestamp"] > 1_600_000_000_000  # epoch milliseconds
    assert meta["CloudWatchMetrics"]
    for directive in meta["CloudWatchMetrics"]:
        assert directive["Namespace"]
        for dimension_set in directive["Dimensions"]:
            assert 1 <= len(dimension_set) <= 30
            for name in dimension_set:
                assert isinstance(doc[name], str) and doc[name]
        assert 1 <= len(directive["Metrics"]) <= 100
        for metric in directive["Metrics"]:
            value = doc[metric["Name"]]
            assert isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class TestEmf:
    def test_given_emf_when_flushed_then_one_json_line_with_job_and_node_directives(self, make_probe, capsys):
        probe = make_probe(emf=True, cluster="ml-cluster")
        probe.step(10, loss=2.0, tokens_per_sec=100.0)
        probe.step(11, loss=4.0, tokens_per_sec=300.0)
        probe.checkpoint(11)

        assert probe.flush() is True

        out = capsys.readouterr().out
        assert out.count("\n") == 1
        (doc,) = emf_lines(out)
        assert_valid_emf(doc)
        job, node = doc["_aws"]["CloudWatchMetrics"]
        assert job["Namespace"] == node["Namespace"] == "Medic/Training"
        assert job["Dimensions"] == [["Job"], ["Job", "Cluster"]]
        assert {m["Name"] for m in job["Metrics"]} == {
            "Heartbeat", "Step", "NonFiniteLoss", "Loss", "TokensPerSecond", "TokensPerSecondBaseline",
            "LastCheckpointStep", "Session", "FirstStep", "Stalled"}
        assert {"Name": "Stalled", "Unit": "None", "StorageResolution": 1} in job["Metrics"]  # high resolution
        assert (doc["FirstStep"], doc["Stalled"]) == (10, 0)
        assert node == {"Namespace": "Medic/Training", "Dimensions": [["Job", "Node"]],
                        "Metrics": [{"Name": "TokensPerSecond", "Unit": "Count/Second"}]}
        assert (doc["Job"], doc["Cluster"], doc["Node"], doc["Rank"]) == ("llama3-70b", "ml-cluster", "ip-10-1-2-3", 0)
        assert (doc["Heartbeat"], doc["Step"], doc["Loss"], doc["TokensPerSecond"]) == (2, 11, 3.0, 200.0)
        assert (doc["NonFiniteLoss"], doc["LastCheckpointStep"]) == (0, 11)

    def test_given_emf_and_nan_losses_when_flushed_then_the_line_is_strict_json_with_the_count(
            self, make_probe, capsys):
        probe = make_probe(emf=True)
        probe.step(1, loss=math.nan)
        probe.step(2, loss=math.inf)

        probe.flush()

        out = capsys.readouterr().out
        assert "NaN" not in out and "Infinity" not in out
        (doc,) = emf_lines(out)
        assert_valid_emf(doc)
        assert doc["NonFiniteLoss"] == 2
        assert "Loss" not in doc
        assert "Cluster" not in doc
        assert doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Job"]]

    def test_given_emf_on_a_non_zero_rank_with_all_ranks_then_only_the_node_directive(self, make_probe, capsys):
        probe = make_probe(emf=True, rank=3, all_ranks=True)
        probe.step(1, loss=1.0, tokens_per_sec=42.0)

        probe.flush()

        (doc,) = emf_lines(capsys.readouterr().out)
        assert_valid_emf(doc)
        assert [d["Dimensions"] for d in doc["_aws"]["CloudWatchMetrics"]] == [[["Job", "Node"]]]
        assert "Loss" not in doc and "Heartbeat" not in doc
        assert doc["TokensPerSecond"] == 42.0

    def test_given_emf_and_no_credentials_when_flushed_then_it_publishes_anyway(
            self, make_probe, no_aws_credentials, capsys):
        probe = make_probe(emf=True)
        probe.step(1)

        assert probe.flush() is True
        assert probe.enabled is True

    def test_given_a_script_that_never_closes_the_probe_when_it_exits_then_atexit_flushes(self, tmp_path):
        script = ("from medic_probe import Probe\n"
                  "probe = Probe(job='exit-job', emf=True, period_seconds=3600)\n"
                  "for step in range(5):\n"
                  "    probe.step(step, loss=1.5)\n"
                  "print('training done')\n")
        env = {**os.environ, "PYTHONPATH": str(PROBE_DIR), "RANK": "0"}

        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                                timeout=30, check=True)

        (doc,) = emf_lines(result.stdout)
        assert doc["Job"] == "exit-job"
        assert doc["Heartbeat"] == 5
        assert "Completed" not in doc  # atexit is no clean close: the script never said it finished
        assert result.stdout.index("training done") < result.stdout.index('"_aws"')
