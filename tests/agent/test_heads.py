"""Several head nodes: one agent on each; only the one on the host of the slurmctld in charge acts.

The parser is tested on the shapes Slurm's `scontrol ping` prints (src/scontrol/scontrol.c, _print_ping;
`Slurmctld(primary) at vm is UP` is what slurm-wlm 22.05.8 prints against tests/agent/local_slurm.py), the
loop with the fake runner answering `scontrol ping` as a two-controller cluster would.
"""

from __future__ import annotations

import pytest
from medic_agent.role import PRIMARY, STANDBY, Unparseable, decide, parse_ping
from medic_agent.state import State

from tests.agent.fakes import ledger_item, ping_output
from tests.agent.test_agent_loop import CLUSTER, World, aws  # noqa: F401 - the fixture

BANNER = "*****************************************\n** RESTORE SLURMCTLD DAEMON TO SERVICE **\n" \
         "*****************************************\n"
HEAD_1, HEAD_2 = "controller-1", "controller-2"


class TestPingParser:
    def test_one_controller_as_the_local_slurm_prints_it(self):
        [controller] = parse_ping("Slurmctld(primary) at vm is UP\n", 0)
        assert (controller.mode, controller.host, controller.up) == ("primary", "vm", True)

    def test_two_controllers_primary_down_as_root_prints_it(self):
        output = f"Slurmctld(primary) at ip-10-1-0-10 is DOWN\nSlurmctld(backup) at ip-10-1-0-11 is UP\n{BANNER}"
        controllers = parse_ping(output, 0)
        assert [(c.mode, c.host, c.up) for c in controllers] == [("primary", "ip-10-1-0-10", False),
                                                                ("backup", "ip-10-1-0-11", True)]

    def test_three_controllers_are_numbered_backups(self):
        output = "Slurmctld(primary) at a is UP\nSlurmctld(backup1) at b is UP\nSlurmctld(backup2) at c is UP\n"
        assert [c.mode for c in parse_ping(output, 0)] == ["primary", "backup1", "backup2"]

    def test_none_up_exits_1(self):
        output = f"Slurmctld(primary) at a is DOWN\nSlurmctld(backup) at b is DOWN\n{BANNER}"
        assert not any(c.up for c in parse_ping(output, 1))

    @pytest.mark.parametrize(("output", "returncode"), [
        ("", 0),
        ("Slurmctld(primary) at a is UP\n", 1),  # exit status contradicts the lines
        ("Slurmctld(primary) at a is DOWN\n", 0),
        ("Slurmctld(primary) at a is UP\n", 2),
        ("Slurmctld(primary) at a is UP\n", None),  # timed out
        ("Slurmctld(primary) at a is UP\nSlurmctld(backup1) at b is UP\n", 0),  # backup1 only with 3+
        ("Slurmctld(backup) at b is UP\nSlurmctld(primary) at a is UP\n", 0),  # out of order
        ("Slurmctld(primary) at a is UP\nSlurmctld(backup) at a is UP\n", 0),  # same host twice
        ("Slurmctld(primary) at a is up\n", 0),
        ("Slurmctld(primary) at a is UP (responding)\n", 0),
        ("Slurmctld(primary) at a;reboot is UP\n", 0),
        ("scontrol: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n", 1),
        ("Slurmctld(primary) at a is UP\nscontrol: error: something\n", 0),
        (f"Slurmctld(primary) at a is UP\n{BANNER}", 0),  # banner with none DOWN
    ])
    def test_anything_else_is_unparseable(self, output, returncode):
        with pytest.raises(Unparseable):
            parse_ping(output, returncode)


class TestDecide:
    def test_the_host_of_the_first_controller_up_is_primary(self):
        _, out, _ = ping_output((HEAD_1, True), (HEAD_2, True))
        assert decide(out, 0, HEAD_1).role == PRIMARY
        standby = decide(out, 0, HEAD_2)
        assert standby.role == STANDBY and standby.in_charge == HEAD_1
        assert "in charge is slurmctld(primary) on controller-1" in standby.reason

    def test_after_a_failover_the_backup_is_in_charge(self):
        code, out, _ = ping_output((HEAD_1, False), (HEAD_2, True))
        assert decide(out, code, HEAD_1).role == STANDBY
        assert decide(out, code, HEAD_2).role == PRIMARY

    def test_a_fully_qualified_hostname_matches_its_short_slurmctld_host(self):
        _, out, _ = ping_output(("ip-10-1-0-10", True))
        assert decide(out, 0, "ip-10-1-0-10.us-west-2.compute.internal").role == PRIMARY
        assert decide(out, 0, "IP-10-1-0-10").role == PRIMARY
        assert decide(out, 0, "ip-10-1-0-1").role == STANDBY

    def test_a_host_that_is_no_controller_stands_by(self):
        _, out, _ = ping_output((HEAD_1, True))
        role = decide(out, 0, "login-1")
        assert role.role == STANDBY and "not a SlurmctldHost" in role.reason

    def test_no_controller_up_and_unparseable_answers_stand_by(self):
        code, out, _ = ping_output((HEAD_1, False), (HEAD_2, False))
        assert decide(out, code, HEAD_1).role == STANDBY
        unparseable = decide("garbage", 0, HEAD_1)
        assert unparseable.role == STANDBY and "cannot tell which controller is in charge" in unparseable.reason


def two_heads(world, primary_up: bool = True, backup_up: bool = True) -> None:
    world.runner.answers["scontrol ping"] = ping_output((HEAD_1, primary_up), (HEAD_2, backup_up))


def heartbeat(world, sk: str) -> dict | None:
    return ledger_item(world.dynamodb, world.table, f"agent#{CLUSTER}", sk)


class TestStandbyAgent:
    @pytest.fixture
    def world(self, aws, tmp_path):  # noqa: F811
        return World(aws, tmp_path)

    def test_the_standby_neither_receives_nor_runs_and_heartbeats_as_standby(self, world):
        # Given two head nodes, controller-1's slurmctld in charge, and a requeue Medic issued on the queue
        two_heads(world)
        body = world.send(job_id="4211")
        # When the agent on controller-2 polls
        standby = world.agent(host=HEAD_2)
        assert standby.poll() == 0
        # Then it asked Slurm only who is in charge: nothing ran, nothing claimed, the message untouched
        assert world.runner.all_argvs == [["scontrol", "ping"]]
        assert world.result(body) is None
        assert ledger_item(world.dynamodb, world.table, f"agent#{CLUSTER}#command#{body['command_id']}",
                           "claim") is None
        visible = world.sqs.receive_message(QueueUrl=world.queue_url, WaitTimeSeconds=0).get("Messages", [])
        assert len(visible) == 1  # never received: still visible to the primary
        # And it heartbeated under its own standby key, never the primary's
        assert heartbeat(world, "heartbeat") is None
        beat = heartbeat(world, f"standby#{HEAD_2}")
        assert beat["role"] == "standby" and beat["host"] == HEAD_2 and beat["in_charge"] == HEAD_1
        assert "controller in charge is slurmctld(primary) on controller-1" in beat["reason"]

    def test_the_primary_acts_and_heartbeats_as_primary(self, world):
        two_heads(world)
        body = world.send(job_id="4211")
        assert world.agent(host=HEAD_1).poll() == 1
        assert world.runner.argvs == [["scontrol", "requeue", "4211"]]
        assert world.result(body)["status"] == "executed"
        beat = heartbeat(world, "heartbeat")
        assert beat["role"] == "primary" and beat["host"] == HEAD_1 and beat["in_charge"] == HEAD_1
        assert heartbeat(world, f"standby#{HEAD_1}") is None

    def test_unparseable_ping_stands_by_and_says_so(self, world, caplog):
        world.runner.answers["scontrol ping"] = (0, "Slurmctld(primary) at controller-1 is MAYBE\n", "")
        body = world.send(job_id="4211")
        assert world.agent().poll() == 0
        assert world.runner.argvs == [] and world.result(body) is None
        beat = heartbeat(world, "standby#controller-1")
        assert beat["role"] == "standby" and "cannot tell which controller is in charge" in beat["reason"]
        assert heartbeat(world, "heartbeat") is None
        assert any(r.getMessage() == "role: standby" and r.levelname == "WARNING" for r in caplog.records)

    def test_ping_that_cannot_run_stands_by(self, world):
        world.runner.raises, world.runner.ping_raises = OSError("no such file"), True
        body = world.send(job_id="4211")
        assert world.agent().poll() == 0
        assert world.result(body) is None and heartbeat(world, "heartbeat") is None
        assert "could not run" in heartbeat(world, "standby#controller-1")["reason"]

    def test_after_a_failover_the_new_primary_acts_with_no_operator_step(self, world, tmp_path):
        # Given both agents running, controller-1 in charge
        two_heads(world)
        first, second = world.agent(host=HEAD_1), world.agent(host=HEAD_2, state=State(str(tmp_path / "2.json")))
        first.heartbeat_seconds = second.heartbeat_seconds = 3600
        second.poll()
        # When controller-1's slurmctld goes DOWN and the backup takes over, and Medic issues a requeue
        two_heads(world, primary_up=False)
        body = world.send(job_id="4211")
        # Then the old primary's agent stands by (and says so at once), the new one runs it
        assert first.poll() == 0 and world.result(body) is None
        assert heartbeat(world, f"standby#{HEAD_1}")["in_charge"] == HEAD_2
        assert second.poll() == 1
        assert world.result(body)["status"] == "executed" and world.result(body)["host"] == HEAD_2
        # And the new primary heartbeated as primary at once, though its heartbeat interval had not passed
        beat = heartbeat(world, "heartbeat")
        assert beat["role"] == "primary" and beat["host"] == HEAD_2

    def test_a_role_lost_during_the_long_poll_releases_the_messages(self, world):
        # Given the primary's agent, which receives two commands at the end of a long poll, during which another
        # controller took over
        two_heads(world)
        bodies = [world.send(job_id="1"), world.send(job_id="2")]
        agent = world.agent(host=HEAD_1)
        receive = agent.queue.receive

        def receive_then_failover():
            messages = receive()
            two_heads(world, primary_up=False)
            return messages

        agent.queue.receive = receive_then_failover
        # When it polls
        assert agent.poll() == 0
        # Then it ran nothing and both messages are visible again at once, for the new primary
        assert world.runner.argvs == [] and [world.result(body) for body in bodies] == [None, None]
        visible = world.sqs.receive_message(QueueUrl=world.queue_url, MaxNumberOfMessages=10,
                                            WaitTimeSeconds=0).get("Messages", [])
        assert len(visible) == 2
        assert heartbeat(world, f"standby#{HEAD_1}")["in_charge"] == HEAD_2
