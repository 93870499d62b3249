"""Specification: how `sim replay` reads its input (sim/scenario.py `documents`): JSON Lines, or pretty-printed JSON
documents as tests/fixtures/events/*.json are, each item with its first line's number; lazily."""

from __future__ import annotations

import json

from sim.scenario import documents
from tests.helpers import EVENTS


def test_a_pretty_printed_document_is_one_item_named_by_its_first_line():
    event = (EVENTS / "hyperpod-node-health-unhealthy.json").read_text().splitlines()
    items = list(documents(["# header", "", *event, '{"sim": {"advance": "+5m"}}']))
    assert [lineno for lineno, _ in items] == [1, 2, 3, 3 + len(event)]
    assert json.loads(items[2][1]) == json.loads("\n".join(event))


def test_a_line_that_never_parses_is_passed_on_alone_and_the_lines_after_it_are_read_again():
    items = list(documents(['{"a": 1', '{"b": 2}', '{"c":', " 3", "# end"]))
    assert items == [(1, '{"a": 1'), (2, '{"b": 2}'), (3, '{"c":'), (4, " 3"), (5, "# end")]


def test_json_lines_are_read_one_at_a_time():
    # Given a caller that writes each line only once the one before it has been replayed (bench/recovery.py does)
    read: list[int] = []

    def lines():
        for number in range(1, 4):
            read.append(number)
            yield json.dumps({"sim": {"advance": f"+{number}m"}})

    replayed = []
    for lineno, _ in documents(lines()):
        assert read == list(range(1, lineno + 1))  # nothing read ahead of the item being replayed
        replayed.append(lineno)
    assert replayed == [1, 2, 3]
