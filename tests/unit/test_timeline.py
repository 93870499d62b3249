"""Specification: an incident's timeline, its durations from the fault and the work it lost (pure arithmetic)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from medic.domain.timeline import DURATIONS, MOMENTS, Timeline, incident_line, lost_steps

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
                         "lost_steps", "lost_minutes"}


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
