"""Storm: 500 failing nodes across 3 Slurm clusters in 10 minutes, through the replay harness (the
synthesized stack's rules and the real handlers on emulated AWS, as ``sim replay`` runs them).

Each cluster has its own binding guardrail: the hourly budget (storm-a, storm-c) or the in-repair
breaker (storm-b). Expected: per cluster, exactly as many node actions as that guardrail allows, every
other node suppressed, one summary page per cluster per guardrail window (a second, smaller wave an hour
later pages again), one record per event, no handler exception."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from sim.replay import ReplayResult, run
from sim.scenarios.generate import T0, event

EVENTS = 500
STORM = timedelta(minutes=10)
CLUSTERS = {  # name: cluster id, guardrail overrides
    "storm-a": ("a1b2c3d4e5f6", {}),  # budget 4 an hour, breaker 25 %: the budget binds
    "storm-b": ("b1c2d3e4f5a6", {"max_node_actions_per_hour": 50, "max_fraction_in_repair": 0.05}),  # breaker
    "storm-c": ("c1d2e3f4a5b6", {"max_node_actions_per_hour": 2}),  # a tighter budget
}
CONFIG = {
    "mode": "act",
    "notify": {"emails": ["oncall@example.com"]},
    "guardrails": {"max_node_actions_per_hour": 4, "max_fraction_in_repair": 0.25, "node_cooldown_minutes": 60,
                   "max_job_restarts": 3},
    "clusters": [{"name": name, "id": cluster_id, "orchestrator": "slurm", "node_recovery": "none",
                  "protected_groups": ["controller", "login"], **({"guardrails": overrides} if overrides else {})}
                 for name, (cluster_id, overrides) in CLUSTERS.items()],
}
REPLACE, REBOOT = "sagemaker:BatchReplaceClusterNodes", "sagemaker:BatchRebootClusterNodes"


SIZE = {"storm-a": 1 + 167 + 7, "storm-b": 1 + 167 + 11, "storm-c": 1 + 166 + 5}  # controller + both waves
ALLOWED = {"storm-a": 4, "storm-b": int(0.05 * SIZE["storm-b"]), "storm-c": 2}  # per guardrail window
SECOND_WAVE = T0 + timedelta(minutes=70)  # the next budget hour (and long after the 30-minute repair window)


def node_id(index: int) -> str:
    return f"i-0{index:016x}"


def storm_lines() -> tuple[list[str], dict[str, tuple[str, int]]]:
    """The clusters and all their nodes, declared up front (each cluster's size holds still); then the
    storm: 500 health events round-robin over the clusters, evenly spread over ten minutes, one
    reboot-class fault in five; then, an hour later, a second wave of three nodes more per cluster than
    its guardrail allows. Returns the lines and each event's (cluster, wave) by event id."""
    names = list(CLUSTERS)
    waves = [[(names[index % len(names)], T0 + STORM * index / EVENTS) for index in range(EVENTS)],
             [(name, SECOND_WAVE + timedelta(seconds=20 * k)) for name in names for k in range(ALLOWED[name] + 3)]]
    lines = [json.dumps({"sim": {"cluster": {"name": name, "groups": {"controller": 1, "workers": 0}}}})
             for name in names]
    events, where = [], {}
    index = 0
    for wave, failures in enumerate(waves, 1):
        for cluster, at in failures:
            lines.append(json.dumps({"sim": {"node": {"cluster": cluster, "id": node_id(index),
                                                      "group": "workers", "status": "Failure"}}}))
            item = event(node_id(index), at, fault="NvidiaErrorReboot" if index % 5 == 4 else "NvidiaErrorTerminate")
            arn = f"arn:aws:sagemaker:us-west-2:123456789012:cluster/{CLUSTERS[cluster][0]}"
            item["detail"].update(ClusterName=cluster, ClusterArn=arn)
            item["resources"] = [arn]
            where[item["id"]] = (cluster, wave)
            events.append(json.dumps(item))
            index += 1
    return lines + events, where


@pytest.fixture(scope="module")
def storm(tmp_path_factory) -> tuple[ReplayResult, dict[str, tuple[str, int]]]:
    config = Path(tmp_path_factory.mktemp("storm")) / "storm.medic.yaml"
    config.write_text(yaml.safe_dump(CONFIG, sort_keys=False))  # same content each run: the synth cache holds
    lines, where = storm_lines()
    return run(lines, config), where  # (the replay pages ListClusterNodes right: see sim/world.py)


def health_records(result: ReplayResult) -> list[dict]:
    return [record for record in result.records if record["trigger"] == "node_health"]


def by_cluster_and_wave(records: list[dict], where: dict[str, tuple[str, int]]) -> dict[tuple[str, int], Counter]:
    counts: dict[tuple[str, int], Counter[str]] = defaultdict(Counter)
    for record in records:
        counts[where[record["event_id"]]][record["outcome"]] += 1
    return counts


def test_every_event_is_accounted_for_by_exactly_one_record(storm):
    result, where = storm
    assert result.errors == []  # no unusable line, and no handler raised
    assert sum(wave == 1 for _, wave in where.values()) == EVENTS
    per_event = Counter(record["event_id"] for record in health_records(result))
    assert set(per_event) == set(where)
    assert set(per_event.values()) == {1}
    assert all(record["cluster"] == where[record["event_id"]][0] for record in health_records(result))
    # (the reconciler's schedule runs as the replay clock passes: its records carry its run ids; its failed-node
    # gauge fires each cluster's failed-node alarm, which the storm page already covers)
    assert {record["trigger"] for record in result.records} <= {"node_health", "reconcile", "alarm"}
    alarm_records = [record for record in result.records if record["trigger"] == "alarm"]
    assert {(r["fault"], r["outcome"], r["paged"]) for r in alarm_records} <= {("failed_nodes", "deferred", False)}


def test_the_reconciler_sweeps_every_cluster_during_the_storm_without_error(storm):
    result, _ = storm
    assert sum(result.schedule_runs.values()) > 0
    assert result.metrics["ReconcileErrors"] == 0
    assert result.calls["sagemaker:ListClusterNodes"] >= len(CLUSTERS)


def test_each_cluster_acts_exactly_as_far_as_its_guardrail_allows(storm):
    result, where = storm
    # storm-a: the default budget (4 an hour) binds before the breaker (25 % of its nodes)
    # storm-b: the breaker binds: an action is allowed while (in repair + 1) / size <= 5 %
    # storm-c: a budget of 2 an hour
    # In each wave (the second comes an hour later, when the budget and the repair window are free again)
    failing = Counter(where.values())
    assert by_cluster_and_wave(health_records(result), where) == {
        (cluster, wave): Counter(executed=ALLOWED[cluster], suppressed=failing[cluster, wave] - ALLOWED[cluster])
        for cluster in CLUSTERS for wave in (1, 2)}
    # And every suppression names the guardrail that held it back
    for record in health_records(result):
        if record["outcome"] == "suppressed":
            guardrail = "Breaker open" if record["cluster"] == "storm-b" else "Cluster budget spent"
            assert record["reason"].startswith(guardrail), record


def test_the_node_calls_are_exactly_the_executed_actions(storm):
    result, _ = storm
    executed = [record for record in result.records if record["outcome"] == "executed"]
    assert {record["trigger"] for record in executed} == {"node_health"}
    acted = [(action["cluster"], node) for action in result.node_actions for node in action["successful"]]
    assert sorted(acted) == sorted((record["cluster"], record["node_id"]) for record in executed)
    assert len(acted) == len(set(acted))  # no node twice
    assert all(not action["failed"] for action in result.node_actions)
    calls = Counter({key: count for key, count in result.calls.items() if key.startswith("sagemaker:Batch")})
    assert calls == Counter({REPLACE: sum(r["action"] == "replace_node" for r in executed),
                             REBOOT: sum(r["action"] == "reboot_node" for r in executed)}) - Counter()


def test_one_guardrail_summary_page_per_cluster_per_window(storm):
    result, where = storm
    paged = [record for record in health_records(result) if record["paged"]]
    assert sorted(where[record["event_id"]] for record in paged) == sorted(
        (cluster, wave) for cluster in CLUSTERS for wave in (1, 2))
    assert all(record["outcome"] == "suppressed" for record in paged)
    storm_pages = [page for page in result.pages if page["record"].get("trigger") == "node_health"]
    assert sorted(page["record"]["event_id"] for page in storm_pages) == sorted(r["event_id"] for r in paged)
    for page in storm_pages:
        assert "held back by guardrails" in page["subject"]


def test_the_whole_storm_pages_once_per_cluster_per_window(storm):
    result, _ = storm
    assert len(result.pages) == len(CLUSTERS) * 2, [page["subject"] for page in result.pages]
    assert [record for record in result.records if record["trigger"] == "reconcile" and record["paged"]] == []
