"""Specification, end to end: the node path as AWS behaves (Slurm controllers, NodeRecovery, replacements,
NotFound) and node events Medic must not trust (replayed, stale, foreign), through the bundled scenarios."""

from __future__ import annotations

from sim.scenario import SCENARIOS
from tests.e2e.conftest import node_action_calls, outcomes

NODE = "i-0d4e5f60718293a4b"


def node_records(result) -> list[dict]:
    return [record for record in result.records if record["fault"] != "config_mismatch"]


def test_t_a_slurm_controller_in_the_controller_machine_group_gets_no_action_and_one_page(replay):
    result = replay(SCENARIOS / "t-slurm-controller-machine.jsonl")
    assert outcomes(result) == [("reboot_node", "suppressed")]
    assert node_action_calls(result) == {}
    assert len(result.pages) == 1 and result.records[0]["instance_group"] == "controller-machine"


def test_u_describe_clusters_node_recovery_automatic_defers_and_the_disagreement_is_reported_once(replay):
    result = replay(SCENARIOS / "u-node-recovery-disagrees.jsonl")
    assert [r["outcome"] for r in node_records(result)] == ["deferred", "deferred"]
    assert node_action_calls(result) == {}
    [mismatch] = [r for r in result.records if r["fault"] == "config_mismatch"]
    assert mismatch["paged"] is True and "NodeRecovery Automatic" in mismatch["reason"]
    assert [page["subject"] for page in result.pages] == [
        "[Medic] pretrain-slurm: node_recovery in medic.yaml disagrees with the cluster"]


def test_v_a_node_medic_replaced_failing_again_hours_later_under_its_old_id_causes_no_second_call(replay):
    result = replay(SCENARIOS / "v-replaced-node-old-id.jsonl")
    assert node_action_calls(result) == {"sagemaker:BatchReplaceClusterNodes": 1}
    [call] = result.node_actions
    assert call["replacements"][NODE] != NODE  # a new instance id, as BatchReplaceClusterNodes provisions
    later = [r for r in result.records if r["trigger"] == "node_health"][-1]
    assert (later["action"], later["outcome"]) == ("none", "ignored")
    assert not any(r["outcome"] == "executed" and r["trigger"] != "node_health" for r in result.records)
    assert result.pages == []


def test_w_a_not_found_node_is_left_alone(replay):
    result = replay(SCENARIOS / "w-not-found-node.jsonl")
    assert outcomes(result) == [("none", "ignored")]
    assert node_action_calls(result) == {} and result.pages == []


def test_x_the_same_event_id_delivered_again_two_hours_later_makes_no_second_call(replay):
    result = replay(SCENARIOS / "x-event-redelivered-later.jsonl")
    node_health = [r for r in result.records if r["trigger"] == "node_health"]
    assert [(r["action"], r["outcome"]) for r in node_health] == [("reboot_node", "executed"), ("none", "duplicate")]
    assert node_action_calls(result) == {"sagemaker:BatchRebootClusterNodes": 1}


def test_y_an_unhealthy_event_older_than_the_nodes_last_healthy_report_is_ignored_as_stale(replay):
    result = replay(SCENARIOS / "y-stale-unhealthy-event.jsonl")
    healthy, stale = result.records
    assert (healthy["fault"], stale["outcome"], stale["action"]) == ("healthy", "ignored", "none")
    assert "08:19:05" in stale["reason"] and "08:44:05" in stale["reason"]
    assert node_action_calls(result) == {} and result.pages == []


def test_z_a_node_event_with_a_foreign_account_cluster_arn_is_rejected_without_a_call(replay):
    result = replay(SCENARIOS / "z-foreign-cluster-arn.jsonl")
    assert outcomes(result) == [("none", "rejected")]
    assert "999999999999" in result.records[0]["reason"]
    assert node_action_calls(result) == {} and result.pages == []
