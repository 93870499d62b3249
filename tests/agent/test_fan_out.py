"""Specification: a requeue reaches exactly one job Medic may requeue (issue 28, item 7; it replaces issue 12's cap on
a requeue by name). By name, the agent requeues the one job running under the name: the one Medic last saw running
there when it still is, else the only one running; held or pending namesakes never, several running ones none. By
id with the names Medic watches, it asks squeue for the job's name first and refuses any other job."""

from __future__ import annotations

import json

import pytest
from medic_agent.actions import EXECUTED, FAILED, REFUSED, execute
from medic_agent.commands import parse
from medic_agent.slurm import Slurm

from tests.agent.fakes import FakeRunner, canary_bin_dir

CLUSTER = "pretrain-slurm"
COMMAND_ID = "0b6f7c5e-2f4d-4c43-9d8e-1a2b3c4d5e6f"


def requeue(**fields) -> object:
    return parse(json.dumps({"command_id": COMMAND_ID, "cluster": CLUSTER, "kind": "requeue_job", **fields}),
                 cluster=CLUSTER)


@pytest.fixture
def slurm(tmp_path):
    runner = FakeRunner()
    return runner, Slurm(bin_dir=str(canary_bin_dir(tmp_path / "bin", tmp_path / "canary")), timeout=5,
                         runner=runner)


def requeued(runner: FakeRunner) -> list[str]:
    return [argv[2] for argv in runner.argvs if argv[:2] == ["scontrol", "requeue"]]


def test_held_namesakes_are_never_listed_and_the_running_job_is_requeued(slurm):
    runner, agent_slurm = slurm
    # Given squeue lists the running jobs of the name only (the held ones are PENDING: not asked for)
    runner.answers["squeue --noheader"] = (0, "4211|llama3-70b\n", "")
    result = execute(requeue(job_name="llama3-70b"), agent_slurm)
    [lookup, _] = runner.argvs
    assert lookup == ["squeue", "--noheader", "--states=RUNNING", "--format=%i|%j", "--name=llama3-70b"]
    assert (result.status, result.job_ids, result.jobs) == (EXECUTED, ("4211",), (("4211", "llama3-70b"),))
    assert "the only job running under that name" in result.message


def test_the_job_medic_last_saw_wins_over_a_running_namesake(slurm):
    runner, agent_slurm = slurm
    runner.answers["squeue --noheader"] = (0, "7000|llama3-70b\n4211|llama3-70b\n", "")
    result = execute(requeue(job_name="llama3-70b", last_seen_id="4211"), agent_slurm)
    assert requeued(runner) == ["4211"] and result.status == EXECUTED
    assert "the job Medic last saw running under that name" in result.message


def test_several_running_namesakes_and_none_seen_requeue_none(slurm):
    runner, agent_slurm = slurm
    runner.answers["squeue --noheader"] = (0, "7000|llama3-70b\n4211|llama3-70b\n", "")
    result = execute(requeue(job_name="llama3-70b", last_seen_id="4100"), agent_slurm)
    assert requeued(runner) == [] and (result.status, result.job_ids) == (FAILED, ())
    assert "2 jobs named 'llama3-70b' are running (7000, 4211), none of them job 4100" in result.message


def test_no_running_job_of_the_name_requeues_nothing(slurm):
    runner, agent_slurm = slurm
    runner.answers["squeue --noheader"] = (0, "", "")
    result = execute(requeue(job_name="llama3-70b"), agent_slurm)
    assert requeued(runner) == [] and result.status == FAILED
    assert "no job named 'llama3-70b' running in squeue" in result.message


def test_a_squeue_line_that_is_not_a_job_requeues_nothing(slurm):
    runner, agent_slurm = slurm
    runner.answers["squeue --noheader"] = (0, "4211|llama3-70b\n$(reboot)\n", "")
    result = execute(requeue(job_name="llama3-70b"), agent_slurm)
    assert requeued(runner) == [] and result.status == FAILED


def test_a_job_by_id_that_is_not_watched_is_refused(slurm):
    runner, agent_slurm = slurm
    runner.answers["squeue --noheader"] = (0, "5000|RUNNING|eval-sweep-team-b\n", "")
    result = execute(requeue(job_id="5000", job_names=["llama3-70b"]), agent_slurm)
    assert runner.argvs == [["squeue", "--noheader", "--states=all", "--format=%i|%T|%j", "-j", "5000"]]
    assert (result.status, result.job_ids) == (REFUSED, ())
    assert "job 5000 is named 'eval-sweep-team-b', not one of the jobs Medic watches" in result.message


def test_a_watched_job_by_id_is_requeued_and_named(slurm):
    runner, agent_slurm = slurm
    runner.answers["squeue --noheader"] = (0, "4211|RUNNING|llama3-70b\n", "")
    result = execute(requeue(job_id="4211", job_names=["bert-xl", "llama3-70b"]), agent_slurm)
    assert requeued(runner) == ["4211"]
    assert (result.status, result.jobs) == (EXECUTED, (("4211", "llama3-70b"),))


def test_an_array_job_is_requeued_only_when_every_task_is_watched(slurm):
    runner, agent_slurm = slurm
    runner.answers["squeue --noheader"] = (0, "4211_1|RUNNING|llama3-70b\n4211_2|RUNNING|other\n", "")
    assert execute(requeue(job_id="4211", job_names=["llama3-70b"]), agent_slurm).status == REFUSED


def test_a_job_slurm_does_not_know_is_not_requeued(slurm):
    runner, agent_slurm = slurm
    runner.answers["squeue --noheader"] = (1, "", "slurm_load_jobs error: Invalid job id specified\n")
    result = execute(requeue(job_id="4211", job_names=["llama3-70b"]), agent_slurm)
    assert requeued(runner) == [] and result.status == FAILED
    assert "Slurm does not know job 4211" in result.message


def test_a_job_by_id_without_names_is_requeued_as_before(slurm):
    # (the jobs a node repair hit: the agent listed them itself)
    runner, agent_slurm = slurm
    result = execute(requeue(job_id="4211"), agent_slurm)
    assert runner.argvs == [["scontrol", "requeue", "4211"]] and result.status == EXECUTED
