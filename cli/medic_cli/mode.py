"""The run-time mode (SSM ``/medic/<stack>/mode``): read it as the handlers do, change it with an audit item."""

from __future__ import annotations

from dataclasses import dataclass

from botocore.exceptions import ClientError

from medic.core.mode import Mode
from medic.ledger.modes import ModeChange, ModeStore
from medic_cli.context import CliError, Context

VALID_MODES = tuple(mode.value for mode in Mode)


@dataclass(frozen=True)
class ModeReading:
    parameter: str
    value: str  # as stored
    effective: Mode  # what the handlers act on: an invalid value reads as paused (fail safe)


def read_mode(ctx: Context) -> ModeReading:
    name = ctx.mode_parameter
    try:
        value = ctx.client("ssm").get_parameter(Name=name)["Parameter"]["Value"].strip()
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ParameterNotFound":
            raise CliError(f"mode parameter {name} not found: is stack {ctx.stack!r} deployed in this region? "
                           "(--stack, --region)") from None
        raise
    return ModeReading(name, value, Mode.of(value))


def set_mode(ctx: Context, mode: str, reason: str) -> tuple[ModeChange | None, ModeReading]:
    """Overwrite the parameter, then append who/why to the ledger; None when the mode already was that."""
    if mode not in VALID_MODES:
        raise CliError(f"mode must be one of {', '.join(VALID_MODES)} (got {mode!r})")
    modes = ModeStore(ctx.ledger())  # resolves the table before changing anything: the change must be recordable
    who = ctx.caller_arn()
    before = read_mode(ctx)
    if before.value == mode:
        return None, before
    ctx.client("ssm").put_parameter(Name=before.parameter, Value=mode, Overwrite=True)
    change = ModeChange(stack=ctx.stack, at=ctx.now(), mode=mode, previous=before.value, who=who, reason=reason)
    try:
        recorded = modes.record(change)
        problem = "" if recorded else f"a change is already recorded at {change.at.isoformat()}"
    except ClientError as error:
        problem = str(error)
    if problem:
        raise CliError(f"the mode IS now {mode}, but the change could not be recorded in ledger {ctx.table}: "
                       f"{problem}. Record it by hand (who: {who}, reason: {reason!r}).")
    return change, before
