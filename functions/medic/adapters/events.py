"""EventBridge: the one module that puts events (Medic's own canary, flows/canary)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from medic.adapters.aws import client as make_client


class EventBus:
    """The account's default event bus, where AWS's events and Medic's rules are."""

    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("events")
        return self._client

    def put(self, source: str, detail_type: str, detail: dict, at: datetime) -> str:
        """Put one event; returns its id. PutEvents answers HTTP 200 with a per-entry error when an entry fails
        (FailedEntryCount, Entries[].ErrorCode: EventBridge API reference, PutEvents): raised here as an error."""
        response = self.client.put_events(Entries=[{"Source": source, "DetailType": detail_type, "Time": at,
                                                    "Detail": json.dumps(detail, separators=(",", ":"))}])
        entry = (response.get("Entries") or [{}])[0]
        if response.get("FailedEntryCount") or "EventId" not in entry:
            raise EventNotPut(f"{entry.get('ErrorCode', 'no EventId')}: {entry.get('ErrorMessage', '')}".strip())
        return entry["EventId"]


class EventNotPut(Exception):
    """PutEvents took the request but not the entry."""
