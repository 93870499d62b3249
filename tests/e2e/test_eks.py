"""Specification: a stalled job on a HyperPod EKS cluster end to end — the synthesized stall alarm evaluated on
what the probe published, the alarm handler queueing a restart_job, the real EKS agent (agent/medic_agent/eks)
claiming it and deleting the job's pods through the official Kubernetes client against the emulated API server
(which enforces the shipped RBAC), its result through the ledger's stream, and the proof of recovery."""

from __future__ import annotations

from sim.scenario import SCENARIOS
from tests.e2e.conftest import outcomes

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
    [failed] = result.records
    assert (failed["action"], failed["outcome"], failed["paged"], failed["incident"]) == (
        "restart_job", "failed", True, INCIDENT)
    assert "not reporting (last heartbeat: 2026-11-21 02:40 UTC)" in failed["reason"]
    [page] = result.pages
    assert "kubectl -n medic-agent logs deploy/medic-agent" in page["message"]
    assert result.calls.get("sqs:SendMessage", 0) == 0
    assert not [call for call in result.kubernetes_calls if call["verb"] == "delete"]
