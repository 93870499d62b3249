"""The storm benchmark's exactness as a spec: 400 node failures over the bench's 20 storm clusters, through the
synthesized-shape template and the real handlers (the full 10,000 are `make bench`'s): every cluster within its
budget in every rolling hour, at most one storm summary page per cluster per window, one record per event, and no
ledger item that grows with the storm."""

from __future__ import annotations

import pytest

from bench import storm
from bench.common import replay_config
from medic.config import parse_config
from tests.bench.template import template

# One event every 9 s for an hour: each cluster's budget binds many times over. The same size locally and in CI
# (`make test`'s budget); the full 10,000 take about 8 minutes and 4 GiB: `make bench` replays them, same checks.
EVENTS = 400
SPACING_S = 9.0


@pytest.fixture(scope="module")
def result() -> dict:
    return storm.run(events=EVENTS, clusters=20, spacing_s=SPACING_S,
                     template=template(parse_config(replay_config())))


def test_every_event_has_exactly_one_record(result):
    assert not result["errors"]
    assert result["events_recorded_once"] == EVENTS and not result["events_recorded_twice"]


def test_every_cluster_stays_within_its_budget_in_every_rolling_hour(result):
    assert result["budget_overruns"] == []
    assert result["actions"] >= result["clusters"] * result["budget"]  # each cluster spent its budget


def test_at_most_one_storm_page_per_cluster_per_window(result):
    assert result["page_overruns"] == []
    assert result["storm_pages"] >= result["clusters"]


def test_suppressed_events_read_and_write_nothing_more_and_no_item_grows(result):
    # Once the window's summary page is out, a suppressed event is one ledger read and the node lookup. This
    # template has no reconciler, so the breaker's cluster size comes from DescribeCluster (cached 5 minutes)
    # instead of the reconciler's snapshot, and the mode is re-read every 30 s, the operators' pauses with it (one
    # Query of their partition: ledger/pauses.py): reads only, never a write. Which events refresh those caches
    # depends on how the storm's events fall in time, not on Medic: without them, every suppressed event makes
    # exactly the two calls.
    cache_refreshes = {"sagemaker:DescribeCluster", "ssm:GetParameter", "dynamodb:Query"}
    for sequence in result["calls_per_suppressed"]["sequences"]:
        calls = [call for call in sequence["calls"] if call not in cache_refreshes]
        assert calls == ["dynamodb:BatchGetItem", "sagemaker:DescribeClusterNode"], sequence
    assert result["ledger"]["largest_bytes"] < 2_000  # the cluster's action list: two hours of actions at most
