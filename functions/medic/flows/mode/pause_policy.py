"""When an operator's pause (`medic pause`, core.mode.Pause) tells the on-call something by itself: it ended (its
`--for` ran out: Medic acts on the cluster again), or it was set without an end and is still on a day later (Medic
has acted on nothing there since). Each at most once per pause. Pure: no I/O."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from medic.core.mode import PAUSE_REMINDER, Pause
from medic.core.pages import PageText
from medic.core.text import quoted


class PauseNotice(StrEnum):
    ENDED = "expiry_paged"  # the ledger's flag of each notice (ledger/pauses.py)
    STILL_ON = "reminder_paged"


def pause_notice(pause: Pause, now: datetime) -> PauseNotice | None:
    """The notice this pause is due now (None: none, or it went out already)."""
    if pause.until is not None:
        due = now >= pause.until and PauseNotice.ENDED.value not in pause.paged
        return PauseNotice.ENDED if due else None
    due = now - pause.since >= PAUSE_REMINDER and PauseNotice.STILL_ON.value not in pause.paged
    return PauseNotice.STILL_ON if due else None


def pause_reason(pause: Pause, notice: PauseNotice) -> str:
    who = f"{quoted(pause.by, 200)} at {pause.since:%Y-%m-%d %H:%M} UTC ({quoted(pause.reason, 300)})"
    if notice is PauseNotice.ENDED:
        return (f"The pause of {pause.what} set by {who} ended at {pause.until:%Y-%m-%d %H:%M} UTC: Medic acts there "
                "again (in the stack's mode).")
    return (f"The pause of {pause.what} set by {who} without an end is still on after "
            f"{int(PAUSE_REMINDER.total_seconds() // 3600)} h: Medic records every decision there and acts on none "
            "until someone runs medic resume.")


def pause_page(pause: Pause, notice: PauseNotice, reason: str) -> PageText:
    scope = "" if pause.scope == "*" else f" --cluster {pause.scope}"
    if notice is PauseNotice.ENDED:
        return PageText(f"[Medic] pause ended: {pause.what}: Medic acts again", (
            f"What happened:  {reason}",
            f"What to do:     Nothing, if the maintenance is over. Otherwise pause again: medic pause{scope} "
            "--for <duration> --reason <text>.",
            f"Read:           medic history{scope} --since {_since(pause)} (what Medic decided while paused)"))
    return PageText(f"[Medic] still paused after a day: {pause.what}", (
        f"What happened:  {reason}",
        f"What to do:     medic resume{scope} when the maintenance is over; or set an end: medic pause{scope} "
        "--for <duration> --reason <text>.",
        f"Read:           medic history{scope} --needs-human --since 24h (the decisions a human must see to)"))


def _since(pause: Pause) -> str:
    end = pause.until or pause.since
    hours = max(1, int((end - pause.since).total_seconds() // 3600) + 1)
    return f"{hours}h"
