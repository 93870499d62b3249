"""Operators' pauses (`medic pause [--cluster C]... [--for 4h] --reason TEXT`): which clusters (or the whole stack)
are paused, by whom, since and until when.

``pause#<mode parameter>`` / ``<cluster>`` (or ``*``: the whole stack): written by the ``medic`` CLI (pause puts it,
resume deletes it), never by the functions except the two page claims below; read by every function's ModeSwitch
with the mode (one Query of this one partition, at most every 30 s per container). ``by``, ``reason``, ``since``,
``until`` (absent: until someone resumes); ``expiry_paged`` once the reconciler paged that it ended,
``reminder_paged`` once it paged that a pause without an end is still on after a day. TTL a week after ``until``
(none without one). Never prefixed: a pause holds whatever the mode, whichever table it is given.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from medic.core.mode import ALL_CLUSTERS, Mode, Pause, PauseBook
from medic.ledger.table import Key, Table, epoch, readable

KEPT_AFTER_END = timedelta(days=7)  # an ended pause stays readable (status, its expiry page) this long
EXPIRY_PAGED, REMINDER_PAGED = "expiry_paged", "reminder_paged"


class PauseStore(PauseBook):
    def __init__(self, table: Table, parameter: str) -> None:
        self.table = table.for_mode(Mode.ACT)  # the real namespace, unprefixed
        self.pk = f"pause#{parameter}"

    def put(self, pause: Pause) -> None:
        """Pause the scope (a new pause of a scope replaces its last one: its own pages are due again)."""
        item = {**self.table.key(self.pk, pause.scope), "by": {"S": pause.by}, "reason": {"S": pause.reason},
                "since": {"S": pause.since.isoformat()}}
        if pause.until is not None:
            item["until"] = {"S": pause.until.isoformat()}
            item["expires_at"] = {"N": str(epoch(pause.until + KEPT_AFTER_END))}
        self.table.put(item)

    def lift(self, scope: str) -> bool:
        """End the scope's pause now (`medic resume`); False when there was none."""
        response = self.table.client.delete_item(TableName=self.table.name, Key=self.table.key(self.pk, scope),
                                                 ReturnValues="ALL_OLD")
        return bool(response.get("Attributes"))

    def pauses(self) -> list[Pause]:
        """Every pause kept (ended ones too, until their TTL), an unreadable item left out."""
        return self.of_items(self.table.partition(self.pk))

    def keys_holding(self, cluster: str) -> list[Key]:
        """The two items that can pause ``cluster``: its own and the whole stack's. The node path reads them with its
        other ledger items in one round trip (ledger/node_event) instead of this partition's Query."""
        return [self.table.key(self.pk, cluster), self.table.key(self.pk, ALL_CLUSTERS)]

    @staticmethod
    def of_items(items: list[dict]) -> list[Pause]:
        """The pauses these items keep, an unreadable item left out."""
        return [pause for pause in (readable(_pause, item) for item in items) if pause is not None]

    def claim_page(self, pause: Pause, flag: str, at: datetime) -> bool:
        """The one page of this pause under ``flag`` (EXPIRY_PAGED: it ended by itself; REMINDER_PAGED: without an
        end, still on after a day); False when it went out already, or the pause was lifted or replaced."""
        return self.table.update_if(
            self.table.key(self.pk, pause.scope), f"SET {flag} = :at",
            f"attribute_exists(pk) AND #since = :since AND attribute_not_exists({flag})",
            {":since": {"S": pause.since.isoformat()}, ":at": {"S": at.isoformat()}}, {"#since": "since"}) is not None

    def release(self, pause: Pause, flag: str) -> None:
        """Give a claim back (SNS refused the page): the next run pages it."""
        self.table.update_if(self.table.key(self.pk, pause.scope), f"REMOVE {flag}", "#since = :since",
                             {":since": {"S": pause.since.isoformat()}}, {"#since": "since"})


def _pause(item: dict) -> Pause:
    until = item.get("until", {}).get("S")
    return Pause(scope=item["sk"]["S"], by=item["by"]["S"], reason=item["reason"]["S"],
                 since=_moment(item["since"]["S"]), until=_moment(until) if until else None,
                 paged=frozenset(flag for flag in (EXPIRY_PAGED, REMINDER_PAGED) if flag in item))


def _moment(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
