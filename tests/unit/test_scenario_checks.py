"""Specification: a scenario's `# check:` lines (sim/expect.py), which `sim demo` verifies against its replay."""

from __future__ import annotations

from collections import Counter

import pytest

from sim.cli import check_lines
from sim.expect import CheckSyntaxError, parse_check
from sim.replay import ReplayResult


def replay_result() -> ReplayResult:
    """A replay as the demo sees it: a node fault deferred then executed, one page, one Slurm command."""
    return ReplayResult(
        lines=[
            {"kind": "record", "action": "replace_node", "outcome": "deferred", "node_id": "i-0a", "paged": False,
             "jobs": None, "reason": "Drain queued, then the call"},
            {"kind": "record", "action": "replace_node", "outcome": "executed", "node_id": "i-0a", "paged": True,
             "jobs": [{"id": "4211", "name": "llama3-70b"}], "reason": "Called after the drain, 8 d old"},
            {"kind": "page", "subject": "[Medic] pretrain-slurm", "message": "What to do: look",
             "record": {"outcome": "executed"}},
            {"kind": "slurm_command", "argv": ["scontrol", "requeue", "4211"], "exit": 0},
        ],
        calls=Counter({"sagemaker:BatchReplaceClusterNodes": 1}), metrics=Counter({"PageFailures": 1.0}))


@pytest.mark.parametrize("check", [
    "pages == 1",
    "records == 2",
    "records outcome=executed == 1",
    "records action=replace_node outcome!=executed == 1",
    "records .outcome == deferred, executed",
    "records action=reboot_node .outcome == ()",
    "records paged=true .jobs == '{\"id\":\"4211\",\"name\":\"llama3-70b\"}'",  # a list: its items
    "records paged=false .jobs == null",
    'records reason~"8 d old" == 1',
    "records jobs~4211 >= 1",
    "pages record.outcome=executed == 1",
    'slurm_commands argv="scontrol requeue 4211" exit=0 == 1',
    "calls sagemaker:BatchReplaceClusterNodes == 1",
    "calls sagemaker:BatchRebootClusterNodes == 0",
    "metric PageFailures == 1",
    "dropped < 1",
])
def test_a_check_the_replay_meets_holds(check):
    met, actual = parse_check(check).evaluate(replay_result())
    assert met, actual


@pytest.mark.parametrize(("check", "actual"), [
    ("pages == 0", "1"),
    ("records .outcome == executed, deferred", "deferred, executed"),  # order matters
    ("records .outcome == executed", "deferred, executed"),  # exactly: not a subset
    ("records outcome=failed >= 1", "0"),
    ("calls sagemaker:BatchReplaceClusterNodes > 1", "1"),
    ("metric PageFailures == 0", "1"),
])
def test_a_check_the_replay_does_not_meet_fails_saying_what_it_had(check, actual):
    assert parse_check(check).evaluate(replay_result()) == (False, actual)


@pytest.mark.parametrize(("check", "says"), [
    ("pages", "no comparison"),
    ("records outcome=executed 1", "no comparison"),
    ("recrods == 1", "unknown kind 'recrods'"),
    ("records executed == 1", "'executed' is neither a filter"),
    ("records == one", "'one' is not a number"),
    ("calls == 1", "calls takes one name"),
    ("records .outcome >= 1", "a sequence compares with == or != only"),
    ("records .outcome ==", "no values after =="),
    ('records reason~"unterminated == 1', "No closing quotation"),
])
def test_a_check_that_does_not_parse_is_refused_naming_what_is_wrong(check, says):
    with pytest.raises(CheckSyntaxError, match=says.replace("(", r"\(")):
        parse_check(check)


def test_the_demo_passes_a_scenario_only_when_it_has_checks_and_meets_every_one():
    result = replay_result()
    assert check_lines(["pages == 1", "records == 2"], result) == (
        True, ["   check: pages == 1", "   check: records == 2", "   PASS (2 of 2 checks met)"])
    passed, lines = check_lines(["pages == 1", "records == 3", "recrods == 1"], result)
    assert not passed
    assert lines[1] == "   check: records == 3  -> FAIL: got 2"
    assert lines[2].startswith("   check: recrods == 1  -> FAIL: check 'recrods == 1': unknown kind")
    assert lines[-1] == "   FAIL (1 of 3 checks met)"
    # a scenario that says nothing it expects is not a pass
    passed, lines = check_lines([], result)
    assert not passed and lines[-1] == "   FAIL (0 of 0 checks met)"
    # nor one whose input the replay could not read whole
    result.skipped = 1
    passed, lines = check_lines(["pages == 1"], result)
    assert not passed and "1 item(s) skipped" in lines[-2]
