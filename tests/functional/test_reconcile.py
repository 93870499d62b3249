"""Specification: the scheduled reconciler against emulated AWS (moto for the ledger and SNS, botocore's
Stubber for ListClusterNodes, DescribeClusterNode and the node actions, every request validated)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from medic.config import parse_config
from medic.core.repairs import IN_FLIGHT
from medic.flows.node.sweep import reconcile
from medic.flows.node.sweep_policy import MAX_NODE_DECISIONS_PER_CLUSTER
from medic.ledger.nodes import NodeStore
from tests.functional.conftest import CLUSTER, CONFIG, Account, Medic, medic_world
from tests.helpers import node_event

NODE = "i-0d4e5f60718293a4b"  # the sample health event's node
OTHER = "i-0a1b2c3d4e5f60718"
REPLACE = "batch_replace_cluster_nodes"
SCHEDULED = {"version": "0", "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa", "detail-type": "Scheduled Event",
             "source": "aws.events", "account": "123456789012", "time": "2026-11-20T08:15:00Z",
             "region": "us-west-2", "resources": ["arn:aws:events:us-west-2:123456789012:rule/medic-reconcile"],
             "detail": {}}
ONE_CLUSTER = {**CONFIG, "clusters": [CONFIG["clusters"][0]]}


@pytest.fixture
def world(aws: Account) -> Iterator[Medic]:
    """One Slurm cluster without automatic node recovery: Medic owns its repairs."""
    yield from medic_world(parse_config(ONE_CLUSTER), aws)


def listed(medic: Medic, *nodes: tuple[str, str], cluster: str = CLUSTER, token: str | None = None,
           next_token: str | None = None, group: str = "gpu-workers", node_recovery: str | None = None,
           logical_ids: dict[str, str] | None = None) -> None:
    """The next ListClusterNodes page: (node id, status) pairs (with NodeLogicalId where given)."""
    response: dict = {"ClusterNodeSummaries": [
        {"InstanceGroupName": group, "InstanceId": node_id, "InstanceType": "ml.p5.48xlarge",
         "LaunchTime": datetime(2026, 11, 1, tzinfo=UTC), "InstanceStatus": {"Status": status},
         **({"NodeLogicalId": logical_ids[node_id]} if logical_ids and node_id in logical_ids else {})}
        for node_id, status in nodes]}
    if next_token:
        response["NextToken"] = next_token
    params = {"ClusterName": cluster, "IncludeNodeLogicalIds": True, **({"NextToken": token} if token else {})}
    medic.hyperpod.stubber.add_response("list_cluster_nodes", response, params)
    # A sweep that finds a failed node reads DescribeCluster's NodeRecovery next (the adapter caches it).
    if not next_token and any(status == "Failure" for _, status in nodes) \
            and cluster not in medic.deps.hyperpod._clusters:
        medic.hyperpod.size(16, cluster=cluster, node_recovery=node_recovery)


def sweep(medic: Medic, at: str, run: str = "run-1", **kwargs) -> dict:
    medic.at(at)
    return reconcile({**SCHEDULED, "id": run, "time": at}, medic.deps, **kwargs)


def records(medic: Medic, trigger: str = "reconcile") -> list[dict]:
    return [line for line in medic.log.lines if line["trigger"] == trigger]


def claim_of(medic: Medic, node_id: str = NODE):
    return NodeStore(medic.deps.table).node_claims(CLUSTER, [node_id]).get(node_id)


def replaced_on_event(medic: Medic, event: dict) -> dict:
    """The event path replaces the node (one BatchReplaceClusterNodes)."""
    medic.hyperpod.node(NODE)
    if CLUSTER not in medic.deps.hyperpod._clusters:  # DescribeCluster is cached once read
        medic.hyperpod.size(16)
    medic.hyperpod.node_action(REPLACE, NODE)
    return medic.handle(event)


class RunDied(BaseException):
    """The Lambda run ends midway (timeout, out of memory): nothing after this line happens."""


def die_after_claiming(medic: Medic, event: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)

    def dies(*args, **kwargs):
        raise RunDied

    with monkeypatch.context() as patch:
        patch.setattr(medic.deps.hyperpod, "act", dies)
        with pytest.raises(RunDied):
            medic.handle(event)


# --- failed nodes no incident covers

def test_given_a_failed_node_no_incident_covers_when_the_reconciler_runs_then_it_pages_once_and_acts_on_nothing(
        world):
    # Given HyperPod lists a node in Failure and no health event ever reached Medic
    listed(world, (NODE, "Failure"), (OTHER, "Running"))
    # When the reconciler runs
    report = sweep(world, "2026-11-20T08:15:00Z")
    # Then it records the node as needing a human and pages once; no reboot or replace (the stub has none)
    world.hyperpod.assert_all_called()
    [record] = records(world)
    assert {key: record[key] for key in ("incident", "trigger", "event_id", "cluster", "instance_group", "node_id",
                                         "fault", "action", "outcome", "paged", "mode")} == {
        "incident": f"node:{CLUSTER}:{NODE}", "trigger": "reconcile", "event_id": "run-1", "cluster": CLUSTER,
        "instance_group": "gpu-workers", "node_id": NODE, "fault": "unknown", "action": "none",
        "outcome": "deferred", "paged": True, "mode": "act"}
    assert "neither reboots nor replaces blindly" in record["reason"]
    [page] = world.pages()
    assert page["Subject"].startswith(f"[Medic] {CLUSTER} {NODE}: unknown")
    assert "found by Medic's reconciler" in page["Message"]
    assert report["clusters"][0] | {"nodes": 2, "failed": 1, "failures_reported": 1, "pages": 1} == \
        report["clusters"][0]
    # And the next run finds the same node and does nothing more
    listed(world, (NODE, "Failure"), (OTHER, "Running"))
    sweep(world, "2026-11-20T08:20:00Z", run="run-2")
    assert len(records(world)) == 1 and world.pages() == []


def test_given_many_failed_nodes_at_once_when_the_reconciler_runs_then_one_summary_page_covers_them(world):
    nodes = [f"i-{n:017x}" for n in range(1, 6)]
    listed(world, *[(node_id, "Failure") for node_id in nodes])
    sweep(world, "2026-11-20T08:15:00Z")
    # Then one record per node, every one paged, through a single summary page
    assert sorted(r["node_id"] for r in records(world)) == nodes
    assert all(r["paged"] for r in records(world))
    [page] = world.pages()
    assert page["Subject"] == f"[Medic] {CLUSTER}: 5 nodes need a human"
    assert all(node_id in page["Message"] for node_id in nodes)
    # And none pages again: each incident's page is claimed
    listed(world, *[(node_id, "Failure") for node_id in nodes])
    sweep(world, "2026-11-20T09:30:00Z", run="run-2")
    assert world.pages() == []


def test_given_a_failed_node_when_a_health_event_names_its_fault_later_then_the_event_path_still_acts_once(
        world, unhealthy_event):
    # Given the reconciler found the node first and paged
    listed(world, (NODE, "Failure"))
    sweep(world, "2026-11-20T08:10:00Z")
    # When the health event arrives with a fault Medic knows
    world.at("2026-11-20T08:14:05Z")
    event_record = replaced_on_event(world, unhealthy_event)
    # Then the event path replaces the node: one action
    assert (event_record["action"], event_record["outcome"]) == ("replace_node", "executed")
    # And the next sweep sees Medic's claim and adds nothing (no second action, no second page)
    listed(world, (NODE, "ShuttingDown"))
    sweep(world, "2026-11-20T08:20:00Z", run="run-2")
    world.hyperpod.assert_all_called()
    assert len(records(world)) == 1
    assert len(world.pages()) == 1  # the reconciler's only


def test_given_medic_replaced_a_node_on_its_event_when_the_reconciler_sees_it_failed_then_it_does_nothing(
        world, unhealthy_event):
    replaced_on_event(world, unhealthy_event)
    # When the sweep still sees the node in Failure (HyperPod has not moved it yet)
    listed(world, (NODE, "Failure"))
    report = sweep(world, "2026-11-20T08:16:00Z")
    # Then Medic's claim covers it: no record, no call, no page
    world.hyperpod.assert_all_called()
    assert records(world) == [] and world.pages() == []
    assert report["clusters"][0]["failures_reported"] == 0


def test_given_a_dry_run_when_the_reconciler_finds_a_failed_node_then_it_records_once_and_pages_nobody(world):
    world.set_mode("dry_run")
    listed(world, (NODE, "Failure"))
    sweep(world, "2026-11-20T08:15:00Z")
    listed(world, (NODE, "Failure"))
    sweep(world, "2026-11-20T08:20:00Z", run="run-2")
    [record] = records(world)
    assert (record["mode"], record["outcome"], record["paged"]) == ("dry_run", "deferred", False)
    assert world.pages() == []


def test_given_more_failed_nodes_than_a_run_takes_then_the_rest_is_left_for_the_next_run(world):
    nodes = [f"i-{n:017x}" for n in range(1, MAX_NODE_DECISIONS_PER_CLUSTER + 4)]
    listed(world, *[(node_id, "Failure") for node_id in nodes])
    first = sweep(world, "2026-11-20T08:15:00Z")["clusters"][0]
    assert (first["failures_reported"], first["left_for_next_run"]) == (MAX_NODE_DECISIONS_PER_CLUSTER, 3)
    listed(world, *[(node_id, "Failure") for node_id in nodes])
    second = sweep(world, "2026-11-20T08:20:00Z", run="run-2")["clusters"][0]
    assert second["failures_reported"] == 3
    assert sorted(r["node_id"] for r in records(world)) == nodes


def test_given_little_time_left_in_the_run_then_no_cluster_is_started(world):
    report = sweep(world, "2026-11-20T08:15:00Z", remaining_seconds=lambda: 5.0)
    assert report["clusters"] == [{"cluster": CLUSTER, "skipped": "no time left in this run"}]
    world.hyperpod.assert_all_called()  # not even ListClusterNodes


def test_given_a_large_cluster_all_pages_of_list_cluster_nodes_are_read(world):
    listed(world, (OTHER, "Running"), next_token="page-2")
    listed(world, (NODE, "Failure"), token="page-2")
    report = sweep(world, "2026-11-20T08:15:00Z")
    assert report["clusters"][0]["nodes"] == 2
    assert [r["node_id"] for r in records(world)] == [NODE]


def test_given_list_cluster_nodes_fails_then_the_run_reports_it_and_raises_nothing(world):
    world.hyperpod.stubber.add_client_error("list_cluster_nodes", "ThrottlingException", "slow down", 400,
                                            expected_params={"ClusterName": CLUSTER, "IncludeNodeLogicalIds": True})
    report = sweep(world, "2026-11-20T08:15:00Z")
    assert report["clusters"][0]["error"] == "ThrottlingException"
    assert records(world) == []


def test_given_a_malformed_schedule_event_then_it_is_rejected_and_nothing_is_called(world):
    report = reconcile({"id": "x", "source": "aws.sagemaker", "detail": []}, world.deps)
    assert report["rejected"] is True
    [record] = records(world)
    assert (record["outcome"], record["action"]) == ("rejected", "none")
    world.hyperpod.assert_all_called()


def test_given_automatic_recovery_a_failed_node_is_hyperpods_and_pages_only_when_its_repair_lasts(aws):
    config = {**CONFIG, "clusters": [{**CONFIG["clusters"][0], "node_recovery": "automatic"}]}
    for medic in medic_world(parse_config(config), aws):
        listed(medic, (NODE, "Failure"))
        sweep(medic, "2026-11-20T08:15:00Z")
        [deferred] = records(medic)
        assert (deferred["outcome"], deferred["paged"]) == ("deferred", False)
        assert "automatic node recovery" in deferred["reason"]
        # When HyperPod still has not repaired it after the repair window
        listed(medic, (NODE, "Failure"))
        sweep(medic, "2026-11-20T08:46:00Z", run="run-2")
        # Then one page says the repair is taking too long
        slow = records(medic)[-1]
        assert (slow["fault"], slow["outcome"], slow["paged"]) == ("failed_nodes", "deferred", True)
        assert "HyperPod's repair" in slow["reason"]
        assert len(medic.pages()) == 1


# --- claims never finished

def test_given_a_run_died_after_claiming_when_the_node_is_still_failed_then_the_reconciler_retries_once(
        world, unhealthy_event, monkeypatch):
    die_after_claiming(world, unhealthy_event, monkeypatch)
    assert claim_of(world).outcome == IN_FLIGHT
    # When the reconciler runs while the run might still be alive: it leaves the claim alone
    listed(world, (NODE, "Failure"))
    sweep(world, "2026-11-20T08:15:00Z")
    assert records(world) == []
    # When it runs again later: it re-checks the node, sees no repair, and makes the call once
    listed(world, (NODE, "Failure"))
    world.hyperpod.node(NODE, status="Failure")
    world.hyperpod.node_action(REPLACE, NODE)
    sweep(world, "2026-11-20T08:19:00Z", run="run-2")
    world.hyperpod.assert_all_called()
    [record] = records(world)
    assert (record["action"], record["outcome"], record["fault"], record["attempt"]) == (
        "replace_node", "executed", "gpu_fatal", 1)
    assert "did not finish" in record["reason"] and "retrying it once" in record["reason"]
    # (the accepted retry leaves its claim in flight, as the event path does: a sweep settles it)
    assert (claim_of(world).outcome, claim_of(world).retries) == ("in_flight", 1)
    # And a later run finds the node in repair: it settles the claim with no second record and no call
    listed(world, (NODE, "ShuttingDown"))
    world.hyperpod.node(NODE, status="ShuttingDown")
    sweep(world, "2026-11-20T08:24:00Z", run="run-3")
    world.hyperpod.assert_all_called()
    assert len(records(world)) == 1
    assert claim_of(world).outcome == "executed"


def test_given_a_replacement_claim_in_flight_when_the_node_is_in_repair_then_it_is_settled_without_a_second_record(
        world, unhealthy_event, monkeypatch):
    # Given a replace claimed in flight (an accepted call leaves it so; here its run died after claiming)
    die_after_claiming(world, unhealthy_event, monkeypatch)
    # When Lambda retries the same event: it calls nothing and says the claim is unconfirmed
    retry = world.handle(unhealthy_event)
    assert (retry["outcome"], retry["action"]) == ("duplicate", "none")
    assert "still unconfirmed" in retry["reason"] and "replace_node" in retry["reason"]
    world.log.lines.clear()
    # When the reconciler finds the node in repair
    listed(world, (NODE, "ShuttingDown"))
    world.hyperpod.node(NODE, status="ShuttingDown")
    sweep(world, "2026-11-20T08:17:00Z")
    # Then the claim is settled as executed: no call, no page, no second remediation record
    world.hyperpod.assert_all_called()
    assert records(world) == [] and world.pages() == []
    assert claim_of(world).outcome == "executed"


def test_given_a_reboot_claim_in_flight_when_the_node_is_in_repair_then_one_record_confirms_it(
        world, unhealthy_event, monkeypatch):
    # Given a run died after claiming a reboot (a finished reboot settles its own claim)
    die_after_claiming(world, node_event(unhealthy_event, reason="NvidiaErrorReboot"),
                       monkeypatch)
    listed(world, (NODE, "Pending"))
    world.hyperpod.node(NODE, status="Pending")
    sweep(world, "2026-11-20T08:17:00Z")
    world.hyperpod.assert_all_called()  # no reboot call
    [record] = records(world)
    assert (record["action"], record["outcome"], record["paged"]) == ("reboot_node", "executed", False)
    assert "went through" in record["reason"]
    assert claim_of(world).outcome == "executed"


def test_given_a_run_died_after_claiming_when_the_node_runs_on_then_medic_pages_instead_of_guessing(
        world, unhealthy_event, monkeypatch):
    die_after_claiming(world, unhealthy_event, monkeypatch)
    listed(world, (NODE, "Running"))
    world.hyperpod.node(NODE, status="Running")
    sweep(world, "2026-11-20T08:19:00Z")
    world.hyperpod.assert_all_called()
    [record] = records(world)
    assert (record["action"], record["outcome"], record["paged"]) == ("replace_node", "failed", True)
    [page] = world.pages()
    assert NODE in page["Subject"]
    assert claim_of(world).outcome == "failed"


def test_given_a_run_died_after_claiming_the_node_is_blocked_only_until_the_claim_expires(
        world, unhealthy_event, monkeypatch):
    # Given a run died after claiming the replace, and no reconciler settled it
    die_after_claiming(world, unhealthy_event, monkeypatch)
    # When the same fault is reported inside the cooldown: a duplicate, nothing called
    world.at("2026-11-20T08:44:05Z")
    world.hyperpod.node(NODE)
    inside = world.handle(node_event(unhealthy_event, event_id="inside-cooldown"))
    assert inside["outcome"] == "duplicate"
    # When it is reported after the cooldown: the claim has expired and the node is replaced
    world.at("2026-11-20T09:15:05Z")
    world.hyperpod.node(NODE)  # (the cluster size is still cached from the first run)
    world.hyperpod.node_action(REPLACE, NODE)
    after = world.handle(node_event(unhealthy_event, event_id="after-cooldown", time="2026-11-20T09:15:05Z"))
    world.hyperpod.assert_all_called()
    assert (after["action"], after["outcome"]) == ("replace_node", "executed")
    assert (claim_of(world).outcome, claim_of(world).acted_at.isoformat()) == ("in_flight", "2026-11-20T09:15:05+00:00")


def test_given_an_unfinished_claim_expired_unseen_when_the_reconciler_runs_then_it_pages_and_does_not_retry(
        world, unhealthy_event, monkeypatch):
    die_after_claiming(world, unhealthy_event, monkeypatch)
    # When the first sweep to see it comes after the cooldown (the reconciler was down meanwhile)
    listed(world, (NODE, "Failure"))
    sweep(world, "2026-11-20T09:15:00Z")
    # Then the claim no longer covers the node: it is a failed node like any other (a page, no call)
    world.hyperpod.assert_all_called()
    [record] = records(world)
    assert (record["fault"], record["action"], record["outcome"], record["paged"]) == (
        "unknown", "none", "deferred", True)


def test_given_an_event_settles_the_claim_while_the_reconciler_rechecks_then_only_one_call_is_made(
        world, unhealthy_event, monkeypatch):
    die_after_claiming(world, unhealthy_event, monkeypatch)
    nodes, describe = NodeStore(world.deps.table), world.deps.hyperpod.describe_node

    def another_invocation_acts_meanwhile(cluster, node_id):
        found = describe(cluster, node_id)
        nodes.retry_claim(cluster, claim_of(world), world.clock[0])  # someone else claims it first
        return found

    listed(world, (NODE, "Failure"))
    world.hyperpod.node(NODE, status="Failure")
    monkeypatch.setattr(world.deps.hyperpod, "describe_node", another_invocation_acts_meanwhile)
    sweep(world, "2026-11-20T08:19:00Z")
    # Then the reconciler's conditional claim loses: no replace from it (the stub has none), no record
    world.hyperpod.assert_all_called()
    assert records(world) == []


# --- repairs that take too long

def test_given_hyperpod_repairs_a_node_for_longer_than_the_repair_window_then_it_pages_once(world):
    listed(world, (NODE, "Pending"))
    sweep(world, "2026-11-20T08:15:00Z")
    listed(world, (NODE, "Pending"))
    sweep(world, "2026-11-20T08:40:00Z", run="run-2")
    assert records(world) == []  # 25 minutes: inside the 30-minute window
    listed(world, (NODE, "Pending"))
    sweep(world, "2026-11-20T08:46:00Z", run="run-3")
    [record] = records(world)
    assert (record["fault"], record["action"], record["outcome"], record["paged"]) == (
        "failed_nodes", "none", "deferred", True)
    assert "Pending for 31 min" in record["reason"] and "HyperPod's repair" in record["reason"]
    [page] = world.pages()
    assert page["Subject"] == f"[Medic] {CLUSTER} {NODE}: repair taking too long"
    # And later runs do not page again while the repair lasts
    listed(world, (NODE, "SystemUpdating"))
    sweep(world, "2026-11-20T08:51:00Z", run="run-4")
    assert len(records(world)) == 1 and world.pages() == []


def test_given_a_repair_ended_when_the_node_goes_into_repair_again_then_that_repair_is_timed_afresh(world):
    listed(world, (NODE, "Pending"))
    sweep(world, "2026-11-20T08:15:00Z")
    listed(world, (NODE, "Pending"))
    sweep(world, "2026-11-20T08:46:00Z", run="run-2")
    assert len(world.pages()) == 1
    listed(world, (NODE, "Running"))
    sweep(world, "2026-11-20T08:51:00Z", run="run-3")
    # When it goes into repair again
    listed(world, (NODE, "Pending"))
    sweep(world, "2026-11-20T09:00:00Z", run="run-4")
    listed(world, (NODE, "Pending"))
    sweep(world, "2026-11-20T09:20:00Z", run="run-5")
    assert world.pages() == []  # 20 minutes into the new repair
    listed(world, (NODE, "Pending"))
    sweep(world, "2026-11-20T09:31:00Z", run="run-6")
    assert len(world.pages()) == 1


def test_given_medic_started_a_repair_that_lasts_then_the_clock_starts_at_medics_action(world, unhealthy_event):
    replaced_on_event(world, unhealthy_event)  # 08:14:05
    listed(world, (NODE, "ShuttingDown"))
    sweep(world, "2026-11-20T08:19:00Z")
    listed(world, (NODE, "Pending"))
    sweep(world, "2026-11-20T08:45:00Z", run="run-2")
    slow = records(world)[-1]
    assert "since Medic's repair began at 08:14 UTC" in slow["reason"]
    assert slow["paged"] is True


# --- as AWS behaves: replacements are new instances, NotFound nodes are gone, NodeRecovery is DescribeCluster's

NEW_NODE = "i-0fedcba9876543210"


def test_given_medic_replaced_a_node_the_new_instance_in_repair_is_credited_to_medic_by_its_logical_id(
        world, unhealthy_event):
    """BatchReplaceClusterNodes provisions a new instance id; NodeLogicalId persists."""
    world.hyperpod.node(NODE, logical_id="worker-7")
    world.hyperpod.size(16)
    world.hyperpod.node_action(REPLACE, NODE)
    world.handle(unhealthy_event)  # 08:14:05
    listed(world, (NEW_NODE, "Pending"), logical_ids={NEW_NODE: "worker-7"})
    sweep(world, "2026-11-20T08:19:00Z")
    listed(world, (NEW_NODE, "Pending"), logical_ids={NEW_NODE: "worker-7"})
    sweep(world, "2026-11-20T08:45:00Z", run="run-2")
    slow = records(world)[-1]
    assert slow["node_id"] == NEW_NODE
    assert "since Medic's repair began at 08:14 UTC" in slow["reason"]


def test_given_a_node_listed_as_not_found_the_reconciler_leaves_it_alone(world):
    listed(world, (NODE, "NotFound"), (OTHER, "Running"))
    report = sweep(world, "2026-11-20T08:15:00Z")
    world.hyperpod.assert_all_called()  # no DescribeCluster, no DescribeClusterNode, no node action
    assert records(world) == [] and world.pages() == []
    assert report["clusters"][0]["failed"] == 0


def test_given_describe_cluster_says_automatic_the_reconciler_defers_and_reports_the_disagreement_once(world):
    listed(world, (NODE, "Failure"), node_recovery="Automatic")
    sweep(world, "2026-11-20T08:15:00Z")
    listed(world, (NODE, "Failure"))
    sweep(world, "2026-11-20T08:20:00Z", run="run-2")
    world.hyperpod.assert_all_called()
    mismatch = [r for r in world.log.lines if r["fault"] == "config_mismatch"]
    assert len(mismatch) == 1 and mismatch[0]["paged"] is True
    assert (mismatch[0]["trigger"], mismatch[0]["event_id"]) == ("reconcile", "run-1")
    failed = [r for r in records(world) if r["node_id"] == NODE]
    assert failed and all(r["outcome"] == "deferred" and not r["paged"] for r in failed)
    assert [page["Subject"] for page in world.pages()] == [
        f"[Medic] {CLUSTER}: node_recovery in medic.yaml disagrees with the cluster"]


def test_given_a_sweep_then_it_publishes_the_clusters_failed_and_in_repair_gauges_as_emf(world, capsys):
    # Given HyperPod lists one node in Failure, one being replaced (Pending) and one Running
    listed(world, (NODE, "Failure"), (OTHER, "Pending"), ("i-0aaaaaaaaaaaaaaa1", "Running"))
    capsys.readouterr()
    # When the reconciler sweeps the cluster
    sweep(world, "2026-11-20T08:15:00Z")
    # Then Medic/Cluster carries FailedNodes 1 and NodesInRepair 1 for the cluster: the failed-node alarm's
    # metric (HyperPod publishes no CloudWatch node metric for Slurm clusters)
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"Medic/Cluster"' in line]
    gauges = {name: (doc[name], doc["Cluster"]) for doc in emf
              for name in ("FailedNodes", "NodesInRepair") if name in doc}
    assert gauges == {"FailedNodes": ([1.0], CLUSTER), "NodesInRepair": ([1.0], CLUSTER)}
    assert all(sorted(doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]) == ["Cluster", "service"]
               and doc["service"] == "medic" for doc in emf)
