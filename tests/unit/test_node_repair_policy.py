"""Specification: the pure pieces of Slurm's side of a node action (issue 16) — the node's Slurm name, the commands
Medic issues around the repair (the agent parses exactly what Medic sends), what happens to each job, and the
record's `jobs` field (present only where a node action says it)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from medic.core.models import SLURM_NODE_NAME, slurm_node_name
from medic.core.record import complete
from medic.flows.agent.agent_result import AgentResult, requeue_found
from medic.flows.agent.commands import (
    JOB_ID_LIST,
    InvalidCommand,
    job_after_repair,
    node_command,
    why_not_requeueable,
)

AGENT_DIR = Path(__file__).resolve().parents[2] / "agent"
if str(AGENT_DIR) not in sys.path:
    sys.path.insert(0, str(AGENT_DIR))

from medic_agent import commands as agent  # noqa: E402

NOW = datetime(2026, 11, 20, 8, 14, 5, tzinfo=UTC)
HOSTILE = ["ip-10-1-2-[3-9]", "ip-10-1-2-3,ip-10-1-2-4", "ALL", "ip-10-1-2-3; reboot", "ip-10-1-2-3\n", "",
           "ip-١٠-1-2-3", "controller-1", None, 42]


class TestSlurmNodeName:
    @pytest.mark.parametrize(("hostname", "ip", "name"), [
        ("ip-10-1-88-23.us-west-2.compute.internal", None, "ip-10-1-88-23"),
        ("ip-10-1-88-23.ec2.internal", "10.9.9.9", "ip-10-1-88-23"),  # the hostname first
        (None, "10.1.88.23", "ip-10-1-88-23"),
        ("ip-10-1-2-[3-9].ec2.internal", None, None), ("$(reboot).x", None, None), (None, "10.1.88.23\n", None),
        (None, "::1", None), (None, None, None), (42, ["10.1.2.3"], None)])
    def test_from_describe_cluster_node(self, hostname, ip, name):
        assert slurm_node_name(hostname, ip) == name

    def test_the_agent_accepts_exactly_medics_node_names(self):
        assert SLURM_NODE_NAME.pattern == agent.NODE_NAME.pattern
        assert JOB_ID_LIST.pattern == agent.JOB_ID_LIST.pattern


class TestNodeCommands:
    @pytest.mark.parametrize("kind", ["drain_node", "resume_node"])
    def test_a_node_command_is_what_the_agent_parses(self, kind):
        command = node_command("pretrain-slurm", kind, "node:pretrain-slurm:i-1", NOW, "e-1", node="ip-10-1-2-3")
        parsed = agent.parse(json.dumps(command.body()), cluster="pretrain-slurm")
        assert (parsed.kind, parsed.target, parsed.incident) == (kind, command.target, command.incident)
        assert command.target == "node:ip-10-1-2-3"

    def test_job_states_is_what_the_agent_parses(self):
        command = node_command("pretrain-slurm", "job_states", "node:pretrain-slurm:i-1", NOW, "e-1",
                               job_ids=["4211", "4300"])
        parsed = agent.parse(json.dumps(command.body()), cluster="pretrain-slurm")
        assert parsed.target == command.target == "jobs:4211,4300"

    def test_the_same_request_is_the_same_command(self):
        first, again = (node_command("c1", "drain_node", "node:c1:i-1", NOW, "e-1", node="ip-10-1-2-3")
                        for _ in range(2))
        assert first.command_id == again.command_id

    @pytest.mark.parametrize("node", HOSTILE)
    def test_hostile_nodes_never_reach_a_command(self, node):
        with pytest.raises(InvalidCommand):
            node_command("c1", "drain_node", "node:c1:i-1", NOW, "e-1", node=node)

    @pytest.mark.parametrize("job_ids", [[], ["4211_3"], ["4211;x"], ["1"] * 51])
    def test_job_states_takes_plain_job_ids_only(self, job_ids):
        with pytest.raises(InvalidCommand):
            node_command("c1", "job_states", "node:c1:i-1", NOW, "e-1", job_ids=job_ids)

    def test_no_other_kind(self):
        with pytest.raises(InvalidCommand):
            node_command("c1", "fail_node", "node:c1:i-1", NOW, "e-1", node="ip-10-1-2-3")


class TestAJobAfterTheRepair:
    """slurmctld requeues a batch job with the requeue flag itself when its node goes down, and ends any other
    NODE_FAIL; `scontrol requeue` refuses a job without the flag or that is no batch job (job_mgr.c)."""

    @pytest.mark.parametrize(("state", "fate"), [
        ("RUNNING", "back"), ("PENDING", "back"), ("REQUEUED", "back"), ("COMPLETING", "back"),
        ("FAILED", "requeue"), ("BOOT_FAIL", "requeue"), ("NODE_FAIL", "not_requeueable"),
        ("COMPLETED", "ended"), ("CANCELLED", "ended"), ("TIMEOUT", "ended"), ("OUT_OF_MEMORY", "ended"),
        ("PREEMPTED", "ended"), (None, "unknown")])
    def test_fate_from_the_state_alone(self, state, fate):
        # an agent that reports no flags: a NODE_FAIL job is one Slurm did not requeue, so it will not
        assert job_after_repair(state) == fate

    @pytest.mark.parametrize(("state", "requeue", "batch", "fate"), [
        ("NODE_FAIL", "0", "1", "not_requeueable"),  # sbatch --no-requeue
        ("NODE_FAIL", "1", "0", "not_requeueable"),  # srun/salloc: Slurm requeues batch jobs only
        ("NODE_FAIL", "1", "1", "requeue"),  # ended NODE_FAIL by another path: Slurm would take it
        ("FAILED", "1", "1", "requeue"), ("FAILED", "0", "1", "not_requeueable"),
        ("BOOT_FAIL", "0", "1", "not_requeueable"),
        ("PENDING", "1", "1", "back"), ("RUNNING", "0", "1", "back"), ("COMPLETED", "0", "1", "ended"),
        ("FAILED", "yes", "1", "requeue"), ("NODE_FAIL", "1", None, "not_requeueable")])  # malformed: state alone
    def test_fate_with_the_flags(self, state, requeue, batch, fate):
        assert job_after_repair(state, requeue, batch) == fate

    def test_why_slurm_will_not(self):
        assert "--no-requeue" in why_not_requeueable("0", "1")
        assert "not a batch job" in why_not_requeueable("1", "0")
        assert "--no-requeue" in why_not_requeueable(None, None)


class TestARequeueThatFoundNothing:
    """requeue_found: what a requeue_job result that requeued nothing says of the job (pure)."""

    @staticmethod
    def result(status="failed", message="no job named 'x' in squeue", job_states=None, job_ids=()):
        return AgentResult.model_validate({"pk": "agent#c1#command#c-1", "sk": "result", "status": status,
                                           "message": message, "job_states": job_states, "job_ids": list(job_ids)})

    def test_the_newest_job_of_that_name_completed(self):
        assert requeue_found(self.result(job_states=[{"id": "4100", "state": "FAILED"},
                                                     {"id": "4211", "state": "COMPLETED"}])) == "completed"

    @pytest.mark.parametrize("job_states", [
        None, [], [{"id": "4211", "state": "FAILED"}],
        [{"id": "4211", "state": "COMPLETED"}, {"id": "4300", "state": "NODE_FAIL"}],  # the newest did not complete
        [{"id": "4211", "state": "COMPLETED"}, {"id": "4100", "state": "PENDING"}],  # one is still queued
        [{"id": "x", "state": "COMPLETED"}], [{"state": "COMPLETED"}]])
    def test_anything_else_is_not_a_completion(self, job_states):
        assert requeue_found(self.result(job_states=job_states)) is None

    @pytest.mark.parametrize("answer", ["Requested operation is presently disabled for job 4211",
                                        "Only batch jobs are accepted or processed for job 4211"])
    def test_slurm_refusing_a_job_it_never_requeues(self, answer):
        assert requeue_found(self.result(message=f"scontrol requeue 4211: exit 1: {answer}")) == "not_requeueable"

    def test_an_executed_or_partly_done_requeue_is_neither(self):
        completed = [{"id": "4211", "state": "COMPLETED"}]
        assert requeue_found(self.result(status="executed", job_states=completed)) is None
        assert requeue_found(self.result(job_states=completed, job_ids=["4212"])) is None


class TestTheRecordsJobs:
    BASE = {"incident": "node:c1:i-1", "trigger": "node_repair", "event_id": "e", "fault": "gpu_fatal",
            "action": "replace_node", "outcome": "executed", "reason": "r", "mode": "act"}

    def test_absent_unless_given(self):
        assert "jobs" not in complete(self.BASE)

    def test_null_is_unknown_and_kept(self):
        assert complete({**self.BASE, "jobs": None})["jobs"] is None

    def test_a_list_of_id_and_name(self):
        assert complete({**self.BASE, "jobs": []})["jobs"] == []
        assert complete({**self.BASE, "jobs": [{"id": "4211", "name": "llama3-70b"}]})["jobs"] == [
            {"id": "4211", "name": "llama3-70b"}]

    @pytest.mark.parametrize("jobs", [[{"id": "x", "name": "a"}], [{"id": "1"}], [{"id": "1", "name": "a", "x": 1}]])
    def test_anything_else_is_refused(self, jobs):
        with pytest.raises(ValidationError):
            complete({**self.BASE, "jobs": jobs})
