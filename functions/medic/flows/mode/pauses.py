"""Operators' pauses end by themselves, and say so (flows/mode/pause_policy.py): each reconciler run reads the
pauses (one Query) and pages once when one ended (its `--for` ran out), and once when one set without an end has
been on for a day. Each notice is claimed on the pause's ledger item (at most once per pause), recorded
(`trigger: mode_change`, `fault: mode_changed`) and paged to the topic in every mode, as a change of the mode
parameter is (outbox.pages.page_whatever_the_mode): a dry run must not hide that Medic acts on a cluster again."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.core.mode import ALL_CLUSTERS, Pause
from medic.core.models import Action, Fault, Outcome, Trigger
from medic.core.record import About
from medic.deps import Deps
from medic.flows.mode.pause_policy import PauseNotice, pause_notice, pause_page, pause_reason
from medic.flows.mode.policy import mode_window
from medic.ledger.pauses import PauseStore
from medic.obs import logger
from medic.outbox.pages import page_whatever_the_mode
from medic.outbox.records import emit


def see_to_pauses(deps: Deps, run_id: str) -> list[dict]:
    """The notices of the operators' pauses due now: one record (and page) each."""
    book = PauseStore(deps.table, deps.mode.parameter)
    try:
        pauses = book.pauses()
    except (ClientError, BotoCoreError) as error:  # the next run reads them again
        logger.warning("pauses not read", extra={"error_code": error_code(error)})
        return []
    now, records = deps.now(), []
    for pause in pauses:
        notice = pause_notice(pause, now)
        if notice is None or not book.claim_page(pause, notice.value, now):
            continue
        records.append(_notice(pause, notice, book, run_id, deps))
    return records


def _notice(pause: Pause, notice: PauseNotice, book: PauseStore, run_id: str, deps: Deps) -> dict:
    cluster = None if pause.scope == ALL_CLUSTERS else pause.scope
    about = About(incident=f"pause:{pause.scope}:{pause.since:%Y-%m-%dT%H:%M:%SZ}", trigger=Trigger.MODE_CHANGE,
                  event_id=run_id, mode=deps.mode.current(cluster), cluster=cluster)
    reason = pause_reason(pause, notice)
    # a pause still on after a day: someone must decide to end it; one that ended is news, nothing to do
    record = about.record(fault=Fault.MODE_CHANGED, action=Action.NONE, outcome=Outcome.IGNORED, reason=reason,
                          needs_human=notice is PauseNotice.STILL_ON)
    paged = page_whatever_the_mode(deps, record, pause_page(pause, notice, reason),
                                   release=lambda: book.release(pause, notice.value),
                                   window=mode_window(deps.mode.parameter))
    return emit(record.paged_if(paged))
