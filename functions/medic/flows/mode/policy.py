"""The mode watch (pure): which change of the mode parameter an SSM "Parameter Store Change" event is about, and the
page that tells the on-call, whoever made the change and whatever the new mode (a dry run pages nobody else).

SSM sends "Parameter Store Change" (source aws.ssm) on Create, Update, Delete and LabelParameterVersion of a
parameter, best effort, with the parameter's `name`, `type` and `operation` and no value or version (AWS Systems
Manager User Guide, "Setting up notifications or trigger actions based on Parameter Store events", and its
EventBridge event examples). The value, version and who changed it come from GetParameterHistory
(`LastModifiedUser`): the version the event is about is the one modified at the event's time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from medic.core.mode import Mode, ModeVersion
from medic.core.pages import PageSource, PageText, PageWindow
from medic.core.text import quoted

# EventBridge's `time` is whole seconds (SSM's LastModifiedDate has milliseconds): a version modified within this of
# it is the change the event reports (two changes within it are paged together); an older one has its own event.
# An event whose change is not within it (delivered late) reports the version SSM holds now.
SAME_CHANGE = timedelta(seconds=2)
# The operations that change the value (a label is no change of the mode).
CHANGES = ("Create", "Update", "Delete")

MEANS = {
    Mode.ACT: "Medic acts again: it reboots and replaces nodes, restarts jobs and pages as configured.",
    Mode.DRY_RUN: "Medic decides and records, but calls nothing and pages nobody (this page is the exception) until "
                  "the mode is act again.",
    Mode.PAUSED: "Medic decides and records, acts on nothing, and still pages for what needs a human.",
}


MODE_PAGES_BEFORE_SUMMARY = 5  # changes of the mode paged as they are per window, before its summary


def mode_window(parameter: str) -> PageWindow:
    """The mode's changes page in a window of their own: each change pages (MODE_PAGES_BEFORE_SUMMARY an hour), then
    one summary, and a switch flipped over and over is held until the window ends (the next window's first page
    says how many were held)."""
    return PageWindow(PageSource.MODE, f"mode {parameter}", before_summary=MODE_PAGES_BEFORE_SUMMARY)


def names_the_parameter(name: str, parameter: str) -> bool:
    """The event's `name` is Medic's mode parameter (with or without the leading slash of a hierarchical name)."""
    return name.lstrip("/") == parameter.lstrip("/")


def versions_reported(history: list[ModeVersion], at: datetime) -> list[ModeVersion]:
    """The versions an event at ``at`` reports, oldest first: those modified within SAME_CHANGE of it. Usually one."""
    return [found for found in history if abs(found.modified_at - at) <= SAME_CHANGE]


class ModeChangeView(NamedTuple):
    """What one page says about a change (or a few changes within a minute) of the mode."""

    parameter: str
    changes: tuple[tuple[ModeVersion | None, ModeVersion], ...]  # (the version before, the version it became)
    operation: str
    cli_note: str | None = None  # what `medic pause|resume|mode` recorded with the change (claimed, quoted)

    @property
    def now(self) -> ModeVersion:
        return self.changes[-1][1]


def previous_of(history: list[ModeVersion], version: ModeVersion) -> ModeVersion | None:
    earlier = [found for found in history if found.version < version.version]
    return earlier[-1] if earlier else None


def mode_change_reason(view: ModeChangeView) -> str:
    steps = "; ".join(f"{_mode_of(before)} -> {after.mode} (version {after.version}, "
                      f"{after.modified_at:%Y-%m-%d %H:%M:%S} UTC, by {quoted(after.modified_by, 200)})"
                      for before, after in view.changes)
    return f"The run-time mode parameter {view.parameter} changed: {steps}."


def mode_change_page(view: ModeChangeView, record: dict, region: str) -> PageText:
    now = view.now
    first_before = view.changes[0][0]
    subject = f"[Medic] mode changed: {_mode_of(first_before)} -> {now.mode}"
    lines = [f"Mode parameter: {view.parameter}"]
    for before, after in view.changes:
        lines += [
            f"Changed:        {_mode_of(before)} -> {after.mode} (version {after.version}, "
            f"{after.modified_at:%Y-%m-%d %H:%M:%S} UTC)",
            f"By:             {quoted(after.modified_by, 200)} (SSM's LastModifiedUser)",
        ]
        if after.value.strip() != str(after.mode):
            lines.append(f"Value written:  {quoted(after.value, 40)} (not a mode: it reads as paused)")
    if view.cli_note:
        lines.append(f"Reason given:   {view.cli_note}")
    lines += [
        "",
        f"What it means:  {MEANS[now.mode]}",
        "What to do:     If nobody meant to change it, set it back (medic resume, or medic pause --reason ...) and "
        f"find who did: CloudTrail, PutParameter on {view.parameter}.",
        f"Console:        https://{region}.console.aws.amazon.com/systems-manager/parameters/"
        f"{view.parameter.lstrip('/')}/description?region={region}",
        f"Incident:       {record['incident']} (event {record['event_id']})",
    ]
    return PageText(subject[:100], tuple(lines))


def mode_deleted_page(parameter: str, last_known: tuple[Mode, int] | None, record: dict, region: str) -> PageText:
    kept = f"{last_known[0]} (version {last_known[1]})" if last_known else "the deployed mode (none was kept)"
    lines = (
        f"Mode parameter: {parameter}",
        "Changed:        deleted",
        "",
        f"What it means:  Medic cannot read its switch: every function keeps the last mode known, {kept}, and "
        "counts each failed read (Medic/ModeReadFailures).",
        "What to do:     Recreate it (cdk deploy, or medic mode <act|dry_run|paused>) and find who deleted it: "
        f"CloudTrail, DeleteParameter on {parameter}.",
        f"Incident:       {record['incident']} (event {record['event_id']})",
    )
    return PageText("[Medic] mode parameter deleted", lines)


def _mode_of(version: ModeVersion | None) -> str:
    return str(version.mode) if version is not None else "(none)"
