"""The logical resource ids of the stack synthesized for medic.example.yaml are pinned.

CloudFormation knows a resource by its logical id: a changed id (a construct renamed or moved to another
scope) makes the next deploy replace the deployed resource: a new queue, table or function, and the old one
deleted with its messages or the ledger's items. So a refactoring keeps every id; adding or removing a
resource updates logical_ids.example.txt on purpose (generated from the template, one id per line, sorted).
"""

from __future__ import annotations

from pathlib import Path

PINNED = Path(__file__).with_name("logical_ids.example.txt")


def pinned_ids() -> set[str]:
    return {line.strip() for line in PINNED.read_text().splitlines() if line.strip()}


def test_the_example_configs_logical_resource_ids_are_the_pinned_ones(example_raw: dict):
    actual = set(example_raw["Resources"])
    expected = pinned_ids()

    added, removed = sorted(actual - expected), sorted(expected - actual)
    assert not added and not removed, (
        f"the logical resource ids of the medic.example.yaml stack changed (pinned in {PINNED.name}).\n"
        f"  added:   {', '.join(added) or 'none'}\n"
        f"  removed: {', '.join(removed) or 'none'}\n"
        "A changed logical id makes the next deploy replace the deployed resource (a new queue, table or function; "
        "the old one deleted with its messages or items). Keep the construct ids and scopes; "
        f"if the change is meant (a resource added or removed), update {PINNED.name} (one id per line, sorted).")
