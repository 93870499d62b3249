"""Specification: deciding with capacity in mind (issue 32, items 4 and 5; pure, no AWS)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from medic.core.models import Action, Fault, Outcome, Why
from medic.core.pages import Page
from medic.flows.jobs.policy import JobDecision, capacity_backoff, wait_for_capacity
from medic.flows.node.capacity import Capacity
from medic.flows.node.policy import decide_node
from tests.unit.test_node_policy import NOW, acted, context

NO_PLAN = Capacity(False, "no training plan on instance group gpu-workers and no capacity failure in it in the last "
                          "hour")
EMPTY_PLAN = Capacity(True, "instance group gpu-workers runs on training plan p5 (Active), which has no available "
                            "instance (DescribeTrainingPlan AvailableInstanceCount 0)")


def asked(answer: Capacity, groups: list[str]):
    def capacity(group: str) -> Capacity:
        groups.append(group)
        return answer
    return capacity


def test_a_replace_that_can_be_served_says_which_capacity_signal_it_used():
    groups: list[str] = []
    decision = decide_node(context(capacity=asked(NO_PLAN, groups)))
    assert (decision.action, decision.outcome) == (Action.REPLACE_NODE, Outcome.EXECUTED)
    assert groups == ["gpu-workers"] and "capacity: no training plan on instance group gpu-workers" in decision.reason


def test_a_replace_class_fault_without_capacity_is_not_replaced_but_paged_and_held_for_a_sweep():
    decision = decide_node(context(capacity=asked(EMPTY_PLAN, [])))
    assert (decision.action, decision.outcome, decision.why) == (Action.REPLACE_NODE, Outcome.DEFERRED,
                                                                 Why.RETRY_LATER)
    assert decision.page is Page.INCIDENT and decision.waits_for_capacity == EMPTY_PLAN.said
    assert "training plan p5" in decision.reason


def test_a_reboot_class_fault_escalating_to_replace_without_capacity_is_rebooted_instead():
    # Given a node rebooted 3 hours ago for the same reboot-class fault: the policy escalates to a replace
    state = acted(Fault.GPU_REBOOT, Action.REBOOT_NODE, minutes_ago=180, reboot_minutes_ago=180)
    escalating = decide_node(context(fault=Fault.GPU_REBOOT, state=state))
    assert escalating.action is Action.REPLACE_NODE
    # When no replacement can be served
    decision = decide_node(context(fault=Fault.GPU_REBOOT, state=state, capacity=asked(EMPTY_PLAN, [])))
    # Then it is rebooted, saying why
    assert (decision.action, decision.outcome) == (Action.REBOOT_NODE, Outcome.EXECUTED)
    assert decision.reason.startswith("A replace cannot be served (instance group gpu-workers runs on training plan")


def test_a_reboot_never_asks_about_capacity():
    groups: list[str] = []
    decision = decide_node(context(fault=Fault.GPU_REBOOT, capacity=asked(EMPTY_PLAN, groups)))
    assert decision.action is Action.REBOOT_NODE and groups == []


@pytest.mark.parametrize("restarts, minutes", [(0, 5), (1, 10), (2, 20), (3, 40), (4, 60), (9, 60), (99, 60)])
def test_the_capacity_backoff_doubles_from_minutes_and_is_bounded(restarts, minutes):
    assert capacity_backoff(restarts, 5, 60) == timedelta(minutes=minutes)


RESTART = JobDecision(Fault.JOB_RETRYABLE, Action.RESTART_JOB, Outcome.EXECUTED,
                      "Retryable failure (insufficient_capacity); restart 2 of 3 from the checkpoint.", attempt=2)


def test_a_restart_after_a_capacity_failure_waits_and_says_when_it_is_due():
    decision, due = wait_for_capacity(RESTART, "insufficient_capacity", 1, 5, 60, NOW)
    assert due == NOW + timedelta(minutes=10)
    assert (decision.outcome, decision.why, decision.attempt) == (Outcome.DEFERRED, Why.RETRY_LATER, 2)
    assert f"next try due at {due:%Y-%m-%d %H:%M} UTC" in decision.reason


@pytest.mark.parametrize("decision, label", [
    (RESTART, "internal_error"),  # another retryable failure: at once
    (JobDecision(Fault.JOB_RETRYABLE, Action.RESTART_JOB, Outcome.DRY_RUN, "Dry run: would restart."),
     "insufficient_capacity"),  # nothing executes: nothing waits
])
def test_other_decisions_do_not_wait(decision, label):
    assert wait_for_capacity(decision, label, 0, 5, 60, NOW) == (decision, None)
