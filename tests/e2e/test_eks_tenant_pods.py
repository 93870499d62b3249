"""Specification, end to end: an EKS namespace tenant cannot make Medic restart a healthy job (issue 28, item 5)."""

from __future__ import annotations

from sim.scenario import SCENARIOS

JOB_INCIDENT = "job:eks:finetune-eks:PyTorchJob/kubeflow/bert-xl"


def test_zz_pods_claiming_a_stepping_job_stuck_on_a_failed_node_restart_nothing(replay):
    # Given bert-xl stepping normally, and a tenant's two pods naming bert-xl as their controller (one with a uid that
    # is not the job's, one with its real uid), Terminating since 01:21 on a node that fails at 02:00
    result = replay(SCENARIOS / "zz-eks-tenant-pod-cannot-restart-a-healthy-job.jsonl")
    # Then the agent's notice names only the pod with the job's uid
    [notice] = [record for record in result.records if record["incident"].startswith("agent:finetune-eks:node:")]
    assert "bert-xl (pods bert-xl-worker-8)" in notice["reason"] and "worker-9" not in notice["reason"]
    # And Medic reads the job's probe: it stepped since the pod got stuck, so nothing is restarted
    [decision] = [record for record in result.records if record["incident"] == JOB_INCIDENT]
    assert (decision["fault"], decision["action"], decision["outcome"], decision["paged"]) == (
        "pods_stuck_terminating", "none", "ignored", False)
    assert "the probe counted 1760 steps since 01:21 UTC" in decision["reason"]
    assert not any(call["verb"] == "delete" for call in result.kubernetes_calls)
    assert result.pages == []
