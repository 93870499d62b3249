"""The typed Medic configuration: the one contract of ``medic.yaml``, shared by the CDK app and the handlers.

The CDK app loads ``medic.yaml`` into :class:`MedicConfig` and validates it whole (``parse_config``), then gives the
handlers the same model, serialized compactly, in the ``MEDIC_CONFIG`` environment variable. The contract is composed
of the sections every handler reads (:mod:`medic.config_core`: mode, guardrails, clusters, jobs), the job sections
(:mod:`medic.config_training`: training_jobs, batch_jobs, bedrock_jobs, job_failure_rules) and the ones only synth
reads (notify, event_archive_days, reserved_concurrency). A handler validates only the first (``CoreConfig``, its
``Deps.config``), so that a node event never builds the job models; a job flow reads the job sections alone
(``JobSections``, through ``Deps.jobs_config``); no handler builds this module's MedicConfig. Every name of the two
section modules is importable from here.
"""

from __future__ import annotations

import re

from pydantic import Field, ValidationError, field_validator

from medic.config_core import (
    ALARM_PREFIX,
    CANARY_DETAIL_TYPE,
    CANARY_LATE,
    CANARY_SOURCE,
    CLUSTER_ALARM_KINDS,
    CLUSTER_ARN_FOR_ID,
    CLUSTER_ID_PATTERN,
    CLUSTER_NAME_PATTERN,
    DEAD_LETTER_RETENTION,
    DEDUPE_DAYS,
    DEFAULT_PROTECTED_GROUPS,
    EKS_OIDC_ISSUER_PATTERN,
    EVENT_AGE_LIMIT,
    EVENT_CLOCK_SKEW,
    EVENT_SOURCE_LAG,
    EVENTBRIDGE_MAX_EVENT_AGE,
    INSTANCE_GROUP_PATTERN,
    JOB_ALARM_KINDS,
    K8S_NAMESPACE_PATTERN,
    K8S_OBJECT_NAME_PATTERN,
    KNOWN_CONTROLLER_GROUPS,
    LAMBDA_MAX_EVENT_AGE,
    REDELIVERY_WINDOW,
    SECTIONS_ELSEWHERE,
    WATCH_RETENTION,
    Cluster,
    CoreConfig,
    DeployMode,
    GuardrailOverrides,
    Guardrails,
    Job,
    K8sJobKind,
    KubernetesJob,
    Strict,
    WatchRule,
    alarm_name,
)
from medic.config_training import (
    BATCH_NAME_PATTERN,
    BEDROCK_JOB_NAME_PATTERN,
    DEFAULT_BATCH_FAILURE_RULES,
    DEFAULT_BEDROCK_FAILURE_RULES,
    DEFAULT_FAILURE_RULES,
    LINEAGE_PLACEHOLDER,
    BatchJobs,
    BedrockJobs,
    CheckpointLocation,
    FailureRule,
    JobSections,
    TrainingJobs,
    role_arns,
)

__all__ = [  # re-exported: the contract"s every name, from one module
    "ALARM_PREFIX", "BATCH_NAME_PATTERN", "BEDROCK_JOB_NAME_PATTERN", "BatchJobs", "BedrockJobs",
    "CANARY_DETAIL_TYPE", "CANARY_LATE", "CANARY_SOURCE", "CLUSTER_ALARM_KINDS", "CLUSTER_ARN_FOR_ID",
    "CLUSTER_ID_PATTERN", "CLUSTER_NAME_PATTERN", "CheckpointLocation", "Cluster", "ConfigError", "CoreConfig",
    "DEAD_LETTER_RETENTION", "DEDUPE_DAYS", "DEFAULT_BATCH_FAILURE_RULES", "DEFAULT_BEDROCK_FAILURE_RULES",
    "DEFAULT_FAILURE_RULES", "DEFAULT_PROTECTED_GROUPS", "DeployMode", "EKS_OIDC_ISSUER_PATTERN", "EMAIL_PATTERN",
    "EVENTBRIDGE_MAX_EVENT_AGE", "EVENT_AGE_LIMIT", "EVENT_CLOCK_SKEW", "EVENT_SOURCE_LAG", "FailureRule",
    "GuardrailOverrides", "Guardrails", "INSTANCE_GROUP_PATTERN", "JOB_ALARM_KINDS", "Job", "WATCH_RETENTION",
    "WatchRule",
    "K8S_NAMESPACE_PATTERN", "K8S_OBJECT_NAME_PATTERN", "K8sJobKind", "KNOWN_CONTROLLER_GROUPS", "KubernetesJob",
    "JobSections", "LAMBDA_MAX_EVENT_AGE", "LINEAGE_PLACEHOLDER", "MedicConfig", "Notify", "REDELIVERY_WINDOW",
    "SECTIONS_ELSEWHERE", "Strict", "TrainingJobs", "alarm_name", "cluster_id_notices", "describe_errors",
    "parse_config", "role_arns",
]

EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"


class Notify(Strict):
    emails: list[str] = []
    https: list[str] = []
    # The opt-out of "someone must get the pages" (infra/config.py refuses a config with neither emails nor https):
    # true when the topic is subscribed outside medic.yaml (aws sns subscribe on the PagingTopicArn output, AWS
    # Chatbot, an incident tool), so that pages do reach someone.
    subscribed_elsewhere: bool = False

    @field_validator("emails")
    @classmethod
    def _emails(cls, emails: list[str]) -> list[str]:
        for email in emails:
            if not re.match(EMAIL_PATTERN, email):
                raise ValueError(f"not an email address: {email!r}")
        return emails

    @field_validator("https")
    @classmethod
    def _https(cls, urls: list[str]) -> list[str]:
        for url in urls:
            if not url.startswith("https://"):
                raise ValueError(f"not an https:// URL: {url!r}")
        return urls


class MedicConfig(JobSections, CoreConfig):
    """The whole contract: the core sections (CoreConfig), the job sections (JobSections) and synth's own."""

    notify: Notify = Field(default_factory=lambda: Notify())
    # Days the EventBridge archive keeps every event Medic's rules match, for `medic backtest`. The archive's
    # RetentionDays also takes 0 (keep forever: storage grows without end), which Medic does not offer.
    event_archive_days: int = Field(default=30, ge=1, le=3650)
    # Each function gets its reserved concurrency (infra/components/function.py RESERVED_CONCURRENCY): a flood of one
    # kind of event cannot starve the others. false: none (an account whose concurrency limit is under their sum
    # plus the 100 Lambda keeps unreserved, where the deploy would fail).
    reserved_concurrency: bool = True

    def to_env(self) -> str:
        """Compact JSON for the handlers' MEDIC_CONFIG environment variable."""
        return self.model_dump_json(exclude_defaults=True)

    @classmethod
    def from_env(cls, value: str) -> MedicConfig:
        return cls.model_validate_json(value)


def cluster_id_notices(data: object) -> list[str]:
    """What synth says about each ``clusters[].id`` given as a full cluster ARN: the id taken from it."""
    clusters = data.get("clusters") if isinstance(data, dict) else None
    notices = []
    for index, cluster in enumerate(clusters if isinstance(clusters, list) else []):
        value = cluster.get("id") if isinstance(cluster, dict) else None
        found = re.fullmatch(CLUSTER_ARN_FOR_ID, value) if isinstance(value, str) else None
        if found:
            notices.append(f"clusters.{index}.id: took the cluster id {found['id']!r} from the ARN {value} (account "
                           f"{found['account']}, region {found['region']}); Medic acts on cluster {found['id']} in "
                           "the account and region the stack is deployed to")
    return notices


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names each bad key and value."""


def describe_errors(error: ValidationError, source: str) -> ConfigError:
    lines = [f"invalid Medic config {source}:"]
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"]) or "(top level)"
        value = item.get("input")
        shown = "" if isinstance(value, dict) else f" (got {value!r})"
        lines.append(f"  {key}: {item['msg']}{shown}")
    return ConfigError("\n".join(lines))


def parse_config(data: object, source: str = "") -> MedicConfig:
    try:
        return MedicConfig.model_validate(data)
    except ValidationError as error:
        raise describe_errors(error, source) from None
