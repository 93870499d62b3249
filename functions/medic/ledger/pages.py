"""Page memory: which incidents paged, each cluster's last guardrail (storm) summary page, and each source's page
window (how many pages it counted in its current window)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import NamedTuple

from medic.ledger.table import Key, Table, epoch, expires, readable


class WindowCount(NamedTuple):
    """A page counted in its source's window: the nth of the window opened at ``opened_at``; when it opened the
    window, what the window before it had counted (``previous_pages``, from ``previous_at``)."""

    nth: int
    opened_at: datetime
    previous_pages: int = 0
    previous_at: datetime | None = None


class PagedIncident(NamedTuple):
    incident: str
    paged_at: datetime


def page_key(table: Table, incident: str) -> Key:
    return table.key(f"incident#{incident}", "page")


class PageStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def storm_key(self, cluster: str) -> Key:
        return self.table.key(f"cluster#{cluster}", "storm")

    def claim_page(self, incident: str, now: datetime) -> bool:
        """True for the first page of an incident; the incident's later decisions do not page."""
        return self.table.put_if({**page_key(self.table, incident), "paged_at": {"S": now.isoformat()},
                                  "expires_at": expires(now)}, "attribute_not_exists(pk)")

    def release_page(self, incident: str) -> None:
        self.table.delete(page_key(self.table, incident))

    def close_incident(self, incident: str) -> None:
        """A healthy node ends its incident: its next failure is a new incident that may page."""
        self.release_page(incident)

    def incident_paged(self, incident: str) -> bool:
        return self.table.exists(page_key(self.table, incident))

    def paged_incidents_among(self, items: Iterable[dict]) -> list[PagedIncident]:
        """The incidents that paged and are not closed, among a scan of the whole table (Table.scan)."""
        found = []
        for incident, _, item in self.table.among(items, "incident#", "page"):
            paged = readable(_paged_incident, incident, item)
            if paged is not None:
                found.append(paged)
        return found

    def storm_paged_at(self, cluster: str) -> datetime | None:
        """When the cluster's last guardrail summary page went out (None: never, or expired)."""
        item = self.table.get(self.storm_key(cluster))
        return datetime.fromisoformat(item["paged_at"]["S"]) if item and "paged_at" in item else None

    def claim_storm_page(self, cluster: str, now: datetime, window: timedelta) -> bool:
        """True at most once per cluster per guardrail window."""
        return self.table.put_if(
            {**self.storm_key(cluster), "paged_at": {"S": now.isoformat()},
             "expires_at": {"N": str(epoch(now + window))}},
            "attribute_not_exists(pk) OR paged_at < :cutoff", {":cutoff": {"S": (now - window).isoformat()}})

    def release_storm_page(self, cluster: str) -> None:
        self.table.delete(self.storm_key(cluster))


    # --- page windows: at most a few pages per source per cluster (or job) per window (core.pages.PageWindow)

    def window_key(self, source: str, scope: str) -> Key:
        return self.table.key(f"pagewindow#{source}#{scope.replace(' ', ':')}", "window")

    def count_window_page(self, source: str, scope: str, now: datetime, length: timedelta) -> WindowCount:
        """Count one page into the source's current window, opening a new window when the last one ended: one
        conditional write opens it (racing runs: one wins, the others count into it), an atomic ADD counts."""
        key, cutoff = self.window_key(source, scope), {":cutoff": {"S": (now - length).isoformat()}}
        for _ in range(2):  # a window that ends between the two writes: open the next one
            old = self.table.replace_if(
                {**key, "opened_at": {"S": now.isoformat()}, "pages": {"N": "1"},
                 "expires_at": {"N": str(epoch(now + length + timedelta(days=1)))}},
                "attribute_not_exists(pk) OR opened_at < :cutoff", cutoff)
            if old is not None:
                previous = readable(_window_start, old) if old else None
                return WindowCount(1, now, int(old["pages"]["N"]) if previous else 0, previous)
            counted = self.table.update_if(key, "ADD pages :one", "attribute_exists(pk) AND opened_at >= :cutoff",
                                           {":one": {"N": "1"}, **cutoff}, returns="ALL_NEW")
            if counted is not None:
                return WindowCount(int(counted["pages"]["N"]), datetime.fromisoformat(counted["opened_at"]["S"]))
        return WindowCount(1, now)  # windows raced past twice within one call: page rather than stay silent

    def uncount_window_page(self, source: str, scope: str) -> None:
        """A counted page that did not go out (SNS failed): the window's next page takes its place."""
        self.table.update(self.window_key(source, scope), "ADD pages :minus", {":minus": {"N": "-1"}})

    def window_pages(self, source: str, scope: str, now: datetime, length: timedelta) -> int:
        """The pages counted in the source's current window (0: no window open)."""
        item = self.table.get(self.window_key(source, scope))
        opened = readable(_window_start, item) if item else None
        return int(item["pages"]["N"]) if opened is not None and now - opened <= length else 0


def _window_start(item: dict) -> datetime:
    int(item["pages"]["N"])  # readable: a window without its count is not one
    return datetime.fromisoformat(item["opened_at"]["S"])


def _paged_incident(incident: str, item: dict) -> PagedIncident:
    return PagedIncident(incident, datetime.fromisoformat(item["paged_at"]["S"]))
