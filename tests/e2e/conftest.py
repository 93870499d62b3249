"""End to end: the replay harness over scenario files — the synthesized stack's rules and the
real handlers against emulated AWS, the same code path as ``make demo``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from sim.replay import ReplayResult, run
from sim.scenario import DEMO_CONFIG, SCENARIOS, read_scenario
from tests.helpers import EVENTS

DRY_RUN_CONFIG = SCENARIOS / "dry-run.medic.yaml"
Replay = Callable[..., ReplayResult]


def lines_of(items: Iterable[dict | str]) -> list[str]:
    return [item if isinstance(item, str) else json.dumps(item) for item in items]


def sample(name: str) -> dict:
    return json.loads((EVENTS / f"{name}.json").read_text())


@pytest.fixture(scope="session")
def replay() -> Replay:
    """Replay a scenario file or a list of events/directives, as ``sim replay`` does."""

    def _replay(source: Path | Iterable[dict | str], config: Path | None = None,
                faults: Iterable[str] = ()) -> ReplayResult:
        if isinstance(source, Path):
            scenario = read_scenario(source)
            lines, config = scenario.lines, config or scenario.config
        else:
            lines = lines_of(source)
        config = config or DEMO_CONFIG
        return run(lines, config, faults)

    return _replay


def outcomes(result: ReplayResult) -> list[tuple[str, str]]:
    return [(record["action"], record["outcome"]) for record in result.records]


def node_action_calls(result: ReplayResult) -> dict[str, int]:
    return {key: count for key, count in result.calls.items() if key.startswith("sagemaker:Batch")}
