"""Test helpers: the sample events exactly as AWS delivers them, with fields varied."""

from __future__ import annotations

import copy
import json
from pathlib import Path

EVENTS = Path(__file__).parent / "fixtures" / "events"


def load_event(name: str) -> dict:
    return json.loads((EVENTS / f"{name}.json").read_text())


def node_event(base: dict, *, instance_id: str | None = None, reason: str | None = None,
               status: str | None = None, time: str | None = None, event_id: str | None = None,
               cluster: str | None = None) -> dict:
    """The sample node health event with some fields changed."""
    event = copy.deepcopy(base)
    detail = event["detail"]
    if instance_id is not None:
        detail["InstanceId"] = instance_id
    if reason is not None:
        detail["HealthSummary"]["HealthStatusReason"] = reason
    if status is not None:
        detail["HealthSummary"]["HealthStatus"] = status
    if time is not None:
        event["time"] = time
    if event_id is not None:
        event["id"] = event_id
    if cluster is not None:  # AWS's documented examples carry the cluster name where the ARN has its id
        detail["ClusterName"] = cluster
        detail["ClusterArn"] = f"{detail['ClusterArn'].rsplit('/', 1)[0]}/{cluster}"
    return event


def hma_reason(fault_type: str) -> str:
    return f"HyperPod Health Monitoring Agent (HMA) has detected fault type {fault_type} on this node and is unhealthy."
