"""Storm: many node failures through ``sim replay`` (the same ``run`` the CLI calls), across clusters.

Events are shaped as sim/scenarios/generate.py shapes its storm scenario: "SageMaker HyperPod Cluster
Node Health Event", ``NvidiaErrorTerminate``, one new node each, round-robin over the storm's configured
Slurm clusters, with the default guardrails (4 node actions per cluster per hour, breaker at 25 % in
repair). The full size is 10,000 events over 20 clusters, each cluster failing a node every 15 s (0.75 s
apart overall): about two hours of replay time, so the budget and the storm page roll over two windows.

What is checked, not only timed (the exactness of the 1,000-event storm at ten times its size):
- every cluster's executed actions stay within its budget in every rolling hour;
- every cluster gets at most one storm summary page per window (one hour);
- every event gets exactly one remediation record.
Medic's own time per event is the node handler's CPU time minus the CPU time the emulator spends
answering its calls (``bench.instrument``), compared over the first and the last thousand events. Memory
is the process's peak RSS; the ledger's largest item is measured at the end (DynamoDB's item size, as
moto computes it).
"""

from __future__ import annotations

import resource
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from typing import Any

from bench.common import (
    ACCOUNT,
    REGION,
    WARM_CLUSTERS,
    cli,
    config_file,
    median,
    replay_config,
    storm_lines,
    template_for,
)
from bench.instrument import call_profile, instrumented

FLAT_TARGET = 1.2  # Medic's CPU per event at 10,000 events within 20 % of its CPU per event at 1,000
SUPPRESSED_CALL_TARGET = 2
BUDGET_WINDOW = timedelta(hours=1)
STORM_SUBJECT = "node actions held back by guardrails"


def _peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


class _Out:
    """The replay's stdout, as it comes: each page is stamped with the time of the record before it."""

    def __init__(self) -> None:
        self.last_time: datetime | None = None
        self.storm_pages: list[tuple[str, datetime | None]] = []

    def __call__(self, line: dict) -> None:
        if line["kind"] == "record" and line.get("timestamp"):
            self.last_time = datetime.fromisoformat(line["timestamp"])
        elif line["kind"] == "page" and STORM_SUBJECT in line.get("subject", ""):
            cluster = line["subject"].removeprefix("[Medic] ").split(":", 1)[0]
            self.storm_pages.append((cluster, self.last_time))


def budget_overruns(records: list[dict], budget: int) -> list[str]:
    """Clusters whose executed node actions exceed the budget in some rolling hour."""
    times: dict[str, list[datetime]] = defaultdict(list)
    for record in records:
        if record.get("outcome") == "executed" and record.get("action") in ("reboot_node", "replace_node"):
            times[record["cluster"]].append(datetime.fromisoformat(record["timestamp"]))
    over = []
    for cluster, ats in times.items():
        ats.sort()
        if any(sum(1 for other in ats if at - BUDGET_WINDOW < other <= at) > budget for at in ats):
            over.append(cluster)
    return sorted(over)


def page_overruns(pages: list[tuple[str, datetime | None]]) -> list[str]:
    """Clusters paged twice for a storm inside one window."""
    by_cluster: dict[str, list[datetime]] = defaultdict(list)
    for cluster, at in pages:
        if at is not None:
            by_cluster[cluster].append(at)
    return sorted(cluster for cluster, ats in by_cluster.items()
                  if any(b - a < BUDGET_WINDOW for a, b in zip(sorted(ats), sorted(ats)[1:], strict=False)))


def ledger_items() -> dict:
    """The emulated ledger at the end of the replay: item count and the largest item (bytes, DynamoDB's
    sizing as moto computes it), with its key."""
    import gc

    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.table import StreamRecord

    largest, count, total = (0, "", ""), 0, 0
    tables = list(dynamodb_backends[ACCOUNT][REGION].tables.values())
    # The emulator's memory: stream records in the tables' streams, and those alive anywhere (moto's
    # TransactWriteItems deep-copies each table it writes, stream included, as its rollback copy).
    stream = sum(len(table.stream_shard.items) for table in tables if table.stream_shard is not None)
    alive = sum(1 for obj in gc.get_objects() if type(obj) is StreamRecord)
    for table in tables:
        for item in table.all_items():
            size = item.size()
            count, total = count + 1, total + size
            if size > largest[0]:
                attrs = item.attrs
                largest = (size, str(attrs["pk"].value) if "pk" in attrs else "?",
                           str(attrs["sk"].value) if "sk" in attrs else "?")
    return {"items": count, "bytes": total, "largest_bytes": largest[0], "largest_key": f"{largest[1]} / {largest[2]}",
            "emulator_stream_records": stream, "emulator_stream_records_alive": alive}


def _with_ledger_snapshot(snapshot: dict) -> Any:
    """World.__exit__ wrapped: the ledger is read just before the emulated account goes away."""
    from sim.world import World

    original = World.__exit__

    def exit_(self: Any, *exc: object) -> None:
        try:
            snapshot.update(ledger_items())
        except Exception as error:  # noqa: BLE001 - a measurement; the replay's teardown must run
            snapshot["error"] = f"{type(error).__name__}: {error}"
        original(self, *exc)

    World.__exit__ = exit_
    return original


def _own_cpu_ms(invocations: list) -> float | None:
    return round(sum(i.own_cpu_ns for i in invocations) / len(invocations) / 1e6, 3) if invocations else None


def run(events: int = 10_000, clusters: int = 20, spacing_s: float = 0.75, template: dict | None = None) -> dict:
    from sim.replay import run as replay_run
    from sim.world import World

    data = replay_config()  # the storm's clusters: those with the default guardrails
    storm_clusters = data["clusters"][WARM_CLUSTERS:WARM_CLUSTERS + clusters]
    clusters = len(storm_clusters)
    budget = data["guardrails"]["max_node_actions_per_hour"]
    with config_file(data) as path:
        started = time.perf_counter()
        template = template if template is not None else template_for(path)
        template_s = time.perf_counter() - started
        lines = storm_lines(events, storm_clusters, timedelta(seconds=spacing_s))
        rss_before = _peak_rss_mib()
        out, ledger = _Out(), {}
        original_exit = _with_ledger_snapshot(ledger)
        try:
            with instrumented() as probe:
                started, cpu_started = time.perf_counter(), time.process_time()
                result = replay_run(lines, path, template=template, out=out)
                wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        finally:
            World.__exit__ = original_exit
    rss_after = _peak_rss_mib()
    records = result.records
    outcomes = Counter(f"{r.get('action')}:{r.get('outcome')}" for r in records)
    per_event = Counter(r["event_id"] for r in records if r.get("trigger") == "node_health")
    node = probe.of("node_health", cold=False)  # a container's first call builds its clients: not per-event work
    suppressed = [i for i in node if i.outcome == "suppressed" and not i.paged]  # the summary page's own apart
    thousand = min(1000, max(1, len(node) // 10))
    first, last = _own_cpu_ms(node[:thousand]), _own_cpu_ms(node[-thousand:])
    handler_cpu_s = sum(i.cpu_ns for i in probe.invocations) / 1e9
    emulator_cpu_s = sum(i.emulator_cpu_ns for i in probe.invocations) / 1e9
    return {
        "benchmark": "storm",
        "events": events,
        "clusters": clusters,
        "spacing_s": spacing_s,
        "replay_hours": round(events * spacing_s / 3600, 2),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "events_per_s": round(events / wall, 1),
        # where the replay's CPU goes: Medic's handlers, the emulator answering them, and the rest (the harness)
        "handler_cpu_s": round(handler_cpu_s, 2),
        "handler_emulator_cpu_s": round(emulator_cpu_s, 2),
        "handler_s": round(sum(i.wall_ns for i in probe.invocations) / 1e9, 2),
        "handler_emulator_s": round(sum(i.emulator_ns for i in probe.invocations) / 1e9, 2),
        "handler_s_by_function": {name: round(sum(i.wall_ns for i in probe.invocations if i.function == name) / 1e9, 2)
                                  for name in sorted({i.function for i in probe.invocations})},
        "invocations": dict(Counter(i.function for i in probe.invocations)),
        "own_cpu_ms_per_event": _own_cpu_ms(node),
        "own_cpu_ms_first": first,
        "own_cpu_ms_last": last,
        "compared_events": thousand,
        "flat_ratio": round(last / first, 2) if first and last else None,
        "flat_target": FLAT_TARGET,
        "template_s": round(template_s, 2),
        "peak_rss_mib": rss_after,
        "rss_before_mib": rss_before,
        "ledger": ledger,
        "records": len(records),
        "events_recorded_once": sum(1 for n in per_event.values() if n == 1),
        "events_recorded_twice": sum(1 for n in per_event.values() if n > 1),
        "outcomes": dict(outcomes),
        "actions": sum(1 for r in records if r.get("outcome") == "executed"),
        "budget": budget,
        "budget_overruns": budget_overruns(records, budget),
        "pages": len(result.pages),
        "storm_pages": len(out.storm_pages),
        "page_overruns": page_overruns(out.storm_pages),
        "node_actions_answered": len(result.node_actions),
        "api_calls": sum(result.calls.values()),
        "calls_by_operation": dict(result.calls.most_common()),
        "calls_per_suppressed": call_profile(suppressed),
        "suppressed_call_target": SUPPRESSED_CALL_TARGET,
        "handler_median_ms": round(median(i.wall_ns for i in probe.invocations) / 1e6, 2),
        "errors": result.errors[:5],
    }


def exact(result: dict) -> bool:
    """The storm replayed exactly: budget and pages held in every window, one record per event."""
    return (not result["budget_overruns"] and not result["page_overruns"] and not result["errors"]
            and result["events_recorded_once"] == result["events"] and not result["events_recorded_twice"])


def render(result: dict) -> str:
    return (f"{result['events']} events over {result['clusters']} clusters ({result['replay_hours']} h replayed): "
            f"{result['wall_s']} s wall ({result['events_per_s']}/s); Medic CPU per event "
            f"{result['own_cpu_ms_first']} ms (first {result['compared_events']}) -> {result['own_cpu_ms_last']} ms "
            f"(last {result['compared_events']}); peak RSS {result['peak_rss_mib']} MiB; largest ledger item "
            f"{result['ledger'].get('largest_bytes')} B ({result['ledger'].get('largest_key')}); actions "
            f"{result['actions']}, storm pages {result['storm_pages']}; exact {exact(result)}; calls per suppressed "
            f"event {result['calls_per_suppressed'].get('median')}")


def main(argv: list[str] | None = None) -> int:
    return cli(run, render, argv)


if __name__ == "__main__":
    sys.exit(main())
