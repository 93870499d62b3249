"""The training job state change event ("SageMaker Training Job State Change"): only the training job
handler (and `medic explain`) parses it, so only they build these models."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from medic.core.clock import epoch_millis
from medic.core.models import MedicEvent

# SageMaker training job names: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$
TRAINING_JOB_NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"


class TrainingJobDetail(BaseModel):
    model_config = ConfigDict(extra="ignore")

    TrainingJobName: str = Field(max_length=63, pattern=TRAINING_JOB_NAME_PATTERN)
    TrainingJobArn: str = Field(pattern=r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-job/.{1,63}$")
    TrainingJobStatus: str = Field(min_length=1, max_length=32)
    FailureReason: str = Field(default="", max_length=4096)
    Tags: dict[str, str] | None = None
    # When the job was created and started training: the event carries DescribeTrainingJob's times as epoch
    # milliseconds in strings ("Events that Amazon SageMaker AI sends to Amazon EventBridge", the training job state
    # change example: "CreationTime": "1583831889050"); read for the job's goodput (its own start), never acted on.
    CreationTime: str | int | float | None = None
    TrainingStartTime: str | int | float | None = None

    @property
    def started_at(self) -> datetime | None:
        """When this job started: TrainingStartTime, else CreationTime; None when neither is a readable time."""
        return epoch_millis(self.TrainingStartTime) or epoch_millis(self.CreationTime)


class TrainingJobStateEvent(MedicEvent):
    detail: TrainingJobDetail
