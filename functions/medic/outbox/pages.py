"""Sending pages under the ledger's at-most-once rules, shared by every flow, and the one place that decides
whether a record's mode may page at all (a dry run pages nobody: core.mode.Mode.pages; the one exception, a
change of the mode itself, pages through page_whatever_the_mode).

Every page counts in its source's window (core.pages.PageWindow: per source, per cluster or job): a few go out as
they are, the next one as the window's summary (itself, headed by the hold), and the rest are recorded without a
page until the window ends; the next window's first page says how many were held. No source can flood the on-call.

While an operator's pause (`medic pause`, core.mode.Pause) holds a record's cluster, every page about that cluster
counts in the pause's own window instead (PageSource.PAUSE, per cluster): one page per cluster per window, headed
by the pause (who, until when, why) and what the window holds; every decision is still recorded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.core.mode import Mode, Pause
from medic.core.pages import (
    PageSource,
    PageText,
    PageWindow,
    WindowVerdict,
    held_before,
    summary_page,
    window_verdict,
    with_held_note,
)
from medic.core.record import Record
from medic.core.text import quoted
from medic.deps import Deps
from medic.ledger.pages import PageStore
from medic.ledger.table import Table
from medic.obs import count, logger


def page_incident(deps: Deps, table: Table, record: Record, text: PageText, *, window: PageWindow,
                  claim: str | None = None) -> bool:
    """At most one page per incident (until the incident closes), within its source's window. ``claim`` names a
    second, separate page of the same incident (an escalation), so it is not blocked by the first."""
    if not record.about.mode.pages:
        return False
    window = paused_window(deps, record, window)
    key = claim or record["incident"]
    store = PageStore(table)
    if not store.claim_page(key, deps.now()):
        return False
    windowed = windowed_text(deps, table, record, text, window)
    if windowed is None:  # held: the incident's page is not spent, its next decision after the window may page
        store.release_page(key)
        return False

    def release() -> None:
        store.release_page(key)
        store.uncount_window_page(window.source, window.scope)

    return _publish(deps, record, windowed, release=release)


def windowed_text(deps: Deps, table: Table, record: Record, text: PageText, window: PageWindow) -> PageText | None:
    """Count a page into its window: the text to send (as it is, with what the last window held, or as the
    window's summary), or None when the window holds it (logged and counted, never silent about why)."""
    window = paused_window(deps, record, window)
    if window.source is PageSource.PAUSE:
        text = _with_pause(text, deps.mode.pause_of(record.about.cluster))
    counted = PageStore(table).count_window_page(window.source, window.scope, deps.now(), window.length)
    verdict = window_verdict(counted.nth, window)
    if verdict is WindowVerdict.HOLD:
        logger.info("page held", extra={"incident": record["incident"], "source": window.source.value,
                                        "scope": window.scope, "window_opened_at": counted.opened_at.isoformat(),
                                        "nth": counted.nth})
        count("PagesHeld")
        return None
    if counted.nth == 1:
        text = with_held_note(text, window, held_before(counted.previous_pages, window), counted.previous_at)
    return summary_page(text, window, counted.nth, counted.opened_at) if verdict is WindowVerdict.SUMMARY else text


def page_cluster_summary(deps: Deps, table: Table, record: Record, text: PageText,
                         window: timedelta) -> bool:
    """At most one summary page per cluster per guardrail window (the node storm's: itself a window)."""
    if not record.about.mode.pages:
        return False
    if not PageStore(table).claim_storm_page(record["cluster"], deps.now(), window):
        return False
    quiet = paused_window(deps, record, PageWindow.cluster(PageSource.NODE, record["cluster"]))
    if quiet.source is PageSource.PAUSE:  # paused: the storm's summary is one page of the pause's window
        windowed = windowed_text(deps, table, record, text, quiet)
        if windowed is None:
            PageStore(table).release_storm_page(record["cluster"])
            return False
        text = windowed
    return _publish(deps, record, text, release=lambda: PageStore(table).release_storm_page(record["cluster"]))


def page_resolution(deps: Deps, table: Table, record: Record, text: PageText, *, window: PageWindow) -> bool:
    """The all-clear for an incident that paged (the caller deduped it: once per closing transition), unless its
    source's window holds pages now: after the summary, nothing of that source pages until the window ends, so a
    flapping alarm is not a page per flap."""
    if not record.about.mode.pages:
        return False
    window = paused_window(deps, record, window)
    if PageStore(table).window_pages(window.source, window.scope, deps.now(), window.length) > window.before_summary:
        logger.info("all-clear held", extra={"incident": record["incident"], "source": window.source.value,
                                             "scope": window.scope})
        count("PagesHeld")
        return False
    return _publish(deps, record, text, release=lambda: None)


def page_whatever_the_mode(deps: Deps, record: Record, text: PageText, release: Callable[[], None], *,
                          window: PageWindow) -> bool:
    """The one page no mode silences: a change of the run-time mode itself (flows/mode), which must reach the on-call
    even when the new mode is a dry run. The caller claimed it (at most once per change); ``release`` gives the
    claim back when SNS refuses the page. Counted in its window like any page: a switch flipped over and over is a
    few pages and a summary, not a flood."""
    windowed = windowed_text(deps, deps.table, record, text, window)
    if windowed is None:
        return False
    return _publish(deps, record, windowed, release=release)


def paused_window(deps: Deps, record: Record, window: PageWindow) -> PageWindow:
    """The window a page counts in: the pause's (one page per cluster per window) while an operator's pause holds
    the record's cluster, else its source's."""
    if record.about.mode is not Mode.PAUSED or window.source in (PageSource.PAUSE, PageSource.MODE):
        return window  # a change of the mode (or a pause's own notice) pages whatever holds: page_whatever_the_mode
    if deps.mode.pause_of(record.about.cluster) is None:  # the stack's mode parameter is paused: pages as ever
        return window
    return PageWindow.cluster(PageSource.PAUSE, record.about.cluster)


def _with_pause(text: PageText, pause: Pause | None) -> PageText:
    """The page headed by the pause that holds it: who, since and until when, why (the operator's words, quoted)."""
    if pause is None:
        return text
    until = f"until {pause.until:%Y-%m-%d %H:%M} UTC" if pause.until else "until someone resumes it (no end set)"
    line = (f"Paused:         {pause.what} by {quoted(pause.by, 200)} since {pause.since:%Y-%m-%d %H:%M} UTC, "
            f"{until}: {quoted(pause.reason, 300)}. Medic records every decision and acts on none; "
            "medic resume ends it.")
    return PageText(f"[Medic] [paused] {text.subject.removeprefix('[Medic] ')}", (line, "", *text.lines))


def _publish(deps: Deps, record: Record, text: PageText, release: Callable[[], None]) -> bool:
    try:
        deps.pager.page(text.subject, text.body, json.dumps(record.paged_if(True).fields))
    except (ClientError, BotoCoreError) as error:
        # The record is still written; the claim is released so the incident's next event can page.
        logger.error("page failed", extra={"incident": record["incident"], "error_code": error_code(error)})
        count("PageFailures")
        release()
        return False
    count("Pages")
    return True
