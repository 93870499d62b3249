"""End to end: the replay harness over scenario files — the synthesized stack's rules and the
real handlers against emulated AWS, the same code path as ``make demo``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from sim.faults import Fault, parse_fault
from sim.replay import ReplayResult, run
from sim.scenario import DEMO_CONFIG, SCENARIOS, read_scenario
from tests.helpers import EVENTS

DRY_RUN_CONFIG = SCENARIOS / "dry-run.medic.yaml"
Replay = Callable[..., ReplayResult]


def lines_of(items: Iterable[dict | str]) -> list[str]:
    return [item if isinstance(item, str) else json.dumps(item) for item in items]


def sample(name: str) -> dict:
    return json.loads((EVENTS / f"{name}.json").read_text())


_REPLAYS: dict[tuple, ReplayResult] = {}


def replayed(lines: Iterable[str], config_path: str | Path | None = None, faults: Iterable[str | Fault] = (),
             **kwargs: object) -> ReplayResult:
    """``sim.replay.run``, once per session for the same lines, config and faults: the demo's table and the
    scenario specs read the same replay (results are not modified by the specs)."""
    if set(kwargs) - {"err"}:
        return run(lines, config_path, faults, **kwargs)  # type: ignore[arg-type]
    parsed = [fault if isinstance(fault, Fault) else parse_fault(fault) for fault in faults]
    key = (tuple(lines), str(Path(config_path or DEMO_CONFIG).resolve()),
           tuple((fault.key, fault.code, fault.count) for fault in parsed))
    if key not in _REPLAYS:
        _REPLAYS[key] = run(list(lines), config_path, parsed, **kwargs)  # type: ignore[arg-type]
    return _REPLAYS[key]


@pytest.fixture(scope="session")
def replay() -> Replay:
    """Replay a scenario file (its '# fault:' headers included) or a list of events/directives, as
    ``sim replay`` does."""

    def _replay(source: Path | Iterable[dict | str], config: Path | None = None,
                faults: Iterable[str] = ()) -> ReplayResult:
        if isinstance(source, Path):
            scenario = read_scenario(source)
            lines, config = scenario.lines, config or scenario.config
            faults = [*scenario.faults, *faults]  # as `sim replay FILE --fault ...`
        else:
            lines = lines_of(source)
        config = config or DEMO_CONFIG
        return replayed(lines, config, faults)

    return _replay


def outcomes(result: ReplayResult) -> list[tuple[str, str]]:
    return [(record["action"], record["outcome"]) for record in result.records]


def node_action_calls(result: ReplayResult) -> dict[str, int]:
    return {key: count for key, count in result.calls.items() if key.startswith("sagemaker:Batch")}
