"""Specification of the command line: ``python -m sim replay`` and ``python -m sim demo``."""

from __future__ import annotations

import json
import subprocess
import sys

from sim.cli import main
from sim.scenario import DEMO_CONFIG, SCENARIOS, bundled
from sim.synth import ROOT
from tests.e2e.conftest import replayed


def test_sim_replay_prints_only_json_lines_records_then_pages():
    # Given the protected-node scenario, with the handlers' own log lines left on (stderr)
    # When it is replayed from the command line
    process = subprocess.run(
        [sys.executable, "-m", "sim", "replay", str(SCENARIOS / "e-protected-node.jsonl"),
         "--config", str(DEMO_CONFIG)],
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)
    # Then it exits 0 and stdout is JSON Lines: the record, then the page it sent
    assert process.returncode == 0, process.stderr
    lines = [json.loads(line) for line in process.stdout.splitlines()]
    assert [(line["kind"], line.get("outcome")) for line in lines] == [("record", "suppressed"), ("page", None)]
    assert lines[1]["record"]["incident"] == lines[0]["incident"]
    assert '"message":"remediation"' in process.stderr.replace(" ", "")  # the Powertools line, on stderr


def test_a_bad_fault_spec_is_a_usage_error(capsys):
    code = main(["replay", str(SCENARIOS / "a-single-fault.jsonl"),
                 "--fault", "sagemaker:BatchReplaceClusterNodes=ThrottlingException:0"])
    assert code == 2
    assert "count '0' must be a whole number >= 1" in capsys.readouterr().err


def test_the_demo_prints_a_table_and_a_summary_per_scenario(capsys, monkeypatch):
    monkeypatch.setattr("sim.replay.run", replayed)  # the scenario specs' replays (each runs once a session)
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    for path in bundled():
        title = next(line for line in path.read_text().splitlines() if line.startswith("# title:"))
        assert f"== {title.removeprefix('# title: ')} ==" in out
    assert out.count("   summary: ") == len(bundled()) == 86
    # every bundled scenario's checks are met, each said, with the tally last
    assert out.count("   PASS (") == len(bundled()) and "   FAIL" not in out and "-> FAIL" not in out
    assert out.rstrip().endswith("== 86 scenarios: 86 PASS, 0 FAIL ==")
    assert "   check: records .outcome == executed, duplicate\n" in out  # (b)
    assert ("   timeline: stall llama3-70b stalled at 03:05:00: detect +780s -> act +780s -> repair - -> resume +1140s "
            "-> resolved +1200s; lost 240 steps (6 min)") in out
    assert "time      node/job" in out
    assert "job started: ft-mistral-7b-0042-r1 from checkpoint s3://" in out
    assert "   probe: 03:02:00 llama3-70b: Heartbeat 60, Step 1340, NonFiniteLoss 60, LastCheckpointStep 1200" in out
    assert ("   probe: 03:05:40 llama3-70b: Heartbeat 10, Step 1450, NonFiniteLoss 0, LastCheckpointStep 1450, "
            "Completed 1") in out  # (zm): the clean close's last publish
    assert "   alarm: 03:03:00 medic-divergence-llama3-70b OK -> ALARM" in out
    assert ("   alarm: 08:19:00 Medic-OperationsDeadLettersNodeRemediationHandler3BB7951E OK -> ALARM -> page via "
            in out)
    assert "   schedules ran: ReconcilerSchedule 12×, AlarmResponseRecoverySchedule 12×" in out
    assert "   fault: sagemaker:BatchReplaceClusterNodes=ThrottlingException:2 (2 injected of 3 attempts)" in out
    assert "   metric: PageFailures 1 (pages that could not be published)" in out


def test_the_demo_fails_a_scenario_whose_checks_are_not_met_and_exits_1(capsys, monkeypatch, tmp_path):
    # Given the single-fault scenario with one check it meets and one it does not (it expects a page)
    scenario = tmp_path / "a-wrong.jsonl"
    lines = (SCENARIOS / "a-single-fault.jsonl").read_text().splitlines()
    scenario.write_text("\n".join(["# title: (a) expecting a page", "# check: records .outcome == executed",
                                   "# check: pages == 1", *[line for line in lines if not line.startswith("#")]]))
    monkeypatch.setattr("sim.replay.run", replayed)
    # When the demo replays it
    code = main(["demo", str(scenario), "--config", str(DEMO_CONFIG)])
    # Then it says which check failed and what the replay had, FAIL, the tally, and exits 1
    out = capsys.readouterr().out
    assert code == 1
    assert "   check: records .outcome == executed\n   check: pages == 1  -> FAIL: got 0\n   FAIL (1 of 2" in out
    assert out.rstrip().endswith("== 1 scenarios: 0 PASS, 1 FAIL ==\n   FAIL: (a) expecting a page")


def test_sim_replay_reads_a_pretty_printed_event_file_as_the_fixtures_are(capsys):
    # Given an event file as AWS documents them and tests/fixtures/events holds them: one JSON document on 23 lines
    path = ROOT / "tests" / "fixtures" / "events" / "hyperpod-node-health-unhealthy.json"
    assert len(path.read_text().splitlines()) > 1
    # When it is replayed
    code = main(["replay", str(path), "--config", str(DEMO_CONFIG), "--quiet"])
    # Then the event is the one input item, and Medic decided on it
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert [(line["kind"], line.get("action"), line.get("outcome")) for line in map(json.loads,
            captured.out.splitlines())] == [("record", "replace_node", "executed")]


def test_sim_replay_exits_1_saying_how_many_input_lines_it_skipped(capsys, tmp_path):
    # Given JSON Lines with a truncated event and a line that is no object between two good events
    event = json.loads((ROOT / "tests" / "fixtures" / "events" / "hyperpod-node-health-unhealthy.json").read_text())
    later = {**event, "id": "9b1d2c3e-4f50-4a6b-8c7d-8e9f0a1b2c3d", "time": "2026-11-20T08:20:05Z",
             "detail": {**event["detail"], "InstanceId": "i-0a1b2c3d4e5f60718"}}
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join([json.dumps(event), json.dumps(later)[:80], "[1, 2]", json.dumps(later)]) + "\n")
    # When it is replayed
    code = main(["replay", str(path), "--config", str(DEMO_CONFIG), "--quiet"])
    # Then the good events are replayed, each bad line is named, and the replay says it is incomplete: exit 1
    captured = capsys.readouterr()
    assert code == 1
    assert [json.loads(line)["outcome"] for line in captured.out.splitlines()] == ["executed", "executed"]
    assert "sim: line 2: not valid JSON" in captured.err and "sim: line 3: expected a JSON object" in captured.err
    assert "sim: 2 input item(s) skipped" in captured.err


def test_sim_replay_applies_the_scenario_fault_header_and_fault_options_override_it(capsys):
    # Given the throttling scenario, whose header injects 2 ThrottlingExceptions
    assert main(["replay", str(SCENARIOS / "q-throttled-node-call.jsonl"), "--quiet"]) == 0
    assert [json.loads(line)["outcome"] for line in capsys.readouterr().out.splitlines()] == ["executed"]
    # When --fault names the same operation, it replaces the header's count: 10 outlast botocore's retries
    assert main(["replay", str(SCENARIOS / "q-throttled-node-call.jsonl"), "--quiet",
                 "--fault", "sagemaker:BatchReplaceClusterNodes=ThrottlingException:10"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["kind"], line.get("outcome")) for line in lines] == [("record", "failed"), ("page", None)]
