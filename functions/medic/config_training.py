"""The training-job part of the configuration: which jobs Medic may restart, and which failures are worth it.

Re-exported by :mod:`medic.config`, which composes these into :class:`medic.config.MedicConfig`.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Strict(BaseModel):
    """Every config model: unknown keys are errors (a typo must not pass as a default), values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class TrainingJobs(Strict):
    prefix: str = Field(min_length=1, max_length=63, pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*-?$")
    max_restarts: int | None = Field(default=None, ge=0, le=100)  # unset: guardrails.max_job_restarts
    # Without a checkpoint a restart starts from scratch: only when the team says that is fine.
    allow_restart_without_checkpoint: bool = False
    # Required: the execution roles these jobs run as, which Medic passes to the restarts (iam:PassRole on
    # exactly these); a job with another role is paged, not restarted.
    role_arns: list[str] = Field(default_factory=list, validate_default=True)
    # Required: the buckets of these jobs' checkpoints (s3:ListBucket on exactly these, to see a checkpoint
    # exists); a job checkpointing elsewhere is paged, not restarted.
    checkpoint_buckets: list[str] = Field(default_factory=list, validate_default=True)
    # Training plans (names) these jobs run on: a restart of a job on a plan needs CreateTrainingJob on the
    # plan too; a job on a plan not listed here is paged instead of restarted.
    training_plans: list[str] = Field(default_factory=list)
    # A failure for capacity (the insufficient_capacity rule: CapacityError, ...) is restarted after a backoff that
    # doubles with each restart of the lineage, from this many minutes up to capacity_backoff_max_minutes: capacity
    # comes back in minutes or hours, and restarts seconds apart spend the budget on the same shortage (issue 32).
    capacity_backoff_minutes: int = Field(default=5, ge=1, le=120)
    capacity_backoff_max_minutes: int = Field(default=60, ge=1, le=24 * 60)

    @field_validator("role_arns")
    @classmethod
    def _roles(cls, arns: list[str]) -> list[str]:
        if not arns:
            raise ValueError("required: the execution roles of these jobs, which Medic may pass to their restarts "
                             "(without it Medic could pass any role of the account); fix: role_arns: "
                             "[arn:aws:iam::<account>:role/<role>] (aws sagemaker describe-training-job "
                             "--training-job-name <job> --query RoleArn)")
        for arn in arns:
            if not re.fullmatch(r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}", arn):
                raise ValueError(f"not an IAM role ARN: {arn!r}")
        return arns

    @field_validator("training_plans")
    @classmethod
    def _plans(cls, plans: list[str]) -> list[str]:
        for plan in plans:  # TrainingPlanName in the SageMaker model
            if not re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}", plan):
                raise ValueError(f"not a training plan name: {plan!r}")
        return plans

    @field_validator("checkpoint_buckets")
    @classmethod
    def _buckets(cls, buckets: list[str]) -> list[str]:
        if not buckets:
            raise ValueError("required: the buckets of these jobs' checkpoints, which Medic lists to see a "
                             "checkpoint exists (without it Medic could list any bucket); fix: checkpoint_buckets: "
                             "[<bucket>] (aws sagemaker describe-training-job --training-job-name <job> "
                             "--query CheckpointConfig.S3Uri)")
        for bucket in buckets:
            if not re.match(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", bucket):
                raise ValueError(f"not an S3 bucket name: {bucket!r}")
        return buckets


class FailureRule(Strict):
    """A FailureReason pattern (case-insensitive regex) and whether such a failure is worth a restart."""

    match: str = Field(min_length=1, max_length=512)
    retryable: bool
    label: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_]+$")

    @field_validator("match")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"not a valid regular expression ({error}): {pattern!r}") from None
        return pattern


# First match wins. Hard user errors first (a restart would fail the same way); then the failures SageMaker
# itself names (InternalServerError, CapacityError) and the specific signatures of broken infrastructure in a
# traceback (XIDs, ECC, NCCL/EFA timeouts); then user code: an AlgorithmError/ClientError or a Python
# exception wins over the generic words after it ("hardware", "health check", "internal error", "interrupt"),
# which user code also prints. A reason matching nothing is unknown: Medic pages and does not restart.
# Real FailureReason shapes: "AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"KeyError: ...\"
# \nCommand \"...\", exit code: 1", "CapacityError: Unable to provision requested ML compute capacity. ...",
# "InternalServerError: We encountered an internal error. Please try again." (SageMaker; the SageMaker Python
# SDK raises its CapacityError on "CapacityError" in the reason).
DEFAULT_FAILURE_RULES = (
    FailureRule(label="validation_error", retryable=False,
                match=r"ValidationException|ValidationError|invalid (hyperparameter|input|argument|value)"),
    FailureRule(label="permission_error", retryable=False,
                match=r"AccessDenied|not authori[sz]ed|permission denied|Forbidden"),
    FailureRule(label="out_of_memory", retryable=False,
                match=r"CUDA out of memory|OutOfMemoryError|\bOOM\b|Cannot allocate memory"),
    FailureRule(label="internal_error", retryable=True, match=r"\bInternalServerError\b"),
    FailureRule(label="insufficient_capacity", retryable=True,
                match=r"CapacityError|InsufficientCapacity|insufficient capacity|Unable to provision requested ML "
                      r"compute capacity|capacity was reclaimed"),
    FailureRule(label="instance_health", retryable=True,
                match=r"\bXid\b|ECC error|fallen off the bus|instance health|unhealthy (instance|host|node)"),
    FailureRule(label="collective_timeout", retryable=True,
                match=r"NCCL|\bEFA\b|collective operation timeout|ProcessGroup.*timeout|Connection reset by peer"),
    FailureRule(label="user_code_error", retryable=False,
                match=r"AlgorithmError|ClientError|ExecuteUserScriptError|Traceback \(most recent call last\)"
                      r"|\b[A-Z]\w*(Error|Exception): "),
    FailureRule(label="internal_error", retryable=True, match=r"internal (server )?error"),
    FailureRule(label="hardware_suspected", retryable=True, match=r"hardware|health ?check"),
    FailureRule(label="interrupted", retryable=True, match=r"spot|interrupt|preempt"),
)
