"""Mode memory: who changed the run-time mode (SSM ``/medic/<stack>/mode``), when, from what and why; and the
last mode Medic's functions read from the switch.

``modechange#<stack>`` / <time>: written by the ``medic`` CLI (pause, resume, mode), never by the functions; one
item per change, kept as the audit trail (no TTL).
``modeseen#<parameter>`` / ``latest``: the newest mode any function read (``mode``, the parameter's ``version``,
``seen_at``), written by the functions whenever they read a version they did not know (the node path only when
this item, read with its other ledger items, keeps an older one), and by the mode watch (flows/mode); read only when
the switch cannot be: the value a failed read keeps (adapters/mode.py). One item, no
TTL, only ever moved to a newer version.
Never prefixed: the mode is one for both namespaces, whichever table it is given.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple

from medic.core.mode import Mode, ModeMemory
from medic.ledger.table import Table


class ModeChange(NamedTuple):
    stack: str
    at: datetime
    mode: str
    previous: str | None
    who: str
    reason: str


class ModeStore:
    def __init__(self, table: Table) -> None:
        self.table = table.for_mode(Mode.ACT)  # the real namespace, unprefixed

    def record(self, change: ModeChange) -> bool:
        """Append the change; False when one is already recorded for the stack at that very moment."""
        item = {**self.table.key(_partition(change.stack), change.at.isoformat()),
                "mode": {"S": change.mode}, "who": {"S": change.who}, "reason": {"S": change.reason},
                "at": {"S": change.at.isoformat()}}
        if change.previous is not None:
            item["previous"] = {"S": change.previous}
        return self.table.put_if(item, "attribute_not_exists(pk)")

    def changes(self, stack: str, limit: int = 1) -> list[ModeChange]:
        """The latest changes, newest first (an item whose time is unreadable is left out)."""
        changes = []
        for item in self.table.newest(_partition(stack), limit):
            at = _moment(item["sk"]["S"])
            if at is None:
                continue
            changes.append(ModeChange(
                stack=stack, at=at, mode=_text(item, "mode") or "?", previous=_text(item, "previous"),
                who=_text(item, "who") or "?", reason=_text(item, "reason") or ""))
        return changes


class SeenModes(ModeMemory):
    """The last mode read from one mode parameter (``modeseen#<parameter>``): the ModeSwitch's memory."""

    def __init__(self, table: Table, parameter: str) -> None:
        self.table = table.for_mode(Mode.ACT)  # the real namespace, unprefixed
        self.parameter = parameter

    def key(self) -> dict:
        """The one item (the node path reads it with its other ledger items: adapters/mode.remember_unless_kept)."""
        return self.table.key(f"modeseen#{self.parameter}", "latest")

    @staticmethod
    def kept_of(item: dict | None) -> tuple[Mode, int] | None:
        """The mode and version an item keeps; None when there is none (or it keeps no mode)."""
        if item is None or "mode" not in item or "version" not in item:
            return None
        return Mode.of(item["mode"]["S"]), int(item["version"]["N"])

    def remember(self, mode: Mode, version: int, at: datetime) -> None:
        """Keep the mode unless a newer version (or this one) is kept already: containers racing with an older
        read never move it back."""
        self.table.put_if({**self.key(), "mode": {"S": str(mode)}, "version": {"N": str(version)},
                           "seen_at": {"S": at.isoformat()}},
                          "attribute_not_exists(pk) OR version < :version", {":version": {"N": str(version)}})

    def last_known(self) -> tuple[Mode, int] | None:
        return self.kept_of(self.table.get(self.key()))


def _partition(stack: str) -> str:
    return f"modechange#{stack}"


def _text(item: dict, name: str) -> str | None:
    value = item.get(name, {})
    return value.get("S") if isinstance(value, dict) else None


def _moment(value: str) -> datetime | None:
    """An ISO time (a naive one is UTC); None when unreadable."""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
