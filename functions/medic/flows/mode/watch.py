"""The mode watch: every change of Medic's run-time mode parameter pages once, whoever made it (the `medic` CLI, the
console, `aws ssm put-parameter`, a deploy) and whatever the new mode: a switch to `dry_run` silences every other
page, so this one goes to the topic directly, past the dry run's silence (outbox.pages.page_whatever_the_mode).

One "Parameter Store Change" event → the parameter's history (GetParameterHistory: each version's value, time and
LastModifiedUser) → the version(s) the event reports → one page claim per version (`incident#mode:v<version>`,
so a redelivered event, or two events of one change, page once) → the newest version kept as the last known mode
(the value a failed read of the switch keeps: adapters/mode.py) → one page and one record.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from medic.adapters.aws import error_code
from medic.core.mode import Mode, ModeVersion
from medic.core.models import Action, Fault, MedicEvent, Outcome, Trigger
from medic.core.pages import PageText
from medic.core.record import About
from medic.core.text import quoted, short
from medic.deps import Deps
from medic.flows.mode.policy import (
    CHANGES,
    ModeChangeView,
    mode_change_page,
    mode_change_reason,
    mode_deleted_page,
    mode_window,
    names_the_parameter,
    previous_of,
    versions_reported,
)
from medic.ledger.modes import ModeStore, SeenModes
from medic.ledger.pages import PageStore
from medic.obs import logger
from medic.outbox.pages import page_whatever_the_mode
from medic.outbox.records import emit, rejected


class ParameterStoreChangeDetail(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=2048)
    operation: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z]+$")
    type: str = Field(default="", max_length=64)


class ParameterStoreChangeEvent(MedicEvent):
    source: Literal["aws.ssm"]
    detail_type: Literal["Parameter Store Change"] = Field(alias="detail-type")
    detail: ParameterStoreChangeDetail


CLI_NOTE_WITHIN = timedelta(minutes=2)  # the `medic` CLI records who and why right after its PutParameter


def record_mode_change(raw: Any, deps: Deps) -> dict:
    parameter = deps.mode.parameter
    try:
        event = ParameterStoreChangeEvent.model_validate(raw, context=deps.edge())
    except ValidationError as error:
        return rejected(raw, error, deps.mode.current(), Trigger.MODE_CHANGE, "Parameter Store Change event")
    detail, now, table = event.detail, deps.now(), deps.table
    if not names_the_parameter(detail.name, parameter) or detail.operation not in CHANGES:
        what = (f"names parameter {quoted(detail.name, 200)}, not Medic's mode parameter {parameter}"
                if not names_the_parameter(detail.name, parameter) else
                f"is a {quoted(detail.operation, 64)}, which does not change the value")
        about = _about(event, f"mode:event:{event.id}", deps.mode.current())
        return emit(about.record(fault=Fault.MODE_CHANGED, action=Action.NONE, outcome=Outcome.IGNORED,
                                 reason=f"The Parameter Store Change event {what}."))
    if detail.operation == "Delete":
        return _deleted(event, parameter, deps)
    try:
        history = deps.mode.history()
    except (ClientError, BotoCoreError) as error:
        return _unreadable(event, parameter, error_code(error), deps)
    reported = versions_reported(history, event.time) or history[-1:]  # a late event: the value now
    pages = PageStore(table)
    claimed = [found for found in reported if pages.claim_page(_claim(found), now)]
    if not claimed:
        newest = reported[-1] if reported else None
        about = _about(event, _claim(newest), newest.mode) if newest else \
            _about(event, f"mode:event:{event.id}", deps.mode.current())
        return emit(about.record(fault=Fault.MODE_CHANGED, action=Action.NONE, outcome=Outcome.DUPLICATE,
                                 reason=f"The change of {parameter} this event reports was paged already "
                                        "(another delivery, or another event of the same change)."))
    newest = claimed[-1]
    _keep(parameter, newest, deps)
    view = ModeChangeView(parameter=parameter, operation=detail.operation,
                          changes=tuple((previous_of(history, found), found) for found in claimed),
                          cli_note=_cli_note(parameter, newest, deps))
    record = _about(event, _claim(newest), newest.mode).record(
        fault=Fault.MODE_CHANGED, action=Action.NONE, outcome=Outcome.IGNORED,
        reason=short(mode_change_reason(view), 1000))
    text = mode_change_page(view, record, deps.region)

    def release() -> None:
        for found in claimed:
            pages.release_page(_claim(found))

    return emit(record.paged_if(page_whatever_the_mode(deps, record, text, release=release,
                                                       window=mode_window(parameter))))


def _keep(parameter: str, version: ModeVersion, deps: Deps) -> None:
    """The change seen here is what a function's failed read of the switch keeps from now on (best effort)."""
    try:
        SeenModes(deps.table, parameter).remember(version.mode, version.version, deps.now())
    except (ClientError, BotoCoreError) as error:
        logger.warning("mode not remembered", extra={"error_code": error_code(error)})


def _claim(version: ModeVersion) -> str:
    return f"mode:v{version.version}"


def _about(event: ParameterStoreChangeEvent, incident: str, mode: Mode) -> About:
    """A mode change's record: its own incident (one per version), and the mode it changed to."""
    return About(incident=incident, trigger=Trigger.MODE_CHANGE, event_id=event.id, mode=mode)


def _deleted(event: ParameterStoreChangeEvent, parameter: str, deps: Deps) -> dict:
    """Nobody can read the switch any more: the functions keep the last known mode; say so, once per event."""
    pages = PageStore(deps.table)
    claim = f"mode:deleted:{event.id}"
    try:
        kept = SeenModes(deps.table, parameter).last_known()
    except (ClientError, BotoCoreError):
        kept = None
    about = _about(event, claim, kept[0] if kept else Mode.of(deps.mode.default))
    if not pages.claim_page(claim, deps.now()):
        return emit(about.record(fault=Fault.MODE_CHANGED, action=Action.NONE, outcome=Outcome.DUPLICATE,
                                 reason=f"The deletion of {parameter} was paged already."))
    record = about.record(fault=Fault.MODE_CHANGED, action=Action.NONE, outcome=Outcome.IGNORED,
                          reason=f"The run-time mode parameter {parameter} was deleted: every function keeps the "
                                 f"last mode known ({kept[0] if kept else 'none kept: the deployed mode'}).")
    text = mode_deleted_page(parameter, kept, record, deps.region)
    return emit(record.paged_if(page_whatever_the_mode(deps, record, text, release=lambda: pages.release_page(claim),
                                                       window=mode_window(parameter))))


def _unreadable(event: ParameterStoreChangeEvent, parameter: str, code: str, deps: Deps) -> dict:
    """The history cannot be read: page what the event says rather than nothing (once per event)."""
    pages = PageStore(deps.table)
    claim = f"mode:event:{event.id}"
    about = _about(event, claim, deps.mode.current())
    if not pages.claim_page(claim, deps.now()):
        return emit(about.record(fault=Fault.MODE_CHANGED, action=Action.NONE, outcome=Outcome.DUPLICATE,
                                 reason=f"This change of {parameter} was paged already."))
    record = about.record(fault=Fault.MODE_CHANGED, action=Action.NONE, outcome=Outcome.IGNORED,
                          reason=f"The run-time mode parameter {parameter} changed ({event.detail.operation} at "
                                 f"{event.time:%H:%M:%S} UTC); Medic could not read its history ({code}), so which "
                                 "mode it is now, and who changed it, is unknown here.")
    text = PageText("[Medic] mode changed", (
        f"Mode parameter: {parameter}",
        f"Changed:        {event.detail.operation} at {event.time:%Y-%m-%d %H:%M:%S} UTC",
        "",
        f"What Medic did: {record['reason']}",
        f"What to do:     medic status (the mode now and its last changes); CloudTrail, PutParameter on {parameter}.",
        f"Incident:       {record['incident']} (event {record['event_id']})",
    ))
    return emit(record.paged_if(page_whatever_the_mode(deps, record, text, release=lambda: pages.release_page(claim),
                                                       window=mode_window(parameter))))


def _cli_note(parameter: str, version: ModeVersion, deps: Deps) -> str | None:
    """Who and why, as the `medic` CLI recorded them with this change (claimed, not verified: shown quoted)."""
    parts = parameter.strip("/").split("/")
    if len(parts) != 3 or parts[0] != "medic":
        return None
    try:
        changes = ModeStore(deps.table).changes(parts[1], limit=3)
    except (ClientError, BotoCoreError) as error:
        logger.warning("mode changes unreadable", extra={"error_code": error_code(error)})
        return None
    for change in changes:
        if change.mode == version.value.strip() and abs(change.at - version.modified_at) <= CLI_NOTE_WITHIN:
            return f"{quoted(change.reason, 300)} (recorded by the medic CLI for {quoted(change.who, 200)}; claimed)"
    return None
