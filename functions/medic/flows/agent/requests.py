"""The operators' requests to the agent channel: "Medic Requeue Job" (requeue a Slurm job, restart an EKS job) and
"Medic Release Node" (return a node Medic quarantined), as EventBridge delivers them from `medic requeue` and `medic
release` or any other sender. Of Medic's functions only the requeue function parses them (and `medic explain`, with
the same models); the reconciler, which builds and sweeps agent commands too, never loads them."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from medic.config_core import CLUSTER_NAME_PATTERN, K8S_NAMESPACE_PATTERN
from medic.core.models import MedicEvent
from medic.core.text import MAX_REASON_CHARS, one_line_text, shown
from medic.flows.agent.commands import JOB_NAME, canonical_job_id, matches, valid_job_id, valid_job_name

# Who the sender says asked (an IAM user or role session name, an e-mail): claimed, not verified.
REQUESTED_BY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+=,:/-]{0,127}", re.ASCII)


def _checked_requester(value: str | None) -> str | None:
    """An operator request's `requested_by` (the CLI sends the caller's ARN): an ARN or nothing."""
    if value is not None and not matches(REQUESTED_BY, value):
        raise ValueError(f"must match {REQUESTED_BY.pattern}, got {shown(value)}")
    return value


class RequeueJobDetail(BaseModel):
    """What an operator (or a tool) asks for: requeue one Slurm job, by id or by name (or by id, naming the job
    so that the name's restart budget is spent too), and why; `requested_by` is who the sender says it is."""

    model_config = ConfigDict(extra="forbid", strict=True)

    cluster: str = Field(pattern=CLUSTER_NAME_PATTERN)
    job_name: str | None = None
    job_id: str | None = None
    # EKS clusters: the job's Kubernetes namespace (job_name is then the object's name; no job_id)
    namespace: str | None = Field(default=None, pattern=K8S_NAMESPACE_PATTERN)
    reason: str = Field(min_length=1, max_length=2000)
    # Claimed by the sender: EventBridge does not say who called PutEvents (CloudTrail does).
    requested_by: str | None = None

    @field_validator("job_id")
    @classmethod
    def _job_id(cls, value: str | None) -> str | None:
        if value is not None and not valid_job_id(value):
            raise ValueError(f"must be 1-10 ASCII digits, got {shown(value)}")
        return None if value is None else canonical_job_id(value)

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        text = one_line_text(value)
        if not text:
            raise ValueError("must say why, in printable text")
        if len(text) > MAX_REASON_CHARS:
            raise ValueError(f"must be at most {MAX_REASON_CHARS} characters on one line, got {len(text)}")
        return text

    _requested_by = field_validator("requested_by")(_checked_requester)

    @field_validator("job_name")
    @classmethod
    def _job_name(cls, value: str | None) -> str | None:
        if value is not None and not valid_job_name(value):
            raise ValueError(f"must match {JOB_NAME.pattern}, got {shown(value)}")
        return value

    @model_validator(mode="after")
    def _one_target(self) -> RequeueJobDetail:
        # Both: requeue the id, and spend the name's restart budget too (the one alarms and requests by name use).
        if self.job_id is None and self.job_name is None:
            raise ValueError("give job_id or job_name (or both: the id is requeued, both budgets are spent)")
        if self.namespace is not None and (self.job_id is not None or self.job_name is None):
            raise ValueError("a Kubernetes job (namespace given) is named by job_name alone, without job_id")
        return self

    @property
    def job(self) -> str:
        return self.job_id if self.job_id is not None else str(self.job_name)


class RequeueJobEvent(MedicEvent):
    """source "medic.operator", detail-type "Medic Requeue Job"."""

    source: Literal["medic.operator"]
    account: str = Field(pattern=r"^[0-9]{12}$")  # the sending account: recorded as the requester's
    detail_type: Literal["Medic Requeue Job"] = Field(alias="detail-type")
    detail: RequeueJobDetail


RELEASE_DETAIL_TYPE = "Medic Release Node"
# What an operator may call a quarantined node: its NodeLogicalId, instance id, Slurm or Kubernetes node name (each
# matches; the ledger says which node it is).
NODE_REFERENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}", re.ASCII)


class ReleaseNodeDetail(BaseModel):
    """`medic release NODE --cluster C`: return a node Medic quarantined to service; `requested_by` is who the sender
    says it is (the CLI sends its caller's ARN from STS; claimed, not verified: CloudTrail has the PutEvents caller)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    cluster: str = Field(pattern=CLUSTER_NAME_PATTERN)
    node: str
    reason: str | None = Field(default=None, max_length=2000)
    requested_by: str | None = None

    @field_validator("node")
    @classmethod
    def _node(cls, value: str) -> str:
        if not matches(NODE_REFERENCE, value):
            raise ValueError(f"must be a NodeLogicalId, instance id or node name ({NODE_REFERENCE.pattern}), got "
                             f"{shown(value)}")
        return value

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str | None) -> str | None:
        text = one_line_text(value) if value is not None else None
        return text[:MAX_REASON_CHARS] if text else None

    _requested_by = field_validator("requested_by")(_checked_requester)


class ReleaseNodeEvent(MedicEvent):
    """source "medic.operator", detail-type "Medic Release Node"."""

    source: Literal["medic.operator"]
    account: str = Field(pattern=r"^[0-9]{12}$")
    detail_type: Literal["Medic Release Node"] = Field(alias="detail-type")
    detail: ReleaseNodeDetail
