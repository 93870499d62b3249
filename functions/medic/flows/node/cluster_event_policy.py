"""HyperPod cluster events ("SageMaker HyperPod Cluster Event"): the typed event and what it means.

Pure: classification from the event's description and failure message; the use case records it
against the node's open incident (cluster_events.py).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from medic.config_core import CLUSTER_NAME_PATTERN, INSTANCE_GROUP_PATTERN
from medic.core.models import CLUSTER_ARN_PATTERN, INSTANCE_ID_PATTERN, Fault, MedicEvent


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class InstanceFailure(_Loose):
    FailureMessage: str | None = Field(default=None, max_length=4096)
    NodeLogicalId: str | None = Field(default=None, max_length=256)


class Metadata(_Loose):
    Instance: InstanceFailure | None = None


class NestedDetails(_Loose):
    EventMetadata: Metadata | None = None


class ClusterEventDetails(_Loose):
    EventId: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9-]+$")
    ClusterArn: str = Field(pattern=CLUSTER_ARN_PATTERN)
    ClusterName: str = Field(pattern=CLUSTER_NAME_PATTERN)
    InstanceGroupName: str | None = Field(default=None, pattern=INSTANCE_GROUP_PATTERN)
    InstanceId: str | None = Field(default=None, pattern=INSTANCE_ID_PATTERN)
    ResourceType: str = Field(default="", max_length=64)
    EventLevel: str = Field(pattern=r"^(Info|Warn|Error)$")
    Description: str = Field(default="", max_length=4096)
    EventDetails: NestedDetails | None = None

    @property
    def failure_message(self) -> str:
        nested = self.EventDetails.EventMetadata if self.EventDetails else None
        instance = nested.Instance if nested else None
        return (instance.FailureMessage or "") if instance else ""

    @property
    def node_logical_id(self) -> str | None:
        """EventMetadata.Instance.NodeLogicalId: the node across replacements (the instance id changes)."""
        nested = self.EventDetails.EventMetadata if self.EventDetails else None
        return nested.Instance.NodeLogicalId if nested and nested.Instance else None


class ClusterEventDetail(_Loose):
    EventDetails: ClusterEventDetails


class ClusterEvent(MedicEvent):
    detail: ClusterEventDetail


_RULES = (
    (Fault.CAPACITY_SHORTFALL, re.compile(r"capacity|InsufficientInstance", re.IGNORECASE)),
    (Fault.LIFECYCLE_SCRIPT_FAILED, re.compile(r"lifecycle|life cycle|on_create|provisioning script", re.IGNORECASE)),
    (Fault.REPAIR_FAILED, re.compile(r"(reboot|replace|replacement|repair|recovery)\b.*\bfail|"
                                     r"fail\w*\b.*\b(reboot|replace|replacement|repair|recovery)", re.IGNORECASE)),
)


def classify_cluster_event(details: ClusterEventDetails) -> Fault:
    """The most specific known cause; the failure message is read before the description."""
    for text in (details.failure_message, details.Description):
        for fault, pattern in _RULES:
            if text and pattern.search(text):
                return fault
    return Fault.CLUSTER_ERROR


def cluster_log_group(cluster_name: str, cluster_arn: str) -> str:
    """Where HyperPod writes the cluster's node and lifecycle-script logs."""
    return f"/aws/sagemaker/Clusters/{cluster_name}/{cluster_arn.rsplit('/', 1)[-1]}"
