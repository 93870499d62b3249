"""Operators' pauses (`medic pause [--cluster C]... [--for 4h] --reason TEXT`, `medic resume [--cluster C]...`):
ledger items every function reads with the mode (functions/medic/ledger/pauses.py). A pause turns `act` into
`paused` for its clusters (or the whole stack) until it ends by itself (`--for`) or someone resumes; the mode
parameter (`medic mode`) stays the big switch."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from medic.config import CLUSTER_NAME_PATTERN
from medic.core.mode import ALL_CLUSTERS, Pause
from medic.ledger.pauses import PauseStore
from medic_cli.context import CliError, Context
from medic_cli.mode import read_mode

_DURATION = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
LONGEST_PAUSE = timedelta(days=14)  # a longer maintenance is a mode change (medic mode paused), not a pause
MAX_REASON = 500


def parse_for(value: str) -> timedelta:
    """``--for``: 30m, 4h, 2d, 1w; at least a minute, at most LONGEST_PAUSE."""
    match = _DURATION.match(value)
    if not match:
        raise CliError(f"--for {value!r}: expected a duration such as 30m, 4h or 2d")
    length = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    if length < timedelta(minutes=1) or length > LONGEST_PAUSE:
        raise CliError(f"--for {value!r}: a pause lasts from 1m to {LONGEST_PAUSE.days}d (for longer, set the mode: "
                       "medic mode paused --reason ...)")
    return length


def scopes(ctx: Context, clusters: list[str]) -> list[str]:
    """The pause's scopes: each --cluster (a configured cluster's name), or the whole stack without one."""
    names = [name.strip() for value in clusters for name in value.split(",") if name.strip()]
    if not names:
        return [ALL_CLUSTERS]
    config = ctx.config
    known = [cluster.name for cluster in config.clusters] if config is not None else None
    for name in names:
        if known is not None and name not in known:
            raise CliError(f"--cluster {name!r} is not a cluster of the config ({ctx.loaded_config.source}): "
                           f"{', '.join(known) or 'none configured'}")
        if not re.match(CLUSTER_NAME_PATTERN, name):
            raise CliError(f"--cluster {name!r} is not a HyperPod cluster name")
    return sorted(set(names))


def pause(ctx: Context, clusters: list[str], length: str | None, reason: str) -> list[Pause]:
    """Write one pause per scope (replacing a scope's last one), or CliError naming the bad value."""
    reason = reason.strip()
    if not reason or len(reason) > MAX_REASON:
        raise CliError(f"--reason: say why in 1 to {MAX_REASON} characters (it is shown to the on-call)")
    until_in = parse_for(length) if length is not None else None
    wanted = scopes(ctx, clusters)
    read_mode(ctx)  # the stack's mode parameter exists: the functions read the pauses kept under its name
    store = PauseStore(ctx.ledger(), ctx.mode_parameter)  # resolves the table before anything changes
    who, now = ctx.caller_arn(), ctx.now()
    paused = [Pause(scope=scope, by=who, reason=reason, since=now, until=now + until_in if until_in else None)
              for scope in wanted]
    for one in paused:
        store.put(one)
    return paused


def lift(ctx: Context, clusters: list[str]) -> list[Pause]:
    """End the pauses of these clusters now (none named: every pause); the pauses that were on."""
    store = PauseStore(ctx.ledger(), ctx.mode_parameter)
    now = ctx.now()
    kept = store.pauses()
    wanted = set(scopes(ctx, clusters)) if clusters else {pause.scope for pause in kept}
    lifted = []
    for one in kept:
        if one.scope in wanted and store.lift(one.scope) and one.holds(now):
            lifted.append(one)
    return lifted


def read(ctx: Context) -> list[Pause]:
    return sorted(PauseStore(ctx.ledger(), ctx.mode_parameter).pauses(), key=lambda one: one.scope)


def pause_text(pause: Pause, now: datetime) -> str:
    until = (f"until {pause.until:%Y-%m-%d %H:%M} UTC" if pause.until and pause.holds(now) else
             f"ended {pause.until:%Y-%m-%d %H:%M} UTC" if pause.until else "until someone resumes (no end set)")
    return f"{pause.what} by {pause.by} since {pause.since:%Y-%m-%d %H:%M} UTC, {until}: {pause.reason!r}"


def pause_json(pause: Pause, now: datetime) -> dict:
    return {"scope": pause.scope, "by": pause.by, "reason": pause.reason, "since": pause.since.isoformat(),
            "until": pause.until.isoformat() if pause.until else None, "holds": pause.holds(now)}
