"""Specification of the command line: ``python -m sim replay`` and ``python -m sim demo``."""

from __future__ import annotations

import json
import subprocess
import sys

from sim.cli import main
from sim.scenario import DEMO_CONFIG, SCENARIOS, bundled
from sim.synth import ROOT


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


def test_the_demo_prints_a_table_and_a_summary_per_scenario(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    for path in bundled():
        title = next(line for line in path.read_text().splitlines() if line.startswith("# title:"))
        assert f"== {title.removeprefix('# title: ')} ==" in out
    assert out.count("   summary: ") == len(bundled()) == 12
    assert "time      node/job" in out
    assert "job started: ft-mistral-7b-0042-r1 from checkpoint s3://" in out
