"""Specification: the node remediation policy (pure; no AWS)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from medic.config import Cluster, Guardrails
from medic.core.mode import Mode
from medic.core.models import (
    Action,
    ClusterAction,
    ClusterInfo,
    ClusterState,
    Fault,
    NodeInfo,
    NodeState,
    Outcome,
)
from medic.core.pages import Page
from medic.flows.node.policy import NodeContext, decide_node

NOW = datetime(2026, 11, 20, 8, 14, 5, tzinfo=UTC)
NODE = "i-0d4e5f60718293a4b"
SLURM = Cluster(name="pretrain-slurm", id="k3v9q2w8x1za", orchestrator="slurm")
EMPTY = ClusterState(actions=(), version=0)


def sized(nodes: int, node_recovery: str | None = None, controllers: frozenset[str] = frozenset(),
          calls: list | None = None):
    """DescribeCluster's answer as the adapter gives it (``calls`` counts the lookups)."""
    def info() -> ClusterInfo:
        if calls is not None:
            calls.append(1)
        return ClusterInfo(size=nodes, node_recovery=node_recovery, provisioning=None, controller_groups=controllers)
    return info


def context(**changes) -> NodeContext:
    base = NodeContext(mode=Mode.ACT, cluster=SLURM, guardrails=Guardrails(), fault=Fault.GPU_FATAL,
                       node=NodeInfo(NODE, "gpu-workers", "Running"), state=None, cluster_state=EMPTY,
                       cluster_info=sized(32), now=NOW)
    return base._replace(**changes)


def acted(fault: Fault, action: Action, minutes_ago: float, reboot_minutes_ago: float | None = None,
          outcome: str = "executed") -> NodeState:
    reboot = NOW - timedelta(minutes=reboot_minutes_ago) if reboot_minutes_ago is not None else None
    return NodeState(fault=fault.value, action=action.value, outcome=outcome,
                     acted_at=NOW - timedelta(minutes=minutes_ago), attempt=1, last_reboot_at=reboot, version=1)


def busy_cluster(actions: int, minutes_ago: float) -> ClusterState:
    return ClusterState(tuple(ClusterAction(f"i-{n:017x}", "replace_node", NOW - timedelta(minutes=minutes_ago))
                              for n in range(actions)), version=actions)


def test_a_fatal_gpu_fault_replaces_the_node():
    decision = decide_node(context(fault=Fault.GPU_FATAL))
    assert (decision.action, decision.outcome, decision.page) == (Action.REPLACE_NODE, Outcome.EXECUTED, Page.NONE)
    assert decision.attempt == 1


def test_a_reboot_fault_reboots_the_node():
    decision = decide_node(context(fault=Fault.GPU_REBOOT))
    assert (decision.action, decision.outcome) == (Action.REBOOT_NODE, Outcome.EXECUTED)


def test_a_node_rebooted_today_that_fails_again_is_replaced():
    # Given a node Medic rebooted two hours ago
    state = acted(Fault.GPU_REBOOT, Action.REBOOT_NODE, minutes_ago=120, reboot_minutes_ago=120)
    # When it reports the reboot fault again
    decision = decide_node(context(fault=Fault.GPU_REBOOT, state=state))
    # Then Medic escalates to a replacement, and says why
    assert (decision.action, decision.outcome) == (Action.REPLACE_NODE, Outcome.EXECUTED)
    assert "escalating to replace" in decision.reason
    assert decision.attempt == 2


def test_a_reboot_older_than_the_escalation_window_is_forgotten():
    state = acted(Fault.GPU_REBOOT, Action.REBOOT_NODE, minutes_ago=25 * 60, reboot_minutes_ago=25 * 60)
    decision = decide_node(context(fault=Fault.GPU_REBOOT, state=state))
    assert (decision.action, decision.attempt) == (Action.REBOOT_NODE, 1)


def test_a_fatal_fault_right_after_a_reboot_is_replaced_inside_the_cooldown():
    state = acted(Fault.GPU_REBOOT, Action.REBOOT_NODE, minutes_ago=20, reboot_minutes_ago=20)
    decision = decide_node(context(fault=Fault.GPU_FATAL, state=state))
    assert (decision.action, decision.outcome) == (Action.REPLACE_NODE, Outcome.EXECUTED)


@pytest.mark.parametrize("fault,action", [(Fault.GPU_FATAL, Action.REPLACE_NODE),
                                          (Fault.GPU_REBOOT, Action.REBOOT_NODE)])
def test_the_same_fault_inside_the_cooldown_is_a_duplicate(fault, action):
    state = acted(fault, action, minutes_ago=5, reboot_minutes_ago=5 if action is Action.REBOOT_NODE else None)
    decision = decide_node(context(fault=fault, state=state))
    assert (decision.outcome, decision.page) == (Outcome.DUPLICATE, Page.NONE)


def test_a_redelivery_after_medics_own_repair_started_is_a_duplicate_not_deferred():
    # Given Medic replaced the node a minute ago, and HyperPod now shows it Pending
    state = acted(Fault.GPU_FATAL, Action.REPLACE_NODE, minutes_ago=1)
    node = NodeInfo(NODE, "gpu-workers", "Pending")
    # When the same event is delivered again
    decision = decide_node(context(fault=Fault.GPU_FATAL, state=state, node=node))
    # Then it reads as what it is: already handled by Medic
    assert (decision.outcome, decision.page) == (Outcome.DUPLICATE, Page.NONE)


def test_the_same_fault_after_the_cooldown_acts_again():
    state = acted(Fault.GPU_FATAL, Action.REPLACE_NODE, minutes_ago=61)
    assert decide_node(context(fault=Fault.GPU_FATAL, state=state)).outcome is Outcome.EXECUTED


def test_a_different_fault_inside_the_cooldown_is_held_back_and_pages():
    # Given a node replaced ten minutes ago
    state = acted(Fault.GPU_FATAL, Action.REPLACE_NODE, minutes_ago=10)
    # When the new node reports a reboot fault
    decision = decide_node(context(fault=Fault.GPU_REBOOT, state=state))
    # Then Medic does not act again inside the cooldown, and a human hears of it
    assert (decision.outcome, decision.page) == (Outcome.SUPPRESSED, Page.INCIDENT)
    assert "cooldown" in decision.reason


def test_a_protected_node_is_never_acted_on_and_pages():
    decision = decide_node(context(node=NodeInfo(NODE, "controller", "Running")))
    assert (decision.action, decision.outcome, decision.page) == (
        Action.REPLACE_NODE, Outcome.SUPPRESSED, Page.INCIDENT)
    assert "protected" in decision.reason


def test_automatic_node_recovery_clusters_are_left_to_hyperpod():
    automatic = SLURM.model_copy(update={"node_recovery": "automatic"})
    decision = decide_node(context(cluster=automatic))
    assert (decision.action, decision.outcome, decision.page) == (Action.NONE, Outcome.DEFERRED, Page.NONE)


def test_an_unknown_fault_takes_no_action_and_pages():
    decision = decide_node(context(fault=Fault.UNKNOWN))
    assert (decision.action, decision.outcome, decision.page) == (Action.NONE, Outcome.DEFERRED, Page.INCIDENT)


def test_a_user_application_error_is_the_jobs_problem():
    decision = decide_node(context(fault=Fault.USER_APP_ERROR))
    assert (decision.action, decision.outcome, decision.page) == (Action.NONE, Outcome.IGNORED, Page.NONE)


def test_a_healthy_node_closes_its_incident_quietly():
    decision = decide_node(context(fault=Fault.HEALTHY, node=None))
    assert (decision.outcome, decision.page, decision.close_incident) == (Outcome.IGNORED, Page.NONE, True)


def test_a_node_gone_from_the_cluster_is_ignored():
    assert decide_node(context(node=None)).outcome is Outcome.IGNORED


@pytest.mark.parametrize("status", ["Pending", "ShuttingDown", "SystemUpdating"])
def test_a_node_already_in_repair_is_deferred(status):
    decision = decide_node(context(node=NodeInfo(NODE, "gpu-workers", status)))
    assert (decision.outcome, decision.page) == (Outcome.DEFERRED, Page.NONE)


def test_the_hourly_budget_holds_back_further_actions_with_a_storm_page():
    # Given four actions in this cluster in the last hour (the default budget)
    decision = decide_node(context(cluster_state=busy_cluster(4, minutes_ago=40), cluster_info=sized(1000)))
    # Then the fifth is suppressed, with the cluster's summary page rather than a page per node
    assert (decision.outcome, decision.page) == (Outcome.SUPPRESSED, Page.STORM)
    assert "budget" in decision.reason


def test_actions_older_than_an_hour_do_not_count_against_the_budget():
    decision = decide_node(context(cluster_state=busy_cluster(4, minutes_ago=61), cluster_info=sized(1000)))
    assert decision.outcome is Outcome.EXECUTED


def test_the_breaker_opens_when_too_much_of_the_cluster_is_in_repair():
    # Given an 8-node cluster with 2 nodes in repair (25 %)
    decision = decide_node(context(cluster_state=busy_cluster(2, minutes_ago=5), cluster_info=sized(8)))
    # Then a third repair would exceed the 25 % breaker
    assert (decision.outcome, decision.page) == (Outcome.SUPPRESSED, Page.STORM)
    assert "Breaker" in decision.reason


def test_per_cluster_guardrail_overrides_apply():
    guardrails = Guardrails(max_node_actions_per_hour=10)
    decision = decide_node(context(guardrails=guardrails, cluster_state=busy_cluster(4, 30), cluster_info=sized(1000)))
    assert decision.outcome is Outcome.EXECUTED


def test_dry_run_decides_but_does_not_execute():
    decision = decide_node(context(mode=Mode.DRY_RUN))
    assert (decision.action, decision.outcome, decision.page) == (Action.REPLACE_NODE, Outcome.DRY_RUN, Page.NONE)
    assert "would replace" in decision.reason


def test_paused_suppresses_and_pages_so_the_node_is_not_forgotten():
    decision = decide_node(context(mode=Mode.PAUSED))
    assert (decision.outcome, decision.page) == (Outcome.SUPPRESSED, Page.INCIDENT)
    assert "paused" in decision.reason


def test_a_duplicate_wins_over_paused():
    state = acted(Fault.GPU_FATAL, Action.REPLACE_NODE, minutes_ago=5)
    assert decide_node(context(mode=Mode.PAUSED, state=state)).outcome is Outcome.DUPLICATE


# --- AWS's facts: node statuses, Slurm controllers, the cluster's real NodeRecovery, event times


def test_a_node_whose_status_is_not_found_is_gone_and_never_acted_on():
    """ClusterInstanceStatus has seven values; NotFound means the instance is no longer there."""
    decision = decide_node(context(node=NodeInfo(NODE, "gpu-workers", "NotFound")))
    assert (decision.action, decision.outcome, decision.page) == (Action.NONE, Outcome.IGNORED, Page.NONE)
    assert "NotFound" in decision.reason


@pytest.mark.parametrize("group", ["controller-machine", "login-group", "controller", "login"])
def test_the_group_names_aws_samples_use_for_controller_and_login_are_protected_by_default(group):
    decision = decide_node(context(fault=Fault.GPU_REBOOT, node=NodeInfo(NODE, group, "Running")))
    assert (decision.outcome, decision.page) == (Outcome.SUPPRESSED, Page.INCIDENT)


def test_a_slurm_controller_by_describe_cluster_slurm_config_is_not_rebooted_without_the_opt_in():
    """DescribeCluster InstanceGroups[].SlurmConfig.NodeType Controller names the controller group."""
    cluster = SLURM.model_copy(update={"protected_groups": []})
    decision = decide_node(context(cluster=cluster, fault=Fault.GPU_REBOOT, node=NodeInfo(NODE, "head", "Running"),
                                   cluster_info=sized(32, controllers=frozenset({"head"}))))
    assert (decision.action, decision.outcome, decision.page) == (
        Action.REBOOT_NODE, Outcome.SUPPRESSED, Page.INCIDENT)
    assert "allow_controller_reboot" in decision.reason


def test_with_allow_controller_reboot_a_slurm_controller_is_rebooted_but_never_replaced():
    """AWS accepts a reboot of a Slurm controller node and refuses its replacement."""
    cluster = SLURM.model_copy(update={"protected_groups": [], "allow_controller_reboot": True})
    controller = NodeInfo(NODE, "controller-machine", "Running")
    reboot = decide_node(context(cluster=cluster, fault=Fault.GPU_REBOOT, node=controller))
    replace_ = decide_node(context(cluster=cluster, fault=Fault.GPU_FATAL, node=controller))
    assert (reboot.action, reboot.outcome) == (Action.REBOOT_NODE, Outcome.EXECUTED)
    assert (replace_.action, replace_.outcome, replace_.page) == (
        Action.REPLACE_NODE, Outcome.SUPPRESSED, Page.INCIDENT)
    assert "does not replace Slurm controller" in replace_.reason


def test_an_eks_group_named_controller_is_no_slurm_controller():
    eks = Cluster(name="finetune-eks", id="p7r2m4x9c1qa", orchestrator="eks", protected_groups=[])
    decision = decide_node(context(cluster=eks, node=NodeInfo(NODE, "controller", "Running")))
    assert decision.outcome is Outcome.EXECUTED


def test_describe_cluster_node_recovery_automatic_defers_even_when_the_config_says_none():
    decision = decide_node(context(cluster_info=sized(32, node_recovery="automatic")))
    assert (decision.action, decision.outcome, decision.page) == (Action.NONE, Outcome.DEFERRED, Page.NONE)
    assert "NodeRecovery Automatic" in decision.reason


def test_describe_cluster_node_recovery_none_acts_even_when_the_config_says_automatic():
    automatic = SLURM.model_copy(update={"node_recovery": "automatic"})
    decision = decide_node(context(cluster=automatic, cluster_info=sized(32, node_recovery="none")))
    assert decision.outcome is Outcome.EXECUTED


def test_a_healthy_report_never_looks_the_cluster_up():
    calls: list = []
    decide_node(context(fault=Fault.HEALTHY, cluster_info=sized(32, calls=calls)))
    assert calls == []


def test_an_unhealthy_event_older_than_the_nodes_last_healthy_report_is_stale():
    """Attack: an archive replay of an old unhealthy event after the node reported Healthy."""
    decision = decide_node(context(event_time=NOW - timedelta(minutes=30), last_healthy_at=NOW - timedelta(minutes=5)))
    assert (decision.action, decision.outcome, decision.page) == (Action.NONE, Outcome.IGNORED, Page.NONE)
    assert "2026-11-20 07:44:05" in decision.reason and "2026-11-20 08:09:05" in decision.reason


def test_an_event_older_than_medics_last_action_on_the_node_is_stale():
    state = acted(Fault.GPU_REBOOT, Action.REBOOT_NODE, minutes_ago=10)
    decision = decide_node(context(fault=Fault.GPU_FATAL, state=state, event_time=NOW - timedelta(minutes=20)))
    assert (decision.action, decision.outcome) == (Action.NONE, Outcome.IGNORED)
    assert "before Medic's last action" in decision.reason


def test_a_stale_healthy_report_does_not_close_the_incident_opened_after_it():
    state = acted(Fault.GPU_FATAL, Action.REPLACE_NODE, minutes_ago=10)
    decision = decide_node(context(fault=Fault.HEALTHY, state=state, event_time=NOW - timedelta(minutes=20)))
    assert (decision.outcome, decision.close_incident) == (Outcome.IGNORED, False)


def test_an_event_about_an_instance_medic_replaced_is_ignored_hours_later():
    """BatchReplaceClusterNodes gives the node a new instance id: the old one is gone for good."""
    state = acted(Fault.GPU_FATAL, Action.REPLACE_NODE, minutes_ago=180)
    decision = decide_node(context(node=None, state=state))
    assert (decision.action, decision.outcome) == (Action.NONE, Outcome.IGNORED)
    assert "Medic replaced it" in decision.reason
