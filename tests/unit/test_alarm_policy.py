"""Specification: Medic's alarms — what they are about, what Medic decides, and when training counts as resumed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from medic.config import alarm_name, parse_config
from medic.core.mode import Mode
from medic.core.models import Action, Fault, Outcome
from medic.core.progress import Progress, RecoveryWatch
from medic.flows.recovery.policy import Verdict, judge_recovery
from medic.flows.stall.policy import AlarmContext, AlarmKind, Plan, alarm_subject, decide_alarm

CONFIG = parse_config({
    "clusters": [{"name": "pretrain-slurm", "id": "k3v9q2w8x1za", "orchestrator": "slurm"},
                 {"name": "finetune-eks", "id": "p7r2m4x9c1qa", "orchestrator": "eks"}],
    "jobs": [{"name": "llama3-70b", "cluster": "pretrain-slurm"},
             {"name": "stall-detector-v2", "cluster": "pretrain-slurm"},
             {"name": "mistral-ft", "cluster": "finetune-eks"}],
})
NOW = datetime(2026, 11, 21, 3, 10, tzinfo=UTC)


def context(name: str = "medic-stall-llama3-70b", state: str = "ALARM", **changes) -> AlarmContext:
    fields = {"subject": alarm_subject(name, CONFIG), "state": state, "episode_seen": False, "incident_open": False,
              "incident_paged": False, "escalated": False, "nodes_in_repair": 0, "mode": Mode.ACT, **changes}
    return AlarmContext(**fields)


def test_the_sample_alarm_is_the_stall_alarm_of_a_configured_job():
    subject = alarm_subject("medic-stall-llama3-70b", CONFIG)
    assert (subject.kind, subject.job.name, subject.cluster.name) == (AlarmKind.STALL, "llama3-70b", "pretrain-slurm")


def test_a_job_name_that_contains_a_kind_is_still_read_right():
    subject = alarm_subject(alarm_name("slowdown", "stall-detector-v2"), CONFIG)
    assert (subject.kind, subject.job.name) == (AlarmKind.SLOWDOWN, "stall-detector-v2")


def test_a_cluster_alarm_names_its_cluster():
    subject = alarm_subject("medic-failed-nodes-finetune-eks", CONFIG)
    assert (subject.kind, subject.job, subject.cluster.name) == (AlarmKind.FAILED_NODES, None, "finetune-eks")


@pytest.mark.parametrize("name", ["cpu-high", "medic-stall-unknown-job", "medic-reboot-llama3-70b",
                                  "medic-failed-nodes-nope"])
def test_alarms_that_are_not_medics_configured_alarms_have_no_subject(name):
    assert alarm_subject(name, CONFIG) is None


def test_a_stalled_slurm_job_is_requeued():
    decision = decide_alarm(context())
    assert (decision.plan, decision.action) == (Plan.REQUEUE, Action.REQUEUE_JOB)


def test_a_repeated_delivery_of_the_same_transition_is_a_duplicate():
    decision = decide_alarm(context(episode_seen=True))
    assert (decision.plan, decision.outcome, decision.page) == (Plan.RECORD, Outcome.DUPLICATE, False)


def test_after_a_restart_that_did_not_help_medic_does_not_restart_again():
    decision = decide_alarm(context(escalated=True, incident_open=True))
    assert (decision.plan, decision.outcome, decision.page) == (Plan.RECORD, Outcome.SUPPRESSED, False)


def test_a_stalled_job_on_eks_is_restarted_through_the_agent_without_a_page():
    # Given a stall alarm for a job on an EKS cluster, no progress in the window
    decision = decide_alarm(context("medic-stall-mistral-ft"))
    # Then Medic restarts it (the agent deletes its pods; its controller recreates them) and pages nobody
    assert (decision.plan, decision.action, decision.page) == (Plan.REQUEUE, Action.RESTART_JOB, False)


def test_divergence_pages_and_never_restarts():
    decision = decide_alarm(context("medic-divergence-llama3-70b"))
    assert (decision.plan, decision.action, decision.page) == (Plan.RECORD, Action.NONE, True)
    assert "diverge again" in decision.reason


def test_slowdown_pages():
    assert decide_alarm(context("medic-slowdown-llama3-70b")).page


def test_failed_nodes_that_medic_is_repairing_do_not_page():
    decision = decide_alarm(context("medic-failed-nodes-pretrain-slurm", nodes_in_repair=2))
    assert (decision.outcome, decision.page) == (Outcome.DEFERRED, False)


def test_failed_nodes_a_storm_page_already_covers_do_not_page_again():
    # Given the guardrails hold a storm back on the cluster and its summary page went out
    decision = decide_alarm(context("medic-failed-nodes-pretrain-slurm", nodes_in_repair=0, storm_held=True))
    # Then the failed-node alarm is recorded, deferred to that page: one page per storm window
    assert (decision.outcome, decision.page) == (Outcome.DEFERRED, False)
    assert "summary page" in decision.reason


def test_failed_nodes_nobody_is_repairing_page():
    assert decide_alarm(context("medic-failed-nodes-pretrain-slurm", nodes_in_repair=0)).page


@pytest.mark.parametrize("paged", [False, True])
def test_ok_after_alarm_closes_the_incident_and_pages_only_if_the_incident_had_paged(paged):
    decision = decide_alarm(context(state="OK", incident_open=True, incident_paged=paged))
    assert (decision.outcome, decision.close_incident, decision.page) == (Outcome.IGNORED, True, paged)


def test_ok_without_an_open_incident_changes_nothing():
    decision = decide_alarm(context(state="OK"))
    assert (decision.close_incident, decision.page) == (False, False)


def test_insufficient_data_is_not_acted_on():
    assert decide_alarm(context(state="INSUFFICIENT_DATA")).plan is Plan.RECORD


WATCH = RecoveryWatch(incident="job:slurm:pretrain-slurm:llama3-70b", job="llama3-70b", cluster="pretrain-slurm",
                      restarted_at=NOW, deadline=NOW + timedelta(minutes=20), attempt=1)


def test_steps_after_the_restart_prove_recovery_even_before_the_deadline():
    assert judge_recovery(WATCH, Progress(steps=40, last_step=1240), NOW + timedelta(minutes=5)) is Verdict.RESUMED


@pytest.mark.parametrize(("first", "checkpoint", "verdict"), [
    (1201, 1200, Verdict.RESUMED), (1200, 1200, Verdict.RESUMED),  # from the last checkpoint: at or above it
    (1, 1200, Verdict.RESUMED_BEHIND), (800, 1200, Verdict.RESUMED_BEHIND),  # from scratch, from an older one
    (1, None, Verdict.RESUMED), (None, 1200, Verdict.RESUMED),  # a number missing: nothing to compare
])
def test_the_resume_point_is_checked_against_the_last_checkpoint_before_the_fault(first, checkpoint, verdict):
    progress = Progress(steps=40, last_step=1240, first_step=first, checkpoint_before=checkpoint)
    assert judge_recovery(WATCH, progress, NOW + timedelta(minutes=5)) is verdict


def test_without_steps_medic_waits_until_the_deadline():
    assert judge_recovery(WATCH, Progress(steps=0, last_step=None), NOW + timedelta(minutes=19)) is Verdict.WAITING


def test_without_steps_at_the_deadline_recovery_failed():
    verdict = judge_recovery(WATCH, Progress(steps=0, last_step=1200), NOW + timedelta(minutes=20))
    assert verdict is Verdict.NO_PROGRESS


# Before acting on a stall ALARM, Medic reads the heartbeat back: an alarm is not the job's progress.
def test_a_stall_alarm_while_the_heartbeat_counts_steps_is_ignored_with_the_numbers():
    decision = decide_alarm(context(recent_progress=Progress(steps=60, last_step=1360), stall_minutes=5))
    assert (decision.plan, decision.action, decision.outcome, decision.page) == (
        Plan.RECORD, Action.NONE, Outcome.IGNORED, False)
    assert "60 steps in the last 5 min" in decision.reason and "step 1360" in decision.reason


def test_a_stalled_eks_job_that_is_in_fact_stepping_does_not_page():
    decision = decide_alarm(context("medic-stall-mistral-ft", recent_progress=Progress(12, 80), stall_minutes=10))
    assert (decision.outcome, decision.page) == (Outcome.IGNORED, False)


@pytest.mark.parametrize("progress", [Progress(steps=0, last_step=1200), Progress(steps=5, last_step=None), None],
                         ids=["no steps", "heartbeat without a step", "unreadable"])
def test_a_stall_alarm_the_heartbeat_does_not_contradict_is_requeued(progress):
    assert decide_alarm(context(recent_progress=progress, stall_minutes=5)).plan is Plan.REQUEUE


# OK is not proof of recovery: only steps since the restart are.
@pytest.mark.parametrize("progress", [Progress(steps=0, last_step=None), Progress(steps=0, last_step=1200), None],
                         ids=["silent", "old step only", "unreadable"])
def test_an_ok_without_steps_since_the_restart_is_not_proof_and_keeps_the_incident(progress):
    decision = decide_alarm(context(state="OK", incident_open=True, incident_paged=True, watch=WATCH,
                                    progress_since_restart=progress))
    assert (decision.outcome, decision.close_incident, decision.page) == (Outcome.IGNORED, False, False)
    assert "not proof of recovery" in decision.reason and "03:10 UTC" in decision.reason


def test_an_ok_with_steps_since_the_restart_closes_the_incident():
    decision = decide_alarm(context(state="OK", incident_open=True, watch=WATCH,
                                    progress_since_restart=Progress(steps=40, last_step=1240)))
    assert decision.close_incident


def test_a_stall_with_no_step_in_the_window_nor_the_day_before_is_no_stall():
    # Given the probe read back: no step in the stall window, none in the day before it
    decision = decide_alarm(context(recent_progress=Progress(steps=0, last_step=None, steps_before=0),
                                    stall_minutes=10))
    # Then nothing is requeued and nobody is paged
    assert (decision.plan, decision.action, decision.outcome, decision.page) == (
        Plan.RECORD, Action.NONE, Outcome.IGNORED, False)
    assert "has not started" in decision.reason


@pytest.mark.parametrize("before", [None, 40])
def test_a_stall_after_steps_or_with_an_unreadable_history_is_requeued(before):
    # Given no step in the window, and steps before it (a real stall) or no history read (metrics unavailable)
    decision = decide_alarm(context(recent_progress=Progress(steps=0, last_step=None, steps_before=before),
                                    stall_minutes=10))
    # Then the job is requeued as a stall
    assert (decision.plan, decision.action) == (Plan.REQUEUE, Action.REQUEUE_JOB)



# A finished job stops publishing Heartbeat, so its stall alarm fires too: the completion marker tells them apart.
FINISHED_AT = NOW - timedelta(minutes=13)


@pytest.mark.parametrize("job", ["llama3-70b", "mistral-ft"], ids=["slurm", "eks"])
def test_a_stall_alarm_after_the_probes_completion_marker_is_ignored_naming_the_time_and_step(job):
    # Given the probe's completion marker at 02:57 is its latest report (the final flush carried step 1450)
    progress = Progress(steps=0, last_step=None, steps_before=400, last_step_before=1450,
                        completed_at=FINISHED_AT, last_report_at=FINISHED_AT)
    # When the stall alarm fires
    decision = decide_alarm(context(f"medic-stall-{job}", recent_progress=progress, stall_minutes=10))
    # Then Medic records the job as finished: no requeue or restart, no page
    assert (decision.plan, decision.action, decision.outcome, decision.page) == (
        Plan.RECORD, Action.NONE, Outcome.IGNORED, False)
    assert decision.fault is Fault.COMPLETED
    assert "completion marker (a clean close) at 2026-11-21 02:57 UTC at step 1450" in decision.reason


def test_a_job_that_finished_within_the_stall_window_is_finished_not_making_progress():
    progress = Progress(steps=50, last_step=1450, steps_before=400, completed_at=FINISHED_AT,
                        last_report_at=FINISHED_AT)
    decision = decide_alarm(context(recent_progress=progress, stall_minutes=15))
    assert (decision.outcome, decision.fault) == (Outcome.IGNORED, Fault.COMPLETED)


def test_a_later_run_under_the_same_name_is_not_masked_by_an_earlier_runs_marker():
    # Given the first run finished at 02:57, and a second run under the same Job name reported until 03:02, then
    # went silent (the stall is the second run's)
    progress = Progress(steps=0, last_step=None, steps_before=120, completed_at=FINISHED_AT,
                        last_report_at=NOW - timedelta(minutes=8))
    # Then the stall is requeued as any other
    decision = decide_alarm(context(recent_progress=progress, stall_minutes=5))
    assert (decision.plan, decision.action, decision.fault) == (Plan.REQUEUE, Action.REQUEUE_JOB, None)


def test_a_later_run_that_reports_without_stepping_is_not_masked_either():
    # Heartbeat 0 is a report: a live process that has stalled, after the last run's marker
    progress = Progress(steps=0, last_step=1500, steps_before=0, completed_at=FINISHED_AT,
                        last_report_at=NOW - timedelta(minutes=1))
    assert progress.finished_at is None


def test_the_marker_and_the_final_flush_in_the_same_minute_read_as_finished():
    assert Progress(steps=0, last_step=None, completed_at=FINISHED_AT,
                    last_report_at=FINISHED_AT).finished_at == FINISHED_AT
    assert Progress(steps=0, last_step=None, completed_at=FINISHED_AT).finished_at == FINISHED_AT  # marker alone


def test_a_completed_job_restarted_by_medic_concludes_at_once_when_the_marker_came_after_the_restart():
    # Given Medic restarted the job at 03:10; the restarted run had nothing left to train and closed cleanly at 03:14
    progress = Progress(steps=0, last_step=None, completed_at=NOW + timedelta(minutes=4),
                        last_report_at=NOW + timedelta(minutes=4))
    # Then the recovery check concludes at its next run, long before the deadline: no no_progress page
    assert judge_recovery(WATCH, progress, NOW + timedelta(minutes=5)) is Verdict.COMPLETED


def test_a_marker_in_the_restarts_own_minute_counts_as_after_it():
    restarted_midminute = WATCH._replace(restarted_at=NOW + timedelta(seconds=40))
    progress = Progress(steps=0, last_step=None, completed_at=NOW, last_report_at=NOW)  # the 03:10 minute
    assert judge_recovery(restarted_midminute, progress, NOW + timedelta(minutes=5)) is Verdict.COMPLETED


def test_a_marker_from_before_the_restart_waits_for_the_deadline_then_concludes_without_a_page():
    # Given the job had finished at 02:57, before Medic's restart (the alarm handler could not read the metrics)
    progress = Progress(steps=0, last_step=None, completed_at=FINISHED_AT, last_report_at=FINISHED_AT)
    # Then a restarted run still has until the deadline to report; at the deadline the job counts as finished
    assert judge_recovery(WATCH, progress, NOW + timedelta(minutes=19)) is Verdict.WAITING
    assert judge_recovery(WATCH, progress, NOW + timedelta(minutes=20)) is Verdict.COMPLETED


def test_steps_after_the_restart_prove_recovery_even_when_the_run_then_finished():
    progress = Progress(steps=40, last_step=1450, completed_at=NOW + timedelta(minutes=3),
                        last_report_at=NOW + timedelta(minutes=3))
    assert judge_recovery(WATCH, progress, NOW + timedelta(minutes=5)) is Verdict.RESUMED


# --- one incident, one owner (issue 27): a watched job a node repair hit


HELD = RecoveryWatch(incident="job:slurm:pretrain-slurm:llama3-70b", job="llama3-70b", cluster="pretrain-slurm",
                     restarted_at=NOW, deadline=NOW + timedelta(minutes=50), attempt=0,
                     held_by="node:pretrain-slurm:i-0d4e5f60718293a4b")


def test_a_stall_while_a_node_repair_holds_the_job_is_deferred_to_the_repair_without_requeue_or_page():
    decision = decide_alarm(context(recent_progress=Progress(steps=0, last_step=1240, steps_before=400), owner=HELD))
    assert (decision.plan, decision.action, decision.outcome, decision.page) == (
        Plan.RECORD, Action.NONE, Outcome.DEFERRED, False)
    assert "node:pretrain-slurm:i-0d4e5f60718293a4b" in decision.reason and "no requeue and no page" in decision.reason


def test_a_stall_while_medics_restart_is_being_proved_is_left_to_that_proof():
    proving = RecoveryWatch(incident=HELD.incident, job="llama3-70b", cluster="pretrain-slurm", restarted_at=NOW,
                            deadline=NOW + timedelta(minutes=20), attempt=1)
    decision = decide_alarm(context(recent_progress=Progress(steps=0, last_step=1240, steps_before=400),
                                    owner=proving))
    assert (decision.plan, decision.outcome, decision.page) == (Plan.RECORD, Outcome.DEFERRED, False)
    assert "no second requeue" in decision.reason


def test_a_held_watch_waits_for_the_repair_whatever_the_probe_says_then_gives_up_at_its_backstop():
    # steps counted while the node is still in repair may be the job's last ones before the node went down
    assert judge_recovery(HELD, Progress(steps=40, last_step=1280), NOW + timedelta(minutes=5)) is Verdict.WAITING
    assert judge_recovery(HELD, Progress(steps=0, last_step=None), NOW + timedelta(minutes=49)) is Verdict.WAITING
    assert judge_recovery(HELD, Progress(steps=0, last_step=None), NOW + timedelta(minutes=50)) is Verdict.NO_PROGRESS


def test_steps_since_medics_requeue_prove_a_held_job_resumed_before_its_node_is_back():
    requeued = RecoveryWatch(incident=HELD.incident, job="llama3-70b", cluster="pretrain-slurm", restarted_at=NOW,
                             deadline=HELD.deadline, attempt=1, held_by=HELD.held_by, acted_at=NOW)
    from medic.flows.recovery.policy import progress_since

    assert progress_since(requeued) == NOW and progress_since(HELD) == NOW
    assert judge_recovery(requeued, Progress(steps=40, last_step=1280), NOW + timedelta(minutes=5)) is Verdict.RESUMED


# The hang alarm (issue 31): the probe's own verdict, a faster witness of the same stall.
def test_the_hang_alarm_names_its_job_and_is_a_stall():
    subject = alarm_subject("medic-hang-llama3-70b", CONFIG)
    assert (subject.kind, subject.job.name, subject.fault) == (AlarmKind.HANG, "llama3-70b", Fault.STALLED)


@pytest.mark.parametrize(("name", "action"), [("medic-hang-llama3-70b", Action.REQUEUE_JOB),
                                              ("medic-hang-mistral-ft", Action.RESTART_JOB)])
def test_a_hang_alarm_takes_the_stall_flow(name, action):
    history = Progress(steps=0, last_step=None, steps_before=2400, last_step_before=1240)
    decision = decide_alarm(context(name, recent_progress=history))
    assert (decision.plan, decision.action) == (Plan.REQUEUE, action)


PAUSED_AT = NOW - timedelta(minutes=1)


def test_a_stall_alarm_while_the_probe_reports_a_marked_pause_is_ignored():
    progress = Progress(steps=0, last_step=1240, steps_before=2400, paused_at=PAUSED_AT, last_report_at=PAUSED_AT)
    decision = decide_alarm(context(recent_progress=progress, stall_minutes=7))
    assert (decision.plan, decision.outcome, decision.page) == (Plan.RECORD, Outcome.IGNORED, False)
    assert "marked pause" in decision.reason and "03:09" in decision.reason


def test_a_pause_the_probe_reported_before_its_latest_report_does_not_stand_the_alarm_down():
    progress = Progress(steps=0, last_step=1240, steps_before=2400, paused_at=PAUSED_AT - timedelta(minutes=5),
                        last_report_at=PAUSED_AT)
    assert decide_alarm(context(recent_progress=progress, stall_minutes=7)).plan is Plan.REQUEUE


def test_a_hang_alarm_in_a_pause_is_the_probes_verdict_that_the_pause_outlasted_its_limit():
    progress = Progress(steps=0, last_step=None, steps_before=2400, paused_at=PAUSED_AT, last_report_at=PAUSED_AT)
    assert decide_alarm(context("medic-hang-llama3-70b", recent_progress=progress)).plan is Plan.REQUEUE
