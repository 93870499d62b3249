"""When a cluster's agent is silent (issue 29, item 1): the pure verdict the reconciler and `medic status` share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from medic.config import Guardrails, parse_config
from medic.flows.agent.silence_policy import NEVER, AgentState, judge_agent, needs_agent, silence_key

NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
BOUNDS = Guardrails()  # agent_silence_minutes 15, agent_install_grace_hours 24


def judged(last_seen_ago: timedelta | None, *, watched_for: timedelta = timedelta(days=3), reported: str = "",
           needed: bool = True):
    return judge_agent(needed=needed, last_seen=NOW - last_seen_ago if last_seen_ago is not None else None,
                       watching_since=NOW - watched_for, reported=reported, now=NOW, guardrails=BOUNDS)


def test_an_agent_within_its_bound_reports():
    verdict = judged(timedelta(minutes=15))
    assert (verdict.state, verdict.report, verdict.back) == (AgentState.REPORTING, False, False)


def test_an_agent_past_its_bound_is_a_silence_reported_once():
    first = judged(timedelta(minutes=16))
    assert (first.state, first.report) == (AgentState.SILENT, True)
    assert first.silence == silence_key(NOW - timedelta(minutes=16))
    assert judged(timedelta(minutes=40), reported=silence_key(NOW - timedelta(minutes=40))).report is False


def test_the_return_of_an_agent_reported_silent_is_said_once():
    assert judged(timedelta(minutes=1), reported="since:1796371200").back is True
    assert judged(timedelta(minutes=1), reported=NEVER).back is True
    assert judged(timedelta(minutes=1)).back is False


@pytest.mark.parametrize(("watched", "state", "report"), [
    (timedelta(hours=23), AgentState.AWAITED, False), (timedelta(hours=25), AgentState.NEVER_REPORTED, True)])
def test_an_agent_never_heard_from_is_reported_after_the_grace(watched, state, report):
    verdict = judged(None, watched_for=watched)
    assert (verdict.state, verdict.report, verdict.age) == (state, report, watched)


def test_an_agent_medic_does_not_need_is_judged_but_never_reported():
    verdict = judged(timedelta(hours=2), needed=False)
    assert (verdict.state, verdict.report) == (AgentState.SILENT, False)


def test_slurm_clusters_need_their_agent_and_eks_ones_when_they_have_watched_jobs():
    config = parse_config({"clusters": [
        {"name": "pretrain-slurm", "id": "k3v9q2w8x1za", "orchestrator": "slurm"},
        {"name": "finetune-eks", "id": "p7r2m4x9c1qa", "orchestrator": "eks"},
        {"name": "serving-eks", "id": "m5n6b7v8c9xz", "orchestrator": "eks"}],
        "jobs": [{"name": "bert-xl", "cluster": "finetune-eks"}]})
    assert [needs_agent(config, cluster) for cluster in config.clusters] == [True, True, False]
