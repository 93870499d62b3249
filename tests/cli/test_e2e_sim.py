"""End to end on the replay emulator: ``python -m sim replay X > out.jsonl; medic history --from-file out.jsonl``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "sim" / "scenarios" / "a-single-fault.jsonl"


def medic(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI as a process, as the console script runs it (not installed: cli/ on the path)."""
    return subprocess.run([sys.executable, "-m", "medic_cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def test_given_a_replayed_scenario_when_medic_history_reads_its_output_then_the_decision_shows(tmp_path: Path):
    # Given the single-fault scenario replayed on the emulator, its stdout saved
    out_file = tmp_path / "out.jsonl"
    with out_file.open("w") as out:
        replay = subprocess.run([sys.executable, "-m", "sim", "replay", str(SCENARIO), "--quiet"], cwd=ROOT,
                                stdout=out, stderr=subprocess.PIPE, text=True, timeout=300, check=False)
    assert replay.returncode == 0, replay.stderr
    # ... with no AWS account or credentials around
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env["PYTHONPATH"] = str(ROOT / "cli")
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "none")

    # When the operator reads it with medic history, as a table and as JSON
    table = medic("history", "--from-file", str(out_file), env=env)
    as_json = medic("history", "--from-file", str(out_file), "--json", env=env)

    # Then the one decision of the scenario shows: the node replaced, at the event's time, nobody paged
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if line.startswith("2026-11-20 08:14:05"))
    assert row.split()[2:12] == ["node_health", "pretrain-slurm", "i-0d4e5f60718293a4b", "workers", "gpu_fatal",
                                 "replace_node", "executed", "acted", "no", "no"]
    assert "1 decision(s): 1 executed; 0 paged" in table.stdout
    [record] = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert {key: record[key] for key in ("incident", "action", "outcome", "timestamp")} == {
        "incident": "node:pretrain-slurm:i-0d4e5f60718293a4b", "action": "replace_node", "outcome": "executed",
        "timestamp": "2026-11-20T08:14:05+00:00"}
