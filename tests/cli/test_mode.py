"""``medic pause`` / ``resume`` / ``mode``: the SSM mode parameter, and who changed it and why in the ledger."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from medic.ledger.modes import ModeChange, ModeStore
from tests.cli.conftest import CALLER, MODE_PARAMETER, NOW, STACK, Deployed


def changes(deployed: Deployed) -> list[dict]:
    """The audit items as stored (read raw: they are what anyone reading the table sees)."""
    return sorted((item for item in deployed.items() if item["pk"]["S"] == f"modechange#{STACK}"),
                  key=lambda item: item["sk"]["S"])


def test_given_medic_acting_when_the_mode_is_set_paused_then_the_parameter_is_paused_and_who_and_why_are_recorded(
        deployed: Deployed):
    # Given Medic acting
    assert deployed.mode() == "act"

    # When an operator throws the big switch with a reason
    result = deployed.cli("mode", "paused", "--reason", "bad AMI rolling out, INC-123")

    # Then the functions' switch reads paused, and the ledger holds one change: when, from, to, who, why
    assert result.code == 0, result.err
    assert deployed.mode() == "paused"
    [change] = changes(deployed)
    assert change["sk"]["S"] == NOW.isoformat()
    assert {key: change[key]["S"] for key in ("mode", "previous", "who", "reason")} == {
        "mode": "paused", "previous": "act", "who": CALLER, "reason": "bad AMI rolling out, INC-123"}
    assert "act -> paused" in result.out and CALLER in result.out and "INC-123" in result.out


def test_given_medic_paused_when_an_operator_resumes_then_it_acts_again_and_the_change_is_recorded(
        deployed: Deployed):
    deployed.set_mode("paused")

    result = deployed.cli("resume", "--reason", "AMI rolled back")

    assert result.code == 0, result.err
    assert deployed.mode() == "act"
    [change] = changes(deployed)
    assert (change["previous"]["S"], change["mode"]["S"], change["reason"]["S"]) == ("paused", "act", "AMI rolled back")


def test_given_medic_acting_when_the_mode_is_set_to_dry_run_then_it_decides_and_calls_nothing(deployed: Deployed):
    result = deployed.cli("mode", "dry_run", "--reason", "trying the new escalation policy")

    assert result.code == 0, result.err
    assert deployed.mode() == "dry_run"
    assert changes(deployed)[0]["mode"]["S"] == "dry_run"


def test_given_the_mode_already_set_when_set_again_then_nothing_changes_and_nothing_is_recorded(deployed: Deployed):
    result = deployed.cli("resume")

    assert result.code == 0
    assert "already act" in result.out
    assert changes(deployed) == []


def test_given_no_reason_when_an_operator_pauses_then_it_is_a_usage_error_and_nothing_changes(
        deployed: Deployed, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_:
        deployed.cli("pause")

    assert exit_.value.code == 2
    assert "--reason" in capsys.readouterr().err
    assert deployed.mode() == "act" and changes(deployed) == []


def test_given_a_stack_without_the_parameter_when_paused_then_an_error_names_it_and_nothing_is_written(
        deployed: Deployed):
    result = deployed.cli("pause", "--reason", "x", "--stack", "Other", "--table", "Medic-LedgerTable")

    assert result.code == 1
    assert "mode parameter /medic/Other/mode not found" in result.err
    assert deployed.mode() == "act" and deployed.items() == []


def test_given_earlier_changes_when_mode_is_asked_then_the_current_mode_and_the_changes_newest_first(
        deployed: Deployed):
    modes = ModeStore(deployed.ledger())
    assert modes.record(ModeChange(STACK, datetime(2026, 12, 1, 10, tzinfo=UTC), mode="paused", previous="act",
                                   who="arn:aws:sts::123456789012:assumed-role/Oncall/alice", reason="FSx outage"))
    assert modes.record(ModeChange(STACK, datetime(2026, 12, 1, 12, tzinfo=UTC), mode="act", previous="paused",
                                   who="arn:aws:sts::123456789012:assumed-role/Oncall/bob", reason="FSx back"))

    result = deployed.cli("mode")

    assert result.code == 0, result.err
    assert f"Mode: act  [{MODE_PARAMETER}]" in result.out
    lines = result.out.splitlines()
    bob = next(i for i, line in enumerate(lines) if "Oncall/bob" in line)
    alice = next(i for i, line in enumerate(lines) if "Oncall/alice" in line)
    assert bob < alice and "FSx back" in lines[bob] and "FSx outage" in lines[alice]


def test_given_a_mistyped_parameter_value_when_mode_is_asked_then_it_reads_paused_as_the_functions_do(
        deployed: Deployed):
    deployed.set_mode("pasued")

    result = deployed.cli("mode")

    assert "Mode: paused (parameter holds 'pasued': read as paused)" in result.out
