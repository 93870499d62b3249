"""Storm: 1,000 node failures through ``sim replay`` (the same ``run`` the CLI calls), across clusters.

Events are shaped as sim/scenarios/generate.py shapes its storm scenario: "SageMaker HyperPod Cluster
Node Health Event", ``NvidiaErrorTerminate``, one new node each, 3 s apart, round-robin over five
configured Slurm clusters, with the default guardrails (4 node actions per cluster per hour, breaker at
25 % in repair). Wall time is the replay alone (the template comes from sim's synth cache, synthesized
once beforehand if needed); memory is the process's peak RSS, before and after the replay.
"""

from __future__ import annotations

import resource
import sys
import time
from collections import Counter
from datetime import timedelta

from bench.common import WARM_CLUSTERS, cli, config_file, median, replay_config, storm_lines, template_for
from bench.instrument import call_profile, instrumented

TARGET_S = 60.0


def _peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def _stamp(line: dict, stamps: list[float]) -> None:
    if line["kind"] == "record":
        stamps.append(time.perf_counter())


def run(events: int = 1000, clusters: int = 5, spacing_s: float = 3.0, template: dict | None = None) -> dict:
    from sim.replay import run as replay_run

    data = replay_config()  # the storm's clusters: those with the default guardrails
    storm_clusters = data["clusters"][WARM_CLUSTERS:WARM_CLUSTERS + clusters]
    clusters = len(storm_clusters)
    with config_file(data) as path:
        started = time.perf_counter()
        template = template if template is not None else template_for(path)
        template_s = time.perf_counter() - started
        lines = storm_lines(events, storm_clusters, timedelta(seconds=spacing_s))
        rss_before = _peak_rss_mib()
        stamps: list[float] = []
        with instrumented() as probe:
            started, cpu_started = time.perf_counter(), time.process_time()
            result = replay_run(lines, path, template=template, out=lambda line: _stamp(line, stamps))
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    rss_after = _peak_rss_mib()
    outcomes = Counter(f"{r.get('action')}:{r.get('outcome')}" for r in result.records)
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    tenth = max(1, len(gaps) // 10)
    suppressed = [i for i in probe.invocations if i.outcome == "suppressed"]
    return {
        "benchmark": "storm",
        "events": events,
        "clusters": clusters,
        "spacing_s": spacing_s,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "events_per_s": round(events / wall, 1),
        # where the replay's time goes: the handlers (emulated AWS calls included) vs routing and setup
        "handler_s": round(sum(i.wall_ns for i in probe.invocations) / 1e9, 2),
        "handler_emulator_s": round(sum(i.emulator_ns for i in probe.invocations) / 1e9, 2),
        "handler_s_by_function": {name: round(sum(i.wall_ns for i in probe.invocations if i.function == name) / 1e9, 2)
                                  for name in sorted({i.function for i in probe.invocations})},
        "invocations": dict(Counter(i.function for i in probe.invocations)),
        "target_s": TARGET_S,
        "within_target": wall < TARGET_S,
        "template_s": round(template_s, 2),
        "peak_rss_mib": rss_after,
        "rss_before_mib": rss_before,
        "records": len(result.records),
        "outcomes": dict(outcomes),
        "actions": sum(1 for r in result.records if r.get("outcome") == "executed"),
        "node_actions_answered": len(result.node_actions),
        "pages": len(result.pages),
        "api_calls": sum(result.calls.values()),
        "calls_by_operation": dict(result.calls.most_common()),
        "calls_per_suppressed": call_profile(suppressed),
        "handler_median_ms": round(median(i.wall_ns for i in probe.invocations) / 1e6, 2),
        "first_tenth_ms": round(median(gaps[:tenth]) * 1000, 1) if gaps else None,
        "last_tenth_ms": round(median(gaps[-tenth:]) * 1000, 1) if gaps else None,
        "errors": result.errors[:5],
    }


def render(result: dict) -> str:
    return (f"{result['events']} events over {result['clusters']} clusters: {result['wall_s']} s "
            f"({result['events_per_s']}/s), peak RSS {result['peak_rss_mib']} MiB "
            f"(before the replay {result['rss_before_mib']} MiB); actions {result['actions']}, pages "
            f"{result['pages']}; outcomes {result['outcomes']}; per event first/last tenth "
            f"{result['first_tenth_ms']}/{result['last_tenth_ms']} ms; {result['api_calls']} API calls")


def main(argv: list[str] | None = None) -> int:
    return cli(run, render, argv)


if __name__ == "__main__":
    sys.exit(main())


