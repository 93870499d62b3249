"""Writes the bundled demo scenarios (``python -m sim.scenarios.generate``); the files are committed.

Every event has the exact shape of a "SageMaker HyperPod Cluster Node Health Event" as AWS
delivers it (events/hyperpod-node-health-unhealthy.json), with the instance, time and reason varied.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).parent
T0 = datetime(2026, 11, 20, 8, 14, 5, tzinfo=UTC)
NODE = "i-0d4e5f60718293a4b"
BASE = {
    "version": "0",
    "id": "5c1f4a2e-7d3b-4f0e-9a61-2b8c0d9e1f10",
    "detail-type": "SageMaker HyperPod Cluster Node Health Event",
    "source": "aws.sagemaker",
    "account": "123456789012",
    "time": "2026-11-20T08:14:05Z",
    "region": "us-west-2",
    "resources": ["arn:aws:sagemaker:us-west-2:123456789012:cluster/k3v9q2w8x1za"],
    "detail": {
        "ClusterName": "pretrain-slurm",
        "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/k3v9q2w8x1za",
        "InstanceId": "i-0d4e5f60718293a4b",
        "Tags": {},
        "HealthSummary": {
            "HealthStatus": "Unhealthy",
            "HealthStatusReason": "HyperPod Health Monitoring Agent (HMA) has detected fault type "
                                  "NvidiaErrorTerminate on this node and is unhealthy.",
            "RepairAction": "None",
            "Recommendation": "Please Replace the Faulty Node.",
        },
    },
}
RECOMMENDATION = {"Terminate": "Please Replace the Faulty Node.", "Reboot": "Please Reboot the Faulty Node."}


def event(node: str = NODE, at: datetime = T0, fault: str = "NvidiaErrorTerminate",
          event_id: str | None = None) -> dict:
    result = copy.deepcopy(BASE)
    result["id"] = event_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/{node}/{at.isoformat()}/{fault}"))
    result["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    result["detail"]["InstanceId"] = node
    summary = result["detail"]["HealthSummary"]
    summary["HealthStatusReason"] = (f"HyperPod Health Monitoring Agent (HMA) has detected fault type {fault} "
                                     "on this node and is unhealthy.")
    summary["Recommendation"] = RECOMMENDATION["Reboot" if fault.endswith("Reboot") else "Terminate"]
    return result


def node_id(index: int) -> str:
    return "i-0" + hashlib.sha256(f"storm-{index}".encode()).hexdigest()[:16]


def scenarios() -> dict[str, tuple[list[str], list[dict]]]:
    sample = copy.deepcopy(BASE)
    storm = [event(node_id(i), T0 + timedelta(seconds=20 * i)) for i in range(30)]
    return {
        "a-single-fault.jsonl": ([
            "title: (a) One GPU fault: NvidiaErrorTerminate -> replace",
            "expect: replace_node executed, no page",
        ], [sample]),
        "b-repeat-delivery.jsonl": ([
            "title: (b) Repeat delivery: the same event twice",
            "expect: executed, then duplicate; exactly one BatchReplaceClusterNodes call",
        ], [sample, sample]),
        "c-escalation.jsonl": ([
            "title: (c) Escalation: a rebooted node fails again two hours later",
            "expect: reboot_node executed, then replace_node executed",
        ], [event(fault="NvidiaErrorReboot"), event(at=T0 + timedelta(hours=2), fault="NvidiaErrorReboot")]),
        "d-storm.jsonl": ([
            "title: (d) Storm: 30 failing nodes in one cluster within ten minutes",
            "expect: at most 4 executed (hourly budget), the rest suppressed, one summary page",
        ], storm),
        "e-protected-node.jsonl": ([
            "title: (e) Protected node: a GPU fault on the Slurm controller",
            "expect: no node action, one page for a human",
        ], [{"sim": {"node": {"cluster": "pretrain-slurm", "id": "i-0c0ffee0c0ffee001", "group": "controller"}}},
            event("i-0c0ffee0c0ffee001")]),
        "f-dry-run.jsonl": ([
            "title: (f) Dry run: the same fault with mode dry_run",
            "config: dry-run.medic.yaml",
            "expect: outcome dry_run, no BatchReplace/BatchReboot call, no page",
        ], [sample]),
        "g-hostile-input.jsonl": ([
            "title: (g) Hostile input: a shell command in the InstanceId, then a valid event",
            "expect: the first rejected with no call; the next valid event still executes",
        ], [event("i-0abc; rm -rf /", event_id="6e0c1d1e-0b7a-4b8e-9a0e-1f2a3b4c5d6e"),
            event("i-0a1b2c3d4e5f60718", T0 + timedelta(minutes=1))]),
    }


def main() -> None:
    for name, (header, items) in scenarios().items():
        lines = [f"# {line}" for line in header] + [json.dumps(item) for item in items]
        (HERE / name).write_text("\n".join(lines) + "\n")
        print(f"wrote {name} ({len(items)} lines)")


if __name__ == "__main__":
    main()
