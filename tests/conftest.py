"""Shared fixtures."""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from unittest import mock

import botocore.loaders
import pytest

from tests.helpers import load_event

# The files that keep a worker busiest, longest first: `make test` hands whole files to its workers in collection
# order (`--dist loadfile --no-loadscope-reorder`), so these start at once and the short files fill in around them
# (longest processing time first). Ordered by test count instead (xdist's default), the demo (7 tests, every bundled
# scenario replayed) started half-way through and kept one worker busy for minutes after the other had finished.
# Measured with `--durations` (docs/development.md); a file not listed only starts later, nothing is skipped.
LONGEST_FIRST = (
    "tests/e2e/test_cli.py",  # the demo: every bundled scenario, the replays it shares with the scenario specs
    "tests/e2e/test_storm.py",  # 500 node failures through the synthesized stack
    "tests/agent/test_real_slurm.py",  # a real slurmctld and slurmd, mostly waiting on Slurm
    "tests/e2e/test_node_repair.py",
    "tests/e2e/test_eks.py",
    "tests/functional/test_fuzz_handlers.py",
    "tests/cli/test_backtest.py",
    "tests/bench/test_storm_spec.py",  # 400 node failures, the storm benchmark's checks
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if renamed := [path for path in LONGEST_FIRST if not (config.rootpath / path).is_file()]:
        raise pytest.UsageError(f"tests/conftest.py LONGEST_FIRST names no such file: {', '.join(renamed)}")
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    # a stable sort: every other file, and the tests within each file, keep their order
    items.sort(key=lambda item: rank.get(item.path.relative_to(config.rootpath).as_posix(), len(rank)))


@pytest.fixture(scope="session", autouse=True)
def service_models_parsed_once() -> Iterator[None]:
    """Every botocore session parses the JSON service models anew, and the tests make many sessions (each
    ``mock_aws()`` starts a new default one, the CLI one per command): one loader for all of them. The models
    are data that never changes, so sharing them changes nothing but the time, ~0.1 s per client."""
    with mock.patch("botocore.session.create_loader", functools.cache(botocore.loaders.create_loader)):
        yield


@pytest.fixture(scope="session", autouse=True)
def moto_action_names_listed_once() -> Iterator[None]:
    """moto finds the method for each request by listing its response class's functions anew
    (``BaseResponse.call_action``: ``method_names_from_class(self.__class__)``, ``inspect.getmembers``): 3 to 5 % of a
    replay's CPU. A class's methods never change while the tests run, so the list is made once per class; the
    answers are the same, only sooner."""
    import moto.core.responses

    with mock.patch("moto.core.responses.method_names_from_class",
                    functools.cache(moto.core.responses.method_names_from_class)):
        yield


@pytest.fixture
def unhealthy_event() -> dict:
    return copy.deepcopy(load_event("hyperpod-node-health-unhealthy"))
