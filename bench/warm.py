"""Warm decision latency and AWS calls per remediation, on the emulator; and the pure policy alone.

One replay (``sim.replay.run``, the same code path as ``sim replay``) against a stack synthesized for
a Slurm cluster with the guardrails wide open (``bench.common.replay_config``), so every event goes the whole way,
after the reconciler's first sweep (as in any stack deployed for more than five minutes):
- the node path: new nodes failing ``NvidiaErrorTerminate`` (every fifth ``NvidiaErrorReboot``), 5 s
  apart, and every tenth event delivered twice (the second is a duplicate);
- a storm burst in a cluster with the default guardrails: new nodes failing 1 s apart, the first four
  acted on, the rest suppressed (one storm summary page, then suppressed events with no page);
- the job path: training jobs failing with a retryable reason and a checkpoint in S3, 30 s apart.
Each handler call is timed in-process (``bench.instrument``); the first call of a container (cold:
clients and config built) is reported apart. The emulator's share is moto answering in-process: it
stands in for the network round trips real AWS would take, so "own" (Medic plus botocore's client-side
work) is the part that is Medic's to make fast, and the call count is what costs time in AWS.

The pure functions (``decide_node``, ``decide_job``) are timed alone over a cycle of prepared contexts.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.common import (
    WARM_CLUSTERS,
    checkpoint_directive,
    cli,
    config_file,
    fmt_ms,
    job_event,
    median,
    node_event,
    percentile,
    replay_config,
    start_time,
    template_for,
)
from bench.instrument import Invocation, call_profile, instrumented

CALL_TARGET = 4  # API round trips for a node replacement, ledger claim included
# Issue 14's targets: a replacement in a warm container, the first one of a container, a suppressed storm event
CALL_TARGETS = {"replace_node_warm": 4, "replace_node_cold": 5, "suppressed": 2}
WHY_JOB = {
    "dynamodb:GetItem": "Medic's note of the job if Medic created it: its lineage and attempt (never the job's tags)",
    "dynamodb:PutItem": "claim of this failure (once per failed job, however often the event comes)",
    "dynamodb:UpdateItem": "the restart noted under the new job's name before CreateTrainingJob (its lineage), "
                           "and the failure marked done after",
}
# Why each call is on the hot path (the record itself is a log line and an EMF metric on stdout: no call).
WHY = {
    "ssm:GetParameter": "run-time mode (act | dry_run | paused), cached 30 s per container",
    "sagemaker:DescribeClusterNode": "instance group (protected?) and status (already in repair?): not in the event",
    "dynamodb:BatchGetItem": "node history and the cluster's recent actions, one round trip "
                             "(cooldown, escalation, hourly budget, breaker), with the agent's last heartbeat "
                             "(drain first?), the operators' pauses of the cluster and the mode memory",
    "sagemaker:DescribeCluster": "cluster size for the breaker (fraction in repair), cached 5 min per cluster",
    "dynamodb:TransactWriteItems": "the claim: node and cluster items, conditional on their versions "
                                   "(dedupes redeliveries and racing invocations)",
    "sagemaker:BatchReplaceClusterNodes": "the action",
    "sagemaker:BatchRebootClusterNodes": "the action",
    "dynamodb:PutItem": "conditional claim of the page (one page per incident, one storm summary per window)",
    "dynamodb:UpdateItem": "the claim's outcome after the call: the claim is written in flight first, so a run "
                           "that dies in between leaves a claim the reconciler can tell from a finished one",
    "sns:Publish": "the page",
    "dynamodb:DeleteItem": "the page claim released after a failed publish",
    "sagemaker:DescribeTrainingJob": "the failed job's full definition, to clone it",
    "sagemaker:ListTags": "the job's own tags, carried over to the clone",
    "s3:ListObjectsV2": "is there a checkpoint under CheckpointConfig.S3Uri?",
    "sagemaker:CreateTrainingJob": "the action: the clone, resuming from the checkpoint",
}


NODE_SPACING = timedelta(seconds=5)


def swept_first() -> list[str]:
    """The clock starts six minutes before the first event, so the reconciler's first sweep (every 5 minutes)
    has stored each cluster's DescribeCluster in the ledger, as it has in any stack deployed for more than
    five minutes: a container's first event then reads it with the ledger instead of calling DescribeCluster."""
    t0 = start_time()
    return [json.dumps({"sim": {"advance": (t0 - timedelta(minutes=6)).isoformat()}}),
            json.dumps({"sim": {"advance": (t0 - timedelta(seconds=30)).isoformat()}})]


def storm_burst(events: int, cluster: dict, after: timedelta, spacing: timedelta = timedelta(seconds=1)) -> list[str]:
    """New nodes failing in one cluster with the default guardrails (4 actions an hour): the first four act,
    the fifth is suppressed and sends the storm summary page, the rest are suppressed storm events."""
    t0 = start_time() + after
    return [json.dumps(node_event(10_000 + i, cluster, t0 + spacing * i)) for i in range(events)]


def node_lines(events: int, clusters: list[dict], spacing: timedelta = NODE_SPACING) -> list[str]:
    lines, t0 = [], start_time()
    for i in range(events):
        fault = "NvidiaErrorReboot" if i % 5 == 4 else "NvidiaErrorTerminate"
        line = json.dumps(node_event(i, clusters[i % len(clusters)], t0 + spacing * i, fault))
        lines.append(line)
        if i % 10 == 9:
            lines.append(line)  # a redelivery: the same event again
    return lines


def job_lines(events: int, after: timedelta, spacing: timedelta = timedelta(seconds=30)) -> list[str]:
    # Right after the node events: a jump in replay time would run every scheduled function in between.
    t0 = start_time() + after + timedelta(minutes=1)
    return [json.dumps(checkpoint_directive())] + [json.dumps(job_event(i, t0 + spacing * i)) for i in range(events)]


def latency(invocations: list[Invocation]) -> dict:
    if not invocations:
        return {"n": 0}
    return {
        "n": len(invocations),
        "median_ms": round(median(i.wall_ns for i in invocations) / 1e6, 2),
        "p90_ms": round(percentile([i.wall_ns for i in invocations], 0.9) / 1e6, 2),
        "emulator_ms": round(median(i.emulator_ns for i in invocations) / 1e6, 2),
        "own_ms": round(median(i.own_ns for i in invocations) / 1e6, 2),
        "calls": median(len(i.calls) for i in invocations),
    }


def replay(node_events: int = 100, job_events: int = 30, template: dict | None = None, storm_events: int = 30) -> dict:
    from sim.replay import run as replay_run

    data = replay_config()
    with config_file(data) as path:
        template = template if template is not None else template_for(path)
        lines = swept_first() + node_lines(node_events, data["clusters"][:WARM_CLUSTERS])
        lines += storm_burst(storm_events, data["clusters"][WARM_CLUSTERS], NODE_SPACING * node_events)
        lines += job_lines(job_events, NODE_SPACING * node_events + timedelta(seconds=storm_events))
        with instrumented() as probe:
            started = time.perf_counter()
            result = replay_run(lines, path, template=template)
            wall = time.perf_counter() - started
    events = sum(1 for line in lines if '"sim"' not in line[:8])
    outcomes: dict[str, int] = {}
    for invocation in probe.invocations:
        key = f"{invocation.function}:{invocation.action}:{invocation.outcome}"
        outcomes[key] = outcomes.get(key, 0) + 1
    replace_warm = probe.of("node_health", "replace_node", "executed", cold=False)
    # A container's first replacement: its first invocation, or one whose 30 s mode cache had expired (the same calls:
    # the switch's read; clients and config are built without a call). In a stack the canary's run through the node
    # function often comes first, so the first replacement of a container is seldom its first invocation.
    replace_first = [i for i in probe.of("node_health", "replace_node", "executed")
                     if i.cold or (i.calls[:1] == ["ssm:GetParameter"])]
    calls = {
        "replace_node": call_profile(probe.of("node_health", "replace_node", "executed")),
        "replace_node_warm": call_profile(replace_warm),
        "replace_node_cold": call_profile(replace_first),
        "reboot_node": call_profile(probe.of("node_health", "reboot_node", "executed")),
        "duplicate": call_profile(probe.of("node_health", outcome="duplicate")),
        # suppressed storm events once the cluster's summary page is out (the one that pages is apart)
        "suppressed": call_profile([i for i in probe.of("node_health", outcome="suppressed") if not i.paged]),
        "suppressed_paging": call_profile([i for i in probe.of("node_health", outcome="suppressed") if i.paged]),
        "restart_job": call_profile(probe.of("training_job", "restart_job", "executed")),
    }
    return {
        "events": events,
        "replay_wall_s": round(wall, 2),
        "replay_per_event_ms": round(wall * 1000 / max(1, events), 1),
        "outcomes": outcomes,
        "errors": result.errors[:5],
        "node": latency(replace_warm),
        "node_all": latency(probe.of("node_health", cold=False)),
        "node_cold": latency(probe.of("node_health", cold=True)),
        "job": latency(probe.of("training_job", "restart_job", "executed", cold=False)),
        "job_cold": latency(probe.of("training_job", cold=True)),
        "calls": calls,
        "why": {call: WHY.get(call, "") for name, profile in calls.items() if name != "restart_job"
                for sequence in profile.get("sequences", []) for call in sequence["calls"]},
        "why_job": {call: WHY_JOB.get(call, WHY.get(call, "")) for sequence in calls["restart_job"].get("sequences", [])
                    for call in sequence["calls"]},
        "call_target": CALL_TARGET,
        "call_targets": CALL_TARGETS,
        "emulator_ms_per_call": probe.emulator_ms_per_call(),
    }


def _node_contexts() -> list[Any]:
    from medic.config import Cluster, Guardrails
    from medic.core.mode import Mode
    from medic.core.models import Action, ClusterAction, ClusterInfo, ClusterState, Fault, NodeInfo, NodeState
    from medic.flows.node.policy import NodeContext

    now = datetime(2026, 11, 20, 8, 14, 5, tzinfo=UTC)
    cluster = Cluster(name="bench-c00", id="bench0000000", orchestrator="slurm")
    busy = ClusterState(tuple(ClusterAction(f"i-{n:017x}", "replace_node", now - timedelta(minutes=5 * n))
                              for n in range(3)), version=3)
    base = NodeContext(mode=Mode.ACT, cluster=cluster, guardrails=Guardrails(), fault=Fault.GPU_FATAL,
                       node=NodeInfo("i-0d4e5f60718293a4b", "workers", "Running"), state=None,
                       cluster_state=ClusterState((), 0), now=now,
                       cluster_info=lambda: ClusterInfo(size=64, node_recovery="none", provisioning=None,
                                                        controller_groups=frozenset()))
    rebooted = NodeState(fault=Fault.GPU_REBOOT.value, action=Action.REBOOT_NODE.value, outcome="executed",
                         acted_at=now - timedelta(hours=2), attempt=1, last_reboot_at=now - timedelta(hours=2),
                         version=1)
    return [
        base,  # replace, executed (the whole path: budget and breaker checked)
        base._replace(fault=Fault.GPU_REBOOT),  # reboot
        base._replace(fault=Fault.GPU_REBOOT, state=rebooted),  # escalation to replace
        base._replace(cluster_state=busy),  # busy cluster, still within budget
        base._replace(node=NodeInfo("i-0d4e5f60718293a4b", "controller", "Running")),  # protected
    ]


def _job_contexts() -> list[Any]:
    from medic.core.mode import Mode
    from medic.core.models import Fault
    from medic.flows.jobs.faults import JobFailure
    from medic.flows.jobs.policy import Checkpoint, JobContext, Lineage

    base = JobContext(mode=Mode.ACT, status="Failed", failure=JobFailure(Fault.JOB_RETRYABLE, "internal_error"),
                      lineage=Lineage("ft-bench-0001", 0), max_restarts=3, checkpoint=Checkpoint.PRESENT,
                      allow_without_checkpoint=False)
    return [base, base._replace(lineage=Lineage("ft-bench-0001", 3)),
            base._replace(failure=JobFailure(Fault.JOB_NOT_RETRYABLE, "cuda_oom"))]


def _rate(function: Any, contexts: list[Any], calls: int, repeats: int) -> dict:
    cycle = [contexts[i % len(contexts)] for i in range(calls)]
    for ctx in cycle[: max(1, calls // 10)]:  # warm up
        function(ctx)
    samples = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            started = time.perf_counter_ns()
            for ctx in cycle:
                function(ctx)
            samples.append((time.perf_counter_ns() - started) / calls)
    finally:
        if gc_was_enabled:
            gc.enable()
    per_call = median(samples)
    return {"per_call_us": round(per_call / 1000, 2), "events_per_s": int(1e9 / per_call), "calls": calls,
            "repeats": repeats, "contexts": len(contexts)}


def decide_rates(calls: int = 20_000, repeats: int = 7) -> dict:
    from medic.flows.jobs.policy import decide_job
    from medic.flows.node.policy import decide_node

    return {"decide_node": _rate(decide_node, _node_contexts(), calls, repeats),
            "decide_job": _rate(decide_job, _job_contexts(), calls, repeats)}


def run(node_events: int = 100, job_events: int = 30, calls: int = 20_000, repeats: int = 7,
        template: dict | None = None, storm_events: int = 30) -> dict:
    result: dict[str, Any] = {"benchmark": "warm"}
    result["pure"] = decide_rates(calls, repeats)  # first: a clean process, before the replay's imports
    result.update(replay(node_events, job_events, template=template, storm_events=storm_events))
    return result


def render(result: dict) -> str:
    pure = result["pure"]
    lines = [f"decide_node: {pure['decide_node']['per_call_us']} us/call, {pure['decide_node']['events_per_s']}/s",
             f"decide_job: {pure['decide_job']['per_call_us']} us/call, {pure['decide_job']['events_per_s']}/s",
             f"replay: {result['events']} events in {result['replay_wall_s']} s "
             f"({result['replay_per_event_ms']} ms/event, routing and emulation included)"]
    for name in ("node", "node_cold", "job", "job_cold"):
        entry = result[name]
        lines.append(f"{name}: n={entry.get('n')} median {fmt_ms(entry.get('median_ms'), 2)} "
                     f"(emulator {fmt_ms(entry.get('emulator_ms'), 2)}, own {fmt_ms(entry.get('own_ms'), 2)}), "
                     f"calls {entry.get('calls')}")
    for name, profile in result["calls"].items():
        sequences = "; ".join(f"{s['n']}x [{', '.join(s['calls'])}]" for s in profile.get("sequences", [])[:3])
        lines.append(f"calls {name}: median {profile.get('median')} :: {sequences}")
    lines.append(f"outcomes: {result['outcomes']}")
    return "\n".join(lines)


def main() -> int:
    return cli(run, render)


if __name__ == "__main__":
    sys.exit(main())
