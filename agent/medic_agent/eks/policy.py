"""Would deleting a job's pods restart it, or end it? The rules of each job's controller, read from the job object
the agent just fetched. Pure: no I/O. A refusal names why and what the job's owner can change; nothing is deleted.

Sources, per rule:
- Finished jobs. A job whose conditions say it is over is never reconciled again: kubeflow/training-operator
  (v1.7-v1.9) pkg/controller.v1/common/job.go `ReconcileJobs` returns early when `IsFinished` (a `Succeeded` or
  `Failed` condition with status True, pkg/util/status.go); the batch/v1 Job controller's terminal conditions are
  `Complete` and `Failed`, announced by `SuccessCriteriaMet` / `FailureTarget` while its pods terminate (Kubernetes
  docs, Jobs, "Terminal Job conditions"); the HyperPodPyTorchJob CRD names its terminal condition types "Complete
  or Failed" (aws/sagemaker-hyperpod-cli, training/config/hyperpod_pytorch_job_status.py, Conditions.type). A
  finished job's pods hold its logs: none is deleted.
- PyTorchJob restartPolicy (per replica spec; default OnFailure: pytorch_types.go
  PyTorchJobDefaultRestartPolicy). pkg/core/status.go `UpdateJobReplicaStatuses` counts a Running pod with a
  deletionTimestamp as failed; pytorchjob_controller.go `UpdateJobStatus` then marks the job `Failed` when the
  replica type's restartPolicy is `Never` (for good: see above), `Restarting` otherwise. Under `ExitCode`,
  common/pod.go `ReconcilePods` recreates a failed pod only when its container's exit code is retryable
  (pkg/util/train/train_util.go `IsRetryableExitCode`: exitCode >= 128; common_types.go: "1-127: permanent error,
  do not restart") and fails the job otherwise: a deleted pod's container exits on SIGTERM with whatever its
  launcher returns, 128 + 15 = 143 only if it lets the signal kill it. OnFailure and Always recreate it.
- batch/v1 Job backoff. The Job controller counts a pod with a deletionTimestamp that has not Succeeded as failed
  (kubernetes pkg/controller/job/job_controller.go `isPodFailed`), and fails the Job when failed > backoffLimit
  (`exceedsBackoffLimit`; backoffLimit defaults to 6, or to 2147483647 with backoffLimitPerIndex: Job API
  reference). With backoffLimitPerIndex (Indexed Jobs) an index fails for good once its failures, kept on its pods
  in the `batch.kubernetes.io/job-index-failure-count` annotation, exceed the limit. A podFailurePolicy rule may
  ignore some failures, and `podReplacementPolicy: Failed` delays the count to the pod's terminal phase, but it is
  still counted unless a rule matches: Medic counts every deleted pod, the safe reading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# A refusal's code: Medic's page says what to change for each (functions/medic/flows/agent/commands.py).
JOB_FINISHED = "job_finished"
RESTART_POLICY_NEVER = "restart_policy_never"
RESTART_POLICY_EXIT_CODE = "restart_policy_exit_code"
BACKOFF_LIMIT = "backoff_limit"

FINISHED_CONDITIONS = {
    "PyTorchJob": ("Succeeded", "Failed"),
    "HyperPodPyTorchJob": ("Complete", "Completed", "Succeeded", "Failed"),
    "Job": ("Complete", "Failed", "SuccessCriteriaMet", "FailureTarget"),
}
PYTORCHJOB_DEFAULT_RESTART_POLICY = "OnFailure"
RESTARTABLE_POLICIES = ("OnFailure", "Always")
DEFAULT_BACKOFF_LIMIT = 6
PER_INDEX_DEFAULT_BACKOFF_LIMIT = 2_147_483_647
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"


@dataclass(frozen=True)
class Refusal:
    code: str
    message: str  # short (Medic quotes at most 200 characters of it); the page says what to change


def _status(job: dict) -> dict:
    return job.get("status") or {}


def _spec(job: dict) -> dict:
    return job.get("spec") or {}


def finished(kind: str, job: dict) -> Refusal | None:
    """The job's terminal condition (status True), if it has one."""
    for condition in _status(job).get("conditions") or []:
        if condition.get("type") in FINISHED_CONDITIONS.get(kind, ()) and condition.get("status") == "True":
            since = condition.get("lastTransitionTime")
            return Refusal(JOB_FINISHED, f"the job has finished (condition {condition.get('type')}"
                                         f"{' since ' + str(since) if since else ''}): never restarted, its pods "
                                         "keep its logs; no pod deleted")
    return None


def restart_policy(job: dict, *, exit_code_restartable: bool) -> Refusal | None:
    """A PyTorchJob whose replica specs would turn the deletion of their pods into a failed job."""
    policies = {str(replica_type): str((spec or {}).get("restartPolicy") or PYTORCHJOB_DEFAULT_RESTART_POLICY)
                for replica_type, spec in (_spec(job).get("pytorchReplicaSpecs") or {}).items()}
    never = sorted(name for name, policy in policies.items() if policy == "Never")
    if never:
        return Refusal(RESTART_POLICY_NEVER, (
            f"restartPolicy Never ({', '.join(never)}): the training-operator fails the job for good when a pod is "
            "deleted, and recreates none; no pod deleted"))
    exit_code = sorted(name for name, policy in policies.items() if policy == "ExitCode")
    if exit_code and not exit_code_restartable:
        return Refusal(RESTART_POLICY_EXIT_CODE, (
            f"restartPolicy ExitCode ({', '.join(exit_code)}): a deleted pod is recreated only on exit codes >= 128, "
            "and launcher_exits_128_or_more_on_sigterm is not set; no pod deleted"))
    unknown = sorted(name for name, policy in policies.items()
                     if policy not in (*RESTARTABLE_POLICIES, "Never", "ExitCode"))
    if unknown:  # a value the operator does not define: it would not recreate the pods either
        return Refusal(RESTART_POLICY_NEVER, (
            f"restartPolicy {', '.join(f'{name}={policies[name]!r}' for name in unknown)} is not one the "
            "training-operator recreates pods under; no pod deleted"))
    return None


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def backoff(job: dict, deleting: list[dict]) -> Refusal | None:
    """A batch/v1 Job that the deletion of `deleting` (pods not already terminating) would fail for good."""
    spec, status = _spec(job), _status(job)
    per_index = spec.get("backoffLimitPerIndex")
    if isinstance(per_index, int) and not isinstance(per_index, bool):
        for pod in deleting:
            annotations = (pod.get("metadata") or {}).get("annotations") or {}
            index = annotations.get(COMPLETION_INDEX, "?")
            try:
                failures = int(annotations.get(INDEX_FAILURE_COUNT, "0"))
            except ValueError:
                failures = 0
            if failures + 1 > per_index:
                return Refusal(BACKOFF_LIMIT, (
                    f"deleting pod {(pod.get('metadata') or {}).get('name')} would be failure {failures + 1} of index "
                    f"{index}, over backoffLimitPerIndex {per_index}: the index would fail for good; no pod deleted"))
    limit = _int(spec.get("backoffLimit"),
                 PER_INDEX_DEFAULT_BACKOFF_LIMIT if per_index is not None else DEFAULT_BACKOFF_LIMIT)
    uncounted = len(((status.get("uncountedTerminatedPods") or {}).get("failed")) or [])
    failed = _int(status.get("failed"), 0) + uncounted
    if failed + len(deleting) > limit:
        return Refusal(BACKOFF_LIMIT, (
            f"deleting {len(deleting)} pod(s) would make {failed + len(deleting)} failures, over backoffLimit {limit} "
            f"({failed} already): the Job would fail for good; no pod deleted"))
    return None
