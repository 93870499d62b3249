"""Nothing doubled: many invocations racing on the same node, job failure, alarm transition, operator
request or agent result make exactly one mutating call (and at most one page).

The handlers run in threads against one moto backend. Two stand-ins keep the emulation honest:
- HyperPod's node API is a thread-safe in-memory cluster answering a real botocore client (so every
  request is still validated against the service model), and it counts every Batch* call;
- the ledger's DynamoDB client makes each request atomic, as DynamoDB does. moto evaluates a
  condition and writes in separate Python steps, so two threads could both pass one condition: a moto
  artefact, not a Medic bug. Only single requests are serialized; every interleaving *between* a
  handler's requests (read, decide, conditional write, call) stays possible, and the node tests force
  the worst one: every racer reads the ledger before any of them claims.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.parser.models import DynamoDBStreamRecordModel
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError, ReadTimeoutError
from botocore.validate import validate_parameters

from medic.adapters.agent_queue import AgentQueues
from medic.adapters.checkpoints import Checkpoints
from medic.adapters.hyperpod import HyperPod
from medic.adapters.mode import ModeSwitch
from medic.adapters.pager import Pager
from medic.adapters.training import TrainingJobs
from medic.config import parse_config
from medic.core.agent_command import CommandContext
from medic.core.mode import Mode
from medic.core.models import Action, Trigger
from medic.deps import Deps
from medic.flows.agent.restart import handle_requeue_event
from medic.flows.agent.results import record_agent_result
from medic.flows.jobs.restart import restart_training_job
from medic.flows.node.health_event import remediate_node
from medic.flows.node.sweep import reconcile
from medic.flows.stall.response import respond_to_alarm
from medic.ledger.agents import AgentStore
from medic.ledger.incidents import IncidentStore
from medic.ledger.table import Table
from medic.wiring import JOBS_ON_NODE
from tests.functional.conftest import CLUSTER, CONFIG, MODE_PARAMETER, REGION, TABLE, Account, Medic, medic_world
from tests.functional.test_training_job_handler import Training
from tests.helpers import hma_reason, load_event, node_event

RACERS = 16
NOW = datetime(2026, 11, 21, 3, 10, 30, tzinfo=UTC)
JOB = "llama3-70b"
RACE_CONFIG = {**CONFIG, "jobs": [{"name": JOB, "cluster": CLUSTER}]}
WORKERS = "gpu-workers"


# --- the stand-ins


class FakeHyperPod:
    """A thread-safe HyperPod cluster behind a real botocore SageMaker client (before-call answers it).

    A node acted on goes SystemUpdating (reboot) or Pending (replace); acting on it again is refused
    with InstanceIdInUse, as HyperPod does, but every call is counted, accepted or not."""

    def __init__(self, nodes: dict[str, str], size: int) -> None:
        self.groups = dict(nodes)  # node id -> instance group
        self.status = dict.fromkeys(nodes, "Running")
        self.size = size
        self.calls: Counter[str] = Counter()  # operation -> count
        self.acted: list[tuple[str, str]] = []  # (operation, node id) per node in a Batch* call
        self.lose_answers = 0  # the next N node actions reach HyperPod but their answer is lost (read timeout)
        self._lock = threading.Lock()
        self._params = threading.local()
        self.client = boto3.client("sagemaker", region_name=REGION)
        self.client.meta.events.register("before-parameter-build.sagemaker", self._remember)
        self.client.meta.events.register("before-call.sagemaker", self._answer)

    def _remember(self, params: dict, **_: Any) -> None:
        self._params.value = dict(params)

    def _answer(self, model: Any, **_: Any) -> tuple[AWSResponse, dict]:
        params, operation = self._params.value, model.name
        with self._lock:
            self.calls[operation] += 1
            response = getattr(self, f"_{operation}")(params)
        validate_parameters(response, model.output_shape)
        return AWSResponse(None, 200, {}, None), response

    def _DescribeClusterNode(self, params: dict) -> dict:  # noqa: N802 - the operation's name
        node = params["NodeId"]
        if node not in self.groups:
            raise ClientError({"Error": {"Code": "ResourceNotFound", "Message": "no such node"}}, "DescribeClusterNode")
        return {"NodeDetails": {"InstanceGroupName": self.groups[node], "InstanceId": node,
                                "InstanceStatus": {"Status": self.status[node]}}}

    def _DescribeCluster(self, params: dict) -> dict:  # noqa: N802
        return {"ClusterArn": f"arn:aws:sagemaker:{REGION}:123456789012:cluster/k3v9q2w8x1za",
                "ClusterName": params["ClusterName"], "ClusterStatus": "InService",
                "InstanceGroups": [{"InstanceGroupName": WORKERS, "CurrentCount": self.size}]}

    def _ListClusterNodes(self, params: dict) -> dict:  # noqa: N802
        if params["ClusterName"] != CLUSTER:
            return {"ClusterNodeSummaries": []}
        return {"ClusterNodeSummaries": [
            {"InstanceGroupName": group, "InstanceId": node, "InstanceType": "ml.p5.48xlarge",
             "LaunchTime": datetime(2026, 11, 1, tzinfo=UTC), "InstanceStatus": {"Status": self.status[node]}}
            for node, group in sorted(self.groups.items())]}

    def _act(self, operation: str, params: dict, becomes: str) -> dict:
        if self.lose_answers:  # lost before HyperPod acted: the node stays as it was
            self.lose_answers -= 1
            self.acted.append((operation, "answer lost"))
            raise ReadTimeoutError(endpoint_url=f"https://api.sagemaker.{REGION}.amazonaws.com/")
        successful, failed = [], []
        for node in params["NodeIds"]:
            self.acted.append((operation, node))
            if self.status.get(node) in ("Running", "Failure"):
                self.status[node] = becomes
                successful.append(node)
            else:
                failed.append({"NodeId": node, "ErrorCode": "InstanceIdInUse", "Message": "repair in progress"})
        return {"Successful": successful, "Failed": failed}

    def _BatchRebootClusterNodes(self, params: dict) -> dict:  # noqa: N802
        return self._act("BatchRebootClusterNodes", params, "SystemUpdating")

    def _BatchReplaceClusterNodes(self, params: dict) -> dict:  # noqa: N802
        return self._act("BatchReplaceClusterNodes", params, "Pending")

    def node_actions(self) -> int:
        return sum(count for operation, count in self.calls.items() if operation.startswith("Batch"))


class AtomicDynamoDB:
    """The ledger's client with each request atomic, as DynamoDB makes it. Optionally holds every racer
    after its first read until all have read (the worst interleaving for optimistic claims)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._first_read: threading.Barrier | None = None
        self._seen = threading.local()
        self.after_read: Callable[[], None] | None = None
        self.requests: list[str] = []  # in the order DynamoDB served them

    def hold_first_reads(self, racers: int) -> None:
        self._first_read = threading.Barrier(racers, timeout=60)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if not callable(method) or name in ("get_paginator", "can_paginate"):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.requests.append(name)
                result = method(*args, **kwargs)
            if name == "batch_get_item":
                if self._first_read is not None and not getattr(self._seen, "value", False):
                    self._seen.value = True
                    self._first_read.wait()
                if self.after_read is not None:
                    self.after_read()
            return result

        return call


class Calls:
    """Counts what a (moto) client is asked to do, by operation; thread-safe."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def watch(self, client: Any) -> Any:
        client.meta.events.register("before-parameter-build", self._count, unique_id=f"calls-{id(self)}")
        return client

    def _count(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.counts[f"{model.service_model.service_name}:{model.name}"] += 1


@dataclass
class RaceWorld:
    medic: Medic
    deps: Deps
    hyperpod: FakeHyperPod
    dynamodb: AtomicDynamoDB
    calls: Calls
    queue_url: str
    errors: list[BaseException] = field(default_factory=list)

    def race(self, invocation: Callable[[int], Any], racers: int = RACERS) -> list[Any]:
        """Run the invocations in threads that all start at once; an exception in any fails the test."""
        start = threading.Barrier(racers, timeout=60)

        def one(index: int) -> Any:
            start.wait()
            return invocation(index)

        with ThreadPoolExecutor(max_workers=racers) as pool:
            futures = [pool.submit(one, index) for index in range(racers)]
            return [future.result(timeout=300) for future in futures]

    def pages(self) -> list[dict]:
        return self.medic.pages()

    def heartbeat(self) -> None:
        self.medic.deps.table.client.put_item(TableName=TABLE, Item={  # Medic's note of it
            "pk": {"S": f"agentseen#{CLUSTER}"}, "sk": {"S": "heartbeat"},
            "seen_epoch": {"N": str(int(NOW.timestamp()))}})


NODES = {f"i-0{index:016x}": WORKERS for index in range(1, 65)}


@pytest.fixture
def world(aws: Account) -> Iterator[RaceWorld]:
    for medic in medic_world(parse_config(RACE_CONFIG), aws):
        calls = Calls()
        hyperpod = FakeHyperPod(NODES, size=200)
        dynamodb = AtomicDynamoDB(boto3.client("dynamodb", region_name=REGION))
        sqs = calls.watch(boto3.client("sqs", region_name=REGION))
        queue_url = sqs.create_queue(QueueName=f"medic-agent-{CLUSTER}")["QueueUrl"]
        config = medic.deps.config
        deps = Deps(config=config, hyperpod=HyperPod(hyperpod.client, sleep=lambda _: None),
                    table=Table(TABLE, dynamodb),
                    pager=Pager(medic.deps.pager.topic_arn, calls.watch(boto3.client("sns", region_name=REGION))),
                    mode=ModeSwitch(MODE_PARAMETER, config.mode, boto3.client("ssm", region_name=REGION)),
                    jobs_on_node=JOBS_ON_NODE,
                    region=REGION, now=lambda: NOW,
                    training=TrainingJobs(calls.watch(boto3.client("sagemaker", region_name=REGION))),
                    checkpoints=Checkpoints(boto3.client("s3", region_name=REGION)),
                    agents=AgentQueues({CLUSTER: queue_url}, sqs))
        # The watched job trained until 20 minutes ago (a stall, not a job that never started), its probe's heartbeat
        # with the process's session, as the probe sends it
        boto3.client("cloudwatch", region_name=REGION).put_metric_data(Namespace="Medic/Training", MetricData=[
            {"MetricName": name, "Dimensions": [{"Name": "Job", "Value": JOB}], "Value": value,
             "Timestamp": NOW - timedelta(minutes=20)} for name, value in (("Heartbeat", 20), ("Session", 1_000_001))])
        yield RaceWorld(medic, deps, hyperpod, dynamodb, calls, queue_url)


def outcomes(records: list[dict]) -> Counter[str]:
    return Counter(record["outcome"] for record in records)


# --- one node


NODE = "i-0000000000000000a"


@pytest.mark.parametrize("same_event_id", [True, False], ids=["redelivered", "several-events"])
def test_racing_deliveries_for_one_failing_node_make_one_node_call(world, unhealthy_event, same_event_id):
    # Given one GPU fault on a worker, delivered to 16 invocations at once (the same event redelivered, or
    # SageMaker sending several events for the one state change), and, for several events, every racer
    # reading the ledger before any of them claims (a redelivered event id is claimed before any read)
    world.hyperpod.groups[NODE], world.hyperpod.status[NODE] = WORKERS, "Running"
    if not same_event_id:
        world.dynamodb.hold_first_reads(RACERS)

    def deliver(index: int) -> dict:
        event = node_event(unhealthy_event, instance_id=NODE, time=NOW.isoformat(),
                           event_id=None if same_event_id else str(uuid.uuid4()))
        return remediate_node(event, world.deps)

    records = world.race(deliver)
    # Then HyperPod is asked to replace the node exactly once
    assert world.hyperpod.acted == [("BatchReplaceClusterNodes", NODE)]
    # And one invocation records the action; every other one a duplicate, with no page
    assert outcomes(records) == {"executed": 1, "duplicate": RACERS - 1}
    assert {record["incident"] for record in records} == {f"node:{CLUSTER}:{NODE}"}
    assert not any(record["paged"] for record in records) and world.pages() == []
    # And each invocation wrote exactly one record
    assert len(world.medic.log.lines) == RACERS


def test_racing_deliveries_of_a_reboot_fault_reboot_once(world, unhealthy_event):
    world.dynamodb.hold_first_reads(RACERS)
    event = node_event(unhealthy_event, instance_id=NODE, time=NOW.isoformat(),
                       reason=hma_reason("NvidiaErrorReboot"))
    world.hyperpod.groups[NODE], world.hyperpod.status[NODE] = WORKERS, "Running"
    records = world.race(lambda index: remediate_node(
        {**copy.deepcopy(event), "id": str(uuid.uuid4())}, world.deps))  # several events for one state change
    assert world.hyperpod.acted == [("BatchRebootClusterNodes", NODE)]
    assert outcomes(records) == {"executed": 1, "duplicate": RACERS - 1}


def schedule_event(run: int) -> dict:
    return {"version": "0", "id": f"reconcile-run-{run}", "detail-type": "Scheduled Event", "source": "aws.events",
            "account": "123456789012", "time": NOW.isoformat(), "region": REGION,
            "resources": [f"arn:aws:events:{REGION}:123456789012:rule/medic-reconcile"], "detail": {}}


def test_overlapping_reconcile_runs_and_redeliveries_retry_a_lost_node_call_once(world, unhealthy_event):
    # Given a replace whose answer was lost (read timeout): the claim is `unknown`, the node still in Failure
    world.hyperpod.groups[NODE], world.hyperpod.status[NODE] = WORKERS, "Failure"
    world.hyperpod.lose_answers = 1
    event = node_event(unhealthy_event, instance_id=NODE, time=NOW.isoformat())
    first = remediate_node(copy.deepcopy(event), world.deps)
    assert (first["outcome"], world.hyperpod.node_actions()) == ("deferred", 1)
    # When, four minutes later (past the settle time, inside the cooldown), eight overlapping reconcile runs
    # and eight redeliveries of the event all see that node at once
    later = NOW + timedelta(minutes=4)
    world.deps.now = lambda: later
    world.dynamodb.hold_first_reads(RACERS)  # every racer reads the ledger before anyone writes

    def see_the_node(index: int) -> Any:
        if index % 2:  # SageMaker's further events for the same state change (each its own event id)
            return remediate_node({**copy.deepcopy(event), "id": str(uuid.uuid4())}, world.deps)
        return reconcile(schedule_event(index), world.deps)

    results = world.race(see_the_node)
    # Then the call is retried exactly once, by one of them, and the node is replaced
    assert world.hyperpod.acted == [("BatchReplaceClusterNodes", "answer lost"), ("BatchReplaceClusterNodes", NODE)]
    assert world.hyperpod.status[NODE] == "Pending"
    # And the redeliveries are duplicates; one reconcile run reports the retry
    assert outcomes([result for result in results if "outcome" in result]) == {"duplicate": RACERS // 2}
    assert sum(cluster["retried"] for run in results if "clusters" in run
               for cluster in run["clusters"] if cluster["cluster"] == CLUSTER) == 1


# --- many nodes of one cluster: the budget holds under concurrency


def test_racing_failures_of_different_nodes_never_exceed_the_cluster_budget(world, unhealthy_event):
    # Given 16 different nodes of one cluster failing at the same moment (budget: 4 actions an hour;
    # the breaker allows 50 of 200), each event in its own invocation, all reading before any claims
    nodes = sorted(NODES)[:RACERS]
    world.dynamodb.hold_first_reads(RACERS)
    records = world.race(lambda index: remediate_node(
        node_event(unhealthy_event, instance_id=nodes[index], time=NOW.isoformat(), event_id=str(uuid.uuid4())),
        world.deps))
    # Then exactly the budget is spent, no node twice, and every other node is held back by it (never taken
    # for a duplicate of another node)
    acted = [node for _, node in world.hyperpod.acted]
    assert len(acted) == len(set(acted)) == 4
    assert outcomes(records) == {"executed": 4, "suppressed": RACERS - 4}
    # And what was acted on is exactly what was recorded as executed, one record per invocation
    assert sorted(acted) == sorted(record["node_id"] for record in records if record["outcome"] == "executed")
    assert sorted(record["node_id"] for record in records) == nodes
    # And one summary page for the cluster
    assert sum(record["paged"] for record in records) == 1
    assert len(world.pages()) == 1


def interlopers(world: RaceWorld, nodes: list[str]) -> Callable[[], None]:
    """After each ledger read, another invocation claims one of these nodes of the cluster first."""
    others = iter(nodes)

    def another_node_claims_first() -> None:
        other = next(others, None)
        if other is None:
            return
        client = world.medic.deps.table.client
        key = {"pk": {"S": f"cluster#{CLUSTER}"}, "sk": {"S": "actions"}}
        item = client.get_item(TableName=TABLE, Key=key).get("Item") or {}
        actions = item.get("actions", {"L": []})["L"] + [{"M": {
            "node": {"S": other}, "action": {"S": "replace_node"}, "at": {"S": NOW.isoformat()}}}]
        version = int(item.get("version", {"N": "0"})["N"]) + 1
        client.put_item(TableName=TABLE, Item={**key, "actions": {"L": actions}, "version": {"N": str(version)}})

    return another_node_claims_first


@pytest.mark.parametrize("losses,outcome", [(3, "executed"), (5, "suppressed")])
def test_a_node_whose_claims_lose_to_other_nodes_still_gets_its_own_decision(world, unhealthy_event, losses, outcome):
    # Given that, each time this invocation has read the ledger, another invocation claims a different node of
    # the same cluster first (what racing invocations in a storm do to one of them): 3 times, or 5 times
    # (then the budget of 4 is spent)
    world.dynamodb.after_read = interlopers(world, sorted(NODES)[1:1 + losses])
    node = sorted(NODES)[0]
    record = remediate_node(node_event(unhealthy_event, instance_id=node, time=NOW.isoformat()), world.deps)
    # Then the node is decided on its own merits, never taken for a duplicate of another node (this used to
    # read "Another invocation is handling this node right now." after three lost claims: no action, no page)
    assert record["outcome"] == outcome, record
    assert world.hyperpod.acted == ([("BatchReplaceClusterNodes", node)] if outcome == "executed" else [])
    assert record["paged"] is (outcome == "suppressed")  # the storm's summary page


# --- one training job failure


def test_racing_deliveries_of_one_training_job_failure_start_one_restart(world):
    # Given a failed job with a checkpoint, and its failure event delivered to 16 invocations at once
    training = Training([NOW])
    training.job("ft-mistral-7b-0042")
    training.checkpoint_saved()
    event = load_event("training-job-failed")
    records = world.race(lambda index: restart_training_job(copy.deepcopy(event), world.deps))
    # Then exactly one CreateTrainingJob, one executed record, and duplicates for the rest
    assert world.calls.counts["sagemaker:CreateTrainingJob"] == 1
    assert training.names() == ["ft-mistral-7b-0042", "ft-mistral-7b-0042-r1"]
    assert outcomes(records) == {"executed": 1, "duplicate": RACERS - 1}
    assert world.calls.counts["sns:Publish"] == 0


# --- one alarm transition, one operator request


def alarm_event(event_id: str | None = None) -> dict:
    event = load_event("cloudwatch-alarm-state-change")
    if event_id:
        event["id"] = event_id
    return event


@pytest.mark.parametrize("same_event_id", [True, False], ids=["redelivered", "distinct-event-ids"])
def test_racing_deliveries_of_one_stall_alarm_queue_one_requeue(world, same_event_id):
    # Given a live agent and the stall alarm's ALARM transition delivered to 16 invocations at once
    world.heartbeat()
    records = world.race(lambda index: respond_to_alarm(
        alarm_event(None if same_event_id else str(uuid.uuid4())), world.deps))
    # Then exactly one command reaches the agent's queue
    assert world.calls.counts["sqs:SendMessage"] == 1
    assert int(world.medic.sqs.get_queue_attributes(QueueUrl=world.queue_url, AttributeNames=[
        "ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"]) == 1
    assert outcomes(records) == {"deferred": 1, "duplicate": RACERS - 1}
    assert world.calls.counts["sns:Publish"] == 0
    # And one recovery watch
    assert len(IncidentStore(world.deps.table).recoveries()) == 1


def test_racing_deliveries_of_one_operator_requeue_queue_one_command(world):
    world.heartbeat()
    event = load_event("medic-requeue-job")
    records = world.race(lambda index: handle_requeue_event(copy.deepcopy(event), world.deps))
    assert world.calls.counts["sqs:SendMessage"] == 1
    assert outcomes(records) == {"deferred": 1, "duplicate": RACERS - 1}


def test_racing_alarm_and_operator_requeues_of_one_job_stay_within_its_restart_budget(world):
    # Given the job's restart budget (3), and 16 different requests for the job at once: the stall alarm
    # and operators asking by name
    world.heartbeat()

    def request(index: int) -> dict:
        if index == 0:
            return respond_to_alarm(alarm_event(), world.deps)
        event = load_event("medic-requeue-job")
        event["id"] = str(uuid.uuid4())
        event["detail"] = {"cluster": CLUSTER, "job_name": JOB, "reason": f"operator {index}"}
        return handle_requeue_event(event, world.deps)

    records = world.race(request)
    # Then at most three commands are queued, each recorded as deferred, the rest held back
    sent = world.calls.counts["sqs:SendMessage"]
    assert 1 <= sent <= 3
    assert outcomes(records)["deferred"] == sent
    assert set(outcomes(records)) <= {"deferred", "suppressed"}


# --- one agent result


def test_racing_deliveries_of_one_failed_agent_result_page_once(world):
    # Given a failed requeue result in the ledger's stream of a command Medic issued, processed by 16
    # invocations at once (a retried batch overlapping a new one)
    AgentStore(world.deps.table).record_command("6f1c2a7e-9b3d-4c1a-8e5f-2d7b9a0c4e13", CommandContext(
        incident=f"job:slurm:{CLUSTER}:4211", trigger=Trigger.OPERATOR, event_id="request-9", cluster=CLUSTER,
        job="4211", fault="operator_request", action=Action.REQUEUE_JOB, mode=Mode.ACT, kind="requeue_job",
        target="4211", attempt=1), NOW)
    record = copy.deepcopy(load_event("ledger-stream-agent-result")["Records"][1])
    record["dynamodb"]["NewImage"]["status"] = {"S": "failed"}
    record["dynamodb"]["NewImage"]["message"] = {"S": "scontrol requeue 4211: exit 1: Invalid job id"}
    parsed = DynamoDBStreamRecordModel.model_validate(record)
    results = world.race(lambda index: record_agent_result(parsed, world.deps))
    # Then one final record, and one page
    finals = [result for result in results if result is not None]
    assert [final["outcome"] for final in finals] == ["failed"]
    assert world.calls.counts["sns:Publish"] == 1
    assert len(world.pages()) == 1


def test_the_race_harness_really_interleaves(world, unhealthy_event):
    """Guard against a harness that serializes whole invocations: with the first reads held, every racer
    has read the ledger before the first claim is written."""
    world.dynamodb.hold_first_reads(RACERS)
    event = node_event(unhealthy_event, instance_id=NODE, time=NOW.isoformat())
    world.race(lambda index: remediate_node({**copy.deepcopy(event), "id": str(uuid.uuid4())}, world.deps))
    requests = [name for name in world.dynamodb.requests if name in ("batch_get_item", "transact_write_items")]
    assert requests[:RACERS] == ["batch_get_item"] * RACERS
    # ... and every racer then either tried to claim, or (finding the node already in repair: a racer's replace
    # went through) read the ledger again to see that claim
    second_looks = requests.count("batch_get_item") - RACERS
    assert requests.count("transact_write_items") >= 1
    assert requests.count("transact_write_items") + second_looks >= RACERS
