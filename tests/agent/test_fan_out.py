"""Specification: a requeue by job name requeues at most the command's `max_jobs` (issue 12, item 6).

Medic's command carries the cap (8); the agent parses it (an integer from 1 to its own ceiling, 50) and,
when squeue lists more jobs with that name, requeues none of them."""

from __future__ import annotations

import json

import pytest
from medic_agent.actions import EXECUTED, FAILED, execute
from medic_agent.commands import MAX_JOBS_PER_NAME, Refused, RequeueJob, parse
from medic_agent.slurm import Slurm

from tests.agent.fakes import FakeRunner, canary_bin_dir

CLUSTER = "pretrain-slurm"
COMMAND_ID = "0b6f7c5e-2f4d-4c43-9d8e-1a2b3c4d5e6f"


def by_name(**fields) -> str:
    return json.dumps({"command_id": COMMAND_ID, "cluster": CLUSTER, "kind": "requeue_job",
                       "job_name": "llama3-70b", **fields})


@pytest.fixture
def slurm(tmp_path):
    runner = FakeRunner()
    return runner, Slurm(bin_dir=str(canary_bin_dir(tmp_path / "bin", tmp_path / "canary")), timeout=5,
                         runner=runner)


def test_a_command_without_max_jobs_keeps_the_agents_own_ceiling():
    assert parse(by_name(), cluster=CLUSTER).action == RequeueJob(job_name="llama3-70b", max_jobs=MAX_JOBS_PER_NAME)


@pytest.mark.parametrize("max_jobs", [0, -1, MAX_JOBS_PER_NAME + 1, "8", 8.0, True, None, [8]], ids=repr)
def test_a_forged_max_jobs_is_refused(max_jobs):
    # Given a queue message that tries to lift (or confuse) the cap / When parsed / Then it is refused
    with pytest.raises(Refused, match="max_jobs must be an integer"):
        parse(by_name(max_jobs=max_jobs), cluster=CLUSTER)


def test_a_name_matching_more_jobs_than_the_cap_requeues_none(slurm):
    runner, agent_slurm = slurm
    # Given nine jobs named llama3-70b in squeue and a command capped at 8
    runner.answers["squeue --noheader"] = (0, "".join(f"{4200 + n}\n" for n in range(9)), "")
    command = parse(by_name(max_jobs=8), cluster=CLUSTER)
    # When the agent carries it out
    result = execute(command, agent_slurm)
    # Then it looked the name up, requeued nothing, and says why
    [lookup] = runner.calls
    assert lookup["argv"][-1] == "--name=llama3-70b" and "requeue" not in lookup["argv"]
    assert (result.status, result.job_ids) == (FAILED, ())
    assert "9 jobs named 'llama3-70b', more than 8: not requeued" in result.message


def test_a_name_within_the_cap_requeues_each_job(slurm):
    runner, agent_slurm = slurm
    runner.answers["squeue --noheader"] = (0, "4211\n4212\n", "")
    result = execute(parse(by_name(max_jobs=2), cluster=CLUSTER), agent_slurm)
    assert (result.status, result.job_ids) == (EXECUTED, ("4211", "4212"))
