"""The Amazon Bedrock model customization job state change event ("Model Customization Job State Change", source
aws.bedrock: "How EventBridge for Amazon Bedrock works", docs.aws.amazon.com/bedrock/latest/userguide/
monitoring-eventbridge-how-it-works.html). Only the Bedrock job flow parses it."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from medic.config_training import BEDROCK_JOB_NAME_PATTERN
from medic.core.models import MedicEvent

# jobArn: arn:<partition>:bedrock:<region>:<account>:model-customization-job/<...>: the documented sample's
# `model-customization-job/<id>`, botocore's bedrock model's `model-customization-job/<base model>/<id>` (the base
# model's id has dots and colons).
BEDROCK_JOB_ARN_PATTERN = (r"^arn:aws[a-z-]*:bedrock:[a-z0-9-]+:[0-9]{12}:model-customization-job/"
                           r"[A-Za-z0-9.:+/-]{1,256}$")


class BedrockJobDetail(BaseModel):
    """The fields Medic reads (the detail carries more, as GetModelCustomizationJob returns them)."""

    model_config = ConfigDict(extra="ignore")

    jobName: str = Field(max_length=63, pattern=BEDROCK_JOB_NAME_PATTERN)
    jobArn: str = Field(pattern=BEDROCK_JOB_ARN_PATTERN)
    jobStatus: str = Field(min_length=1, max_length=32)
    outputModelName: str = Field(default="", max_length=63)
    roleArn: str = Field(default="", max_length=2048)
    failureMessage: str = Field(default="", max_length=4096)
    creationTime: datetime | None = None  # ISO 8601 in the sample ("2023-08-11T10:11:12Z"): its goodput only


class BedrockJobStateEvent(MedicEvent):
    detail: BedrockJobDetail
