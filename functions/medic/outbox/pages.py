"""Sending pages under the ledger's at-most-once rules, shared by every flow, and the one place that decides
whether a record's mode may page at all (a dry run pages nobody: core.mode.Mode.pages; the one exception, a
change of the mode itself, pages through page_whatever_the_mode)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.core.pages import PageText
from medic.core.record import Record
from medic.deps import Deps
from medic.ledger.pages import PageStore
from medic.ledger.table import Table
from medic.obs import count, logger


def page_incident(deps: Deps, table: Table, record: Record, text: PageText,
                  claim: str | None = None) -> bool:
    """At most one page per incident (until the incident closes). ``claim`` names a second, separate
    page of the same incident (an escalation), so it is not blocked by the first."""
    if not record.about.mode.pages:
        return False
    key = claim or record["incident"]
    if not PageStore(table).claim_page(key, deps.now()):
        return False
    return _publish(deps, record, text, release=lambda: PageStore(table).release_page(key))


def page_cluster_summary(deps: Deps, table: Table, record: Record, text: PageText,
                         window: timedelta) -> bool:
    """At most one summary page per cluster per guardrail window."""
    if not record.about.mode.pages:
        return False
    if not PageStore(table).claim_storm_page(record["cluster"], deps.now(), window):
        return False
    return _publish(deps, record, text, release=lambda: PageStore(table).release_storm_page(record["cluster"]))


def page_resolution(deps: Deps, record: Record, text: PageText) -> bool:
    """The all-clear for an incident that paged: once per closing transition (the caller deduped it)."""
    if not record.about.mode.pages:
        return False
    return _publish(deps, record, text, release=lambda: None)


def page_whatever_the_mode(deps: Deps, record: Record, text: PageText, release: Callable[[], None]) -> bool:
    """The one page no mode silences: a change of the run-time mode itself (flows/mode), which must reach the on-call
    even when the new mode is a dry run. The caller claimed it (at most once per change); ``release`` gives the
    claim back when SNS refuses the page."""
    return _publish(deps, record, text, release=release)


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
