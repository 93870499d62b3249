"""A Slurm cluster's side of Medic in emulated AWS: its agent queue (SQS), the ledger's stream
(DynamoDB Streams, as Lambda delivers it), and the real medic-agent from agent/ running in-process
with a fake in place of subprocess.run. Both sides of the command/result contract are the real code."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.parser.models import DynamoDBStreamRecordModel

from medic.adapters.agent_queue import AgentQueues
from medic.flows.agent.heartbeats import heartbeat_cluster, record_heartbeat
from medic.handlers import agent_results
from tests.functional.conftest import CLUSTER, REGION, TABLE, Medic
from tests.helpers import load_event

AGENT_DIR = Path(__file__).resolve().parents[2] / "agent"
if str(AGENT_DIR) not in sys.path:
    sys.path.insert(0, str(AGENT_DIR))

from medic_agent.commands import RequeueJob  # noqa: E402,F401 - re-exported for the tests
from medic_agent.commands import parse as agent_parse  # noqa: E402,F401
from medic_agent.ledger import Ledger as AgentLedger  # noqa: E402
from medic_agent.main import Agent  # noqa: E402
from medic_agent.queue import Queue  # noqa: E402
from medic_agent.slurm import Slurm  # noqa: E402
from medic_agent.state import State  # noqa: E402

CONTROLLER = "ip-10-1-88-145"
STREAM_LABEL = "2026-11-20T08:00:00.000"


@dataclass
class FakeSlurm:
    """Stands in for subprocess.run: answers `scontrol requeue` / `squeue` from a script, runs nothing."""

    answers: dict[str, tuple[int, str, str]] = field(default_factory=dict)  # "scontrol requeue" -> (rc, out, err)
    argvs: list[list[str]] = field(default_factory=list)

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        argv = [Path(argv[0]).name, *argv[1:]]
        if argv == ["scontrol", "ping"]:  # the agent's role check: its host runs the slurmctld in charge
            return subprocess.CompletedProcess(argv, 0, f"Slurmctld(primary) at {CONTROLLER} is UP\n", "")
        self.argvs.append(argv)
        # the answer for the longest leading part of the command line given (`squeue --noheader --states=all`
        # before `squeue --noheader`)
        given = next((" ".join(argv[:n]) for n in range(len(argv), 1, -1) if " ".join(argv[:n]) in self.answers),
                     " ".join(argv[:2]))
        returncode, stdout, stderr = self.answers.get(given, (0, "", ""))
        return subprocess.CompletedProcess(argv, returncode, stdout, stderr)


class SlurmWorld:
    def __init__(self, medic: Medic, tmp_path: Path, cluster: str = CLUSTER) -> None:
        self.medic = medic
        self.cluster = cluster  # an EKS cluster's too: the queue, heartbeat and result contract are the same
        self.sqs = medic.sqs
        self.dynamodb = medic.deps.table.client
        self.queue_url = self.sqs.create_queue(QueueName=f"medic-agent-{cluster}")["QueueUrl"]
        medic.deps.agents = AgentQueues({cluster: self.queue_url}, self.sqs)
        self.dynamodb.update_table(TableName=TABLE, StreamSpecification={
            "StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
        self.stream_arn = self.dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        # botocore sends stream calls to an account endpoint moto does not serve: use the regional one.
        self.streams = boto3.client("dynamodbstreams", region_name=REGION,
                                    endpoint_url=f"https://streams.dynamodb.{REGION}.amazonaws.com")
        shard = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
        self._iterator = self.streams.get_shard_iterator(StreamArn=self.stream_arn, ShardId=shard,
                                                         ShardIteratorType="LATEST")["ShardIterator"]
        self.slurm = FakeSlurm()
        self.bin_dir = tmp_path / "slurm-bin"
        self.bin_dir.mkdir()
        for program in ("scontrol", "squeue", "sacct"):  # resolvable, never run (FakeSlurm answers instead)
            (self.bin_dir / program).write_text("#!/bin/sh\nexit 99\n")
            (self.bin_dir / program).chmod(0o755)
        self.state_file = tmp_path / "agent-state.json"
        self.agent_ledger = AgentLedger(TABLE, lambda: self.dynamodb)
        self._pending: list[dict] = []

    # --- the agent

    def heartbeat(self, age: timedelta = timedelta(seconds=30), clock_ahead: timedelta = timedelta(0)) -> None:
        """The agent reports in (written by the agent's own ledger code) ``age`` ago by DynamoDB's clock, with its
        own clock ``clock_ahead`` of it; the stream brings the write to the results function, as in AWS."""
        written = self.medic.clock[0] - age
        self.agent_ledger.heartbeat(self.cluster, written + clock_ahead, CONTROLLER, "0.1.0")
        records = self.stream_event(created=written)["Records"]
        beats = [r for r in records if r["dynamodb"]["Keys"] == {"pk": {"S": f"agent#{self.cluster}"},
                                                                 "sk": {"S": "heartbeat"}}]
        self._pending.extend(r for r in records if r not in beats)  # for the test's next stream_event()
        self.deliver_heartbeats(beats)

    def deliver_heartbeats(self, records: list[dict]) -> None:
        """The results function's handling of heartbeat stream records (DynamoDB's time, not the agent's)."""
        for raw in records:
            record = DynamoDBStreamRecordModel.model_validate(raw)
            cluster = heartbeat_cluster(record)
            assert cluster is not None, raw
            record_heartbeat(record, cluster, self.medic.deps)

    def run_agent(self) -> None:
        """One poll of the real agent on the controller: claim, run (fake Slurm), write the result, delete."""
        agent = Agent(cluster=CLUSTER, queue=Queue(self.queue_url, lambda: self.sqs, wait_seconds=0),
                      ledger=self.agent_ledger, slurm=Slurm(bin_dir=str(self.bin_dir), runner=self.slurm),
                      state=State(str(self.state_file)), host=CONTROLLER,
                      heartbeat_seconds=3600, clock=lambda: self.medic.clock[0] + timedelta(seconds=2))
        agent.poll()

    def put_result(self, command_id: str, status: str, message: str, **fields: Any) -> None:
        """A result as the agent writes it, without running the agent."""
        self.agent_ledger.put_result({
            "command_id": command_id, "cluster": self.cluster, "kind": "requeue_job", "target": "4211",
            "incident": f"job:slurm:{self.cluster}:4211", "host": CONTROLLER, "agent_version": "0.1.0",
            "status": status, "message": message, "finished_at": self.medic.clock[0].isoformat(), **fields,
        }, self.medic.clock[0])

    # --- the queue

    def queued(self) -> list[dict]:
        """The messages waiting for the agent (left on the queue)."""
        messages = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10,
                                            VisibilityTimeout=0).get("Messages", [])
        return [json.loads(message["Body"]) for message in messages]

    def depth(self) -> int:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
        return sum(int(value) for value in attributes.values())

    # --- the ledger

    def items(self) -> list[dict]:
        return self.dynamodb.scan(TableName=TABLE)["Items"]

    def item(self, pk: str, sk: str) -> dict | None:
        return self.dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": pk}, "sk": {"S": sk}}).get("Item")

    def stream_event(self, created: datetime | None = None) -> dict:
        """The stream records written since the last call, as Lambda delivers them to the function; created (their
        ApproximateCreationDateTime) at the world's clock, as DynamoDB's clock would say (moto stamps wall time)."""
        records, self._pending = self._pending, []
        while True:
            response = self.streams.get_records(ShardIterator=self._iterator)
            self._iterator = response["NextShardIterator"]
            if not response["Records"]:
                break
            records.extend(response["Records"])
        for record in records:
            if "eventSourceARN" in record:  # kept from an earlier call: already as Lambda delivers it
                continue
            change = record["dynamodb"]
            change["ApproximateCreationDateTime"] = int((created or self.medic.clock[0]).timestamp())
            record.update({"awsRegion": REGION, "eventVersion": "1.1",
                           "eventSourceARN": f"{self.stream_arn.split('/stream/')[0]}/stream/{STREAM_LABEL}"})
        return {"Records": records}

    # --- requests

    def request_event(self, event_id: str | None = None, **detail: Any) -> dict:
        """The sample "Medic Requeue Job" event with its detail changed (a None value removes the key)."""
        event = copy.deepcopy(load_event("medic-requeue-job"))
        for key, value in detail.items():
            if value is None:
                event["detail"].pop(key, None)
            else:
                event["detail"][key] = value
        if event_id is not None:
            event["id"] = event_id
        return event


@pytest.fixture(name="slurm")
def streamed_slurm(medic, tmp_path, monkeypatch) -> SlurmWorld:
    """A Slurm cluster with a live agent, whose ledger stream the results function reads with these deps."""
    world = SlurmWorld(medic, tmp_path)
    monkeypatch.setattr(agent_results, "dependencies", lambda: medic.deps)
    world.heartbeat()
    return world
