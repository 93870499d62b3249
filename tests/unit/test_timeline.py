"""Specification: an incident's timeline, its durations from the fault and the work it lost (pure arithmetic)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from medic.core.timeline import (
    DURATIONS,
    MOMENTS,
    Timeline,
    alarm_timeline,
    incident_line,
    job_timeline,
    lost_steps,
    node_timeline,
)

FAULT = datetime(2026, 11, 21, 3, 5, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return FAULT + timedelta(minutes=minutes)


def stall(**moments) -> Timeline:
    return Timeline(incident="job:slurm:c1:llama", kind="stall", fault="stalled", fault_at=FAULT,
                    detected_at=at(13), cluster="c1", job="llama", **moments)


def test_every_moment_came_each_duration_is_measured_from_the_fault():
    # Given a stall at 03:05 detected and requeued at 03:18, stepping again at 03:24, closed at 03:25, having lost
    # the 240 steps since its checkpoint at 40 steps a minute
    line = incident_line(stall(acted_at=at(13), repaired_at=at(14), resumed_at=at(19), resolved_at=at(20),
                               last_step=1440, checkpoint_step=1200, steps_per_minute=40))
    # Then each duration is seconds from 03:05, and the lost work is in steps and in minutes of training
    assert (line["time_to_detect_s"], line["time_to_act_s"], line["time_to_repair_s"], line["time_to_resume_s"],
            line["total_s"]) == (780, 780, 840, 1140, 1200)
    assert (line["lost_steps"], line["lost_minutes"]) == (240, 6)
    assert line["fault_at"] == "2026-11-21T03:05:00+00:00" and line["resolved_at"] == "2026-11-21T03:25:00+00:00"
    assert set(line) == {"incident", "kind", "cluster", "job", "node_id", "fault", *MOMENTS, *DURATIONS,
                         "lost_steps", "lost_minutes", "job_started_at"}


def test_no_restart_and_no_probe_leave_their_moments_and_the_lost_work_null():
    # Given a node incident Medic recorded but did not act on, on a job with no probe
    line = incident_line(Timeline(incident="node:c1:i-0abc", kind="node", fault="gpu_fatal", fault_at=FAULT,
                                  detected_at=at(0.5), cluster="c1", node_id="i-0abc", resolved_at=at(30)))
    # Then the moments that never came are null, and so are their durations and the lost work
    assert (line["acted_at"], line["repaired_at"], line["resumed_at"]) == (None, None, None)
    assert (line["time_to_detect_s"], line["time_to_act_s"], line["time_to_repair_s"], line["time_to_resume_s"],
            line["total_s"]) == (30, None, None, None, 1800)
    assert (line["lost_steps"], line["lost_minutes"]) == (None, None)


def test_an_incident_medic_gave_up_on_has_no_resolution():
    # Given a requeue that never brought training back (a human owns it now)
    line = incident_line(stall(acted_at=at(13), last_step=1440, checkpoint_step=1200))
    # Then it is not resolved: no total, no resume; the lost work is known, its minutes are not (no rate)
    assert (line["resolved_at"], line["total_s"], line["resumed_at"], line["time_to_resume_s"]) == (
        None, None, None, None)
    assert (line["lost_steps"], line["lost_minutes"]) == (240, None)


def test_an_unknown_fault_time_leaves_every_duration_null():
    line = incident_line(Timeline(incident="job:x", kind="stall", fault="stalled", fault_at=None,
                                  detected_at=at(13), acted_at=at(13), resolved_at=at(20)))
    assert all(line[duration] is None for duration in DURATIONS)
    assert line["detected_at"] == "2026-11-21T03:18:00+00:00"


def test_a_moment_read_off_a_one_minute_metric_never_precedes_the_fault():
    # A probe datapoint is stamped at its minute's start, which can fall before the event's own second
    line = incident_line(stall(resumed_at=FAULT - timedelta(seconds=20)))
    assert line["time_to_resume_s"] == 0


def test_lost_work_is_never_negative_and_needs_both_steps():
    assert lost_steps(1200, 1200) == 0
    assert lost_steps(1100, 1200) == 0  # a checkpoint reported after the last step seen: nothing lost
    assert lost_steps(None, 1200) is None and lost_steps(1440, None) is None


def test_a_restart_that_resumed_behind_its_checkpoint_lost_everything_back_to_where_it_resumed():
    # Given the last step 1250 before the fault, the last checkpoint 1200, and training resumed from step 300
    # Then 950 steps are redone (not the 50 since the checkpoint, nor only the 900 behind it)
    assert lost_steps(1250, 1200, resumed_step=300) == 950
    line = incident_line(stall(last_step=1250, checkpoint_step=1200, resumed_step=300, steps_per_minute=50))
    assert (line["lost_steps"], line["lost_minutes"]) == (950, 19)
    # ... a resume at (or above) the checkpoint redoes the work since the checkpoint, as before
    assert lost_steps(1250, 1200, resumed_step=1200) == 50 and lost_steps(1250, 1200, resumed_step=1210) == 50
    # ... and without a checkpoint, the step it resumed from is the start
    assert lost_steps(1250, None, resumed_step=0) == 1250


# --- each kind of incident: which moments it has, and which never come


def test_a_node_replaced_and_seen_running_again_is_repaired_and_resolved_at_that_sweep():
    # Given a GPU fault at 03:05 received 2 s later, the replace call at once, the node Running at the 03:35 sweep
    line = node_timeline(incident="node:c1:i-0abc", cluster="c1", node_id="i-0abc", fault="gpu_fatal",
                         fault_at=FAULT, detected_at=at(2 / 60), acted_at=at(2 / 60), repaired_at=at(30),
                         resolved_at=at(30))
    # Then the repair is 30 minutes from the fault, and nothing about training is claimed (no probe on a node)
    assert (line["kind"], line["node_id"], line["job"]) == ("node", "i-0abc", None)
    assert (line["time_to_detect_s"], line["time_to_act_s"], line["time_to_repair_s"], line["total_s"]) == (
        2, 2, 1800, 1800)
    assert (line["resumed_at"], line["time_to_resume_s"], line["lost_steps"], line["lost_minutes"]) == (
        None, None, None, None)


def test_a_node_repair_that_never_came_leaves_repair_and_resolution_null():
    # Given Medic's replace, and the node failed again (or gone, or the reconciler gave up on the claim)
    line = node_timeline(incident="node:c1:i-0abc", cluster="c1", node_id="i-0abc", fault="gpu_fatal",
                         fault_at=FAULT, detected_at=at(0), acted_at=at(0), repaired_at=None, resolved_at=None)
    # Then the action is timed, the repair and the end are not
    assert (line["time_to_act_s"], line["time_to_repair_s"], line["total_s"]) == (0, None, None)


def test_a_training_job_restarted_is_repaired_when_its_clone_is_in_progress_and_resumed_when_it_trains():
    # Given a job failure at 02:40:12, received 30 s later, its clone started (InProgress) 2 s after that and
    # `Training` 5 minutes after the failure
    line = job_timeline(incident="job:ft", job="ft", fault="job_retryable", fault_at=FAULT, detected_at=at(0.5),
                        restarted_at=at(0.5) + timedelta(seconds=2), resumed_at=at(5))
    # Then act and repair are the clone's start, the resume and the end its training again; no probe step is claimed
    assert (line["kind"], line["job"], line["cluster"]) == ("training_job", "ft", None)
    assert (line["time_to_detect_s"], line["time_to_act_s"], line["time_to_repair_s"], line["time_to_resume_s"],
            line["total_s"]) == (30, 32, 32, 300, 300)
    assert line["lost_steps"] is None
    # ... and a clone that never trained leaves the resume and the end null
    never = job_timeline(incident="job:ft", job="ft", fault="job_retryable", fault_at=FAULT, detected_at=at(0.5),
                         restarted_at=at(0.5), resumed_at=None)
    assert (never["time_to_repair_s"], never["time_to_resume_s"], never["resolved_at"]) == (30, None, None)


def test_a_training_job_medic_gave_up_on_has_only_its_detection():
    # Given the restart budget spent (or a failure that is not retryable): no clone
    line = job_timeline(incident="job:ft", job="ft", fault="job_retryable", fault_at=FAULT, detected_at=at(0.5),
                        restarted_at=None)
    # Then only the detection is timed: no action, no repair, not resolved (a human owns it)
    assert line["time_to_detect_s"] == 30
    assert all(line[key] is None for key in ("acted_at", "repaired_at", "resumed_at", "resolved_at",
                                             "time_to_act_s", "time_to_repair_s", "time_to_resume_s", "total_s"))


def test_a_page_only_alarm_incident_is_resolved_by_its_ok_with_no_action():
    # Given a divergence alarm in ALARM at 03:03, received at 03:03:01, OK again at 03:40
    line = alarm_timeline(incident="alarm:medic-divergence-llama", kind="divergence", fault="diverged",
                          cluster="c1", job="llama", fault_at=FAULT, detected_at=at(1 / 60), resolved_at=at(35))
    # Then detection and the end are timed; Medic acted on nothing, so act, repair and resume are null
    assert (line["kind"], line["time_to_detect_s"], line["total_s"]) == ("divergence", 1, 2100)
    assert (line["acted_at"], line["time_to_act_s"], line["time_to_repair_s"], line["time_to_resume_s"]) == (
        None, None, None, None)


def test_a_training_jobs_line_says_when_the_job_that_failed_started():
    from medic.flows.jobs.events import TrainingJobDetail

    # Given the state change event's times (epoch milliseconds in strings, as SageMaker sends them)
    detail = TrainingJobDetail(TrainingJobName="ft", TrainingJobStatus="Failed",
                               TrainingJobArn="arn:aws:sagemaker:us-west-2:123456789012:training-job/ft",
                               CreationTime="1795221612000", TrainingStartTime="1795221912000")
    # Then the job started when it started training (else when it was created); garbage is no time
    assert detail.started_at == datetime(2026, 11, 21, 0, 45, 12, tzinfo=UTC)
    assert detail.model_copy(update={"TrainingStartTime": None}).started_at == datetime(2026, 11, 21, 0, 40, 12,
                                                                                         tzinfo=UTC)
    assert detail.model_copy(update={"TrainingStartTime": "soon", "CreationTime": "-1"}).started_at is None
    line = job_timeline(incident="job:ft", job="ft", fault="job_retryable", fault_at=FAULT, detected_at=at(0.5),
                        restarted_at=None, job_started_at=detail.started_at)
    assert line["job_started_at"] == "2026-11-21T00:45:12+00:00"
