"""Specification: a stalled job on a HyperPod EKS cluster end to end — the synthesized stall alarm evaluated on
what the probe published, the alarm handler queueing a restart_job, the real EKS agent (agent/medic_agent/eks)
claiming it and deleting the job's pods through the official Kubernetes client against the emulated API server
(which enforces the shipped RBAC), its result through the ledger's stream, and the proof of recovery."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from sim.scenario import DEMO_CONFIG, SCENARIOS
from sim.scenarios.generate import event
from tests.e2e.conftest import outcomes, sample

INCIDENT = "job:eks:finetune-eks:PyTorchJob/kubeflow/bert-xl"
PODS = ["bert-xl-master-0", "bert-xl-worker-0", "bert-xl-worker-1", "bert-xl-worker-2"]


def test_zk_a_stalled_pytorchjob_is_restarted_by_the_eks_agent_once_and_recovers_without_a_page(replay):
    # Given bert-xl (a PyTorchJob, 4 pods) training until 03:05, then silent; the EKS agent up
    result = replay(SCENARIOS / "zk-eks-stall-restarted.jsonl")
    # Then the 03:18 ALARM queues one restart, which the agent carries out; the 03:19 redelivery is a duplicate;
    # the probe's steps prove the recovery; OK closes the incident; nobody is paged
    assert outcomes(result) == [("restart_job", "deferred"), ("restart_job", "executed"),
                                ("none", "duplicate"), ("none", "ignored"), ("none", "ignored")]
    assert {record["incident"] for record in result.records} == {INCIDENT}
    deferred, executed, duplicate, recovered, _ = result.records
    assert executed["attempt"] == deferred["attempt"] == 1 and executed["event_id"] == deferred["event_id"]
    assert f"deleted 4 pod(s) of bert-xl for its controller to recreate ({', '.join(PODS)})" in executed["reason"]
    assert duplicate["event_id"] == "7d1f0b2a-5c3e-4e8f-9a61-0b2c3d4e5f60" and duplicate["paged"] is False
    assert recovered["fault"] == "recovered"
    assert result.pages == [] and result.calls["sqs:SendMessage"] == 1
    # And the agent's Kubernetes calls: the job read, its pods listed and each deleted, never the job itself
    calls = [(call["verb"], call["path"], call["status"]) for call in result.kubernetes_calls
             if "leases" not in call["path"] and not call["path"].endswith("/nodes")]
    assert calls == [("get", "/apis/kubeflow.org/v1/namespaces/kubeflow/pytorchjobs/bert-xl", 200),
                     ("list", "/api/v1/namespaces/kubeflow/pods", 200),
                     *[("delete", f"/api/v1/namespaces/kubeflow/pods/{pod}", 200) for pod in PODS]]
    assert not [call for call in result.kubernetes_calls if call["status"] == 403]
    # And the incident's timeline: the stall at the last heartbeat (03:05), detected and acted on at 03:18
    [incident] = result.incidents
    assert (incident["incident"], incident["time_to_detect_s"], incident["time_to_act_s"]) == (INCIDENT, 780, 780)


def test_zl_with_the_eks_agent_down_one_page_and_nothing_queued_into_the_void(replay):
    result = replay(SCENARIOS / "zl-eks-agent-down.jsonl")
    # The reconciler already reported the agent silent at 03:05 (25 min since 02:40: issue 29, item 1), one page
    silent, failed = result.records
    assert (silent["fault"], silent["outcome"], silent["paged"], silent["timestamp"][11:16]) == (
        "agent_silent", "failed", True, "03:05")
    assert (failed["action"], failed["outcome"], failed["paged"], failed["incident"]) == (
        "restart_job", "failed", True, INCIDENT)
    assert "not reporting (last heartbeat: 2026-11-21 02:40 UTC)" in failed["reason"]
    silence_page, page = result.pages
    assert silence_page["subject"] == "[Medic] finetune-eks: its agent is silent"
    assert "kubectl -n medic-agent logs deploy/medic-agent" in page["message"]
    assert result.calls.get("sqs:SendMessage", 0) == 0
    assert not [call for call in result.kubernetes_calls if call["verb"] == "delete"]


# --- restarts the job's own controller would turn into its end: refused by the agent, one page (issue 27, 1-3)

NEVER_CALLS_BUT_GET = "/apis/kubeflow.org/v1/namespaces/kubeflow/pytorchjobs/bert-xl"


def job_calls(result):
    return [(call["verb"], call["path"], call["status"]) for call in result.kubernetes_calls
            if "leases" not in call["path"] and not call["path"].endswith("/nodes")]


def test_zq_a_pytorchjob_under_restart_policy_never_is_not_restarted_and_one_page_says_what_to_change(replay):
    # Given bert-xl under restartPolicy Never, stalled from 03:05
    result = replay(SCENARIOS / "zq-eks-never-restart-refused.jsonl")
    # Then the 03:18 restart is queued, and the agent refuses it after reading the job: nothing deleted
    assert outcomes(result) == [("restart_job", "deferred"), ("restart_job", "failed")]
    _, refused = result.records
    assert refused["incident"] == INCIDENT and refused["paged"] is True
    assert 'refused the restart of bert-xl' in refused["reason"] and "restartPolicy Never (Master, Worker)" in \
        refused["reason"]
    assert job_calls(result) == [("get", NEVER_CALLS_BUT_GET, 200)]
    # And one page says why and what to change; past the recovery window (03:38) no second page
    [page] = result.pages
    assert "set restartPolicy: OnFailure in each replica spec" in page["message"]
    assert page["subject"] == "[Medic] finetune-eks job bert-xl: restart FAILED"


@pytest.fixture(scope="module")
def jobs_config(tmp_path_factory) -> Path:
    """The demo config plus two watched jobs on the EKS cluster: bert-xs, a PyTorchJob whose launcher exits >= 128 on
    SIGTERM (the config says so), and etl, a batch/v1 Job."""
    config = yaml.safe_load(DEMO_CONFIG.read_text())
    config["jobs"] += [{"name": "bert-xs", "cluster": "finetune-eks", "namespace": "kubeflow", "kind": "PyTorchJob",
                        "launcher_exits_128_or_more_on_sigterm": True},
                       {"name": "etl", "cluster": "finetune-eks", "namespace": "default", "kind": "Job"}]
    path = Path(tmp_path_factory.mktemp("eks-jobs")) / "eks-jobs.medic.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))  # the same content each run: the synth cache holds
    return path


def operator_restart(job: str, namespace: str, event_id: str, at: str = "2026-11-21T03:10:00Z") -> dict:
    request = sample("medic-requeue-job")
    request.update({"id": event_id, "time": at})
    request["detail"] = {"cluster": "finetune-eks", "namespace": namespace, "job_name": job,
                         "reason": f"{job} stuck: restart it from its checkpoint"}
    return request


def restart_lines(job: dict, namespace: str = "kubeflow") -> list[dict]:
    return [{"sim": {"advance": "2026-11-21T03:00:00Z"}},
            {"sim": {"k8s_job": {"cluster": "finetune-eks", "namespace": namespace, **job}}},
            {"sim": {"agent": {"cluster": "finetune-eks", "heartbeat": True}}},
            {"sim": {"advance": "2026-11-21T03:10:00Z"}},
            operator_restart(job["name"], namespace, str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-test/{job}"))),
            {"sim": {"advance": "2026-11-21T03:12:00Z"}}]


def test_exit_code_without_the_config_saying_the_launcher_exits_128_or_more_is_refused(replay):
    result = replay(restart_lines({"name": "bert-xl", "kind": "PyTorchJob", "replicas": 2,
                                   "restart_policy": "ExitCode"}))
    assert outcomes(result) == [("restart_job", "deferred"), ("restart_job", "failed")]
    assert "restartPolicy ExitCode (Master, Worker)" in result.records[1]["reason"]
    [page] = result.pages
    assert "set launcher_exits_128_or_more_on_sigterm: true on the job in medic.yaml" in page["message"]
    assert [verb for verb, _, _ in job_calls(result)] == ["get"]


def test_exit_code_with_a_launcher_that_exits_128_or_more_is_restarted(replay, jobs_config):
    result = replay(restart_lines({"name": "bert-xs", "kind": "PyTorchJob", "replicas": 2,
                                   "restart_policy": "ExitCode"}), jobs_config)
    assert outcomes(result) == [("restart_job", "deferred"), ("restart_job", "executed")]
    assert "deleted 2 pod(s) of bert-xs" in result.records[1]["reason"] and result.pages == []


def test_a_batch_job_at_its_backoff_limit_is_refused_naming_the_limit(replay, jobs_config):
    # Given etl, a Job of 2 pods with backoffLimit 1: deleting both would be 2 failures > 1
    result = replay(restart_lines({"name": "etl", "kind": "Job", "replicas": 2, "backoff_limit": 1}, "default"),
                    jobs_config)
    assert outcomes(result) == [("restart_job", "deferred"), ("restart_job", "failed")]
    assert "would make 2 failures, over backoffLimit 1 (0 already)" in result.records[1]["reason"]
    [page] = result.pages
    assert "no retries left for a restart" in page["message"]
    assert [verb for verb, _, _ in job_calls(result)] == ["get", "list"]


@pytest.mark.parametrize("status", ["Succeeded", "Failed"])
def test_a_finished_job_is_never_restarted_and_keeps_its_pods(replay, status):
    result = replay(restart_lines({"name": "bert-xl", "kind": "PyTorchJob", "replicas": 2, "status": status}))
    assert outcomes(result) == [("restart_job", "deferred"), ("restart_job", "failed")]
    assert f"the job has finished (condition {status} since 2026-11-21T03:00:00Z)" in result.records[1]["reason"]
    [page] = result.pages
    assert "Medic restarts no finished job, and left its pods" in page["message"]
    assert job_calls(result) == [("get", NEVER_CALLS_BUT_GET, 200)]


# --- the emulated cluster: a replacement has no Node until its kubelet registers (issue 27, 5)

def eks_health_event(node: str, at: str) -> dict:
    """HyperPod's node health event (NvidiaErrorTerminate: replace) for a node of the EKS cluster."""
    unhealthy = event(node=node)
    arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/p7r2m4x9c1qa"
    unhealthy.update({"time": at, "resources": [arn], "id": "9b7c1e2d-3f4a-4b5c-8d6e-7f8091a2b3c4"})
    unhealthy["detail"].update({"ClusterName": "finetune-eks", "ClusterArn": arn})
    return unhealthy


def test_a_replaced_node_is_reported_not_ready_and_its_replacement_only_once_it_registers(replay):
    """Medic replaces a node of the EKS cluster (recovery not automatic). The old instance's kubelet is gone: its Node
    goes NotReady, and the agent reports it (Medic's own replace in progress). The new instance has no Node while
    HyperPod provisions it (Kubernetes docs, Nodes: the kubelet registers it), so nothing reports a ghost node."""
    node = "i-0e1d2c3b4a5f60718"
    result = replay([
        {"sim": {"advance": "2026-11-21T03:00:00Z"}},
        {"sim": {"cluster": {"name": "finetune-eks", "node_recovery": "None"}}},
        {"sim": {"node": {"cluster": "finetune-eks", "id": node, "group": "workers", "status": "Running"}}},
        {"sim": {"agent": {"cluster": "finetune-eks", "heartbeat": True}}},
        eks_health_event(node, "2026-11-21T03:01:00Z"),
        {"sim": {"advance": "2026-11-21T03:40:00Z"}},
    ])
    [replace] = [record for record in result.records if record["action"] == "replace_node"]
    assert replace["outcome"] == "executed"
    [action] = result.node_actions
    new = action["replacements"][node]
    reported = [record for record in result.records if record["fault"] == "k8s_node_unhealthy"]
    assert [record["node_id"] for record in reported] == [node]
    assert "Medic's replace_node of it is in progress" in reported[0]["reason"]
    assert not any(new in record["reason"] for record in result.records)
