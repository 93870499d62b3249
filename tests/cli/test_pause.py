"""``medic pause [--cluster C]... [--for 4h] --reason TEXT`` / ``medic resume [--cluster C]...``: an operator's
scoped, timed pause, kept in the ledger where every function reads it with the mode (issue 29, item 7)."""

from __future__ import annotations

import json
from datetime import timedelta

from medic.core.mode import Pause
from medic.ledger.pauses import PauseStore
from medic.ledger.table import Table
from tests.cli.conftest import CALLER, CLUSTER, MODE_PARAMETER, NOW, Deployed


def pauses(deployed: Deployed) -> dict[str, Pause]:
    """The pauses as the functions read them (ledger/pauses.py, under the stack's mode parameter)."""
    store = PauseStore(Table("Medic-LedgerTable", deployed.dynamodb), MODE_PARAMETER)
    return {pause.scope: pause for pause in store.pauses()}


def test_given_medic_acting_when_an_operator_pauses_one_cluster_for_4h_then_it_holds_that_cluster_until_then(
        deployed: Deployed):
    # When an operator pauses one cluster for four hours
    result = deployed.cli("pause", "--cluster", CLUSTER, "--for", "4h", "--reason", "IB switch upgrade, CHG-88",
                          "--config", str(deployed.config_file))

    # Then the functions read a pause of that cluster: by whom, since and until when, why; the switch stays act
    assert result.code == 0, result.err
    assert pauses(deployed) == {CLUSTER: Pause(scope=CLUSTER, by=CALLER, reason="IB switch upgrade, CHG-88",
                                               since=NOW, until=NOW + timedelta(hours=4))}
    assert deployed.mode() == "act"
    assert f"Paused: cluster {CLUSTER} by {CALLER}" in result.out and "until" in result.out


def test_given_no_cluster_when_an_operator_pauses_then_the_whole_stack_is_paused_without_an_end(deployed: Deployed):
    result = deployed.cli("pause", "--reason", "region-wide FSx incident")

    assert result.code == 0, result.err
    [pause] = pauses(deployed).values()
    assert (pause.scope, pause.until) == ("*", None)
    assert "the whole stack" in result.out and "still on after a day" in result.out
    assert deployed.mode() == "act"  # the big switch is medic mode's


def test_given_a_cluster_the_config_does_not_name_when_paused_then_an_error_names_it_and_nothing_is_written(
        deployed: Deployed):
    result = deployed.cli("pause", "--cluster", "pretrain-slrum", "--reason", "x", "--config",
                          str(deployed.config_file))

    assert result.code == 1
    assert "--cluster 'pretrain-slrum' is not a cluster of the config" in result.err and CLUSTER in result.err
    assert pauses(deployed) == {}


def test_given_a_duration_out_of_bounds_or_unreadable_when_paused_then_an_error_names_it(deployed: Deployed):
    for value in ("forever", "0m", "30d"):
        result = deployed.cli("pause", "--for", value, "--reason", "x")
        assert result.code == 1 and f"--for {value!r}" in result.err
    assert pauses(deployed) == {}


def test_given_two_paused_clusters_when_one_is_resumed_then_only_its_pause_ends(deployed: Deployed):
    config = str(deployed.config_file)
    deployed.cli("pause", "--cluster", CLUSTER, "--cluster", "finetune-eks", "--reason", "x", "--config", config)

    result = deployed.cli("resume", "--cluster", "finetune-eks", "--config", config)

    assert result.code == 0, result.err
    assert set(pauses(deployed)) == {CLUSTER}
    assert "Resumed: cluster finetune-eks" in result.out


def test_given_pauses_and_the_switch_paused_when_resumed_without_cluster_then_everything_acts_again(
        deployed: Deployed):
    deployed.cli("pause", "--cluster", CLUSTER, "--reason", "x", "--config", str(deployed.config_file))
    deployed.set_mode("paused")

    result = deployed.cli("resume", "--reason", "maintenance over")

    assert result.code == 0, result.err
    assert pauses(deployed) == {} and deployed.mode() == "act"


def test_given_a_paused_cluster_when_status_then_what_is_paused_by_whom_until_when_and_why_show(deployed: Deployed):
    # Given one cluster paused for 2 hours
    config = str(deployed.config_file)
    deployed.cli("pause", "--cluster", CLUSTER, "--for", "2h", "--reason", "IB switch upgrade", "--config", config)

    # When the operator asks for the status (table and JSON)
    result = deployed.cli("status", "--config", config)
    as_json = deployed.cli("status", "--config", config, "--json")

    # Then the pause shows with who, since, until and why
    assert result.code == 0, result.err
    line = next(line for line in result.out.splitlines() if line.startswith("Paused:"))
    until = NOW + timedelta(hours=2)
    assert f"cluster {CLUSTER} by {CALLER}" in line and f"until {until:%Y-%m-%d %H:%M} UTC" in line
    assert "'IB switch upgrade'" in line
    assert json.loads(as_json.out)["pauses"] == [{"scope": CLUSTER, "by": CALLER, "reason": "IB switch upgrade",
                                         "since": NOW.isoformat(), "until": until.isoformat(), "holds": True}]
