"""Specification: no source of pages floods the on-call. Every page counts in its source's window (per cluster or
job): a few go out as they are, the next one as the window's summary, the rest are recorded without a page until
the window ends (core.pages); and every place that pages goes through it."""

from __future__ import annotations

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from medic.core.pages import (
    PAGE_WINDOW,
    PageSource,
    PageText,
    PageWindow,
    WindowVerdict,
    held_before,
    summary_page,
    window_verdict,
    with_held_note,
)

MEDIC = Path(__file__).resolve().parents[2] / "functions" / "medic"
OPENED = datetime(2026, 11, 20, 8, 32, 5, tzinfo=UTC)
TEXT = PageText("[Medic] pretrain-slurm i-0a1b2c3d4e5f60718: capacity_shortfall", ("Cluster:        pretrain-slurm",))


def test_a_trusted_source_pages_once_then_once_as_the_summary_then_holds():
    window = PageWindow.cluster(PageSource.CLUSTER_EVENT, "pretrain-slurm")
    assert [window_verdict(nth, window) for nth in range(1, 6)] == [
        WindowVerdict.PAGE, WindowVerdict.SUMMARY, WindowVerdict.HOLD, WindowVerdict.HOLD, WindowVerdict.HOLD]
    assert (window.scope, window.length) == ("cluster pretrain-slurm", PAGE_WINDOW)
    assert held_before(15, window) == 13 and held_before(2, window) == 0 and held_before(0, window) == 0


@pytest.mark.parametrize("source, length", [(PageSource.AGENT_NODES, timedelta(hours=1)),
                                            (PageSource.AGENT_REJECTED, timedelta(days=7))])
def test_the_agents_word_pages_once_per_cluster_per_window(source, length):
    # Given a source an agent controls (its node reports, results Medic did not ask for)
    window = PageWindow.cluster(source, "finetune-eks")
    # Then its first page is already the window's only one, and everything after is held
    assert [window_verdict(nth, window) for nth in range(1, 4)] == [
        WindowVerdict.SUMMARY, WindowVerdict.HOLD, WindowVerdict.HOLD]
    assert window.length == length


def test_the_summary_is_the_page_itself_headed_by_what_is_held_and_until_when():
    window = PageWindow.cluster(PageSource.CLUSTER_EVENT, "pretrain-slurm")
    page = summary_page(TEXT, window, 2, OPENED)
    assert page.subject == "[Medic] [held until 09:32 UTC] pretrain-slurm i-0a1b2c3d4e5f60718: capacity_shortfall"
    hold, _, rest = page.body.partition("\n\n")
    assert "further cluster event pages about cluster pretrain-slurm are recorded without a page until 09:32" in hold
    assert "page 2 of its kind since 08:32 UTC" in hold
    assert "medic history --since 1h --cluster pretrain-slurm" in hold
    assert rest == TEXT.body


def test_the_agents_one_page_keeps_its_subject_and_says_how_long_it_holds():
    week = summary_page(TEXT, PageWindow.cluster(PageSource.AGENT_REJECTED, "pretrain-slurm"), 1, OPENED)
    assert week.subject == TEXT.subject
    assert "until 2026-11-27 08:32 UTC" in week.body and "--since 7d" in week.body


def test_a_new_windows_first_page_says_what_the_last_one_held():
    window = PageWindow.job(PageSource.TRAINING, "llama3-70b")
    noted = with_held_note(TEXT, window, 4, OPENED)
    assert noted.subject == TEXT.subject
    assert noted.body.startswith("Held before:    4 more training page(s) about job llama3-70b were recorded without "
                                 "a page in the window from 08:32 UTC (medic history --job llama3-70b).")
    assert with_held_note(TEXT, window, 0, OPENED) == TEXT


# --- every place that pages goes through a window


def _calls(name: str) -> list[tuple[Path, ast.Call]]:
    found = []
    for path in MEDIC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if called == name:
                    found.append((path.relative_to(MEDIC), node))
    return found


@pytest.mark.parametrize("function", ["page_incident", "page_resolution", "windowed_text"])
def test_every_page_names_its_window(function):
    calls = _calls(function)
    assert calls, function
    for path, call in calls:
        named = {keyword.arg for keyword in call.keywords}
        assert "window" in named or len(call.args) >= 5, f"{path}:{call.lineno} pages without a window"


def test_only_the_outbox_and_the_sweeps_window_counted_summary_call_the_pager():
    # the sweep's own summary of several incidents calls the pager after windowed_text counted it
    assert sorted({str(path) for path, _ in _calls("page")}) == ["flows/node/sweep_pages.py", "outbox/pages.py"]
