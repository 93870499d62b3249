"""The agent's loop against emulated SQS and DynamoDB (moto), with a fake in place of subprocess.run.

The fake records every call it gets, so "nothing ran" is a checked fact, not an assumption.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from medic_agent import __version__
from medic_agent.ledger import Ledger
from medic_agent.main import INTERRUPTED, Agent, main
from medic_agent.queue import Queue
from medic_agent.slurm import Slurm
from medic_agent.state import State
from moto import mock_aws

from tests.agent.fakes import (
    FakeRunner,
    agent_pk,
    canary_bin_dir,
    command_body,
    create_ledger,
    issue,
    ledger_item,
    queue_depth,
    result_of,
    send,
)

CLUSTER = "pretrain-slurm"
NOW = datetime(2026, 12, 2, 18, 0, tzinfo=UTC)


@pytest.fixture
def aws(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        queue_url = sqs.create_queue(QueueName="medic-agent-pretrain-slurm")["QueueUrl"]
        table = create_ledger(dynamodb, "medic-ledger")
        yield sqs, dynamodb, queue_url, table


class World:
    def __init__(self, aws, tmp_path):
        self.sqs, self.dynamodb, self.queue_url, self.table = aws
        self.runner = FakeRunner()
        self.canary = tmp_path / "canary"
        self.bin_dir = canary_bin_dir(tmp_path / "bin", self.canary)
        self.state_file = tmp_path / "state" / "state.json"

    def agent(self, **overrides) -> Agent:
        fields = dict(
            cluster=CLUSTER,
            queue=Queue(self.queue_url, lambda: self.sqs, wait_seconds=0),
            ledger=Ledger(self.table, lambda: self.dynamodb),
            slurm=Slurm(bin_dir=str(self.bin_dir), timeout=5, runner=self.runner),
            state=State(str(self.state_file)),
            host="controller-1",
            clock=lambda: NOW,
        )
        fields.update(overrides)
        return Agent(**fields)

    def send(self, issued: bool = True, **fields) -> dict:
        """A command on the queue; Medic's record of issuing it in the ledger unless ``issued`` is False."""
        body = command_body(CLUSTER, **fields)
        if issued:
            issue(self.dynamodb, self.table, body)
        send(self.sqs, self.queue_url, body)
        return body

    def result(self, body: dict) -> dict | None:
        return result_of(self.dynamodb, self.table, CLUSTER, body["command_id"])

    def depth(self) -> int:
        return queue_depth(self.sqs, self.queue_url)


@pytest.fixture
def world(aws, tmp_path):
    return World(aws, tmp_path)


class TestRuns:
    def test_requeue_by_id_runs_scontrol_with_an_argv_and_reports(self, world):
        # Given a requeue command for job 4211 on the queue
        body = world.send(job_id="4211")
        # When the agent polls once
        world.agent().poll()
        # Then it ran exactly `scontrol requeue 4211`, as an argv, no shell, with a timeout
        assert world.runner.argvs == [["scontrol", "requeue", "4211"]]
        call = world.runner.calls[-1]
        assert call["argv"][0] == str(world.bin_dir / "scontrol")
        assert call["shell"] is False and call["timeout"] == 5 and call["stdin"] == subprocess.DEVNULL
        # And the ledger holds the claim and the result, and the message is gone
        assert ledger_item(world.dynamodb, world.table, agent_pk(CLUSTER, body['command_id']), "claim") is not None
        result = world.result(body)
        assert result["status"] == "executed"
        assert result["message"] == "scontrol requeue 4211: exit 0"
        assert result["cluster"] == CLUSTER and result["kind"] == "requeue_job" and result["target"] == "4211"
        assert result["incident"] == "job:test"
        assert result["finished_at"] == NOW.isoformat()
        assert int(result["expires_at"]) == int(NOW.timestamp()) + 7 * 86400
        assert world.depth() == 0

    def test_slurm_failure_is_reported_with_slurms_message(self, world):
        world.runner.answers["scontrol requeue"] = (1, "", "Invalid job id specified for job 4211")
        body = world.send(job_id="4211")
        world.agent().poll()
        result = world.result(body)
        assert result["status"] == "failed"
        assert result["message"] == "scontrol requeue 4211: exit 1: Invalid job id specified for job 4211"
        assert world.depth() == 0

    def test_timeout_is_a_failure(self, world):
        world.runner.raises = subprocess.TimeoutExpired(["scontrol"], 5)
        body = world.send(job_id="4211")
        world.agent().poll()
        assert world.result(body)["status"] == "failed"
        assert "timed out after 5s" in world.result(body)["message"]

    def test_long_output_is_truncated_to_1000_chars(self, world):
        world.runner.answers["scontrol requeue"] = (1, "", "x" * 5000)
        body = world.send(job_id="4211")
        world.agent().poll()
        assert len(world.result(body)["message"]) == 1000

    def test_requeue_by_name_requeues_the_one_running_job(self, world):
        world.runner.answers["squeue --noheader"] = (0, "4211|llama3-70b\n", "")
        body = world.send(job_name="llama3-70b")
        world.agent().poll()
        assert world.runner.argvs == [
            ["squeue", "--noheader", "--states=RUNNING", "--format=%i|%j", "--name=llama3-70b"],
            ["scontrol", "requeue", "4211"]]
        result = world.result(body)
        assert result["status"] == "executed" and result["target"] == "name:llama3-70b"
        assert result["job_ids"] == [{"S": "4211"}]
        assert result["jobs"] == [{"M": {"id": {"S": "4211"}, "name": {"S": "llama3-70b"}}}]

    def test_requeue_by_name_with_no_job_fails_saying_what_became_of_it(self, world):
        # Given no job of that name pending or running, none in slurmctld's memory, and no accounting
        world.runner.answers["squeue --noheader"] = (0, "", "")
        world.runner.answers["sacct --noheader"] = (1, "", "Slurm accounting storage is disabled")
        body = world.send(job_name="llama3-70b")
        world.agent().poll()
        # Then it looked in squeue, in slurmctld's memory of finished jobs, then in sacct, and requeued nothing
        assert world.runner.argvs == [
            ["squeue", "--noheader", "--states=RUNNING", "--format=%i|%j", "--name=llama3-70b"],
            ["squeue", "--noheader", "--states=all", "--format=%i|%T", "--name=llama3-70b"],
            ["sacct", "--noheader", "--parsable2", "--allocations", "--format=JobIDRaw,State", "--name=llama3-70b",
             "--starttime=now-2days"]]
        result = world.result(body)
        assert result["status"] == "failed" and "job_states" not in result
        assert "no job named 'llama3-70b'" in result["message"]
        assert "Slurm accounting storage is disabled" in result["message"]



class TestRefuses:
    @pytest.mark.parametrize("fields", [
        {"job_id": "4211; rm -rf /"}, {"job_id": "$(reboot)"}, {"job_name": "x; reboot"},
        {"kind": "run_shell", "job_id": "4211"},
        {"cluster": "another-cluster", "job_id": "4211"},
    ])
    def test_hostile_command_is_refused_and_nothing_runs(self, world, fields):
        # Given a command with a hostile value (even one Medic's ledger names: parsing comes first)
        body = command_body(**{"cluster": CLUSTER, **fields})
        issue(world.dynamodb, world.table, body)
        send(world.sqs, world.queue_url, body)
        # When the agent polls
        world.agent().poll()
        # Then nothing ran: not the fake runner, not the canary binaries
        assert world.runner.argvs == []
        assert not world.canary.exists()
        # And no result is written (it could only spend a page), no claim either, and the message is gone
        assert world.result(body) is None
        assert ledger_item(world.dynamodb, world.table, agent_pk(CLUSTER, body["command_id"]), "claim") is None
        assert world.depth() == 0

    @pytest.mark.parametrize("raw", ["not json", "[]", json.dumps({"kind": "requeue_job", "job_id": "1"})])
    def test_message_without_a_command_id_is_dropped(self, world, raw):
        send(world.sqs, world.queue_url, raw)
        world.agent().poll()
        assert world.runner.argvs == []
        assert world.dynamodb.scan(TableName=world.table)["Count"] == 1  # only the heartbeat
        assert world.depth() == 0

    @pytest.mark.parametrize("repair", ["Replace", "Reboot"])
    def test_fail_node_which_medic_never_sends_is_refused_and_nothing_runs(self, world, repair):
        # Given anyone able to send to the queue asking for the Slurm-native repair of a node (no Medic
        # function issues it: no guardrail, protected group or mode check ever saw it)
        body = world.send(issued=False, kind="fail_node", node="ip-10-1-2-3", repair=repair)
        # When the agent polls
        world.agent().poll()
        # Then `scontrol update ... State=FAIL` never runs, nothing is written, the message is gone
        assert world.runner.argvs == [] and not world.canary.exists()
        assert world.result(body) is None and world.depth() == 0

    def test_forged_requeue_medic_never_issued_is_not_run_and_writes_no_result(self, world):
        # Given a well-formed requeue on the queue that Medic's ledger has no record of issuing
        body = world.send(issued=False, job_id="4211")
        # When the agent polls
        world.agent().poll()
        # Then nothing runs, no claim and no result are written (a forgery must not spend a page), and
        # the message is gone
        assert world.runner.argvs == []
        assert world.result(body) is None
        assert ledger_item(world.dynamodb, world.table, agent_pk(CLUSTER, body["command_id"]), "claim") is None
        assert world.depth() == 0
        # And a redelivery of it is not run either
        send(world.sqs, world.queue_url, body)
        world.agent().poll()
        assert world.runner.argvs == []

    def test_a_command_medic_withdrew_is_not_run(self, world):
        # Given a command Medic issued and then withdrew (no result by its deadline: the sweep closed it as failed)
        body = world.send(issued=False, job_id="4211")
        issue(world.dynamodb, world.table, body, withdrawn_at="2026-12-02T18:10:00+00:00")
        # When the agent finally polls
        world.agent().poll()
        # Then it does not run it late, and writes nothing
        assert world.runner.argvs == [] and world.result(body) is None and world.depth() == 0

    @pytest.mark.parametrize("change", [{"cluster": "another-cluster"}, {"kind": "fail_node"},
                                        {"target": "4212"}, {"incident": "job:slurm:pretrain-slurm:4212"}],
                             ids=lambda change: next(iter(change)))
    def test_forged_requeue_reusing_an_issued_id_for_something_else_is_not_run(self, world, change):
        # Given a command id Medic issued, and a message that reuses it for another cluster, kind, job or incident
        body = world.send(issued=False, job_id="4211")
        issue(world.dynamodb, world.table, body, **change)
        # When the agent polls
        world.agent().poll()
        # Then nothing runs and nothing is written
        assert world.runner.argvs == [] and world.result(body) is None and world.depth() == 0

    def test_a_command_issued_to_another_cluster_is_not_run(self, world):
        # Given Medic issued this command id to another cluster (its `command#other-slurm#<id>/issued`), and the same
        # message on this agent's queue
        body = world.send(issued=False, job_id="4211")
        issue(world.dynamodb, world.table, {**body, "cluster": "other-slurm"})
        # When the agent polls
        world.agent().poll()
        # Then it finds no such command for its own cluster: nothing runs, nothing is written
        assert world.runner.argvs == [] and world.result(body) is None and world.depth() == 0


class TestUpgrade:
    """Commands Medic issued before it keyed them by cluster (issue 28 item 12): `command#<id>/issued`."""

    def test_a_command_issued_under_the_old_key_runs_where_the_stack_lets_the_agent_check_it(self, world):
        # Given a command a Medic from before the change issued (its old key), the agent upgraded first
        body = world.send(issued=False, job_id="4211")
        issue(world.dynamodb, world.table, body, legacy=True)
        # When the agent polls (the old stack's grant lets it check `command#*`)
        world.agent().poll()
        # Then the command runs once and its result is written under the agent's own key, as always
        assert world.runner.argvs == [["scontrol", "requeue", "4211"]]
        assert world.result(body)["status"] == "executed"

    def test_where_the_stack_refuses_the_old_key_the_command_is_not_run(self, world):
        # Given the same command after the stack's upgrade: its grant refuses a check outside `command#<cluster>#*`
        body = world.send(issued=False, job_id="4211")
        issue(world.dynamodb, world.table, body, legacy=True)
        ledger = Ledger(world.table, lambda: world.dynamodb)
        refusing = DeniesOldKeys(world.dynamodb)
        ledger._client = refusing
        # When the agent polls
        world.agent(ledger=ledger).poll()
        # Then it is refused as not issued (Medic's sweep closes it as failed, with a page): nothing runs
        assert refusing.denied == 1
        assert world.runner.argvs == [] and world.result(body) is None and world.depth() == 0


class DeniesOldKeys:
    """The DynamoDB client as IAM lets the agent use it after the upgrade: a transaction whose ConditionCheck names a
    key outside `command#<cluster>#*` is refused with AccessDeniedException (IAM checks a transaction per action)."""

    def __init__(self, client) -> None:
        self.client, self.denied = client, 0

    def transact_write_items(self, **kwargs):
        for action in kwargs["TransactItems"]:
            check = action.get("ConditionCheck")
            if check and not check["Key"]["pk"]["S"].startswith(f"command#{CLUSTER}#"):
                self.denied += 1
                raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}},
                                  "TransactWriteItems")
        return self.client.transact_write_items(**kwargs)

    def __getattr__(self, name):
        return getattr(self.client, name)


class TestOnce:
    def test_delivered_twice_in_one_batch_runs_once(self, world):
        body = world.send(job_id="4211")
        send(world.sqs, world.queue_url, body)
        world.agent().poll()
        assert world.runner.argvs == [["scontrol", "requeue", "4211"]]
        assert world.depth() == 0

    def test_delivered_again_after_a_restart_runs_once(self, world):
        body = world.send(job_id="4211")
        world.agent().poll()
        send(world.sqs, world.queue_url, body)
        world.agent().poll()  # a new agent, reading the same state file
        assert world.runner.argvs == [["scontrol", "requeue", "4211"]]
        assert world.result(body)["status"] == "executed"
        assert world.depth() == 0

    def test_state_file_alone_prevents_a_rerun(self, world):
        # Given a command that ran, and a ledger that has since lost its claim (TTL, a restored table)
        body = world.send(job_id="4211")
        world.agent().poll()
        world.dynamodb.delete_item(TableName=world.table, Key={"pk": {"S": agent_pk(CLUSTER, body['command_id'])},
                                                               "sk": {"S": "claim"}})
        # When it is delivered again to a restarted agent
        send(world.sqs, world.queue_url, body)
        world.agent().poll()
        # Then the local state file stops it
        assert world.runner.argvs == [["scontrol", "requeue", "4211"]]

    def test_ledger_claim_alone_prevents_a_rerun(self, world):
        # Given another agent (another controller) already claimed the command
        body = world.send(job_id="4211")
        world.agent().poll()
        world.state_file.unlink()
        send(world.sqs, world.queue_url, body)
        world.agent().poll()
        assert world.runner.argvs == [["scontrol", "requeue", "4211"]]
        assert world.result(body)["status"] == "executed"

    def test_killed_mid_command_is_not_rerun(self, world):
        # Given an agent that took the command on and died before recording the result
        body = world.send(job_id="4211")
        state = State(str(world.state_file))
        state.put(body["command_id"], NOW, status="running", message_id="m-1")
        # When the message comes back to a restarted agent
        world.agent().poll()
        # Then it is not run again, and the ledger says what is known
        assert world.runner.argvs == []
        assert world.result(body)["status"] == "failed"
        assert world.result(body)["message"] == INTERRUPTED
        assert world.depth() == 0

    def test_ledger_unreachable_at_claim_runs_nothing_and_keeps_the_message(self, world):
        body = world.send(job_id="4211")
        ledger = Ledger(world.table, lambda: world.dynamodb)
        ledger.claim = lambda *args: (_ for _ in ()).throw(EndpointConnectionError(endpoint_url="http://ddb"))
        world.agent(ledger=ledger).poll()
        assert world.runner.argvs == []
        assert world.depth() == 1  # invisible for now, delivered again later
        assert State(str(world.state_file)).get(body["command_id"]) is None

    def test_result_not_written_is_written_on_redelivery_without_rerunning(self, world):
        body = world.send(job_id="4211")
        ledger = Ledger(world.table, lambda: world.dynamodb)
        ledger.put_result = lambda *args: (_ for _ in ()).throw(EndpointConnectionError(endpoint_url="http://ddb"))
        world.agent(ledger=ledger).poll()
        assert world.result(body) is None
        assert world.depth() == 1  # kept, so the result gets written when it comes back
        # When it comes back (here: resent) to an agent whose ledger works again
        send(world.sqs, world.queue_url, body)
        world.agent(queue=Queue(world.queue_url, lambda: world.sqs, wait_seconds=0, visibility_timeout=0)).poll()
        assert world.runner.argvs == [["scontrol", "requeue", "4211"]]
        assert world.result(body)["status"] == "executed"


class TestLoop:
    def test_heartbeat(self, world):
        world.agent().poll()
        beat = ledger_item(world.dynamodb, world.table, f"agent#{CLUSTER}", "heartbeat")
        assert beat["at"] == NOW.isoformat()
        assert datetime.fromisoformat(beat["at"]).tzinfo is not None  # the Lambda compares it with an aware now
        assert beat["host"] == "controller-1" and beat["version"] == __version__
        assert int(beat["expires_at"]) == int(NOW.timestamp()) + 86400

    def test_heartbeat_is_not_rewritten_before_it_is_due(self, world):
        agent = world.agent()
        agent.poll()
        world.dynamodb.delete_item(TableName=world.table, Key={"pk": {"S": f"agent#{CLUSTER}"},
                                                               "sk": {"S": "heartbeat"}})
        agent.poll()
        assert ledger_item(world.dynamodb, world.table, f"agent#{CLUSTER}", "heartbeat") is None
        agent.heartbeat_seconds = 0
        agent.poll()
        assert ledger_item(world.dynamodb, world.table, f"agent#{CLUSTER}", "heartbeat") is not None

    def test_stop_finishes_the_current_command_and_releases_the_rest(self, world):
        first, second = world.send(job_id="1"), world.send(job_id="2")
        agent = world.agent()
        original = world.runner.__call__

        def runner_that_gets_sigterm(argv, **kwargs):
            if argv[1:] != ["ping"]:
                agent.request_stop()  # SIGTERM arrives while scontrol requeue runs
            return original(argv, **kwargs)

        agent.slurm = Slurm(bin_dir=str(world.bin_dir), timeout=5, runner=runner_that_gets_sigterm)
        assert agent.run() == 0
        assert len(world.runner.argvs) == 1
        done = first if world.result(first) else second
        assert world.result(done)["status"] == "executed"
        assert world.depth() == 1  # the other one is back on the queue, visible, for the next start
        assert world.sqs.receive_message(QueueUrl=world.queue_url, WaitTimeSeconds=0).get("Messages")

    def test_unexpected_errors_do_not_crash_the_loop(self, world):
        queue = Queue(world.queue_url, lambda: world.sqs, wait_seconds=0)
        queue.receive = lambda: (_ for _ in ()).throw(RuntimeError("boom"))
        assert world.agent(queue=queue).run(once=True) == 0

    def test_state_file_corrupt_is_moved_aside(self, world):
        world.state_file.parent.mkdir(parents=True)
        world.state_file.write_text("{not json")
        state = State(str(world.state_file))
        assert state.commands == {}
        assert list(world.state_file.parent.glob("state.json.corrupt-*"))


class TestCommandLine:
    def test_missing_options_are_an_error(self, monkeypatch, capsys):
        for name in ("MEDIC_CLUSTER", "MEDIC_QUEUE_URL", "MEDIC_TABLE", "MEDIC_REGION", "AWS_REGION",
                     "AWS_DEFAULT_REGION"):
            monkeypatch.delenv(name, raising=False)
        with pytest.raises(SystemExit) as exit_:
            main(["--cluster", "c"])
        assert exit_.value.code == 2
        assert "--queue-url" in capsys.readouterr().err

    def test_missing_slurm_exits_2(self, tmp_path, capsys):
        code = main(["--cluster", "c", "--queue-url", "http://q", "--table", "t", "--region", "us-east-1",
                     "--slurm-bin", str(tmp_path)])
        assert code == 2
        line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert line["message"] == "Slurm client commands not found" and line["level"] == "error"

    def test_node_pattern_is_gone_with_fail_node(self, capsys):
        with pytest.raises(SystemExit) as exit_:
            main(["--cluster", "c", "--queue-url", "http://q", "--table", "t", "--region", "us-east-1",
                  "--node-pattern", "localhost"])
        assert exit_.value.code == 2
