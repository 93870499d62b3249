"""Shared fixtures."""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from unittest import mock

import botocore.loaders
import pytest

from tests.helpers import load_event


@pytest.fixture(scope="session", autouse=True)
def service_models_parsed_once() -> Iterator[None]:
    """Every botocore session parses the JSON service models anew, and the tests make many sessions (each
    ``mock_aws()`` starts a new default one, the CLI one per command): one loader for all of them. The models
    are data that never changes, so sharing them changes nothing but the time, ~0.1 s per client."""
    with mock.patch("botocore.session.create_loader", functools.cache(botocore.loaders.create_loader)):
        yield


@pytest.fixture
def unhealthy_event() -> dict:
    return copy.deepcopy(load_event("hyperpod-node-health-unhealthy"))
