"""The reconciler's pages for one cluster and sweep: one per incident when few, one summary when many.

Each record is emitted once its page is decided (after the sweep's pages are sent); a dry run pages nobody.
Every incident is still claimed one by one (``PageStore``), so none pages twice, summary or not.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.core.mode import Mode
from medic.core.pages import PageSource, PageText, PageWindow
from medic.core.record import Record
from medic.deps import Deps
from medic.flows.node.sweep_policy import SUMMARY_AFTER, summary_page
from medic.ledger.pages import PageStore
from medic.ledger.table import Table
from medic.obs import count, logger
from medic.outbox.pages import page_incident, paused_window, windowed_text
from medic.outbox.records import emit


@dataclass
class _Page:
    record: Record
    text: PageText
    key: str  # the incident whose page claim makes this page once-only
    after: Callable[[bool], None] = lambda paged: None


@dataclass
class SweepPages:
    deps: Deps
    table: Table
    mode: Mode
    cluster: str
    pages: list[_Page] = field(default_factory=list)

    @property
    def window(self) -> PageWindow:
        return PageWindow.cluster(PageSource.NODE, self.cluster)

    def add(self, record: Record, *, page: bool, text: PageText, key: str | None = None,
            after: Callable[[bool], None] = lambda paged: None) -> None:
        """Emit now (no page, or a mode that pages nobody), or after the sweep's pages are sent."""
        # Not left to the outbox: a summary page claims each incident and calls the pager itself (below).
        if not page or not self.mode.pages:
            after(False)
            emit(record)
            return
        self.pages.append(_Page(record, text, key or record["incident"], after))

    def send(self) -> int:
        """Send what the sweep gathered and emit its records; how many pages went out."""
        pages, self.pages = self.pages, []
        if not pages:
            return 0
        try:
            if len(pages) <= SUMMARY_AFTER:
                for item in pages:
                    # The page (its claim, and the record it carries) is the key's: a repair page is its own.
                    under_key = item.record.but(about=item.record.about.but(incident=item.key))
                    item.record = item.record.paged_if(page_incident(self.deps, self.table, under_key, item.text,
                                                                     window=self.window))
            else:
                self._send_summary(pages)
            for item in pages:
                item.after(item.record.paged)
        except (ClientError, BotoCoreError) as error:  # the ledger failed: records still go out, unpaged
            logger.warning("reconcile pages failed", extra={"cluster": self.cluster, "error_code": error_code(error)})
        for item in pages:
            emit(item.record)
        return sum(int(item.record.paged) for item in pages)

    def _send_summary(self, pages: list[_Page]) -> None:
        store = PageStore(self.table)
        claimed = [item for item in pages if store.claim_page(item.key, self.deps.now())]
        if not claimed:
            return
        records = [item.record for item in claimed]
        # The sweep's summary is one page of the cluster's node window (held after the window's own summary), or of
        # the pause's while an operator's pause holds the cluster
        window = paused_window(self.deps, records[0], self.window)
        text = windowed_text(self.deps, self.table, records[0], summary_page(self.cluster, records, self.deps.region),
                             window)
        if text is None:
            for item in claimed:
                store.release_page(item.key)
            return
        try:
            self.deps.pager.page(text.subject, text.body, json.dumps({"records": [dict(record) for record in records]}))
        except (ClientError, BotoCoreError) as error:
            logger.error("page failed", extra={"cluster": self.cluster, "error_code": error_code(error)})
            count("PageFailures")
            for item in claimed:
                store.release_page(item.key)
            store.uncount_window_page(window.source, window.scope)
            return
        count("Pages")
        for item in claimed:
            item.record = item.record.paged_if(True)
