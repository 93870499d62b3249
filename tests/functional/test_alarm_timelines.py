"""Specification: a page-only alarm incident (divergence, slowdown) writes its timeline line when the alarm goes OK."""

from __future__ import annotations

from medic.flows.stall.response import respond_to_alarm
from tests.functional.test_alarm_handler import JOB, alarm, medic, slurm  # noqa: F401 - fixtures
from tests.functional.test_node_timelines import IncidentLog


def incident_lines(run) -> list[dict]:  # noqa: ANN001
    import logging

    log = IncidentLog()
    logging.getLogger("medic").addHandler(log)
    try:
        run()
    finally:
        logging.getLogger("medic").removeHandler(log)
    return log.lines


def test_a_slowdown_incident_is_timed_from_its_alarm_to_its_ok_with_no_action(slurm):  # noqa: F811
    name = f"medic-slowdown-{JOB}"
    # Given the slowdown alarm went into ALARM at 03:08 and Medic received it at 03:10 (paged, no action)
    opened = incident_lines(lambda: respond_to_alarm(alarm(name, at="2026-11-21T03:08:00.000+0000"),
                                                     slurm.medic.deps))
    assert opened == []  # nothing closed yet
    # When it goes OK at 03:40
    slurm.medic.at("2026-11-21T03:40:00+00:00")
    [line] = incident_lines(lambda: respond_to_alarm(alarm(name, state="OK", at="2026-11-21T03:40:00.000+0000"),
                                                     slurm.medic.deps))
    # Then one slowdown line: fault at the ALARM's state time, detected at receipt, resolved at the OK, no action
    assert (line["incident"], line["kind"], line["job"], line["fault"]) == (
        f"alarm:{name}", "slowdown", JOB, "slowed")
    assert (line["fault_at"], line["detected_at"], line["resolved_at"]) == (
        "2026-11-21T03:08:00+00:00", "2026-11-21T03:10:00+00:00", "2026-11-21T03:40:00+00:00")
    assert (line["time_to_detect_s"], line["total_s"]) == (120, 1920)
    assert all(line[key] is None for key in ("acted_at", "repaired_at", "resumed_at", "time_to_act_s"))
    # ... and the OK delivered again closes nothing more
    again = incident_lines(lambda: respond_to_alarm(alarm(name, state="OK", at="2026-11-21T03:40:00.000+0000"),
                                                    slurm.medic.deps))
    assert again == []


def test_an_ok_with_no_open_incident_writes_no_line(slurm):  # noqa: F811
    lines = incident_lines(lambda: respond_to_alarm(alarm(f"medic-divergence-{JOB}", state="OK"), slurm.medic.deps))
    assert lines == []
