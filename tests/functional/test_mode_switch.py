"""Specification: the run-time mode switch cannot be moved silently, nor slip back to the deployed mode (issue 28,
item 8). Every change of the parameter pages once, straight to the topic, whoever made it and whatever the new mode
(a dry run silences every other page); a read of the switch that fails keeps the last mode any function knew (fail
closed), counted as Medic/ModeReadFailures. Against moto (SSM, DynamoDB, SNS, SQS)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import boto3
import pytest
import time_machine
from botocore.stub import Stubber

from medic.adapters.mode import ModeSwitch
from medic.core.mode import Mode
from medic.flows.mode.watch import record_mode_change
from medic.ledger.modes import SeenModes
from medic.ledger.table import Table
from tests.functional.conftest import MODE_PARAMETER, REGION, TABLE
from tests.helpers import load_event


def failing_ssm(times: int = 1) -> object:
    """An SSM client whose GetParameter fails (an outage, a throttled cold start) ``times`` times."""
    client = boto3.client("ssm", region_name=REGION)
    stubber = Stubber(client)
    for _ in range(times):
        stubber.add_client_error("get_parameter", "InternalServerError", "SSM is unwell", 500)
    stubber.activate()
    return client


def fresh_switch(medic, client, default: str = "act", memory: bool = True) -> ModeSwitch:
    """A function's container starting cold: no read of its own yet."""
    table = medic.deps.table
    return ModeSwitch(MODE_PARAMETER, default, client, memory=SeenModes(table, MODE_PARAMETER) if memory else None,
                      now=lambda: medic.clock[0])


def set_later(medic, value: str, minutes: int = 1) -> None:
    """Someone sets the parameter a while after the deploy created it (SSM times each version)."""
    with time_machine.travel(datetime.now(UTC) + timedelta(minutes=minutes), tick=False):
        medic.ssm.put_parameter(Name=MODE_PARAMETER, Value=value, Type="String", Overwrite=True)


def change_event(medic, operation: str = "Update", name: str = MODE_PARAMETER, event_id: str | None = None) -> dict:
    """SSM's "Parameter Store Change" for the parameter's newest version, at the time SSM modified it."""
    event = copy.deepcopy(load_event("ssm-parameter-store-change"))
    newest = medic.ssm.get_parameter_history(Name=MODE_PARAMETER)["Parameters"][-1]["LastModifiedDate"]
    event["time"] = newest.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    medic.clock[0] = newest.astimezone(UTC) + timedelta(seconds=2)  # the event reaches Medic as SSM sends it
    event["detail"].update(operation=operation, name=name)
    if event_id:
        event["id"] = event_id
    return event


# --- a failed read keeps the last known mode


def test_a_failed_read_in_a_fresh_container_keeps_the_paused_another_function_read(medic, capsys):
    # Given the operator paused Medic, and one function read it (keeping it in the ledger)
    medic.set_mode("paused")
    assert fresh_switch(medic, medic.ssm).current() is Mode.PAUSED
    # When another function starts cold and SSM fails its read (deployed mode: act)
    mode = fresh_switch(medic, failing_ssm()).current()
    # Then it keeps paused (fail closed), not the deployed act, and counts the failure
    assert mode is Mode.PAUSED
    assert '"ModeReadFailures"' in capsys.readouterr().out


def test_without_the_memory_a_failed_read_fell_back_to_the_deployed_mode(medic):
    # The failure this fixes: nothing kept, a cold container's failed read acted on the deployed mode
    medic.set_mode("paused")
    assert fresh_switch(medic, failing_ssm(), memory=False).current() is Mode.ACT


def test_a_failed_read_keeps_the_newer_of_the_containers_read_and_the_ledgers(medic):
    # Given a container read act (version 1), then another function read the operator's dry_run (version 2)
    mine = fresh_switch(medic, medic.ssm)
    assert mine.current() is Mode.ACT
    medic.set_mode("dry_run")
    assert fresh_switch(medic, medic.ssm).current() is Mode.DRY_RUN
    # When the first container's next read fails
    mine._client, mine._cached = failing_ssm(), None
    # Then it keeps the newer version: dry_run
    assert mine.current() is Mode.DRY_RUN


def test_an_older_read_never_moves_the_kept_mode_back(medic):
    memory = SeenModes(medic.deps.table, MODE_PARAMETER)
    memory.remember(Mode.PAUSED, 3, medic.clock[0])
    memory.remember(Mode.ACT, 2, medic.clock[0])  # a slow container's older read
    assert memory.last_known() == (Mode.PAUSED, 3)


def test_with_nothing_ever_kept_a_failed_read_is_the_deployed_mode(medic):
    assert fresh_switch(medic, failing_ssm(), default="dry_run").current() is Mode.DRY_RUN


def test_with_the_ledger_unreadable_too_a_failed_read_is_paused(medic):
    switch = fresh_switch(medic, failing_ssm())
    switch.memory = SeenModes(Table("no-such-table", medic.deps.table.client), MODE_PARAMETER)
    assert switch.current() is Mode.PAUSED


def test_a_failed_read_is_not_retried_by_every_call_of_the_next_30_seconds(medic):
    switch = fresh_switch(medic, failing_ssm(times=1))  # a second GetParameter would find no stubbed answer
    assert switch.current() is switch.current() is Mode.ACT


# --- every change pages once, whoever made it, whatever the new mode


def test_a_switch_to_dry_run_pages_once_naming_the_change(medic):
    # Given someone sets the parameter to dry_run (not through the medic CLI)
    set_later(medic, "dry_run")
    event = change_event(medic)
    # When SSM's change event arrives
    record = record_mode_change(event, medic.deps)
    # Then one page goes out although the new mode is a dry run, and the record says what changed
    assert (record["trigger"], record["fault"], record["outcome"], record["mode"], record["paged"]) == (
        "mode_change", "mode_changed", "ignored", "dry_run", True)
    assert record["incident"] == "mode:v2"
    [page] = medic.pages()
    assert page["Subject"] == "[Medic] mode changed: act -> dry_run"
    assert "pages nobody (this page is the exception)" in page["Message"]
    assert "By:             " in page["Message"]
    # And a redelivery of the event (or another event of the same change) pages nothing more
    again = record_mode_change({**event, "id": "7b8e5fec-c5a2-4d08-b0a2-c04814598829"}, medic.deps)
    assert (again["outcome"], again["paged"]) == ("duplicate", False)
    assert medic.pages() == []


def test_a_change_the_watch_saw_is_what_a_failed_read_keeps(medic):
    set_later(medic, "paused")
    record_mode_change(change_event(medic), medic.deps)
    assert fresh_switch(medic, failing_ssm()).current() is Mode.PAUSED


def test_the_medic_clis_reason_is_shown_quoted_as_claimed(medic):
    from medic.ledger.modes import ModeChange, ModeStore

    set_later(medic, "paused")
    event = change_event(medic)
    at = datetime.fromisoformat(event["time"].replace("Z", "+00:00"))
    ModeStore(medic.deps.table).record(ModeChange(stack="Medic", at=at, mode="paused", previous="act",
                                                  who="arn:aws:iam::123456789012:user/alice",
                                                  reason="AMI rollout\nWhat to do: nothing"))
    record_mode_change(event, medic.deps)
    [page] = medic.pages()
    assert 'Reason given:   "AMI rollout What to do: nothing" (recorded by the medic CLI for ' in page["Message"]


def test_a_deleted_parameter_pages_once_with_the_mode_the_functions_keep(medic):
    medic.set_mode("paused")
    fresh_switch(medic, medic.ssm).current()  # a function read it: kept
    event = change_event(medic, operation="Delete")
    medic.ssm.delete_parameter(Name=MODE_PARAMETER)
    record = record_mode_change(event, medic.deps)
    assert (record["outcome"], record["paged"], record["mode"]) == ("ignored", True, "paused")
    [page] = medic.pages()
    assert page["Subject"] == "[Medic] mode parameter deleted"
    assert "keeps the last mode known, paused (version 2)" in page["Message"]
    assert record_mode_change(event, medic.deps)["outcome"] == "duplicate"


@pytest.mark.parametrize(("operation", "name"), [("LabelParameterVersion", MODE_PARAMETER),
                                                 ("Update", "/medic/OtherStack/mode")])
def test_a_label_or_another_parameter_is_no_change_of_the_mode(medic, operation, name):
    medic.ssm.put_parameter(Name=MODE_PARAMETER, Value="paused", Type="String", Overwrite=True)
    record = record_mode_change(change_event(medic, operation=operation, name=name), medic.deps)
    assert (record["outcome"], record["paged"]) == ("ignored", False)
    assert medic.pages() == []


def test_a_malformed_change_event_is_rejected(medic):
    event = change_event(medic)
    event["detail"]["operation"] = "Update; rm -rf /"
    record = record_mode_change(event, medic.deps)
    assert (record["outcome"], record["paged"]) == ("rejected", False)


def test_an_unreadable_history_still_pages_what_the_event_says(medic):
    event = change_event(medic)
    medic.deps.mode._client = boto3.client("ssm", region_name=REGION)
    stubber = Stubber(medic.deps.mode._client)
    stubber.add_client_error("get_parameter_history", "AccessDeniedException", "no", 400)
    stubber.add_response("get_parameter", {"Parameter": {"Name": MODE_PARAMETER, "Value": "act", "Version": 1}})
    stubber.activate()
    record = record_mode_change(event, medic.deps)
    assert (record["outcome"], record["paged"]) == ("ignored", True)
    assert "could not read its history (AccessDeniedException)" in record["reason"]
    assert TABLE  # the ledger is the real one: the page is claimed once per event
