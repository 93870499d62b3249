"""A scenario's checks: its ``# check:`` header lines, which ``sim demo`` verifies against the replay (sim/README.md,
*Bundled scenarios*, "Checks").

One check a line, in one of three forms::

    # check: pages == 0                                      how many lines of a kind (a comparison and a count)
    # check: records action=replace_node outcome=executed == 1     ... of them that match every filter
    # check: records .outcome == executed, duplicate         a field of each matching line, in order, exactly
    # check: calls sagemaker:BatchReplaceClusterNodes == 1   a number: the handlers' calls, attempts, a metric

Kinds (``LIST``): records, pages, alarms, incidents, training_jobs, batch_jobs, bedrock_jobs, slurm_commands,
kubernetes_calls (the replay's stdout lines of that kind), node_actions (the emulated HyperPod's Batch* answers),
dropped (what went to a DLQ).
Numbers: ``calls SERVICE:Operation``, ``attempts SERVICE:Operation`` (HTTP attempts, retries included),
``injected SERVICE:Operation`` (attempts a fault failed), ``metric NAME`` (the handlers' EMF metric, summed).
Comparisons: ``==``, ``!=``, ``>=``, ``<=``, ``>``, ``<``. Filters: ``FIELD=VALUE`` (equal), ``FIELD!=VALUE``,
``FIELD~TEXT`` (TEXT occurs in it); a dotted FIELD reads into an object (``record.outcome`` of a page). Values are
compared as text: null, true, false, numbers without a trailing ``.0``, a list as its items joined by spaces (a
Slurm ``argv``), an object as compact JSON. Quote a value holding spaces or commas with double quotes.
"""

from __future__ import annotations

import json
import operator
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from sim.replay import ReplayResult

LISTS: dict[str, Callable[[ReplayResult], list[dict]]] = {
    "records": lambda result: result.records,
    "pages": lambda result: result.pages,
    "alarms": lambda result: result.alarms,
    "incidents": lambda result: result.incidents,
    "training_jobs": lambda result: result.training_jobs,
    "batch_jobs": lambda result: result.batch_jobs,
    "bedrock_jobs": lambda result: result.bedrock_jobs,
    "slurm_commands": lambda result: result.slurm_commands,
    "kubernetes_calls": lambda result: result.kubernetes_calls,
    "node_actions": lambda result: result.node_actions,
    "dropped": lambda result: result.dropped,
}
NUMBERS: dict[str, Callable[[ReplayResult, str], float]] = {
    "calls": lambda result, key: result.calls.get(key, 0),
    "attempts": lambda result, key: result.attempts.get(key, 0),
    "injected": lambda result, key: result.injected.get(key, 0),
    "metric": lambda result, key: result.metrics.get(key, 0),
}
COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}


class CheckSyntaxError(ValueError):
    """A ``# check:`` line the grammar above does not read."""


@dataclass(frozen=True)
class Filter:
    field: str
    test: str  # "=", "!=", "~"
    value: str

    def matches(self, item: dict) -> bool:
        actual = text(lookup(item, self.field))
        if self.test == "~":
            return self.value in actual
        return (actual == self.value) == (self.test == "=")


@dataclass(frozen=True)
class Check:
    source: str  # the line as written, after "check:"
    subject: str
    key: str | None = None  # a number's SERVICE:Operation or metric name
    filters: tuple[Filter, ...] = ()
    field: str | None = None  # the sequence form: the field read from each matching line
    comparison: str = "=="
    expected: tuple[str, ...] | float = 0

    def evaluate(self, result: ReplayResult) -> tuple[bool, str]:
        """Whether the replay meets the check, and what it had (said when it does not)."""
        if self.subject in NUMBERS:
            actual: Any = NUMBERS[self.subject](result, str(self.key))
            return COMPARISONS[self.comparison](actual, self.expected), f"{actual:g}"
        items = [item for item in LISTS[self.subject](result) if all(each.matches(item) for each in self.filters)]
        if self.field is None:
            return COMPARISONS[self.comparison](len(items), self.expected), str(len(items))
        values = tuple(text(lookup(item, self.field)) for item in items)
        return COMPARISONS[self.comparison](values, self.expected), ", ".join(values) or "(none)"


def parse_check(line: str) -> Check:
    """One ``# check:`` line (without the prefix) → a Check, or CheckSyntaxError naming what is wrong."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace += ","  # a sequence's values: "executed, duplicate" (a quoted value keeps its commas)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as error:
        raise CheckSyntaxError(f"check {line!r}: {error}") from None
    if not tokens:
        raise CheckSyntaxError("an empty check")
    subject, rest = tokens[0], tokens[1:]
    comparisons = [index for index, token in enumerate(rest) if token in COMPARISONS]
    if not comparisons:
        raise CheckSyntaxError(f"check {line!r}: no comparison ({', '.join(COMPARISONS)})")
    at = comparisons[0]
    before, comparison, after = rest[:at], rest[at], rest[at + 1:]
    if subject in NUMBERS:
        if len(before) != 1:
            raise CheckSyntaxError(f"check {line!r}: {subject} takes one name (e.g. {subject} "
                                   f"{'PageFailures' if subject == 'metric' else 'sagemaker:CreateTrainingJob'})")
        return Check(line, subject, key=before[0], comparison=comparison, expected=_count(line, after))
    if subject not in LISTS:
        raise CheckSyntaxError(f"check {line!r}: unknown kind {subject!r} (one of {', '.join([*LISTS, *NUMBERS])})")
    field = None
    if before and before[-1].startswith("."):
        field, before = before[-1][1:], before[:-1]
        if not field:
            raise CheckSyntaxError(f"check {line!r}: a '.' without a field name")
    filters = tuple(_filter(line, token) for token in before)
    if field is None:
        return Check(line, subject, filters=filters, comparison=comparison, expected=_count(line, after))
    if comparison not in ("==", "!="):
        raise CheckSyntaxError(f"check {line!r}: a sequence compares with == or != only")
    if not after:
        raise CheckSyntaxError(f"check {line!r}: no values after {comparison} (write () for none)")
    values = () if after == ["()"] else tuple(after)
    return Check(line, subject, filters=filters, field=field, comparison=comparison, expected=values)


def lookup(item: Any, field: str) -> Any:
    for part in field.split("."):
        item = item.get(part) if isinstance(item, dict) else None
    return item


def text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | tuple):
        return " ".join(text(each) for each in value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def _filter(line: str, token: str) -> Filter:
    found = [(token.find(test), test) for test in ("!=", "~", "=") if token.find(test) > 0]
    if found:
        at, test = min(found)  # the first: a value may hold the others ("reason~a=b")
        return Filter(token[:at], test, token[at + len(test):])
    raise CheckSyntaxError(f"check {line!r}: {token!r} is neither a filter (FIELD=VALUE, FIELD!=VALUE, FIELD~TEXT) "
                           "nor a comparison")


def _count(line: str, after: list[str]) -> float:
    if len(after) != 1:
        raise CheckSyntaxError(f"check {line!r}: a count is one number")
    try:
        return float(after[0])
    except ValueError:
        raise CheckSyntaxError(f"check {line!r}: {after[0]!r} is not a number") from None
