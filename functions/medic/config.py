"""The typed Medic configuration, shared by the CDK app (validated at synth) and the handlers.

The CDK app loads ``medic.yaml`` into :class:`MedicConfig`; the handlers receive the same
model, serialized compactly, in the ``MEDIC_CONFIG`` environment variable.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

# SageMaker HyperPod cluster names: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$
CLUSTER_NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
INSTANCE_GROUP_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"

Mode = Literal["act", "dry_run"]
RuntimeMode = Literal["act", "dry_run", "paused"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Notify(_Strict):
    emails: list[str] = Field(default_factory=list)
    https: list[str] = Field(default_factory=list)

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


class Guardrails(_Strict):
    max_node_actions_per_hour: int = Field(default=4, ge=0, le=1000)
    max_fraction_in_repair: float = Field(default=0.25, gt=0, le=1)
    node_cooldown_minutes: int = Field(default=60, ge=1, le=24 * 60)
    max_job_restarts: int = Field(default=3, ge=0, le=100)
    # How long a node Medic acted on counts as "in repair" for the breaker.
    repair_minutes: int = Field(default=30, ge=1, le=24 * 60)
    # A node that fails again within this window after a reboot is replaced instead.
    reboot_escalation_hours: int = Field(default=24, ge=1, le=24 * 7)


class GuardrailOverrides(_Strict):
    """Per-cluster overrides: any guardrail left unset takes the global value."""

    max_node_actions_per_hour: int | None = Field(default=None, ge=0, le=1000)
    max_fraction_in_repair: float | None = Field(default=None, gt=0, le=1)
    node_cooldown_minutes: int | None = Field(default=None, ge=1, le=24 * 60)
    max_job_restarts: int | None = Field(default=None, ge=0, le=100)
    repair_minutes: int | None = Field(default=None, ge=1, le=24 * 60)
    reboot_escalation_hours: int | None = Field(default=None, ge=1, le=24 * 7)


class Cluster(_Strict):
    name: str = Field(pattern=CLUSTER_NAME_PATTERN)
    # The cluster id, the last part of its ARN (arn:aws:sagemaker:<region>:<account>:cluster/<id>):
    # IAM grants the node actions on exactly these ARNs.
    id: str = Field(pattern=r"^[a-z0-9]{12}$")
    orchestrator: Literal["slurm", "eks"]
    node_recovery: Literal["automatic", "none"] = "none"
    protected_groups: list[str] = Field(default_factory=lambda: ["controller", "login"])
    guardrails: GuardrailOverrides = Field(default_factory=GuardrailOverrides)

    @field_validator("protected_groups")
    @classmethod
    def _groups(cls, groups: list[str]) -> list[str]:
        for group in groups:
            if not re.match(INSTANCE_GROUP_PATTERN, group):
                raise ValueError(f"not an instance group name: {group!r}")
        return groups


class TrainingJobs(_Strict):
    prefix: str = Field(min_length=1, max_length=63, pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*-?$")
    max_restarts: int = Field(default=3, ge=0, le=100)


class Job(_Strict):
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._-]+$")
    cluster: str
    stall_minutes: int = Field(default=10, ge=1, le=24 * 60)


class MedicConfig(_Strict):
    mode: Mode = "act"
    notify: Notify = Field(default_factory=Notify)
    guardrails: Guardrails = Field(default_factory=Guardrails)
    clusters: list[Cluster] = Field(min_length=1)
    training_jobs: list[TrainingJobs] = Field(default_factory=list)
    jobs: list[Job] = Field(default_factory=list)
    # Powertools for AWS Lambda (Python) v3 public layer version (per region, same number).
    powertools_layer_version: int = Field(default=27, ge=1)

    @model_validator(mode="after")
    def _cross_references(self) -> MedicConfig:
        names = [cluster.name for cluster in self.clusters]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise ValueError(f"clusters: duplicate cluster name(s) {duplicated}")
        for index, job in enumerate(self.jobs):
            if job.cluster not in names:
                raise ValueError(
                    f"jobs.{index}.cluster: {job.cluster!r} is not a configured cluster (known: {names})"
                )
        return self

    def cluster(self, name: str) -> Cluster | None:
        return next((cluster for cluster in self.clusters if cluster.name == name), None)

    def guardrails_for(self, cluster: Cluster) -> Guardrails:
        overrides = cluster.guardrails.model_dump(exclude_none=True)
        return self.guardrails.model_copy(update=overrides)

    def to_env(self) -> str:
        """Compact JSON for the handlers' MEDIC_CONFIG environment variable."""
        return self.model_dump_json(exclude_defaults=True)

    @classmethod
    def from_env(cls, value: str) -> MedicConfig:
        return cls.model_validate_json(value)


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
