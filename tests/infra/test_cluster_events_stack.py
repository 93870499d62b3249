"""Specification: the HyperPod cluster-event rule takes Error events, and Warn events about repairs,
of the configured clusters."""

from __future__ import annotations

import copy

import pytest

from tests.helpers import load_event
from tests.infra.conftest import one
from tests.infra.test_node_remediation_stack import matches


@pytest.fixture(scope="module")
def pattern(raw) -> dict:
    return one(raw, "AWS::Events::Rule", "ClusterEventsRule")["Properties"]["EventPattern"]


def event(level: str = "Error", description: str | None = None, cluster: str = "pretrain-slurm") -> dict:
    sample = copy.deepcopy(load_event("hyperpod-cluster-event-error"))
    details = sample["detail"]["EventDetails"]
    details.update(EventLevel=level, ClusterName=cluster)
    if description is not None:
        details["Description"] = description
    return sample


def test_the_sample_error_event_is_taken(pattern):
    assert matches(pattern, load_event("hyperpod-cluster-event-error"))


@pytest.mark.parametrize("description", ["Node replacement failed", "Reboot of instance i-0a1 failed",
                                         "Insufficient capacity for instance group gpu-workers"])
def test_warnings_about_repairs_are_taken(pattern, description):
    assert matches(pattern, event("Warn", description))


@pytest.mark.parametrize("level,description,cluster", [
    ("Warn", "Instance group scaling started", "pretrain-slurm"),
    ("Info", "Node replacement failed", "pretrain-slurm"),
    ("Error", None, "someone-elses-cluster"),
])
def test_other_events_are_not(pattern, level, description, cluster):
    assert not matches(pattern, event(level, description, cluster))
