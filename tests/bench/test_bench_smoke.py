"""Smoke tests for bench/: each benchmark's functions run on tiny inputs and return what `make bench`
reads. The numbers themselves are not checked (they are measurements, not specifications)."""

from __future__ import annotations

import json

import pytest

from bench import cold_start, common, report, storm, warm
from bench.__main__ import BENCHMARKS
from bench.common import ROOT
from medic.config import parse_config
from tests.bench.template import template


@pytest.fixture(scope="module")
def tiny_template() -> dict:
    return template(parse_config(common.replay_config()), agent_queues=True)  # as the stack: the node path may drain


def test_configs_validate_as_synth_validates_them(tmp_path):
    from sim.synth import load_config

    for data in (common.config(1), common.config(20, eks_every=2), common.replay_config()):
        path = tmp_path / "medic.yaml"
        path.write_text(json.dumps(data))  # JSON is YAML
        loaded = load_config(path)
        assert len(loaded.clusters) == len(data["clusters"])
        assert all(len(cluster.id) == 12 for cluster in loaded.clusters)


def test_cold_start_times_a_handler_against_boto3():
    result = cold_start.run(repeats=1, handlers=("node_health",))
    entry = result["handlers"]["node_health"]
    assert result["boto3_ms"] > 0 and entry["ms"] > 0
    assert {"ratio", "cpu_ratio", "within_target", "above_boto3"} <= set(entry)
    assert "node_health" in cold_start.handler_modules()


def test_pure_decision_rates():
    rates = warm.decide_rates(calls=200, repeats=1)
    assert rates["decide_node"]["events_per_s"] > 0 and rates["decide_job"]["events_per_s"] > 0


def test_warm_replay_times_each_path_and_counts_its_calls(tiny_template):
    result = warm.replay(node_events=3, job_events=1, template=tiny_template, storm_events=7)
    assert not result["errors"]
    assert result["outcomes"].get("node_health:replace_node:executed", 0) >= 2
    assert result["outcomes"].get("training_job:restart_job:executed") == 1
    assert result["node"]["n"] >= 1 and result["node"]["median_ms"] > 0
    replacement = result["calls"]["replace_node"]
    assert "sagemaker:BatchReplaceClusterNodes" in replacement["sequences"][0]["calls"]
    assert all(call in result["why"] for call in replacement["sequences"][0]["calls"])
    # the container's first replacement, and any after its 30 s mode cache (wall time) expired: the switch's read first
    # (the exact calls of each: tests/functional/test_node_call_budget.py)
    first = result["calls"]["replace_node_cold"]
    assert first["count"] >= 1 and all(s["calls"][0] == "ssm:GetParameter" for s in first["sequences"])
    # a replacement in a warm container is four round trips (issue 14's budget, issue 31 item 6): the ledger read
    # (the agent's heartbeat with the rest: no GetItem of its own), the node, the claim, the call. This template has
    # no reconciler, so a cluster's first replacement also asks DescribeCluster (the stack reads its snapshot)
    for sequence in result["calls"]["replace_node_warm"]["sequences"]:
        assert [call for call in sequence["calls"] if call != "sagemaker:DescribeCluster"] == [
            "dynamodb:BatchGetItem", "sagemaker:DescribeClusterNode", "dynamodb:TransactWriteItems",
            "sagemaker:BatchReplaceClusterNodes"], sequence
    # the burst: four acted on, one suppressed event pages the storm summary, the others are suppressed quietly
    assert result["calls"]["suppressed_paging"]["count"] == 1
    assert result["calls"]["suppressed"]["count"] == 2
    assert "sns:Publish" not in result["calls"]["suppressed"]["sequences"][0]["calls"]
    rows = dict((label, status) for label, _, _, status in report.call_rows(result))
    assert rows["AWS calls: suppressed storm event (summary page already out)"] in ("met", "gap")


def test_storm_checks_budget_pages_and_one_record_per_event(tiny_template):
    result = storm.run(events=30, clusters=2, spacing_s=3.0, template=tiny_template)
    assert result["records"] == 30 and result["events_recorded_once"] == 30
    assert {"wall_s", "cpu_s", "peak_rss_mib", "actions", "pages", "outcomes", "api_calls", "ledger"} <= set(result)
    assert result["actions"] == 8  # 4 per cluster: the hourly budget
    assert result["storm_pages"] == 2 and storm.exact(result)
    assert result["ledger"]["largest_bytes"] > 0 and result["ledger"]["items"] > 0
    assert result["own_cpu_ms_first"] > 0 and result["flat_ratio"] is not None
    assert not result["errors"] and result["handler_s"] > 0  # the handlers ran, and the timing hooks saw them
    assert any("exact" in row[1] for row in report.storm_rows(result))


def test_storm_exactness_checks_catch_overruns():
    at = "2026-11-20T08:{:02d}:00+00:00"
    records = [{"outcome": "executed", "action": "replace_node", "cluster": "c", "timestamp": at.format(m)}
               for m in range(5)]
    assert storm.budget_overruns(records, 4) == ["c"]
    assert storm.budget_overruns(records[:4], 4) == []
    from datetime import datetime
    pages = [("c", datetime.fromisoformat(at.format(0))), ("c", datetime.fromisoformat(at.format(30)))]
    assert storm.page_overruns(pages) == ["c"] and storm.page_overruns(pages[:1]) == []


def test_the_page_block_is_replaced_and_nothing_else(tmp_path):
    # Given a benchmarks page without the block
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nintro\n")
    # When the results are written twice, the page edited in between
    assert report.update_page(page, "first")
    text = page.read_text()
    assert text.index("intro") < text.index(report.HEADING) < text.index(report.START) < text.index("first")
    page.write_text(text.replace("intro", "intro, edited by someone else"))
    assert report.update_page(page, "second")
    # Then only the block changed, once, and the same results change nothing
    text = page.read_text()
    assert "second" in text and "first" not in text and "edited by someone else" in text
    assert text.count(report.START) == 1 and text.count(report.HEADING) == 1
    assert not report.update_page(page, "second")


def test_make_bench_writes_the_page_that_holds_the_markers():
    # The blocks live in docs/benchmarks.md (the README links it); README.md has none to rewrite.
    page = (ROOT / report.PAGE).read_text()
    for marker in (report.START, report.END, report.RECOVERY_START, report.RECOVERY_END):
        assert page.count(marker) == 1, marker
        assert marker not in (ROOT / "README.md").read_text()


def test_the_table_renders_results_and_errors():
    results = {"machine": common.machine(), "probe": {"error": "boom"}, "synth": {"error": "timed out"},
               "cold_start": {"boto3_ms": 100.0, "boto3_cpu_ms": 90.0, "within_target": False, "handlers": {
                   "node_health": {"ms": 200.0, "cpu_ms": 180.0, "ratio": 2.0, "cpu_ratio": 2.0,
                                   "within_target": False, "above_boto3": {"pydantic": 30.0, "medic": 20.0}}}}}
    text = report.block(results)
    assert "| Cold start: `medic.handlers.node_health` |" in text and "2.00×" in text
    assert "error: boom" in text and "gap" in text
    assert set(BENCHMARKS) == {"cold_start", "prepare", "warm", "storm", "probe", "synth", "recovery"}


def test_module_cli_passes_numbers_and_prints_json(capsys):
    assert common.cli(lambda calls=1: {"calls": calls}, str, ["--json", "--calls", "3"]) == 0
    assert json.loads(capsys.readouterr().out) == {"calls": 3}
