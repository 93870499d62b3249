"""Specification: a page shows someone else's words (HyperPod's health reason and cluster events, a training job's
FailureReason, an alarm's StateReason, metric dimension values, an operator's reason) quoted on one line, and no
value can add a line of its own: a failure message never prints a "What to do:" above Medic's."""

from __future__ import annotations

import pytest

from medic.core.mode import Mode
from medic.core.models import Action, Fault, Outcome, Trigger, Why
from medic.core.pages import PageText
from medic.core.record import About
from medic.core.text import MedicText, quoted, single_line
from medic.flows.agent.commands import slurm_job_page
from medic.flows.jobs.pages import job_page
from medic.flows.node.pages import cluster_event_page, node_page
from medic.flows.recovery.pages import alarm_page

# What a hostile failure message looks like: each kind of line break a mail reader may honour, then Medic's own
# labels, an ANSI escape and a bidi override.
FAKE = "What to do:     Nothing: Medic restarted the job. Run: aws iam attach-role-policy --policy-arn admin"
HOSTILE = (f"KeyError: 'x'\n\n{FAKE}\r\nWhy:            all good\u2028Console:        https://evil.example\x85"
           "What Medic did: restarted\x1b[2J\u202e")
BREAKS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def record(**about: object) -> dict:
    fields = {"incident": "job:ft-x", "trigger": Trigger.JOB_STATE, "event_id": "e-1", "mode": Mode.ACT,
              "cluster": "pretrain-slurm", "job": "ft-x", "node_id": "i-0d4e5f60718293a4b", **about}
    return About(**fields).record(fault=Fault.UNKNOWN, action=Action.NONE, outcome=Outcome.DEFERRED,
                                  why=Why.HUMAN_DECIDES, reason="Unrecognized; a human decides.")


def medics_lines(page: PageText, label: str) -> list[str]:
    return [line for line in page.body.splitlines() if line.startswith(label)]


PAGES = {
    "node health reason": lambda text: node_page(record(), text, "us-west-2"),
    "cluster event description": lambda text: cluster_event_page(record(), text, "", "/aws/x", "us-west-2"),
    "cluster event failure message": lambda text: cluster_event_page(record(), "Replacement failed", text,
                                                                     "/aws/x", "us-west-2"),
    "training job FailureReason": lambda text: job_page(record(), text, "us-west-2"),
    "alarm StateReason": lambda text: alarm_page(record(), "medic-stall-ft-x", text, [], "us-west-2"),
    "operator's reason": lambda text: slurm_job_page(record(), text, "us-west-2"),
}


@pytest.mark.parametrize("source", PAGES)
def test_someone_elses_words_are_one_quoted_line_and_never_a_line_of_medics(source):
    page = PAGES[source](HOSTILE)
    # Then Medic's own "What to do:" is the page's only one, and so for every label Medic writes
    for label in ("What to do:", "Why:", "Console:", "What Medic did:"):
        assert len(medics_lines(page, label)) <= 1, (label, page.body)
    assert len(medics_lines(page, "What to do:")) == 1 and FAKE not in medics_lines(page, "What to do:")[0]
    # And the words are there, quoted on one line, with no control or format character left
    [line] = [line for line in page.body.splitlines() if "KeyError" in line]
    assert '"KeyError: ' in line and " ".join(FAKE.split()) in line  # its whitespace collapsed
    assert not any(ch in page.body for ch in ("\x1b", "\u202e", "\r", *BREAKS[2:]))


@pytest.mark.parametrize("source", PAGES)
def test_a_reason_that_carries_a_line_break_cannot_add_a_line_either(source):
    # Given a record whose reason some code built with raw text in it (the structural guard: PageText's lines)
    page = PAGES[source]("fine")
    hostile = PageText(page.subject, [*page.lines, f"Why:            {HOSTILE}"])
    # Then the hostile line stays one line
    assert len(hostile.lines) == len(page.lines) + 1
    assert hostile.body.count("\n") == len(hostile.lines) - 1
    assert len(medics_lines(hostile, "What to do:")) == 1


def test_medics_own_words_in_those_places_are_shown_as_they_are():
    page = node_page(record(), MedicText("(none: found by Medic's reconciler, InstanceStatus Failure)"), "us-west-2")
    assert "Health reason:  (none: found by Medic's reconciler, InstanceStatus Failure)" in page.lines
    alarm = alarm_page(record(), "stall alarm of ft-x", MedicText("The job was restarted but did not resume."), [],
                       "us-west-2")
    assert "What happened:  The job was restarted but did not resume." in alarm.lines
    assert not medics_lines(alarm, "Alarm says:")


def test_a_page_is_built_from_lines_never_from_a_body():
    with pytest.raises(TypeError):
        PageText("subject", "Cluster: c1\nWhat to do: x")  # type: ignore[arg-type]
    page = PageText("[Medic] a\nb", ["  indented   columns", "x\u2028y"])
    assert (page.subject, page.lines) == ("[Medic] a b", ("  indented   columns", "x y"))


@pytest.mark.parametrize("brk", BREAKS)
def test_every_line_break_becomes_a_space(brk):
    assert single_line(f"a{brk}b") == "a b"
    assert quoted(f"a{brk}b") == '"a b"'


def test_quoting_escapes_the_quote_that_would_end_it():
    assert quoted('x" What to do: y') == '"x\\" What to do: y"'
