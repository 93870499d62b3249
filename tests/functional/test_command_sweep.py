"""Specification: a requeue sent to an agent that never reports (dead within its heartbeat window, or its clock
ahead) does not stay `deferred` forever: the reconciler's sweep closes it as `failed` after the deadline, gives
the restart back when the agent never took it on, withdraws it so it cannot run late, and pages once."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from medic.flows.agent.command_sweep import sweep_commands
from medic.flows.agent.commands import COMMAND_DEADLINE
from medic.flows.agent.results import record_agent_result
from medic.handlers import agent_results
from tests.functional.conftest import CLUSTER
from tests.functional.slurm_world import SlurmWorld, agent_parse, streamed_slurm, watched_medic  # noqa: F401 - the `slurm` fixture


@pytest.fixture
def medic(aws):
    """Requests by id are limited to watched jobs: llama3-70b is watched on the Slurm cluster."""
    yield from watched_medic(aws)

SCHEDULE = {"id": "0d9f4c2e-reconcile", "detail-type": "Scheduled Event", "source": "aws.events"}
LINEAGE = f"lineage#slurm:{CLUSTER}:4211"


def queue_requeue(slurm: SlurmWorld) -> dict:
    from medic.flows.agent.restart import handle_requeue_event

    record = handle_requeue_event(slurm.request_event(), slurm.medic.deps)
    assert record["outcome"] == "deferred"
    slurm.stream_event()  # Medic's own writes
    return record


def restarts(slurm: SlurmWorld) -> int:
    return int(slurm.item(LINEAGE, "restarts")["restarts"]["N"])


def later(slurm: SlurmWorld, by: timedelta) -> None:
    slurm.medic.clock[0] += by


def test_a_requeue_to_an_agent_that_died_in_its_heartbeat_window_fails_after_the_deadline_and_pages_once(slurm):
    # Given a live agent (it reported 30 s ago) that dies before it polls, and a requeue queued for it
    deferred = queue_requeue(slurm)
    assert restarts(slurm) == 1
    # When the reconciler sweeps before the deadline, then after it, then again
    later(slurm, COMMAND_DEADLINE - timedelta(minutes=1))
    assert sweep_commands(SCHEDULE, slurm.medic.deps) == []
    later(slurm, timedelta(minutes=2))
    [record] = sweep_commands(SCHEDULE, slurm.medic.deps)
    again = sweep_commands(SCHEDULE, slurm.medic.deps)
    # Then the requeue's incident gets one final record: failed, paged once, attempt kept
    assert (record["incident"], record["action"], record["outcome"], record["paged"]) == (
        deferred["incident"], "requeue_job", "failed", True)
    assert (record["job"], record["attempt"], record["cluster"]) == ("4211", 1, CLUSTER)
    assert "never took it on" in record["reason"] and "gave the restart back" in record["reason"]
    assert again == []
    [page] = slurm.medic.pages()
    assert "requeue FAILED" in page["Subject"] and "journalctl -u medic-agent" in page["Message"]
    # And the restart is back in the job's budget
    assert restarts(slurm) == 0


def test_a_command_swept_away_never_runs_late_and_its_late_result_changes_nothing(slurm):
    # Given a requeue the sweep closed as failed (the agent was away)
    queue_requeue(slurm)
    [body] = slurm.queued()
    later(slurm, COMMAND_DEADLINE + timedelta(minutes=1))
    [record] = sweep_commands(SCHEDULE, slurm.medic.deps)
    assert record["outcome"] == "failed"
    # When the agent comes back and polls its queue
    slurm.run_agent()
    # Then it does not run the withdrawn command, and writes no result
    assert slurm.slurm.argvs == []
    assert slurm.item(f"agent#{CLUSTER}#command#{body['command_id']}", "result") is None
    # And a result written anyway (a replayed or late write) is not recorded a second time
    slurm.put_result(body["command_id"], "executed", "scontrol requeue 4211: exit 0")
    _, records = deliver(slurm)
    assert records == []


def test_a_command_the_agent_took_on_but_never_answered_fails_without_a_refund(slurm):
    # Given a requeue the agent claimed (it may have run) and then died before writing its result
    queue_requeue(slurm)
    [body] = slurm.queued()
    command = agent_parse(json.dumps(body), cluster=CLUSTER)
    assert slurm.agent_ledger.claim(command, slurm.medic.clock[0], "ip-10-1-88-145") == "claimed"
    # When the deadline passes
    later(slurm, COMMAND_DEADLINE + timedelta(minutes=1))
    [record] = sweep_commands(SCHEDULE, slurm.medic.deps)
    # Then it is failed and paged, and the restart stays spent (the job may have been requeued)
    assert (record["outcome"], record["paged"]) == ("failed", True)
    assert "took it on but wrote no result" in record["reason"]
    assert restarts(slurm) == 1


def test_a_command_answered_in_time_is_left_alone_by_the_sweep(slurm):
    # Given a requeue the agent ran and reported
    queue_requeue(slurm)
    slurm.run_agent()
    _, [final] = deliver(slurm)
    assert final["outcome"] == "executed"
    # When the sweep runs after the deadline
    later(slurm, COMMAND_DEADLINE + timedelta(minutes=1))
    # Then it finds nothing open
    assert sweep_commands(SCHEDULE, slurm.medic.deps) == []
    assert restarts(slurm) == 1


def deliver(slurm: SlurmWorld) -> tuple[dict, list[dict]]:
    before = len(slurm.medic.log.lines)

    class Context:
        function_name, memory_limit_in_mb, aws_request_id = "medic-agent-results", 256, "req-1"
        invoked_function_arn = "arn:aws:lambda:us-west-2:123456789012:function:medic-agent-results"

    response = agent_results.handler(slurm.stream_event(), Context())
    return response, slurm.medic.log.lines[before:]


def test_record_agent_result_closes_the_open_command(slurm):
    # (the results path removes the open item: the sweep's work stays bounded by the commands in flight)
    queue_requeue(slurm)
    [body] = slurm.queued()
    slurm.run_agent()
    for raw in slurm.stream_event()["Records"]:
        from aws_lambda_powertools.utilities.parser.models import DynamoDBStreamRecordModel

        record_agent_result(DynamoDBStreamRecordModel.model_validate(raw), slurm.medic.deps)
    assert slurm.item("recovery#command", body["command_id"]) is None
