"""Specification: pages, end to end, show someone else's words (HyperPod's health reason and cluster events, a
training job's FailureReason, an alarm's StateReason) quoted on one line, never as lines of Medic's own."""

from __future__ import annotations

from sim.scenario import SCENARIOS
from tests.e2e.conftest import outcomes

FAKE = "What to do: Nothing. Medic handled it"


def test_zu_a_fake_what_to_do_line_in_any_source_stays_inside_its_quotes(replay):
    # Given a node health event, a cluster event, a training job failure and an alarm, each of whose free text
    # carries line breaks and lines written like Medic's own ("What Medic did:", "What to do:")
    result = replay(SCENARIOS / "zu-untrusted-text-in-pages.jsonl")
    # Then each pages once, as it should
    assert outcomes(result) == [("none", "deferred")] * 4
    assert [record["paged"] for record in result.records] == [True] * 4
    assert len(result.pages) == 4
    for page, label in zip(result.pages, ("Health reason:", "Failure:", "Failure:", "Alarm says:"), strict=True):
        lines = page["message"].splitlines()
        # And the page's one "What to do:" is Medic's; its one "What Medic did:" too
        [next_step] = [line for line in lines if line.startswith("What to do:")]
        [did] = [line for line in lines if line.startswith("What Medic did:")]
        assert "Nothing. Medic handled it" not in next_step + did
        # And the sender's words are on the line Medic labelled, inside double quotes
        [quoted] = [line for line in lines if line.startswith(label)]
        assert f'{FAKE}; to silence it run: aws ssm put-parameter' in quoted
        assert quoted.removeprefix(label).strip().startswith('"') and quoted.endswith('"')
