"""The training-job part of the configuration: which jobs Medic may restart, and which failures are worth it.

Re-exported by :mod:`medic.config`, whose :class:`medic.config.MedicConfig` composes :class:`JobSections`.
"""

from __future__ import annotations

import json
import re

from pydantic import Field, field_validator, model_validator

from medic.config_core import Guardrails, Strict


def role_arns(arns: list[str]) -> list[str]:
    """IAM role ARNs, each (a ValueError names the first that is not one)."""
    for arn in arns:
        if not re.fullmatch(r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}", arn):
            raise ValueError(f"not an IAM role ARN: {arn!r}")
    return arns


class TrainingJobs(Strict):
    prefix: str = Field(min_length=1, max_length=63, pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*-?$")
    max_restarts: int | None = Field(default=None, ge=0, le=100)  # unset: guardrails.max_job_restarts
    # Without a checkpoint a restart starts from scratch: only when the team says that is fine.
    allow_restart_without_checkpoint: bool = False
    # Required: the execution roles these jobs run as, which Medic passes to the restarts (iam:PassRole on
    # exactly these); a job with another role is paged, not restarted.
    role_arns: list[str] = Field(default=[], validate_default=True)
    # Required: the buckets of these jobs' checkpoints (s3:ListBucket on exactly these, to see a checkpoint
    # exists); a job checkpointing elsewhere is paged, not restarted.
    checkpoint_buckets: list[str] = Field(default=[], validate_default=True)
    # Training plans (names) these jobs run on: a restart of a job on a plan needs CreateTrainingJob on the
    # plan too; a job on a plan not listed here is paged instead of restarted.
    training_plans: list[str] = []
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
        return role_arns(arns)

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


# AWS Batch names: a job, job queue or job definition name is "up to 128 letters (uppercase and lowercase),
# numbers, hyphens, and underscores", the first a letter or number (AWS Batch API reference, SubmitJob jobName,
# CreateJobQueue jobQueueName, RegisterJobDefinition jobDefinitionName).
BATCH_NAME_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$"
LINEAGE_PLACEHOLDER = "{lineage}"


class CheckpointLocation(Strict):
    """Where a team's Batch jobs write their checkpoints: a bucket and a key prefix, in which ``{lineage}`` stands
    for the lineage's root job name (the name the job was first submitted under: its restarts carry the same
    parameters and environment, so they write where it wrote)."""

    bucket: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
    prefix: str = Field(min_length=1, max_length=1024)

    @field_validator("prefix")
    @classmethod
    def _placeholders(cls, prefix: str) -> str:
        if prefix.startswith("/"):
            raise ValueError(f"an S3 key prefix does not start with '/': {prefix!r}")
        if "{" in prefix.replace(LINEAGE_PLACEHOLDER, "") or "}" in prefix.replace(LINEAGE_PLACEHOLDER, ""):
            raise ValueError(f"the only placeholder a checkpoint prefix may hold is {LINEAGE_PLACEHOLDER}: {prefix!r}")
        return prefix

    def prefix_for(self, lineage: str) -> str:
        return self.prefix.replace(LINEAGE_PLACEHOLDER, lineage)

    def uri_for(self, lineage: str) -> str:
        return f"s3://{self.bucket}/{self.prefix_for(lineage)}"


class BatchJobs(Strict):
    """AWS Batch jobs Medic may restart (resubmit): a team's jobs by name prefix, in its queues, of its job
    definitions; FAILED is Batch's last word (its own retryStrategy already ran)."""

    prefix: str = Field(min_length=1, max_length=128, pattern=BATCH_NAME_PATTERN)
    # Required: the queues (names) these jobs run in. The rule takes FAILED events of these queues only, and
    # Medic submits restarts only to them (batch:SubmitJob on exactly these).
    job_queues: list[str] = Field(min_length=1)
    # Required: the job definitions (names; every revision) these jobs use (batch:SubmitJob on exactly these);
    # a job of another definition is paged, not restarted.
    job_definitions: list[str] = Field(min_length=1)
    max_restarts: int | None = Field(default=None, ge=0, le=100)  # unset: guardrails.max_job_restarts
    # Batch has no checkpoint of its own: where these jobs write theirs. Medic restarts only when one exists there
    # (s3:ListBucket on exactly these buckets), unless allow_restart_without_checkpoint.
    checkpoint_buckets: list[CheckpointLocation] = []
    allow_restart_without_checkpoint: bool = False
    # The failure rules for these jobs (first match wins); unset: DEFAULT_BATCH_FAILURE_RULES.
    failure_rules: list[FailureRule] | None = None

    @field_validator("job_queues", "job_definitions")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not re.fullmatch(BATCH_NAME_PATTERN, name):
                raise ValueError(f"not an AWS Batch name (a name, not an ARN; up to 128 letters, numbers, hyphens "
                                 f"and underscores): {name!r}")
        return names

    @model_validator(mode="after")
    def _checkpoints(self) -> BatchJobs:
        if not self.checkpoint_buckets and not self.allow_restart_without_checkpoint:
            raise ValueError("checkpoint_buckets: required (Batch has no checkpoint of its own: Medic restarts only "
                             "when one exists where these jobs write theirs); fix: checkpoint_buckets: [{bucket: "
                             "<bucket>, prefix: \"checkpoints/{lineage}/\"}], or allow_restart_without_checkpoint: "
                             "true to restart from scratch")
        return self


# A Batch job's failure, as Medic classifies it: its statusReason, then its last attempt's statusReason, its
# container's reason and exit code ("statusReason: ...; attempt: ...; container: ...; exit code: N",
# flows/jobs/batch_events.failure_text). First match wins; a text matching nothing is unknown: Medic pages.
# The strings are Batch's and ECS's own:
# - "Host EC2 (instance i-...) terminated.": the instance under the job went away (a Spot reclaim among others);
#   AWS CDK's aws_batch Reason.SPOT_INSTANCE_RECLAIMED matches it as onStatusReason "Host EC2*"
#   (aws-cdk-lib aws-batch/lib/job-definition-base.ts), and the EC2-instance-failure scenario of "Automated job
#   retries" (docs.aws.amazon.com/batch/latest/userguide/job_retries.html) is this one;
# - CannotPullContainerError / CannotStartContainerError / ResourceInitializationError / "Task failed to start" /
#   DockerTimeoutError: ECS's stopped-task errors ("Amazon ECS stopped task error messages",
#   docs.aws.amazon.com/AmazonECS/latest/developerguide/stopped-task-error-codes.html), "Task failed to start"
#   also in Batch's evaluateOnExit example (job_retries.html). A pull error naming a missing image or a denied
#   registry is the job's own (it fails the same way again), matched first;
# - "OutOfMemoryError: Container killed due to memory usage" (ECS stopped-task errors);
# - "Job attempt duration exceeded timeout": the job's own `timeout` (assumption: the wording as users report it;
#   no AWS page lists it verbatim);
# - "Essential container in task exited" with a non-zero exit code, and no infrastructure reason: the job's code.
DEFAULT_BATCH_FAILURE_RULES = (
    FailureRule(label="image_not_found", retryable=False,
                match=r"CannotPullContainerError.*(not found|manifest unknown|does not exist|pull access denied"
                      r"|access ?denied|unauthorized|repository .* not exist)"),
    FailureRule(label="host_terminated", retryable=True, match=r"Host EC2 \(instance [^)]*\) (terminated|stopped)"),
    FailureRule(label="spot_reclaimed", retryable=True, match=r"\bSpot\b.*(reclaim|interrupt)"),
    FailureRule(label="container_start_error", retryable=True,
                match=r"CannotPullContainerError|CannotStartContainerError|CannotInspectContainerError"
                      r"|DockerTimeoutError|Task failed to start"),
    FailureRule(label="resource_initialization", retryable=True, match=r"ResourceInitializationError"),
    FailureRule(label="internal_error", retryable=True, match=r"\bInternal ?(Server)? ?Error\b|internal error"),
    FailureRule(label="out_of_memory", retryable=False,
                match=r"OutOfMemoryError|Container killed due to memory usage|CUDA out of memory"),
    FailureRule(label="job_timeout", retryable=False, match=r"duration exceeded timeout"),
    FailureRule(label="job_exit_code", retryable=False, match=r"exit code: -?[1-9][0-9]*\b"),
    FailureRule(label="essential_container_exited", retryable=False, match=r"Essential container in task exited"),
)


# Bedrock model customization job names: [a-zA-Z0-9](-*[a-zA-Z0-9\+\-\.])*, at most 63 (botocore's bedrock model,
# CreateModelCustomizationJob jobName).
BEDROCK_JOB_NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9+\-.])*$"


class BedrockJobs(Strict):
    """Amazon Bedrock model customization jobs (fine-tuning, continued pre-training, distillation) Medic may start
    again: they do not resume from a checkpoint, so a restart starts over, and only where the team allows it."""

    prefix: str = Field(min_length=1, max_length=63, pattern=BEDROCK_JOB_NAME_PATTERN)
    # Required: the service roles these jobs run as, which Medic passes to the restarts (iam:PassRole on exactly
    # these, to bedrock.amazonaws.com); a job with another role is paged, not restarted.
    role_arns: list[str] = Field(min_length=1)
    max_restarts: int | None = Field(default=None, ge=0, le=100)  # unset: guardrails.max_job_restarts
    # A restart starts over and repeats the job's training time and cost: only when the team says that is fine.
    allow_restart_from_scratch: bool = False
    # The failure rules for these jobs (first match wins); unset: DEFAULT_BEDROCK_FAILURE_RULES.
    failure_rules: list[FailureRule] | None = None

    @field_validator("role_arns")
    @classmethod
    def _roles(cls, arns: list[str]) -> list[str]:
        return role_arns(arns)


# A Bedrock job's failureMessage, as Medic classifies it. No AWS page lists the messages a failed customization job
# carries; these rules follow the errors botocore's bedrock model declares for its operations (ValidationException,
# AccessDeniedException, ServiceQuotaExceededException: the job's or the account's; InternalServerException,
# ThrottlingException: the service's) and the service's wording for capacity (assumption). First match wins; a
# message matching nothing is unknown: Medic pages.
DEFAULT_BEDROCK_FAILURE_RULES = (
    FailureRule(label="quota_exceeded", retryable=False, match=r"ServiceQuotaExceeded|quota|limit exceeded"),
    FailureRule(label="validation_error", retryable=False,
                match=r"ValidationException|validation (error|failed)|invalid|malformed|does not match the format"),
    FailureRule(label="permission_error", retryable=False, match=r"AccessDenied|not authori[sz]ed|permission"),
    FailureRule(label="internal_error", retryable=True,
                match=r"InternalServerException|internal (server |service )?error|service error|ServiceUnavailable"),
    FailureRule(label="insufficient_capacity", retryable=True, match=r"capacity|Throttl|throttl|try again later"),
)

# The contract's job sections (what JobSections validates from MEDIC_CONFIG; guardrails for max_job_restarts).
JOB_SECTIONS = ("guardrails", "training_jobs", "batch_jobs", "bedrock_jobs", "job_failure_rules")


class JobSections(Strict):
    """The job sections and what the job flows ask of them. The training and managed-job handlers validate these alone
    from MEDIC_CONFIG (``Deps.jobs_config``: the other sections were validated at synth, where MedicConfig, which
    composes this, validates the whole); no handler builds MedicConfig or synth's own sections."""

    guardrails: Guardrails = Field(default_factory=lambda: Guardrails())  # max_job_restarts: an entry's default
    training_jobs: list[TrainingJobs] = []
    batch_jobs: list[BatchJobs] = []  # AWS Batch jobs Medic may restart (resubmit)
    # Amazon Bedrock model customization jobs Medic may start again (from scratch, where allowed)
    bedrock_jobs: list[BedrockJobs] = []
    job_failure_rules: list[FailureRule] = Field(default_factory=lambda: list(DEFAULT_FAILURE_RULES))

    @classmethod
    def from_env(cls, value: str) -> JobSections:
        """The job sections of MEDIC_CONFIG (the whole contract, validated at synth); the others are left unread."""
        data = json.loads(value)
        return cls.model_validate({key: item for key, item in data.items() if key in JOB_SECTIONS}
                                  if isinstance(data, dict) else data)

    def training_jobs_for(self, job_name: str) -> TrainingJobs | None:
        """The most specific configured prefix matching the job (None: Medic leaves it alone)."""
        matching = [spec for spec in self.training_jobs if job_name.startswith(spec.prefix)]
        return max(matching, key=lambda spec: len(spec.prefix), default=None)

    def batch_jobs_for(self, job_name: str) -> BatchJobs | None:
        """The most specific configured Batch prefix matching the job (None: Medic leaves it alone)."""
        matching = [spec for spec in self.batch_jobs if job_name.startswith(spec.prefix)]
        return max(matching, key=lambda spec: len(spec.prefix), default=None)

    def bedrock_jobs_for(self, job_name: str) -> BedrockJobs | None:
        """The most specific configured Bedrock prefix matching the job (None: Medic leaves it alone)."""
        matching = [spec for spec in self.bedrock_jobs if job_name.startswith(spec.prefix)]
        return max(matching, key=lambda spec: len(spec.prefix), default=None)

    @staticmethod
    def bedrock_failure_rules(spec: BedrockJobs) -> list[FailureRule]:
        """The entry's own failure rules, else Medic's defaults for Bedrock (DEFAULT_BEDROCK_FAILURE_RULES)."""
        return list(DEFAULT_BEDROCK_FAILURE_RULES) if spec.failure_rules is None else list(spec.failure_rules)

    @staticmethod
    def batch_failure_rules(spec: BatchJobs) -> list[FailureRule]:
        """The entry's own failure rules, else Medic's defaults for Batch (DEFAULT_BATCH_FAILURE_RULES)."""
        return list(DEFAULT_BATCH_FAILURE_RULES) if spec.failure_rules is None else list(spec.failure_rules)

    def max_restarts_for(self, spec: TrainingJobs | BatchJobs | BedrockJobs) -> int:
        return self.guardrails.max_job_restarts if spec.max_restarts is None else spec.max_restarts

