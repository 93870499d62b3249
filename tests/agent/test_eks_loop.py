"""The EKS agent's loop: emulated SQS and DynamoDB (moto) and the emulated Kubernetes API server, the agent's
real code path in between (parse → claim against Medic's issued item → restart → result → delete)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from medic_agent.eks.kube import Kube
from medic_agent.eks.main import EksAgent
from medic_agent.ledger import Ledger
from medic_agent.queue import Queue
from medic_agent.state import State
from moto import mock_aws

from sim.kubeapi import KubeApiServer
from tests.agent.eks_world import CLUSTER, issue_restart, manifest, restart_body, watched_jobs
from tests.agent.fakes import create_ledger, ledger_item, queue_depth, result_of, send

NOW = datetime(2026, 12, 2, 18, 0, tzinfo=UTC)


@pytest.fixture
def world(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        server = KubeApiServer(manifest(), clock=lambda: NOW).start()
        try:
            yield World(server, tmp_path)
        finally:
            server.stop()


class World:
    def __init__(self, api: KubeApiServer, tmp_path) -> None:
        self.api = api
        self.tmp_path = tmp_path
        self.sqs = boto3.client("sqs", region_name="us-east-1")
        self.dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        self.queue_url = self.sqs.create_queue(QueueName=f"medic-agent-{CLUSTER}")["QueueUrl"]
        self.table = create_ledger(self.dynamodb, "medic-ledger")
        for node in ("node-a", "node-b"):
            api.add_node(node)

    def agent(self, identity: str = "medic-agent-5b8c-x", clock=lambda: NOW) -> EksAgent:
        return EksAgent(cluster=CLUSTER, queue=Queue(self.queue_url, lambda: self.sqs, wait_seconds=0),
                        ledger=Ledger(self.table, lambda: self.dynamodb),
                        kube=Kube.for_server(self.api.url, self.api.token),
                        state=State(str(self.tmp_path / identity / "state.json")), watched=watched_jobs(),
                        identity=identity, lease_namespace="medic-agent", heartbeat_seconds=0, standby_seconds=0,
                        clock=clock)

    def send(self, body: dict, issued: bool = True) -> dict:
        if issued:
            issue_restart(self.dynamodb, self.table, body)
        send(self.sqs, self.queue_url, body)
        return body

    def result(self, body: dict) -> dict | None:
        return result_of(self.dynamodb, self.table, CLUSTER, body["command_id"])


def strings(values):
    return [value["S"] for value in values]


def test_restart_end_to_end(world):
    world.api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=2)
    before = {pod["metadata"]["uid"] for pod in world.api.job_pods("PyTorchJob", "kubeflow", "bert-xl")}
    body = world.send(restart_body())
    assert world.agent().poll() == 1
    result = world.result(body)
    assert result["status"] == "executed", result["message"]
    assert result["target"] == "PyTorchJob/kubeflow/bert-xl" and result["kind"] == "restart_job"
    assert result["incident"] == "job:bert-xl" and result["host"] == "medic-agent-5b8c-x"
    assert strings(result["pods"]) == ["bert-xl-master-0", "bert-xl-worker-0"] and result["force_deleted"] == []
    assert ledger_item(world.dynamodb, world.table, f"agent#{CLUSTER}#command#{body['command_id']}", "claim")
    after = {pod["metadata"]["uid"] for pod in world.api.job_pods("PyTorchJob", "kubeflow", "bert-xl")}
    assert len(after) == 2 and not after & before
    assert queue_depth(world.sqs, world.queue_url) == 0
    heartbeat = ledger_item(world.dynamodb, world.table, f"agent#{CLUSTER}", "heartbeat")
    assert heartbeat["role"] == "primary" and heartbeat["host"] == "medic-agent-5b8c-x"
    nodes = ledger_item(world.dynamodb, world.table, f"agent#{CLUSTER}", "nodes")
    assert json.loads(nodes["nodes"]) == [] and "truncated" not in nodes


def test_a_message_medic_did_not_issue_is_not_run(world):
    world.api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=1)
    body = world.send(restart_body(), issued=False)
    world.agent().poll()
    assert world.result(body) is None
    assert not [call for call in world.api.calls if call["verb"] == "delete"]
    assert queue_depth(world.sqs, world.queue_url) == 0


def test_an_issued_target_that_differs_is_not_run(world):
    """Medic issued a restart of bert-xl; the message asks for another job under the same id."""
    world.api.add_job("Job", "default", "etl", replicas=1)
    issued = restart_body()
    issue_restart(world.dynamodb, world.table, issued)
    forged = {**issued, "job_kind": "Job", "namespace": "default", "job_name": "etl"}
    send(world.sqs, world.queue_url, forged)
    world.agent().poll()
    assert world.result(issued) is None
    assert not [call for call in world.api.calls if call["verb"] == "delete"]


def test_a_job_not_watched_fails_with_the_reason(world):
    body = world.send(restart_body(job_name="someone-elses-job"))
    world.agent().poll()
    result = world.result(body)
    assert result["status"] == "failed"
    assert "PyTorchJob/kubeflow/someone-elses-job is not among the jobs this agent watches" in result["message"]
    assert not [call for call in world.api.calls if "pytorchjobs" in call["path"] or "/pods" in call["path"]]


def test_a_hostile_message_is_refused(world):
    send(world.sqs, world.queue_url, restart_body(namespace="kube-system/../../x"))
    world.agent().poll()
    assert queue_depth(world.sqs, world.queue_url) == 0
    assert not [call for call in world.api.calls if "/pods" in call["path"]]


def test_a_redelivered_command_runs_once(world):
    world.api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=1)
    body = world.send(restart_body())
    send(world.sqs, world.queue_url, body)  # delivered twice
    agent = world.agent()
    agent.poll()
    agent.poll()
    assert len([call for call in world.api.calls if call["verb"] == "delete"]) == 1


def test_two_replicas_one_acts(world):
    world.api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=1)
    first, second = world.agent("medic-agent-1"), world.agent("medic-agent-2")
    assert first.poll() == 0  # becomes leader, nothing queued
    body = world.send(restart_body())
    assert second.poll() == 0  # standby: receives nothing
    standby = ledger_item(world.dynamodb, world.table, f"agent#{CLUSTER}", "standby#medic-agent-2")
    assert standby["role"] == "standby" and standby["in_charge"] == "medic-agent-1"
    assert queue_depth(world.sqs, world.queue_url) == 1
    assert first.poll() == 1
    assert world.result(body)["host"] == "medic-agent-1"


def test_stuck_pods_are_force_deleted_and_reported(world):
    world.api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=2)
    master = world.api.pod("kubeflow", "bert-xl-master-0")
    world.api.set_node(master["spec"]["nodeName"], ready=False)
    world.api.mark_terminating("kubeflow", "bert-xl-master-0", NOW - timedelta(minutes=6))
    agent = world.agent()
    agent.poll()
    nodes = json.loads(ledger_item(world.dynamodb, world.table, f"agent#{CLUSTER}", "nodes")["nodes"])
    assert [node["name"] for node in nodes] == [master["spec"]["nodeName"]]
    assert nodes[0]["pods"][0]["name"] == "bert-xl-master-0" and nodes[0]["pods"][0]["terminating_since"]
    body = world.send(restart_body())
    agent.poll()
    result = world.result(body)
    assert strings(result["force_deleted"]) == ["bert-xl-master-0"]
    assert strings(result["pods"]) == ["bert-xl-worker-0"]
