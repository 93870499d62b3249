"""Specification, end to end: HyperPod's cluster events cannot flood the on-call (issue 28, item 9)."""

from __future__ import annotations

from sim.scenario import SCENARIOS


def test_zp_fifteen_capacity_errors_page_twice_and_the_next_window_says_how_many_were_held(replay):
    # Given HyperPod reporting 15 replacements of one cluster that found no capacity within 7 minutes, then one more
    # after the hour
    result = replay(SCENARIOS / "zp-capacity-errors-one-summary.jsonl")
    # Then each is recorded against its node (a human decides)
    assert len(result.records) == 16
    assert {(record["fault"], record["outcome"]) for record in result.records} == {("capacity_shortfall",
                                                                                   "deferred")}
    # And the first pages, the second pages as the cluster's summary for the hour, the next 13 page nobody
    assert [record["paged"] for record in result.records] == [True, True] + [False] * 13 + [True]
    first, summary, late = result.pages
    assert first["subject"].startswith("[Medic] pretrain-slurm i-0")
    assert summary["subject"].startswith("[Medic] [held until 09:32 UTC] pretrain-slurm i-0")
    assert summary["message"].startswith(
        "Paging held:    further cluster event pages about cluster pretrain-slurm are recorded without a page "
        "until 09:32 UTC.")
    assert "medic history --since 1h --cluster pretrain-slurm" in summary["message"]
    # And the next window's first page says what the last one held
    assert late["message"].startswith("Held before:    13 more cluster event page(s) about cluster pretrain-slurm")
    assert late["record"]["incident"] == result.records[-1]["incident"]
