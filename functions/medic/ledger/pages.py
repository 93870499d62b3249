"""Page memory: which incidents paged, and each cluster's last guardrail (storm) summary page."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from medic.ledger.table import Key, Table, epoch, expires, readable


@dataclass(frozen=True)
class PagedIncident:
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


def _paged_incident(incident: str, item: dict) -> PagedIncident:
    return PagedIncident(incident, datetime.fromisoformat(item["paged_at"]["S"]))
