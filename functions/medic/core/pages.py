"""Pages in general: the text a human reads, the console link, and whether a decision pages."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import NamedTuple

from medic.core.models import Action, Outcome
from medic.core.text import single_line


@dataclass(frozen=True)
class PageText:
    """A page: its subject and its lines. Each line is kept to one line (`single_line`): a value a builder puts
    into a line (a reason, a name, someone else's words) can never add a line of its own, such as a fake
    "What to do:" above Medic's. Untrusted words inside a line are shown `quoted` by the builder."""

    subject: str
    lines: tuple[str, ...]

    def __post_init__(self) -> None:
        if isinstance(self.lines, str):
            raise TypeError("PageText takes the page's lines, not a body: a line break inside a value must not "
                            "start a new line")
        object.__setattr__(self, "subject", single_line(self.subject))
        object.__setattr__(self, "lines", tuple(single_line(line) for line in self.lines))

    @property
    def body(self) -> str:
        return "\n".join(self.lines)


def console_link(region: str, cluster: str) -> str:
    return (f"https://{region}.console.aws.amazon.com/sagemaker/home?region={region}"
            f"#/cluster-management/{cluster}")


class Page(StrEnum):
    NONE = "none"
    INCIDENT = "incident"  # at most one page per incident
    STORM = "storm"  # one summary page per cluster per guardrail window


def what_medic_did(record: dict) -> str:
    action, outcome = record["action"], record["outcome"]
    if action == Action.NONE.value:
        return "nothing (no automatic action for this fault)"
    if action == Action.RESTART_JOB.value and outcome == Outcome.SUPPRESSED.value:
        return "did not restart the job"
    return {
        Outcome.FAILED.value: f"tried {action}; the call failed",
        Outcome.SUPPRESSED.value: f"did not {action} (held back)",
        Outcome.DEFERRED.value: f"did not {action}",
    }.get(outcome, f"{action}: {outcome}")


# --- page windows: no source of pages can flood the on-call

PAGE_WINDOW = timedelta(hours=1)  # as the node storm's summary page (one per cluster per guardrail hour)


class PageSource(StrEnum):
    """What a page is about. Each source pages under a window of its own per cluster (or job): a flood of one
    kind never silences another."""

    NODE = "node"  # node health decisions, the reconciler's node pages, the jobs on a repaired node, failed nodes
    CLUSTER_EVENT = "cluster_event"  # HyperPod's cluster events (capacity, lifecycle scripts, failed repairs)
    TRAINING_JOB = "training_job"  # SageMaker training jobs, per configured prefix
    TRAINING = "training"  # a watched job's alarms (stall, divergence, slowdown) and its proof of recovery
    AGENT = "agent"  # restarts through an agent: refused, unanswered, failed
    AGENT_NODES = "agent_nodes"  # an EKS agent's node reports: the agent's word
    AGENT_REJECTED = "agent_rejected"  # results an agent wrote that Medic did not ask for: the agent's word
    MODE = "mode"  # changes of the run-time mode parameter (flows/mode): every change pages, a flapping switch does not
    PAUSE = "pause"  # every page about a cluster an operator paused (`medic pause`): one per cluster per window
    CONFIG = "config"  # a configuration error found at run time (a cluster id that is not the cluster's): once a day
    AGENT_SILENT = "agent_silent"  # a cluster's agent silent (or never heard from): once per silence, its return
    WATCH = "watch"  # the runs a cluster watches by pattern cannot be read: once per cluster per UTC day


class PageWindow(NamedTuple):
    """Where a page counts: its source and scope (`cluster <name>`, `job <name>`, `training jobs <prefix>*`).
    Per window (PAGE_WINDOW), ``before_summary`` pages go out as they are; the next one goes out as the summary
    (itself, headed by the hold); the rest are recorded without a page until the window ends. The agent's word
    gets no page before its summary: one page per cluster per window."""

    source: PageSource
    scope: str
    before_summary: int = 1
    length: timedelta = PAGE_WINDOW

    @classmethod
    def cluster(cls, source: PageSource, name: str | None) -> PageWindow:
        return cls(source, f"cluster {name or '-'}", 0 if source in ONE_PAGE_PER_WINDOW else 1,
                   ONE_PAGE_PER_WINDOW.get(source, PAGE_WINDOW))

    @classmethod
    def job(cls, source: PageSource, name: str | None) -> PageWindow:
        return cls(source, f"job {name or '-'}")

    @property
    def since(self) -> str:
        """The window's length as `medic history --since` reads it."""
        hours = int(self.length.total_seconds() // 3600)
        return f"{hours // 24}d" if hours >= 24 and hours % 24 == 0 else f"{max(hours, 1)}h"


# The agent's word pages once per cluster per window, before any summary: a node report's notices every hour; a
# result Medic did not ask for once a week (a flood of forgeries is one page: the controller is the suspect).
AGENTS_WORD = {PageSource.AGENT_NODES: PAGE_WINDOW, PageSource.AGENT_REJECTED: timedelta(days=7)}
# A paused cluster (an operator's pause) pages once per window too: the page says what the window holds.
ONE_PAGE_PER_WINDOW = {**AGENTS_WORD, PageSource.PAUSE: PAGE_WINDOW}


class WindowVerdict(StrEnum):
    PAGE = "page"  # within the window's pages: as it is
    SUMMARY = "summary"  # the window's last page: itself, headed by the hold
    HOLD = "hold"  # after the summary: recorded, not paged, until the window ends


def window_verdict(nth: int, window: PageWindow) -> WindowVerdict:
    """The fate of the window's ``nth`` page (1-based)."""
    if nth <= window.before_summary:
        return WindowVerdict.PAGE
    return WindowVerdict.SUMMARY if nth == window.before_summary + 1 else WindowVerdict.HOLD


def held_before(pages: int, window: PageWindow) -> int:
    """How many pages a window that counted ``pages`` held back (those after its summary)."""
    return max(0, pages - window.before_summary - 1)


def summary_page(text: PageText, window: PageWindow, nth: int, opened_at: datetime) -> PageText:
    """The window's summary: the page itself, headed by what is held and until when."""
    until = _moment(opened_at + window.length, window)
    source = window.source.value.replace("_", " ")
    what = ("While paused, Medic pages once per cluster per window: this page." if window.source is PageSource.PAUSE
            else "A configuration error pages once a day: it cannot flood the on-call."
            if window.source is PageSource.CONFIG
            else "The agent's word pages once per window: it cannot flood the on-call." if window.before_summary == 0
            else f"This is page {nth} of its kind since {opened_at:%H:%M} UTC: the last one in this window.")
    read = " ".join(part for part in (f"medic history --since {window.since}", _history_filter(window)) if part)
    hold = (f"Paging held:    further {source} pages about {window.scope} are recorded without a page until "
            f"{until} UTC. {what} Read them: {read}")
    if window.before_summary == 0:  # the one page of the window: its subject is the news
        return PageText(text.subject, (hold, "", *text.lines))
    subject = f"[Medic] [held until {until} UTC] {text.subject.removeprefix('[Medic] ')}"
    return PageText(subject, (hold, "", *text.lines))


def with_held_note(text: PageText, window: PageWindow, held: int, previous: datetime | None) -> PageText:
    """A window's first page, saying what the window before it held back (nothing to say: the page as it is)."""
    if held <= 0 or previous is None:
        return text
    source = window.source.value.replace("_", " ")
    read = " ".join(part for part in ("medic history", _history_filter(window)) if part)
    note = (f"Held before:    {held} more {source} page(s) about {window.scope} were recorded without a page in "
            f"the window from {_moment(previous, window)} UTC ({read}).")
    return PageText(text.subject, (note, "", *text.lines))


def _moment(moment: datetime, window: PageWindow) -> str:
    return f"{moment:%Y-%m-%d %H:%M}" if window.length >= timedelta(days=1) else f"{moment:%H:%M}"


def _history_filter(window: PageWindow) -> str:
    kind, _, name = window.scope.partition(" ")
    return {"cluster": f"--cluster {name}", "job": f"--job {name}"}.get(kind, "")
