"""Specification: an operator request reaches no further than Medic's watched jobs (issue 28, item 7). A request by
Slurm job id is requeued only when squeue names the job one of the jobs Medic watches there (the agent checks before
acting); a request by name must name a watched job, and requeues the one job running under it (the one Medic last
saw running there), never a held namesake; each cluster has a budget of operator requests per clock hour. Against
moto (SQS, DynamoDB Streams) with the real agent in-process."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from medic.config import parse_config
from medic.flows.agent.restart import handle_requeue_event
from medic.handlers import agent_results
from medic.ledger.jobs import JobStore
from tests.functional.conftest import CLUSTER, CONFIG, medic_world
from tests.functional.slurm_world import SlurmWorld, watched_medic
from tests.functional.test_agent_results import LambdaContext

JOB = "llama3-70b"


@pytest.fixture
def medic(aws):
    yield from watched_medic(aws)


@pytest.fixture
def slurm(medic, tmp_path, monkeypatch) -> SlurmWorld:
    world = SlurmWorld(medic, tmp_path)
    monkeypatch.setattr(agent_results, "dependencies", lambda: medic.deps)
    world.heartbeat()
    return world


def request(slurm: SlurmWorld, event_id: str, **detail: Any) -> dict:
    return handle_requeue_event(slurm.request_event(event_id, **detail), slurm.medic.deps)


def agent_runs(slurm: SlurmWorld) -> list[dict]:
    """The agent takes what is queued; the stream brings its results to Medic: the final records."""
    slurm.stream_event()  # Medic's own writes
    slurm.run_agent()
    before = len(slurm.medic.log.lines)
    agent_results.handler(slurm.stream_event(), LambdaContext())
    return slurm.medic.log.lines[before:]


def requeued(slurm: SlurmWorld) -> list[str]:
    return [argv[2] for argv in slurm.slurm.argvs if argv[:2] == ["scontrol", "requeue"]]


def test_a_request_by_id_for_another_teams_job_is_not_requeued(slurm):
    # Given job 5000, another team's, running on the cluster Medic watches llama3-70b on
    slurm.slurm.jobs["5000"] = ("eval-sweep-team-b", "RUNNING")
    # When an operator request names it by id
    assert request(slurm, "0a000000-0000-4000-8000-000000000001", job_id="5000")["outcome"] == "deferred"
    [final] = agent_runs(slurm)
    # Then the agent looked it up, found it is not a watched job, and requeued nothing; a human is told once
    assert requeued(slurm) == []
    assert (final["outcome"], final["action"], final["paged"]) == ("rejected", "none", True)
    assert "is named 'eval-sweep-team-b', not one of the jobs Medic watches on this cluster (llama3-70b)" in \
        final["reason"]


def test_a_request_by_id_for_a_watched_job_is_requeued(slurm):
    assert request(slurm, "0a000000-0000-4000-8000-000000000002", job_id="4211")["outcome"] == "deferred"
    [final] = agent_runs(slurm)
    assert requeued(slurm) == ["4211"] and final["outcome"] == "executed"
    # and Medic now knows 4211 runs as llama3-70b
    assert JobStore(slurm.medic.deps.table).last_running(CLUSTER, JOB) == "4211"


def test_a_request_by_name_for_a_job_medic_does_not_watch_is_rejected(slurm):
    record = request(slurm, "0a000000-0000-4000-8000-000000000003", job_id=None, job_name="eval-sweep-team-b")
    assert (record["outcome"], record["paged"]) == ("rejected", False)
    assert "not a job Medic watches on pretrain-slurm (llama3-70b" in record["reason"]
    assert slurm.depth() == 0


def test_a_request_for_a_cluster_medic_does_not_manage_is_rejected_naming_the_clusters_and_their_jobs(slurm):
    # Given an operator who mistypes the cluster (issue 29, item 4: the rule now takes every request of the account)
    record = request(slurm, "0a000000-0000-4000-8000-000000000006", cluster="pretrain-slurn", job_id="4211")
    # Then nothing is queued, nothing pages, and the record says what the operator could have named
    assert (record["outcome"], record["action"], record["paged"], record["cluster"]) == (
        "rejected", "none", False, "pretrain-slurn")
    assert record["reason"].startswith("Refused: cluster pretrain-slurn is not managed by Medic. Medic's clusters "
                                       "(medic.yaml): pretrain-slurm (slurm; watched jobs: llama3-70b)")
    assert slurm.depth() == 0


def test_a_request_by_id_naming_an_unwatched_job_is_rejected(slurm):
    record = request(slurm, "0a000000-0000-4000-8000-000000000004", job_id="5000", job_name="eval-sweep-team-b")
    assert record["outcome"] == "rejected" and slurm.depth() == 0


def test_on_a_cluster_with_no_watched_job_no_request_is_taken(aws, tmp_path):
    for medic in medic_world(parse_config(CONFIG), aws):  # nothing watched on the Slurm cluster
        slurm = SlurmWorld(medic, tmp_path)
        slurm.heartbeat()
        record = request(slurm, "0a000000-0000-4000-8000-000000000005", job_id="4211")
        assert record["outcome"] == "rejected" and "Medic watches no job on pretrain-slurm" in record["reason"]
        assert slurm.depth() == 0


def test_held_namesakes_cannot_block_a_requeue_by_name(slurm):
    # Given nine held jobs named like the watched job, and the real one running
    slurm.slurm.jobs.update({str(6000 + n): (JOB, "PENDING") for n in range(9)})
    # When an operator asks by name
    assert request(slurm, "0a000000-0000-4000-8000-000000000006", job_id=None, job_name=JOB)["outcome"] == \
        "deferred"
    [final] = agent_runs(slurm)
    # Then the running one is requeued, and no held namesake
    assert requeued(slurm) == ["4211"] and final["outcome"] == "executed"


def test_a_requeue_by_name_prefers_the_job_medic_last_saw_running_over_a_namesake(slurm):
    # Given Medic saw 4211 running as llama3-70b, and someone starts a job of the same name
    JobStore(slurm.medic.deps.table).saw_running(CLUSTER, JOB, "4211", slurm.medic.clock[0])
    slurm.slurm.jobs["7000"] = (JOB, "RUNNING")
    # When a requeue by name goes out
    request(slurm, "0a000000-0000-4000-8000-000000000007", job_id=None, job_name=JOB)
    [final] = agent_runs(slurm)
    # Then the job Medic saw is requeued, not the namesake
    assert requeued(slurm) == ["4211"] and final["outcome"] == "executed"


def test_two_running_namesakes_and_none_seen_requeue_nothing_and_page(slurm):
    slurm.slurm.jobs["7000"] = (JOB, "RUNNING")
    request(slurm, "0a000000-0000-4000-8000-000000000008", job_id=None, job_name=JOB)
    [final] = agent_runs(slurm)
    assert requeued(slurm) == [] and (final["outcome"], final["paged"]) == ("failed", True)
    assert "2 jobs named 'llama3-70b' are running (4211, 7000)" in final["reason"]


def test_each_cluster_takes_at_most_its_budget_of_requests_an_hour_and_pages_once(slurm):
    # Given max_operator_requests_per_hour (10): ten requests for ten jobs in one hour
    ids = [str(4211 + n) for n in range(12)]
    records = [request(slurm, f"0b000000-0000-4000-8000-0000000000{n:02d}", job_id=job_id)
               for n, job_id in enumerate(ids)]
    # Then ten are queued; the eleventh and twelfth are held back, and a human is paged once
    assert [r["outcome"] for r in records] == ["deferred"] * 10 + ["suppressed"] * 2
    assert [r["paged"] for r in records[10:]] == [True, False]
    assert "max_operator_requests_per_hour" in records[10]["reason"]
    assert slurm.depth() == 10
    [page] = slurm.medic.pages()
    assert "CloudTrail, PutEvents with source medic.operator" in page["Message"]
    # And the next clock hour has a budget again
    slurm.medic.clock[0] += timedelta(hours=1)
    slurm.heartbeat()
    assert request(slurm, "0b000000-0000-4000-8000-000000000099", job_id="4300")["outcome"] == "deferred"
