"""Specification: a requeue by name that finds no job pending or running says what became of the jobs of that name
(issue 27 item 3, Slurm's half), so that Medic can tell a job that completed from one that failed or vanished.

The agent looks, in order, at what slurmctld still remembers (`squeue --states=all`: finished jobs stay until
MinJobAge after they ended, 300 s by default) and at the cluster's accounting (`sacct`, where slurmdbd keeps it).
Nothing is requeued either way, so the result stays `failed`; its `job_states` carry what was found."""

from __future__ import annotations

import json

import pytest
from medic_agent.actions import FAILED, execute
from medic_agent.commands import (
    SACCT_STATE_LINE,
    SQUEUE_STATE_LINE,
    JobState,
    accounted_jobs_argv,
    named_jobs_argv,
    parse,
    parse_named_jobs,
)
from medic_agent.slurm import Slurm

from tests.agent.fakes import FakeRunner, canary_bin_dir

CLUSTER = "pretrain-slurm"
FIND = "squeue --noheader --format=%i"
REMEMBERED = "squeue --noheader --states=all"
ACCOUNTED = "sacct --noheader"


def by_name(name: str = "llama3-70b") -> str:
    return json.dumps({"command_id": "c-1", "cluster": CLUSTER, "kind": "requeue_job", "job_name": name})


@pytest.fixture
def slurm(tmp_path):
    runner = FakeRunner(answers={"scontrol ping": FakeRunner().answers["scontrol ping"], FIND: (0, "", "")})
    return runner, Slurm(bin_dir=str(canary_bin_dir(tmp_path / "bin", tmp_path / "canary")), timeout=5,
                         runner=runner)


def test_a_job_slurmctld_still_remembers_as_completed_is_reported_without_asking_sacct(slurm):
    runner, agent_slurm = slurm
    # Given llama3-70b no longer pending or running, but slurmctld still lists it COMPLETED (within MinJobAge)
    runner.answers[REMEMBERED] = (0, "4211|COMPLETED\n", "")
    # When the agent carries out a requeue by name
    result = execute(parse(by_name(), cluster=CLUSTER), agent_slurm)
    # Then nothing is requeued, sacct is not asked, and the result says what Slurm remembers
    assert runner.argvs == [[*FIND.split(), "--name=llama3-70b"], named_jobs_argv("llama3-70b")]
    assert (result.status, result.job_ids) == (FAILED, ())
    assert result.job_states == (JobState("4211", "COMPLETED"),)
    assert "slurmctld still lists 4211 COMPLETED" in result.message


def test_a_job_slurmctld_forgot_is_looked_up_in_the_accounting(slurm):
    runner, agent_slurm = slurm
    # Given slurmctld forgot it, and slurmdbd keeps the cluster's accounting (a cancelled older run too)
    runner.answers[REMEMBERED] = (0, "", "")
    runner.answers[ACCOUNTED] = (0, "4100|CANCELLED by 1000\n4211|COMPLETED\n", "")
    result = execute(parse(by_name(), cluster=CLUSTER), agent_slurm)
    assert runner.argvs[-1] == accounted_jobs_argv("llama3-70b") == [
        "sacct", "--noheader", "--parsable2", "--allocations", "--format=JobIDRaw,State", "--name=llama3-70b",
        "--starttime=now-2days"]
    assert result.status == FAILED
    assert result.job_states == (JobState("4100", "CANCELLED"), JobState("4211", "COMPLETED"))
    assert "sacct lists 4100 CANCELLED, 4211 COMPLETED" in result.message


@pytest.mark.parametrize(("answer", "said"), [
    ((1, "", "Slurm accounting storage is disabled"), "Slurm accounting storage is disabled"),
    ((0, "", ""), "squeue lists none; sacct lists none"),
    ((0, "4211|COMPLETED|extra\n", ""), "squeue lists none; sacct: unexpected line: '4211|COMPLETED|extra'"),
])
def test_with_nothing_found_what_became_of_it_is_unknown(slurm, answer, said):
    runner, agent_slurm = slurm
    runner.answers[REMEMBERED] = (0, "", "")
    runner.answers[ACCOUNTED] = answer
    result = execute(parse(by_name(), cluster=CLUSTER), agent_slurm)
    assert (result.status, result.job_states) == (FAILED, None)
    assert "what became of it is unknown" in result.message and said in result.message


def test_a_cluster_without_sacct_still_answers(tmp_path):
    # Given a Slurm installation without sacct (it is optional: the agent starts without it)
    runner = FakeRunner(answers={"scontrol ping": FakeRunner().answers["scontrol ping"], FIND: (0, "", ""),
                                 REMEMBERED: (0, "", "")})
    bin_dir = canary_bin_dir(tmp_path / "bin", tmp_path / "canary")
    (bin_dir / "sacct").unlink()
    agent_slurm = Slurm(bin_dir=str(bin_dir), timeout=5, runner=runner)
    assert set(agent_slurm.check()) == {"scontrol", "squeue"}
    result = execute(parse(by_name(), cluster=CLUSTER), agent_slurm)
    assert result.status == FAILED and "sacct not found" in result.message
    assert [argv[0] for argv in runner.argvs] == ["squeue", "squeue"]


class TestParsing:
    def test_squeue_and_sacct_lines_strictly(self):
        assert parse_named_jobs("4211|COMPLETED\n4211|PENDING\n", SQUEUE_STATE_LINE) == [
            JobState("4211", "COMPLETED")]
        assert parse_named_jobs("4211|CANCELLED by 0\n", SACCT_STATE_LINE) == [JobState("4211", "CANCELLED")]
        for output, line in (("4211|CANCELLED by 0\n", SQUEUE_STATE_LINE), ("4211.batch|COMPLETED\n", SACCT_STATE_LINE),
                             ("4211|completed\n", SACCT_STATE_LINE), ("x|COMPLETED\n", SQUEUE_STATE_LINE)):
            with pytest.raises(ValueError):
                parse_named_jobs(output, line)

    @pytest.mark.parametrize("name", ["x; reboot", "$(reboot)", "a b", "", "n\n"])
    def test_the_argv_builders_recheck_the_name(self, name):
        for build in (named_jobs_argv, accounted_jobs_argv):
            with pytest.raises(ValueError):
                build(name)
