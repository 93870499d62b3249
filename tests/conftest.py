"""Shared fixtures."""

from __future__ import annotations

import copy

import pytest

from tests.helpers import load_event


@pytest.fixture
def unhealthy_event() -> dict:
    return copy.deepcopy(load_event("hyperpod-node-health-unhealthy"))
