"""Specification: every record says whether a human must act (`needs_human`) and, where one outcome word means
several things, which one (`why`, core.models.Why) — issue 29, item 8."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from medic.core.mode import Mode
from medic.core.models import DEFAULT_WHY, NEEDS_HUMAN, WHY_OUTCOMES, Action, Fault, Outcome, Trigger, Why
from medic.core.record import About

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions" / "medic"
ABOUT = About(incident="node:pretrain-slurm:i-0d4e5f60718293a4b", trigger=Trigger.NODE_HEALTH, event_id="e-1",
              mode=Mode.ACT, cluster="pretrain-slurm")
TYPED = sorted((outcome, why) for why, outcomes in WHY_OUTCOMES.items() for outcome in outcomes)


def source_calls() -> list[tuple[str, int, ast.Call]]:
    """Every ``<about>.record(...)`` call in Medic's Lambda code."""
    calls = []
    for path in sorted(FUNCTIONS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "record"
                    and any(keyword.arg == "outcome" for keyword in node.keywords)):
                calls.append((str(path.relative_to(FUNCTIONS)), node.lineno, node))
    return calls


def test_every_outcome_has_its_sub_reasons_and_every_sub_reason_its_outcome():
    # Each sub-reason belongs to at least one outcome, and each outcome has at least one sub-reason
    assert set(WHY_OUTCOMES) == set(Why)
    assert all(WHY_OUTCOMES[why] for why in Why)
    assert {outcome for outcomes in WHY_OUTCOMES.values() for outcome in outcomes} == set(Outcome)
    # The two words that mean several things name theirs; every other outcome has one meaning by default
    assert set(DEFAULT_WHY) == set(Outcome) - {Outcome.DEFERRED, Outcome.SUPPRESSED}
    assert all(outcome in WHY_OUTCOMES[why] for outcome, why in DEFAULT_WHY.items())


@pytest.mark.parametrize(("outcome", "why"), TYPED, ids=[f"{o.value}-{w.value}" for o, w in TYPED])
def test_each_typed_pair_makes_a_record_that_says_it_and_whether_a_human_must_act(outcome: Outcome, why: Why):
    record = ABOUT.record(fault=Fault.GPU_FATAL, action=Action.REPLACE_NODE, outcome=outcome, reason="r", why=why)
    assert (record["outcome"], record["why"], record["needs_human"]) == (outcome.value, why.value,
                                                                          why in NEEDS_HUMAN)


@pytest.mark.parametrize("outcome", sorted(Outcome))
def test_any_other_pair_is_refused(outcome: Outcome):
    for why in Why:
        if outcome in WHY_OUTCOMES[why]:
            continue
        with pytest.raises(ValueError, match=f"why {why.value} is not typed for outcome {outcome.value}"):
            ABOUT.record(fault=Fault.GPU_FATAL, action=Action.NONE, outcome=outcome, reason="r", why=why)


@pytest.mark.parametrize("outcome", [Outcome.DEFERRED, Outcome.SUPPRESSED])
def test_deferred_and_suppressed_never_go_without_their_why(outcome: Outcome):
    with pytest.raises(ValueError, match=f"a {outcome.value} record names its why"):
        ABOUT.record(fault=Fault.GPU_FATAL, action=Action.NONE, outcome=outcome, reason="r")


def test_a_builder_may_say_otherwise_about_needing_a_human():
    record = ABOUT.record(fault=Fault.INVALID, action=Action.NONE, outcome=Outcome.REJECTED, reason="forged",
                          needs_human=True)
    assert (record["why"], record["needs_human"]) == ("invalid", True)


def test_every_record_builder_with_a_deferred_or_suppressed_outcome_names_its_why():
    # Given every place Medic builds a record
    calls = source_calls()
    assert len(calls) >= 60
    # Then each that writes deferred or suppressed as such names its sub-reason (others pass a decision's, checked
    # when the record is made: test_deferred_and_suppressed_never_go_without_their_why)
    literal = [(path, line) for path, line, call in calls for keyword in call.keywords
               if keyword.arg == "outcome" and isinstance(keyword.value, ast.Attribute)
               and keyword.value.attr in ("DEFERRED", "SUPPRESSED")
               and not any(other.arg == "why" for other in call.keywords)]
    assert literal == []
    # And those that pass a decision's outcome pass its why too
    decided = [(path, line) for path, line, call in calls for keyword in call.keywords
               if keyword.arg == "outcome" and isinstance(keyword.value, ast.Attribute)
               and keyword.value.attr == "outcome" and not any(other.arg == "why" for other in call.keywords)]
    assert decided == []


def test_every_sub_reason_is_reachable_from_medics_code():
    # Each sub-reason is named where Medic decides (its typing aside), so none is a word no record can carry
    named = set()
    for path in FUNCTIONS.rglob("*.py"):
        if path.name == "models.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Why":
                named.add(node.attr)
    defaults = {why.name for why in DEFAULT_WHY.values()}
    assert {why.name for why in Why} - named - defaults == set()
