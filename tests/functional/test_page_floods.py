"""Specification: no source of pages floods the on-call (issue 28, item 9). Every source pages under a window per
cluster (or job, or training-job prefix): the first page as it is, the second as the window's summary (itself,
headed by what is held until when), the rest recorded without a page until the window ends; the next window's first
page says how many were held. Against moto (DynamoDB, SNS, SSM, CloudWatch, SageMaker)."""

from __future__ import annotations

from datetime import datetime, timedelta

import boto3
import pytest

from medic.adapters.metrics import TrainingMetrics
from medic.config import parse_config
from medic.flows.jobs.restart import restart_training_job
from medic.flows.stall.response import respond_to_alarm
from tests.functional.conftest import CONFIG, REGION, medic_world
from tests.functional.test_alarm_handler import alarm, probe_reports
from tests.functional.test_training_job_handler import Training, failure
from tests.helpers import load_event, node_event

JOB = "llama3-70b"
FLOOD_CONFIG = {**CONFIG, "jobs": [{"name": JOB, "cluster": "pretrain-slurm"}]}


@pytest.fixture
def medic(aws):
    yield from medic_world(parse_config(FLOOD_CONFIG), aws)


def node(index: int) -> str:
    return f"i-0{index:016x}"


def test_ten_nodes_with_a_fault_medic_cannot_name_page_twice_not_ten_times(medic):
    # Given ten nodes of one cluster reporting a fault Medic takes no action on
    medic.at("2026-11-20T08:20:00+00:00")
    records = []
    for index in range(10):
        medic.hyperpod.node(node(index))
        if index == 0:
            medic.hyperpod.size(16)
        records.append(medic.handle(node_event(load_event("hyperpod-node-health-unhealthy"), instance_id=node(index),
                                               reason="Fan speed reading out of range", event_id=f"fan-{index}",
                                               time="2026-11-20T08:20:00Z")))
    # Then every node is recorded, the first pages, the second pages as the window's summary, the rest are held
    assert [record["outcome"] for record in records] == ["deferred"] * 10
    assert [record["paged"] for record in records] == [True, True] + [False] * 8
    first, summary = medic.pages()
    assert first["Subject"].startswith(f"[Medic] pretrain-slurm {node(0)}")
    assert summary["Subject"].startswith(f"[Medic] [held until 09:20 UTC] pretrain-slurm {node(1)}")
    assert "further node pages about cluster pretrain-slurm are recorded without a page until 09:20 UTC" in (
        summary["Message"])
    # And when the hour is out, the next one pages again, saying how many were held
    medic.at("2026-11-20T09:25:00+00:00")
    medic.hyperpod.node(node(10))
    medic.hyperpod.size(16)
    late = medic.handle(node_event(load_event("hyperpod-node-health-unhealthy"), instance_id=node(10),
                                   reason="Fan speed reading out of range", event_id="fan-10",
                                   time="2026-11-20T09:25:00Z"))
    assert late["paged"] is True
    [page] = medic.pages()
    assert page["Message"].startswith("Held before:    8 more node page(s) about cluster pretrain-slurm")


def test_a_held_incident_pages_after_the_window_when_it_needs_a_human_again(medic):
    # Given the window's two pages spent, and a third node held (its incident's page not spent)
    for index in range(3):
        medic.hyperpod.node(node(index))
        if index == 0:
            medic.hyperpod.size(16)
        medic.handle(node_event(load_event("hyperpod-node-health-unhealthy"), instance_id=node(index),
                                reason="mystery", event_id=f"m-{index}"))
    assert len(medic.pages()) == 2
    # When that node reports again after the window
    medic.at("2026-11-20T09:30:00+00:00")
    medic.hyperpod.node(node(2))
    medic.hyperpod.size(16)
    again = medic.handle(node_event(load_event("hyperpod-node-health-unhealthy"), instance_id=node(2),
                                    reason="mystery", event_id="m-2-again", time="2026-11-20T09:30:00Z"))
    # Then it pages: held is not the same as paged
    assert again["paged"] is True and len(medic.pages()) == 1


def test_a_page_sns_refused_gives_its_place_in_the_window_back(aws):
    for medic in medic_world(parse_config(FLOOD_CONFIG), aws):
        topic = medic.deps.pager.topic_arn
        medic.deps.pager.topic_arn = f"{topic}-does-not-exist"
        medic.hyperpod.node(node(0))
        medic.hyperpod.size(16)
        lost = medic.handle(node_event(load_event("hyperpod-node-health-unhealthy"), instance_id=node(0),
                                       reason="mystery", event_id="lost"))
        medic.deps.pager.topic_arn = topic
        medic.hyperpod.node(node(1))
        sent = medic.handle(node_event(load_event("hyperpod-node-health-unhealthy"), instance_id=node(1),
                                       reason="mystery", event_id="sent"))
        assert (lost["paged"], sent["paged"]) == (False, True)
        [page] = medic.pages()
        assert "held until" not in page["Subject"]  # the window's first page, not its summary


# --- a flapping alarm


@pytest.fixture
def trained(medic):
    medic.at("2026-11-21T03:10:00+00:00")
    medic.deps.metrics = TrainingMetrics(boto3.client("cloudwatch", region_name=REGION))
    probe_reports("LastCheckpointStep", 1200, datetime.fromisoformat("2026-11-21T02:40:00+00:00"))
    return medic


def flap(medic, state: str, at: datetime) -> dict:
    medic.at(at.isoformat())
    return respond_to_alarm(alarm(f"medic-divergence-{JOB}", state=state,
                                  at=at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")), medic.deps)


def test_a_flapping_divergence_alarm_pages_its_first_episode_and_one_summary_not_each_flap(trained):
    # Given the divergence alarm of a job flapping ALARM/OK every five minutes for an hour
    start = datetime.fromisoformat("2026-11-21T03:10:00+00:00")
    records = [flap(trained, state, start + timedelta(minutes=5 * step))
               for step, state in enumerate(["ALARM", "OK"] * 6)]
    # Then every transition is recorded, and three pages go out: the first ALARM, its all-clear, and the second
    # ALARM as the window's summary; after it nothing pages, all-clears included, until the window ends
    assert [record["outcome"] for record in records] == ["deferred", "ignored"] * 6
    assert [record["paged"] for record in records] == [True, True, True] + [False] * 9
    first, all_clear, summary = trained.pages()
    assert "resolved" in all_clear["Subject"] and "held until" not in first["Subject"]
    assert summary["Subject"].startswith("[Medic] [held until 04:10 UTC]")
    assert "further training pages about job llama3-70b" in summary["Message"]
    # And the next episode after the window pages again, saying how many were held
    late = flap(trained, "ALARM", start + timedelta(minutes=75))
    assert late["paged"] is True
    [page] = trained.pages()
    assert page["Message"].startswith("Held before:    4 more training page(s) about job llama3-70b")


# --- training jobs: per configured prefix


def test_a_shortage_failing_many_training_jobs_of_one_prefix_pages_twice(medic):
    # Given eight jobs under the prefix ft- failing for a reason Medic does not retry
    medic.deps.account = "123456789012"
    training = Training(medic.clock)
    sample = load_event("training-job-failed")
    records = []
    for index in range(8):
        name = f"ft-sweep-{index}"
        training.job(name)
        event = medic.arrives(failure(sample, reason="ClientError: bad hyperparameter", name=name))  # at its time
        records.append(restart_training_job(event, medic.deps))
    # Then each failure is recorded, and two pages go out for the prefix: the first and the summary
    assert [record["paged"] for record in records] == [True, True] + [False] * 6
    first, summary = medic.pages()
    assert "further training job pages about training jobs ft-*" in summary["Message"]
    assert first["Subject"] != summary["Subject"]

