"""End to end: the replay harness over scenario files — the synthesized stack's rules and the
real handlers against emulated AWS, the same code path as ``make demo``."""

from __future__ import annotations

import fcntl
import hashlib
import json
import pickle
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


_REPLAYS: dict[str, ReplayResult] = {}
_SHARED_REPLAYS: list[Path] = []  # the directory the session's workers share, once the session has started


@pytest.fixture(scope="session", autouse=True)
def _replays_shared_by_workers(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> None:
    """Under xdist every worker replays in its own process: the replays go to a directory they share, the parent of
    their base temp directories (pytest-xdist's documented way to run a session fixture's work once: "Making
    session-scoped fixtures execute only once"), so a scenario the demo and its specs both read is replayed once."""
    if worker_id != "master":
        shared = tmp_path_factory.getbasetemp().parent / "replays"
        shared.mkdir(exist_ok=True)
        _SHARED_REPLAYS[:] = [shared]


def _replay_key(lines: list[str], config_path: Path, faults: list[Fault]) -> str:
    config = config_path.read_bytes() if config_path.is_file() else b""
    parts = [*lines, "\0", str(config_path), config.decode(errors="replace"), "\0",
             *(f"{fault.key}={fault.code}:{fault.count}" for fault in faults)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def replayed(lines: Iterable[str], config_path: str | Path | None = None, faults: Iterable[str | Fault] = (),
             **kwargs: object) -> ReplayResult:
    """``sim.replay.run``, once per test session for the same lines, config and faults, whichever worker asks first:
    the demo's table and the scenario specs read the same replay (results are not modified by the specs)."""
    if set(kwargs) - {"err"}:
        return run(lines, config_path, faults, **kwargs)  # type: ignore[arg-type]
    parsed = [fault if isinstance(fault, Fault) else parse_fault(fault) for fault in faults]
    lines, config = list(lines), Path(config_path or DEMO_CONFIG).resolve()
    key = _replay_key(lines, config, parsed)
    if key in _REPLAYS:
        return _REPLAYS[key]
    if not _SHARED_REPLAYS:
        _REPLAYS[key] = run(lines, config, parsed, **kwargs)  # type: ignore[arg-type]
        return _REPLAYS[key]
    saved = _SHARED_REPLAYS[0] / f"{key}.pickle"
    with open(_SHARED_REPLAYS[0] / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a worker replaying this key now: wait for its result rather than redo it
        if saved.exists():
            _REPLAYS[key] = pickle.loads(saved.read_bytes())
        else:
            _REPLAYS[key] = run(lines, config, parsed, **kwargs)  # type: ignore[arg-type]
            partial = saved.with_suffix(".partial")
            partial.write_bytes(pickle.dumps(_REPLAYS[key]))
            partial.rename(saved)
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
