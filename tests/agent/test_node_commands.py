"""drain_node / resume_node: Slurm's side of a node action (issue 16 item 1), parsed, built and run like requeue_job:
only after the ConditionCheck on Medic's `command#<id>/issued` (kind, target `node:<name>`, cluster, incident)."""

from __future__ import annotations

import json

import pytest
from medic_agent.actions import EXECUTED, FAILED, execute
from medic_agent.commands import (
    DRAIN_REASON,
    DrainNode,
    JobState,
    JobStates,
    Refused,
    ResumeNode,
    drain_argv,
    job_states_argv,
    jobs_on_node_argv,
    parse,
    parse_job_states,
    parse_jobs_on_node,
    resume_argv,
    show_node_argv,
)
from medic_agent.slurm import OUTPUT_LIMIT, Slurm

from tests.agent.fakes import FakeRunner, agent_pk, ledger_item
from tests.agent.test_agent_loop import CLUSTER, World, aws  # noqa: F401 - the fixture

NODE = "ip-10-1-2-3"
HOSTILE_NODES = ["ip-10-1-2-[3-9]", "ip-10-1-2-3,ip-10-1-2-4", "ALL", "ip-10-1-2-3; reboot", "$(reboot)",
                 "ip-10-1-2-3\n", " ip-10-1-2-3", "ip-10-1-2-3 State=DOWN", "ip-1000-1-2-3", "ip-10-1-2", "",
                 "--help", "ip-١٠-1-2-3", "controller-1"]


def body(kind: str, **fields) -> str:
    return json.dumps({"command_id": "c-1", "cluster": CLUSTER, "kind": kind, "incident": "node:x", **fields})



def shown_node(state: str, reason: str, name: str = NODE) -> str:
    """`scontrol show node` as Slurm 22.05 prints it (tests/agent/test_real_slurm.py checks the real one)."""
    lines = [f"NodeName={name} Arch=x86_64 CoresPerSocket=1 ", "   CPUAlloc=0 CPUEfctv=4 CPUTot=4 CPULoad=0.00",
             f"   State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A", "   Partitions=debug "]
    if reason:
        lines.append(f"   Reason={reason} [root@2026-11-20T08:15:06]")
    return "\n".join(lines) + "\n\n"


class TestParse:
    @pytest.mark.parametrize(("kind", "action"), [("drain_node", DrainNode(NODE)), ("resume_node", ResumeNode(NODE))])
    def test_one_node(self, kind, action):
        command = parse(body(kind, node=NODE), cluster=CLUSTER)
        assert command.action == action and command.target == f"node:{NODE}" and command.kind == kind

    @pytest.mark.parametrize("node", [*HOSTILE_NODES, 42, None, [NODE]])
    @pytest.mark.parametrize("kind", ["drain_node", "resume_node"])
    def test_hostile_node_is_refused(self, kind, node):
        with pytest.raises(Refused, match="node must be one Slurm node name"):
            parse(body(kind, node=node), cluster=CLUSTER)

    def test_a_node_command_takes_no_job(self):
        with pytest.raises(Refused, match="takes a node, not job_id"):
            parse(body("drain_node", node=NODE, job_id="1"), cluster=CLUSTER)

    def test_argvs(self):
        assert drain_argv(NODE) == ["scontrol", "update", f"NodeName={NODE}", "State=DRAIN", f"Reason={DRAIN_REASON}"]
        assert resume_argv(NODE) == ["scontrol", "update", f"NodeName={NODE}", "State=RESUME"]
        assert show_node_argv(NODE) == ["scontrol", "show", "node", NODE]
        assert jobs_on_node_argv(NODE) == ["squeue", "--noheader", "--format=%i|%j", "-w", NODE]
        for build in (drain_argv, resume_argv, show_node_argv, jobs_on_node_argv):
            with pytest.raises(ValueError):
                build("ip-10-1-2-[3-4]")


class TestJobsOnNode:
    def test_ids_and_names_in_order(self):
        assert parse_jobs_on_node("4211|llama3-70b\n4212_3|eval run|x\n\n4211|llama3-70b\n") == [
            ("4211", "llama3-70b"), ("4212_3", "eval run|x")]

    def test_none(self):
        assert parse_jobs_on_node("") == []

    @pytest.mark.parametrize("output", ["4211\n", "llama|4211\n", "4211 |x\n", "squeue: error: x\n", "4211|a\tb\n"])
    def test_anything_else_is_unknown(self, output):
        with pytest.raises(ValueError):
            parse_jobs_on_node(output)


def slurm(runner: FakeRunner, tmp_path) -> Slurm:
    from tests.agent.fakes import canary_bin_dir

    return Slurm(bin_dir=str(canary_bin_dir(tmp_path / "bin", tmp_path / "canary")), timeout=5, runner=runner)


class TestExecute:
    def test_drain_then_list(self, tmp_path):
        runner = FakeRunner(answers={"squeue --noheader": (0, "4211|llama3-70b\n4300|eval\n", "")})
        result = execute(parse(body("drain_node", node=NODE), cluster=CLUSTER), slurm(runner, tmp_path))
        assert runner.argvs == [drain_argv(NODE), jobs_on_node_argv(NODE)]  # drained first: nothing new lands
        assert result.status == EXECUTED and result.jobs == (("4211", "llama3-70b"), ("4300", "eval"))
        assert f"jobs on {NODE}: 4211 (llama3-70b), 4300 (eval)" in result.message

    def test_a_failed_drain_lists_nothing(self, tmp_path):
        runner = FakeRunner(answers={"scontrol update": (1, "", "slurm_update error: Invalid node name specified")})
        result = execute(parse(body("drain_node", node=NODE), cluster=CLUSTER), slurm(runner, tmp_path))
        assert runner.argvs == [drain_argv(NODE)]
        assert result.status == FAILED and "Invalid node name" in result.message and result.jobs is None

    @pytest.mark.parametrize("answer", [(1, "", "squeue: error: x"), (0, "garbage\n", ""),
                                        (0, "1|" + "x" * 200 + "\n" + "2|y\n" * (OUTPUT_LIMIT // 4), "")])
    def test_jobs_that_cannot_be_listed_are_unknown_not_empty(self, tmp_path, answer):
        runner = FakeRunner(answers={"squeue --noheader": answer})
        result = execute(parse(body("drain_node", node=NODE), cluster=CLUSTER), slurm(runner, tmp_path))
        assert result.status == EXECUTED and result.jobs is None and "jobs unknown" in result.message

    def test_list_node_jobs_lists_and_changes_nothing(self, tmp_path):
        # Given a node HyperPod repairs by itself (issue 32): its Slurm state is HyperPod's
        runner = FakeRunner(answers={"squeue --noheader": (0, "4211|llama3-70b\n", "")})
        result = execute(parse(body("list_node_jobs", node=NODE), cluster=CLUSTER), slurm(runner, tmp_path))
        # Then only squeue runs (no scontrol), and the jobs come back
        assert runner.argvs == [jobs_on_node_argv(NODE)]
        assert result.status == EXECUTED and result.jobs == (("4211", "llama3-70b"),)

    @pytest.mark.parametrize("answer", [(1, "", "squeue: error: x"), (0, "garbage\n", "")])
    def test_list_node_jobs_that_cannot_list_fails_with_jobs_unknown(self, tmp_path, answer):
        runner = FakeRunner(answers={"squeue --noheader": answer})
        result = execute(parse(body("list_node_jobs", node=NODE), cluster=CLUSTER), slurm(runner, tmp_path))
        assert result.status == FAILED and result.jobs is None and "jobs unknown" in result.message

    def test_resume_reads_the_node_first_and_resumes_it_when_medic_drained_it(self, tmp_path):
        # Given the node still drained with Medic's reason (slurmctld appended its own when the node went down)
        runner = FakeRunner(answers={"scontrol show": (0, shown_node("DOWN+DRAIN+NOT_RESPONDING",
                                                                     f"{DRAIN_REASON} : Not responding"), "")})
        result = execute(parse(body("resume_node", node=NODE), cluster=CLUSTER), slurm(runner, tmp_path))
        # Then it is read, then resumed
        assert runner.argvs == [show_node_argv(NODE), resume_argv(NODE)]
        assert (result.status, result.resumed, result.node_state) == (EXECUTED, True, "DOWN+DRAIN+NOT_RESPONDING")
        assert result.node_reason == f"{DRAIN_REASON} : Not responding" and result.jobs is None

    @pytest.mark.parametrize("state, reason", [("IDLE", ""), ("ALLOCATED", ""),
                                               ("IDLE+DRAIN", "disk replacement"),
                                               ("DOWN", "Node unexpectedly rebooted"),
                                               ("IDLE+DRAIN", f"x {DRAIN_REASON}")])
    def test_a_node_not_drained_by_medic_is_left_as_it_is(self, tmp_path, state, reason):
        # Given the node back in service (HyperPod or a person resumed it), or drained or down for someone else
        runner = FakeRunner(answers={"scontrol show": (0, shown_node(state, reason), "")})
        result = execute(parse(body("resume_node", node=NODE), cluster=CLUSTER), slurm(runner, tmp_path))
        # Then nothing changes it: executed, not resumed, with what Slurm said
        assert runner.argvs == [show_node_argv(NODE)]
        assert (result.status, result.resumed, result.node_state, result.node_reason) == (
            EXECUTED, False, state, reason)
        assert "not resumed" in result.message

    @pytest.mark.parametrize("answer", [(1, "Node ip-10-1-2-3 not found\n", ""), (0, "garbage\n", ""),
                                        (0, shown_node("IDLE", "", name="ip-10-1-2-4"), ""),
                                        (0, "NodeName=ip-10-1-2-3 Arch=x86_64\n", "")])
    def test_a_node_whose_state_cannot_be_read_is_not_resumed(self, tmp_path, answer):
        runner = FakeRunner(answers={"scontrol show": answer})
        result = execute(parse(body("resume_node", node=NODE), cluster=CLUSTER), slurm(runner, tmp_path))
        assert runner.argvs == [show_node_argv(NODE)]
        assert result.status == FAILED and "not resumed" in result.message and result.resumed is None



class TestThroughTheLedger:
    @pytest.fixture
    def world(self, aws, tmp_path):  # noqa: F811
        return World(aws, tmp_path)

    def test_a_drain_medic_issued_runs_and_reports_the_jobs(self, world):
        world.runner.answers["squeue --noheader"] = (0, "4211|llama3-70b\n", "")
        body = world.send(kind="drain_node", node=NODE)
        assert world.agent().poll() == 1
        assert world.runner.argvs == [drain_argv(NODE), jobs_on_node_argv(NODE)]
        assert ledger_item(world.dynamodb, world.table, agent_pk(CLUSTER, body["command_id"]), "claim") is not None
        raw = world.dynamodb.get_item(TableName=world.table, Key={
            "pk": {"S": agent_pk(CLUSTER, body["command_id"])}, "sk": {"S": "result"}})["Item"]
        assert raw["status"] == {"S": "executed"} and raw["target"] == {"S": f"node:{NODE}"}
        assert raw["jobs"] == {"L": [{"M": {"id": {"S": "4211"}, "name": {"S": "llama3-70b"}}}]}
        assert world.depth() == 0

    def test_a_resume_result_says_what_the_node_was_and_whether_it_was_resumed(self, world):
        # Given a node HyperPod already returned to service
        world.runner.answers["scontrol show"] = (0, shown_node("IDLE", ""), "")
        body = world.send(kind="resume_node", node=NODE)
        assert world.agent().poll() == 1
        # Then the result item carries the state read, and that nothing was resumed (Medic records it ignored)
        raw = world.dynamodb.get_item(TableName=world.table, Key={
            "pk": {"S": agent_pk(CLUSTER, body["command_id"])}, "sk": {"S": "result"}})["Item"]
        assert (raw["status"], raw["node_state"], raw["node_reason"], raw["resumed"]) == (
            {"S": "executed"}, {"S": "IDLE"}, {"S": ""}, {"S": "false"})
        assert world.runner.argvs == [show_node_argv(NODE)]

    @pytest.mark.parametrize("kind", ["drain_node", "resume_node"])
    def test_a_node_command_medic_never_issued_does_not_run(self, world, kind):
        body = world.send(issued=False, kind=kind, node=NODE)
        assert world.agent().poll() == 1
        assert world.runner.argvs == [] and world.result(body) is None and world.depth() == 0

    def test_an_issued_drain_for_another_node_does_not_run(self, world):
        from tests.agent.fakes import command_body, issue, send

        body = command_body(CLUSTER, kind="drain_node", node=NODE)
        issue(world.dynamodb, world.table, body)
        send(world.sqs, world.queue_url, {**body, "node": "ip-10-1-2-4"})  # same id, another node
        assert world.agent().poll() == 1
        assert world.runner.argvs == [] and world.result(body) is None

    def test_the_standby_does_not_drain(self, world):
        from tests.agent.fakes import ping_output

        world.runner.answers["scontrol ping"] = ping_output(("controller-2", True), ("controller-1", True))
        body = world.send(kind="drain_node", node=NODE)
        assert world.agent().poll() == 0
        assert world.runner.argvs == [] and world.result(body) is None


class TestJobStates:
    """job_states: where the jobs a node repair hit are now (issue 16 item 2), read only."""

    def test_parse_and_argv(self):
        command = parse(body("job_states", job_ids="4211,4300"), cluster=CLUSTER)
        assert command.action == JobStates("4211,4300") and command.target == "jobs:4211,4300"
        # squeue -O: the state, the requeue and batch flags (does Slurm accept a requeue) and the restart count
        assert job_states_argv("4211,4300") == [
            "squeue", "--noheader", "--states=all",
            "--Format=JobID:0|,State:0|,Requeue:0|,BatchFlag:0|,RestartCnt:0", "-j", "4211,4300"]

    @pytest.mark.parametrize("job_ids", ["", "4211,", ",4211", "4211 4300", "4211;reboot", "-1", "4211\n",
                                         ",".join(["1"] * 51), 4211, None, ["4211"], "٤٢١١"])
    def test_hostile_ids_are_refused(self, job_ids):
        with pytest.raises(Refused, match="job_ids must be"):
            parse(body("job_states", job_ids=job_ids), cluster=CLUSTER)

    def test_takes_no_node(self):
        with pytest.raises(Refused, match="takes job_ids, not node"):
            parse(body("job_states", job_ids="1", node=NODE), cluster=CLUSTER)

    def test_states_parsed_strictly(self):
        assert parse_job_states("4211|NODE_FAIL|0|1|0\n4300|PENDING|1|1|2\n4211|PENDING|1|1|1\n") == [
            JobState("4211", "NODE_FAIL", requeue=False, batch=True, restarts=0),
            JobState("4300", "PENDING", requeue=True, batch=True, restarts=2)]
        for output in ("4211\n", "4211|NODE_FAIL\n", "4211|running|1|1|0\n", "x|RUNNING|1|1|0\n",
                       "4211|RUNNING|2|1|0\n", "4211|RUNNING|1|1|x\n", "4211|RUNNING|1|1|0|extra\n"):
            with pytest.raises(ValueError):
                parse_job_states(output)

    def test_execute(self, tmp_path):
        runner = FakeRunner(answers={"squeue --noheader": (0, "4211|NODE_FAIL|0|1|0\n", "")})
        result = execute(parse(body("job_states", job_ids="4211,4300"), cluster=CLUSTER), slurm(runner, tmp_path))
        assert runner.argvs == [job_states_argv("4211,4300")]
        assert result.status == EXECUTED and result.job_states == (JobState("4211", "NODE_FAIL", False, True, 0),)
        # as the result item carries it: strings, flags 1/0
        assert [job.fields() for job in result.job_states] == [
            {"id": "4211", "state": "NODE_FAIL", "requeue": "0", "batch": "1", "restarts": "0"}]

    def test_a_job_slurm_forgot_is_an_empty_listing(self, tmp_path):
        runner = FakeRunner(answers={"squeue --noheader": (1, "", "slurm_load_jobs error: Invalid job id specified")})
        result = execute(parse(body("job_states", job_ids="4211"), cluster=CLUSTER), slurm(runner, tmp_path))
        assert result.status == EXECUTED and result.job_states == ()

    def test_unreadable_states_fail(self, tmp_path):
        runner = FakeRunner(answers={"squeue --noheader": (1, "", "squeue: error: slurm_receive_msg: timeout")})
        result = execute(parse(body("job_states", job_ids="4211"), cluster=CLUSTER), slurm(runner, tmp_path))
        assert result.status == FAILED and result.job_states is None
