"""Specification: the reconciler's pure decisions (unfinished claims, coverage, repair timing, its event)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from medic.config import Cluster
from medic.core.mode import Mode
from medic.core.models import NodeInfo, Outcome
from medic.core.repairs import IN_FLIGHT, RESULT_UNKNOWN, PendingClaim
from medic.flows.node.sweep import ScheduleEvent
from medic.flows.node.sweep_policy import (
    MAX_PENDING_RETRIES,
    SETTLE,
    STALE_CLAIM,
    Resolution,
    covered,
    decide_pending,
    latest_actions,
    needs_recheck,
    repair_overdue,
    repair_since,
    repair_statuses,
    summary_page,
)

NOW = datetime(2026, 11, 20, 8, 14, 5, tzinfo=UTC)
NODE = "i-0d4e5f60718293a4b"
COOLDOWN = timedelta(minutes=60)
SLURM = Cluster(name="pretrain-slurm", id="k3v9q2w8x1za", orchestrator="slurm")


def claim(outcome: str = RESULT_UNKNOWN, minutes_ago: float = 5, retries: int = 0,
          action: str = "replace_node") -> PendingClaim:
    return PendingClaim(node_id=NODE, fault="gpu_fatal", action=action, outcome=outcome,
                        acted_at=NOW - timedelta(minutes=minutes_ago), attempt=1, version=3, retries=retries)


def node(status: str) -> NodeInfo:
    return NodeInfo(NODE, "gpu-workers", status)


# --- which claims need a re-check

def test_a_claim_whose_answer_was_lost_is_rechecked_at_once():
    assert needs_recheck(claim(RESULT_UNKNOWN, minutes_ago=0), NOW, COOLDOWN)


def test_an_in_flight_claim_is_left_to_its_run_while_the_run_may_still_be_alive():
    assert not needs_recheck(claim(IN_FLIGHT, minutes_ago=0.5), NOW, COOLDOWN)


def test_an_in_flight_claim_older_than_any_run_belongs_to_a_run_that_died():
    stale_minutes = STALE_CLAIM.total_seconds() / 60
    assert needs_recheck(claim(IN_FLIGHT, minutes_ago=stale_minutes), NOW, COOLDOWN)


@pytest.mark.parametrize("outcome", ["executed", "failed", "deferred", "dry_run"])
def test_a_finished_claim_is_never_rechecked(outcome):
    assert not needs_recheck(claim(outcome, minutes_ago=30), NOW, COOLDOWN)


@pytest.mark.parametrize("outcome", [IN_FLIGHT, RESULT_UNKNOWN])
def test_an_unfinished_claim_expires_with_the_node_cooldown(outcome):
    assert not needs_recheck(claim(outcome, minutes_ago=60), NOW, COOLDOWN)


# --- what a re-check decides

@pytest.mark.parametrize("status", ["Pending", "ShuttingDown", "SystemUpdating", "DeepHealthCheckInProgress"])
def test_given_an_unknown_result_when_the_node_is_in_repair_then_the_call_went_through(status):
    decision = decide_pending(claim(minutes_ago=1), node(status), NOW, Mode.ACT)
    assert (decision.resolution, decision.outcome, decision.ledger_outcome) == (
        Resolution.CONFIRMED, Outcome.EXECUTED, "executed")
    assert status in decision.reason and "Nothing is called again" in decision.reason
    assert not decision.page


def test_given_an_unknown_result_when_the_node_is_gone_then_the_replace_took_effect():
    decision = decide_pending(claim(minutes_ago=1), None, NOW, Mode.ACT)
    assert (decision.resolution, decision.ledger_outcome) == (Resolution.CONFIRMED, "executed")


@pytest.mark.parametrize("status", ["Running", "Failure"])
def test_given_an_unknown_result_when_no_sign_of_repair_yet_then_wait_without_calling(status):
    minutes = SETTLE.total_seconds() / 60 - 1
    decision = decide_pending(claim(minutes_ago=minutes), node(status), NOW, Mode.ACT)
    assert (decision.resolution, decision.ledger_outcome, decision.page) == (Resolution.WAIT, None, False)


def test_given_a_settled_unknown_result_when_the_node_is_still_failed_then_retry_once():
    decision = decide_pending(claim(minutes_ago=5), node("Failure"), NOW, Mode.ACT)
    assert (decision.resolution, decision.outcome) == (Resolution.RETRY, Outcome.EXECUTED)
    assert "retrying it once" in decision.reason


def test_given_a_retried_claim_when_the_node_is_still_failed_then_give_up_and_page():
    decision = decide_pending(claim(minutes_ago=5, retries=MAX_PENDING_RETRIES), node("Failure"), NOW, Mode.ACT)
    assert (decision.resolution, decision.outcome, decision.ledger_outcome, decision.page) == (
        Resolution.GIVE_UP, Outcome.FAILED, "failed", True)


def test_given_a_settled_unknown_result_when_the_node_runs_then_medic_cannot_tell_and_pages():
    # A reboot may have completed or never started: the same status either way
    decision = decide_pending(claim(minutes_ago=5, action="reboot_node"), node("Running"), NOW, Mode.ACT)
    assert (decision.resolution, decision.outcome, decision.page) == (Resolution.GIVE_UP, Outcome.FAILED, True)
    assert "does not repeat it blindly" in decision.reason


def test_given_a_dead_run_claim_the_reason_says_the_run_did_not_finish():
    decision = decide_pending(claim(IN_FLIGHT, minutes_ago=5), node("Failure"), NOW, Mode.ACT)
    assert "did not finish" in decision.reason


def test_given_medic_is_paused_a_retry_is_suppressed_and_paged():
    decision = decide_pending(claim(minutes_ago=5), node("Failure"), NOW, Mode.PAUSED)
    assert (decision.resolution, decision.outcome, decision.page) == (Resolution.GIVE_UP, Outcome.SUPPRESSED, True)


def test_given_a_dry_run_a_retry_is_only_described():
    decision = decide_pending(claim(minutes_ago=5), node("Failure"), NOW, Mode.DRY_RUN)
    assert (decision.resolution, decision.outcome, decision.ledger_outcome) == (
        Resolution.WAIT, Outcome.DRY_RUN, None)


# --- coverage: which failed nodes already have an open incident

def test_a_node_without_any_claim_is_not_covered():
    assert not covered(None, NOW, COOLDOWN)


def test_a_node_acted_on_inside_the_cooldown_is_covered():
    assert covered(claim("executed", minutes_ago=59), NOW, COOLDOWN)


def test_a_node_acted_on_before_the_cooldown_is_no_longer_covered():
    assert not covered(claim("executed", minutes_ago=61), NOW, COOLDOWN)


def test_an_unfinished_claim_covers_its_node_until_it_expires_with_the_cooldown():
    assert covered(claim(IN_FLIGHT, minutes_ago=59), NOW, COOLDOWN)
    assert not covered(claim(IN_FLIGHT, minutes_ago=61), NOW, COOLDOWN)


# --- repairs

def test_only_repairs_in_progress_are_timed_and_deep_health_checks_are_not():
    assert repair_statuses("none") == {"Pending", "SystemUpdating", "ShuttingDown"}


def test_with_automatic_recovery_a_failed_node_is_hyperpods_repair_and_is_timed():
    # DescribeCluster's NodeRecovery Automatic: HyperPod owns a failed node's repair
    assert "Failure" in repair_statuses("automatic")


def test_a_pending_claim_on_a_node_hyperpod_reports_not_found_took_effect():
    """ClusterInstanceStatus NotFound (a replaced, terminated instance): the call went through; nothing again."""
    claim = PendingClaim(NODE, "gpu_fatal", "replace_node", "unknown", NOW - timedelta(minutes=5), 1, 2)
    decision = decide_pending(claim, NodeInfo(NODE, "gpu-workers", "NotFound"), NOW, Mode.ACT)
    assert (decision.resolution, decision.outcome) == (Resolution.CONFIRMED, Outcome.EXECUTED)


def test_a_repair_starts_at_medics_action_when_medic_started_it():
    acted = NOW - timedelta(minutes=20)
    assert repair_since(None, acted, NOW) == acted
    assert repair_since(NOW - timedelta(minutes=5), acted, NOW) == acted


def test_a_repair_medic_did_not_start_is_timed_from_when_a_sweep_first_saw_it():
    assert repair_since(None, None, NOW) == NOW


def test_a_repair_is_overdue_only_after_the_repair_window():
    assert not repair_overdue(NOW - timedelta(minutes=30), NOW, 30)
    assert repair_overdue(NOW - timedelta(minutes=31), NOW, 30)


def test_the_latest_action_per_node_wins():
    early, late = NOW - timedelta(minutes=50), NOW - timedelta(minutes=5)
    assert latest_actions([(NODE, early), (NODE, late), ("i-1", early)]) == {NODE: late, "i-1": early}


# --- the schedule event

SCHEDULED = {"version": "0", "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa", "detail-type": "Scheduled Event",
             "source": "aws.events", "account": "123456789012", "time": "2026-11-20T08:15:00Z",
             "region": "us-west-2", "resources": ["arn:aws:events:us-west-2:123456789012:rule/medic-reconcile"],
             "detail": {}}


def test_the_schedule_event_names_the_run():
    assert ScheduleEvent.model_validate(SCHEDULED).id == SCHEDULED["id"]


@pytest.mark.parametrize("change", [{"source": "aws.sagemaker"}, {"detail-type": "Something Else"},
                                    {"id": ""}, {"id": "x" * 500}, {"id": "<script>"}, {"detail": "nope"}])
def test_anything_but_a_schedule_event_is_rejected(change):
    with pytest.raises(ValidationError):
        ScheduleEvent.model_validate({**SCHEDULED, **change})


def test_a_summary_page_lists_each_node_and_says_how_to_find_the_records():
    records = [{"node_id": f"i-{n:017x}", "instance_group": "gpu-workers", "fault": "unknown", "outcome": "deferred",
                "reason": "Node status is Failure.", "event_id": "run-1", "mode": "act"} for n in range(25)]
    text = summary_page("pretrain-slurm", records, "us-west-2")
    assert text.subject == "[Medic] pretrain-slurm: 25 nodes need a human"
    assert "i-00000000000000000" in text.body and "and 5 more" in text.body
    assert "trigger = 'reconcile'" in text.body
