"""Specification of the EKS agent's rules (agent/medic_agent/eks/policy.py): would deleting a job's pods restart it, or
end it? Read from the job object as the API returns it. The controllers' behaviour these rules follow is emulated and
tested in test_eks_kubeapi.py; the agent applying them, in test_eks_restart.py."""

from __future__ import annotations

import pytest
from medic_agent.eks import policy


def pytorchjob(*policies: str | None, conditions: list[dict] | None = None) -> dict:
    types = ("Master", "Worker", "Launcher")
    return {"spec": {"pytorchReplicaSpecs": {types[i]: ({"replicas": 1} if value is None else
                                                        {"replicas": 1, "restartPolicy": value})
                                             for i, value in enumerate(policies)}},
            "status": {"conditions": conditions or []}}


def batch_job(backoff_limit: int | None = 6, failed: int = 0, **spec: object) -> dict:
    return {"spec": {**({} if backoff_limit is None else {"backoffLimit": backoff_limit}), **spec},
            "status": {"failed": failed}}


def pods(count: int, index_failures: dict[int, int] | None = None) -> list[dict]:
    out = []
    for index in range(count):
        annotations = {policy.COMPLETION_INDEX: str(index)}
        if index_failures and index in index_failures:
            annotations[policy.INDEX_FAILURE_COUNT] = str(index_failures[index])
        out.append({"metadata": {"name": f"etl-{index}-x", "annotations": annotations}})
    return out


@pytest.mark.parametrize("policies", [("OnFailure", "OnFailure"), ("Always",), (None, None), ("OnFailure", None)])
def test_policies_under_which_the_operator_recreates_deleted_pods_are_restarted(policies):
    # Given a PyTorchJob whose replica specs say OnFailure or Always (or nothing: the operator's default OnFailure)
    # Then the agent may delete its pods
    assert policy.restart_policy(pytorchjob(*policies), exit_code_restartable=False) is None


def test_never_is_refused_naming_the_replica_types():
    refusal = policy.restart_policy(pytorchjob("OnFailure", "Never"), exit_code_restartable=True)
    assert refusal.code == policy.RESTART_POLICY_NEVER
    assert refusal.message.startswith("restartPolicy Never (Worker): ")
    assert "fails the job for good" in refusal.message and refusal.message.endswith("no pod deleted")
    assert len(refusal.message) <= 200  # Medic quotes at most 200 characters of an agent's message


def test_exit_code_is_refused_unless_the_config_says_the_launcher_exits_128_or_more_on_sigterm():
    job = pytorchjob("ExitCode", "ExitCode")
    refusal = policy.restart_policy(job, exit_code_restartable=False)
    assert refusal.code == policy.RESTART_POLICY_EXIT_CODE
    assert "(Master, Worker)" in refusal.message and "launcher_exits_128_or_more_on_sigterm" in refusal.message
    assert policy.restart_policy(job, exit_code_restartable=True) is None


def test_a_policy_the_operator_does_not_define_is_refused():
    refusal = policy.restart_policy(pytorchjob("Sometimes"), exit_code_restartable=True)
    assert refusal.code == policy.RESTART_POLICY_NEVER and "Master='Sometimes'" in refusal.message


@pytest.mark.parametrize("kind, condition", [
    ("PyTorchJob", "Succeeded"), ("PyTorchJob", "Failed"),
    ("HyperPodPyTorchJob", "Complete"), ("HyperPodPyTorchJob", "Failed"),
    ("Job", "Complete"), ("Job", "Failed"), ("Job", "FailureTarget"), ("Job", "SuccessCriteriaMet"),
])
def test_a_finished_job_is_refused(kind, condition):
    ended = {"type": condition, "status": "True", "lastTransitionTime": "2026-12-02T17:00:00Z"}
    job = {"status": {"conditions": [{"type": "Running", "status": "False"}, ended]}}
    refusal = policy.finished(kind, job)
    assert refusal.code == policy.JOB_FINISHED
    assert refusal.message.startswith(f"the job has finished (condition {condition} since 2026-12-02T17:00:00Z)")


@pytest.mark.parametrize("conditions", [
    [], [{"type": "Running", "status": "True"}], [{"type": "Succeeded", "status": "False"}],
    [{"type": "Restarting", "status": "True"}],
])
def test_a_job_still_running_is_not_finished(conditions):
    assert policy.finished("PyTorchJob", {"status": {"conditions": conditions}}) is None


@pytest.mark.parametrize("limit, failed, deleting, refused", [
    (6, 0, 2, False), (6, 4, 2, False), (6, 5, 2, True), (0, 0, 1, True), (None, 4, 2, False), (None, 5, 2, True),
])
def test_a_batch_job_is_refused_when_its_deleted_pods_would_exceed_backoff_limit(limit, failed, deleting, refused):
    # The Job fails once failed > backoffLimit (default 6); each deleted pod is one more failure
    refusal = policy.backoff(batch_job(limit, failed), pods(deleting))
    assert (refusal is not None) is refused
    if refused:
        assert refusal.code == policy.BACKOFF_LIMIT
        assert f"over backoffLimit {6 if limit is None else limit} ({failed} already)" in refusal.message


def test_failures_not_yet_in_the_count_are_counted_too():
    job = batch_job(6, 4)
    job["status"]["uncountedTerminatedPods"] = {"failed": ["uid-1"]}
    assert policy.backoff(job, pods(2)).code == policy.BACKOFF_LIMIT


def test_backoff_limit_per_index_refuses_an_index_at_its_limit():
    # An Indexed Job with backoffLimitPerIndex 1 (backoffLimit then defaults to MaxInt32): index 1 failed once
    job = batch_job(None, 3, backoffLimitPerIndex=1, completionMode="Indexed")
    assert policy.backoff(job, pods(3)) is None
    refusal = policy.backoff(job, pods(3, {1: 1}))
    assert refusal.code == policy.BACKOFF_LIMIT
    assert "failure 2 of index 1, over backoffLimitPerIndex 1" in refusal.message
