"""The replay's EKS glue (sim/eks.py): the `k8s_job` directive, the `agent` directive on an EKS cluster starting
the real EKS agent in-process, and its Kubernetes calls as `kubernetes_call` lines. Medic's side that issues
restart_job commands is not needed here: the test writes the `command#<id>/issued` item and the message itself.
A small template stands in for the stack: the ledger table, the cluster's agent queue, one function whose
AGENT_QUEUES names it (the stack's functions name every agent's queue there; the config says it is EKS), and the
agent's policy."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest

from sim.replay import Replay
from sim.scenario import DEMO_CONFIG
from sim.synth import load_config
from sim.world import World
from tests.agent.eks_world import issue_restart, restart_body
from tests.agent.fakes import result_of

CLUSTER = "finetune-eks"
TEMPLATE = {"Resources": {
    "Ledger": {"Type": "AWS::DynamoDB::Table", "Properties": {
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                 {"AttributeName": "sk", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST"}},
    "AgentQueue": {"Type": "AWS::SQS::Queue", "Properties": {}},
    "Issuer": {"Type": "AWS::Lambda::Function", "Properties": {
        "Handler": "medic.handlers.none.handler", "Runtime": "python3.13",
        "Environment": {"Variables": {"AGENT_QUEUES": {"Fn::Sub": ['{"finetune-eks": "${Url}"}',
                                                                  {"Url": {"Ref": "AgentQueue"}}]},
                                      "LEDGER_TABLE": {"Ref": "Ledger"}}}}},
    # The agent's ledger grants as infra/components/agent_channel.py writes them (the replay checks its calls)
    "AgentPolicy": {"Type": "AWS::IAM::ManagedPolicy", "Properties": {
        "Description": f"Medic agent on the {CLUSTER} EKS cluster: its command queue and ledger items",
        "PolicyDocument": {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "dynamodb:PutItem", "Resource": {"Fn::GetAtt": ["Ledger", "Arn"]},
             "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [
                 f"agent#{CLUSTER}", f"agent#{CLUSTER}#command#*"]}}},
            {"Effect": "Allow", "Action": "dynamodb:ConditionCheckItem", "Resource": {"Fn::GetAtt": ["Ledger", "Arn"]},
             "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"command#{CLUSTER}#*"]}}}]}}},
}}
T0 = datetime(2026, 12, 2, 18, 0, tzinfo=UTC)


@pytest.fixture
def replay():
    with World(TEMPLATE, load_config(DEMO_CONFIG)) as world:
        lines: list[dict] = []
        yield Replay(world, lines.append, io.StringIO(), io.StringIO())


def directive(replay, number, spec):
    replay.line(number, json.dumps({"sim": spec}))


def test_k8s_job_and_an_eks_agent_restart_a_job(replay):
    world = replay.world
    assert world.eks.queues[CLUSTER] and CLUSTER not in world.slurm.queues
    directive(replay, 1, {"advance": T0.isoformat()})
    directive(replay, 2, {"k8s_job": {"cluster": CLUSTER, "namespace": "kubeflow", "name": "bert-xl",
                                      "kind": "PyTorchJob", "replicas": 3}})
    directive(replay, 3, {"agent": {"cluster": CLUSTER, "heartbeat": True}})
    assert replay.result.errors == []
    server = world.eks.cluster(CLUSTER).server
    before = {pod["metadata"]["uid"] for pod in server.job_pods("PyTorchJob", "kubeflow", "bert-xl")}
    assert len(before) == 3
    assert all(pod["spec"]["nodeName"].startswith("hyperpod-i-") for pod in server.pods("kubeflow"))

    body = restart_body()
    dynamodb, sqs = world.client("dynamodb"), world.client("sqs")
    issue_restart(dynamodb, world.eks.table, body)
    sqs.send_message(QueueUrl=world.eks.queues[CLUSTER], MessageBody=json.dumps(body))
    directive(replay, 4, {"advance": "+1m"})

    result = result_of(dynamodb, world.eks.table, CLUSTER, body["command_id"])
    assert result["status"] == "executed", result
    assert sorted(pod["S"] for pod in result["pods"]) == ["bert-xl-master-0", "bert-xl-worker-0",
                                                           "bert-xl-worker-1"]
    after = {pod["metadata"]["uid"] for pod in server.job_pods("PyTorchJob", "kubeflow", "bert-xl")}
    assert len(after) == 3 and not after & before
    calls = replay.result.kubernetes_calls
    assert calls and all(set(call) == {"kind", "cluster", "verb", "path", "status"} for call in calls)
    assert {"kind": "kubernetes_call", "cluster": CLUSTER, "verb": "get",
            "path": "/apis/kubeflow.org/v1/namespaces/kubeflow/pytorchjobs/bert-xl", "status": 200} in calls
    deletes = [call for call in calls if call["verb"] == "delete"]
    assert [call["path"] for call in deletes] == [f"/api/v1/namespaces/kubeflow/pods/bert-xl-{pod}"
                                                  for pod in ("master-0", "worker-0", "worker-1")]
    # the only error: the first leader check finds no Lease yet (404), then creates it
    assert [(call["verb"], call["path"], call["status"]) for call in calls if call["status"] >= 400] == [
        ("get", "/apis/coordination.k8s.io/v1/namespaces/medic-agent/leases/medic-agent", 404)]
    heartbeat = dynamodb.get_item(TableName=world.eks.table, Key={"pk": {"S": f"agent#{CLUSTER}"},
                                                                  "sk": {"S": "heartbeat"}})["Item"]
    assert heartbeat["host"]["S"] == "medic-agent-7c9d5-a"


def test_a_node_in_repair_is_reported_with_its_training_pods(replay):
    world = replay.world
    directive(replay, 1, {"advance": T0.isoformat()})
    directive(replay, 2, {"k8s_job": {"cluster": CLUSTER, "namespace": "kubeflow", "name": "bert-xl",
                                      "kind": "PyTorchJob", "replicas": 2}})
    server = world.eks.cluster(CLUSTER).server
    node = server.pod("kubeflow", "bert-xl-master-0")["spec"]["nodeName"]
    world.hyperpod.node(CLUSTER, node.removeprefix("hyperpod-")).status = "SystemUpdating"  # a reboot
    directive(replay, 3, {"agent": {"cluster": CLUSTER, "heartbeat": True}})
    directive(replay, 4, {"advance": "+1m"})
    item = world.client("dynamodb").get_item(TableName=world.eks.table, Key={"pk": {"S": f"agent#{CLUSTER}"},
                                                                            "sk": {"S": "nodes"}})["Item"]
    nodes = json.loads(item["nodes"]["S"])
    # A reboot takes the kubelet down (NotReady); HyperPod's label is not "rebooting": UnschedulablePendingReboot
    # means the node needs one (AWS, "Resilience-related Kubernetes labels"), so the label stays as it was
    assert [(n["name"], n["health_status"], n["ready"]) for n in nodes] == [(node, "Schedulable", False)]
    assert [pod["name"] for pod in nodes[0]["pods"]] == ["bert-xl-master-0"]


def test_an_instance_has_a_node_object_only_once_its_kubelet_registers(replay):
    """Kubernetes docs, Nodes, "Self-registration of Nodes": the kubelet creates the Node. An instance HyperPod is
    still provisioning (Pending: a replacement) has none; it appears, Ready, once the instance runs."""
    world = replay.world
    directive(replay, 1, {"advance": T0.isoformat()})
    directive(replay, 2, {"k8s_job": {"cluster": CLUSTER, "namespace": "kubeflow", "name": "bert-xl"}})
    fresh = "i-0feedc0ffee123456"
    directive(replay, 3, {"node": {"cluster": CLUSTER, "id": fresh, "group": "workers", "status": "Pending"}})
    directive(replay, 4, {"agent": {"cluster": CLUSTER, "heartbeat": True}})
    directive(replay, 5, {"advance": "+1m"})
    server = world.eks.cluster(CLUSTER).server
    assert server.node(f"hyperpod-{fresh}") is None
    directive(replay, 6, {"node": {"cluster": CLUSTER, "id": fresh, "group": "workers", "status": "Running"}})
    directive(replay, 7, {"advance": "+1m"})
    node = server.node(f"hyperpod-{fresh}")
    assert node["status"]["conditions"][0]["status"] == "True"
    assert node["metadata"]["labels"]["sagemaker.amazonaws.com/node-health-status"] == "Schedulable"


@pytest.mark.parametrize("spec, error", [
    ({"cluster": "pretrain-slurm", "name": "x"}, "must be an EKS cluster"),
    ({"cluster": CLUSTER, "name": "Bad_Name"}, "DNS-1123 subdomain"),
    ({"cluster": CLUSTER, "name": "x", "namespace": "a.b"}, "DNS-1123 label"),
    ({"cluster": CLUSTER, "name": "x", "kind": "MPIJob"}, "'kind' must be one of"),
    ({"cluster": CLUSTER, "name": "x", "replicas": 0}, "'replicas' must be"),
    ({"cluster": CLUSTER, "name": "x", "color": "red"}, "unknown field"),
    ({"cluster": CLUSTER, "name": "x", "restart_policy": "Sometimes"}, "'restart_policy' is a PyTorchJob's"),
    ({"cluster": CLUSTER, "name": "x", "kind": "Job", "restart_policy": "Never"}, "'restart_policy' is a PyTorchJob's"),
    ({"cluster": CLUSTER, "name": "x", "backoff_limit": 3}, "'backoff_limit' is a batch Job's"),
    ({"cluster": CLUSTER, "name": "x", "kind": "Job", "backoff_limit": -1}, "'backoff_limit' is a batch Job's"),
    ({"cluster": CLUSTER, "name": "x", "status": "Complete"}, "'status' must be one of Succeeded, Failed"),
    ({"cluster": CLUSTER, "name": "x", "sigterm_exit_code": 256}, "'sigterm_exit_code' must be 0..255"),
])
def test_bad_k8s_job_directives_are_errors(replay, spec, error):
    directive(replay, 1, {"k8s_job": spec})
    assert len(replay.result.errors) == 1 and error in replay.result.errors[0]


def test_two_replicas_and_a_failover(replay):
    """Two replicas of the agent Deployment: one holds the Lease; when it stops (its node died), the other takes
    the Lease over once it has seen it unchanged for 60 s, and restarts the job."""
    world = replay.world
    directive(replay, 1, {"advance": T0.isoformat()})
    directive(replay, 2, {"k8s_job": {"cluster": CLUSTER, "namespace": "kubeflow", "name": "bert-xl",
                                      "kind": "PyTorchJob", "replicas": 2}})
    directive(replay, 3, {"agent": {"cluster": CLUSTER, "heartbeat": True}})
    directive(replay, 4, {"agent": {"cluster": CLUSTER, "replica": 2, "heartbeat": True}})
    directive(replay, 5, {"advance": "+30s"})
    dynamodb = world.client("dynamodb")

    def item(sk):
        return dynamodb.get_item(TableName=world.eks.table, Key={"pk": {"S": f"agent#{CLUSTER}"},
                                                                 "sk": {"S": sk}}).get("Item")

    assert item("heartbeat")["host"]["S"] == "medic-agent-7c9d5-a"
    assert item("standby#medic-agent-7c9d5-b")["in_charge"]["S"] == "medic-agent-7c9d5-a"
    directive(replay, 6, {"agent": {"cluster": CLUSTER, "replica": 1, "heartbeat": False}})
    body = restart_body()
    issue_restart(dynamodb, world.eks.table, body)
    world.client("sqs").send_message(QueueUrl=world.eks.queues[CLUSTER], MessageBody=json.dumps(body))
    directive(replay, 7, {"advance": "+30s"})
    assert result_of(dynamodb, world.eks.table, CLUSTER, body["command_id"]) is None  # the lease is not expired yet
    directive(replay, 8, {"advance": "+2m"})
    result = result_of(dynamodb, world.eks.table, CLUSTER, body["command_id"])
    assert result["status"] == "executed" and result["host"] == "medic-agent-7c9d5-b"
    assert item("heartbeat")["host"]["S"] == "medic-agent-7c9d5-b"
    lease = world.eks.cluster(CLUSTER).server.objects[(("coordination.k8s.io", "v1", "leases"), "medic-agent",
                                                       "medic-agent")]
    assert lease["spec"]["holderIdentity"] == "medic-agent-7c9d5-b" and lease["spec"]["leaseTransitions"] == 1


def test_agent_result_on_an_eks_cluster(replay):
    """`agent_result` forges a result under an EKS cluster's agent key too (what its Pod Identity role can write)."""
    world = replay.world
    directive(replay, 1, {"advance": T0.isoformat()})
    directive(replay, 2, {"agent_result": {"cluster": CLUSTER, "command": "c0ffee", "status": "executed",
                                           "kind": "restart_job", "target": "PyTorchJob/kubeflow/bert-xl"}})
    assert replay.result.errors == []
    result = result_of(world.client("dynamodb"), world.eks.table, CLUSTER, "c0ffee")
    assert result["target"] == "PyTorchJob/kubeflow/bert-xl" and result["cluster"] == CLUSTER
