"""The AWS Batch job state change event ("Batch Job State Change", source aws.batch): its detail is the job as
DescribeJobs returns it ("Job state change events", docs.aws.amazon.com/batch/latest/userguide/batch_job_events.html:
"The detail section resembles the JobDetail object that's returned from a DescribeJobs API operation"). Only the
Batch job flow (and `medic explain`) parses it."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from medic.config_training import BATCH_NAME_PATTERN
from medic.core.clock import epoch_millis
from medic.core.models import MedicEvent

# jobArn: arn:<partition>:batch:<region>:<account>:job/<jobId> (the documented sample; JobDetail.jobArn)
BATCH_JOB_ARN_PATTERN = r"^arn:aws[a-z-]*:batch:[a-z0-9-]+:[0-9]{12}:job/[A-Za-z0-9:#-]{1,128}$"
QUEUE_ARN_PATTERN = r"^arn:aws[a-z-]*:batch:[a-z0-9-]+:[0-9]{12}:job-queue/[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$"
DEFINITION_ARN_PATTERN = (r"^arn:aws[a-z-]*:batch:[a-z0-9-]+:[0-9]{12}:job-definition/"
                          r"[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}:[0-9]{1,9}$")


class AttemptContainer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    exitCode: int | None = None
    reason: str = Field(default="", max_length=4096)


class Attempt(BaseModel):
    """One attempt Batch made (AttemptDetail): Batch's own retries are attempts of the same job."""

    model_config = ConfigDict(extra="ignore")

    statusReason: str = Field(default="", max_length=4096)
    container: AttemptContainer | None = None


class BatchJobDetail(BaseModel):
    model_config = ConfigDict(extra="ignore")

    jobArn: str = Field(pattern=BATCH_JOB_ARN_PATTERN)
    jobName: str = Field(pattern=BATCH_NAME_PATTERN)
    jobId: str = Field(min_length=1, max_length=128)
    jobQueue: str = Field(pattern=QUEUE_ARN_PATTERN)
    jobDefinition: str = Field(min_length=1, max_length=2048)
    status: str = Field(min_length=1, max_length=32)
    statusReason: str = Field(default="", max_length=4096)
    attempts: list[Attempt] = Field(default=[], max_length=100)
    createdAt: int | None = None  # epoch milliseconds (JobDetail.createdAt)
    startedAt: int | None = None
    container: AttemptContainer | None = None  # the last attempt's container (JobDetail.container.exitCode/reason)
    arrayProperties: dict | None = None  # a parent: {size, statusSummary}; a child: {index}
    nodeDetails: dict | None = None  # a multi-node parallel job's node: {nodeIndex, isMainNode}
    nodeProperties: dict | None = None  # a multi-node parallel job (the parent): {numNodes, mainNode, ...}

    @property
    def created(self) -> datetime | None:
        return epoch_millis(self.createdAt)

    @property
    def started_at(self) -> datetime | None:
        """When the job started (startedAt, else createdAt): read for its goodput, never acted on."""
        return epoch_millis(self.startedAt) or self.created

    @property
    def queue_name(self) -> str:
        return self.jobQueue.rsplit("/", 1)[-1]

    @property
    def array_child(self) -> bool:
        """A child of an array job: its jobId is `<parent>:<index>` and arrayProperties names its index."""
        return "index" in (self.arrayProperties or {})

    @property
    def array_parent(self) -> bool:
        return "size" in (self.arrayProperties or {})

    @property
    def node_of_multi_node(self) -> bool:
        """One node of a multi-node parallel job (jobId `<parent>#<node index>`, nodeDetails): the parent's own
        event carries the job's failure."""
        return self.nodeDetails is not None or "#" in self.jobId

    def failure_text(self) -> str:
        """What the failure rules match: the job's statusReason, then its last attempt's statusReason, container
        reason and exit code (the attempt that decided FAILED: the earlier ones Batch retried itself)."""
        parts = [f"statusReason: {self.statusReason}"] if self.statusReason else []
        last = self.attempts[-1] if self.attempts else None
        container = (last.container if last else None) or self.container
        if last is not None and last.statusReason:
            parts.append(f"attempt: {last.statusReason}")
        if container is not None and container.reason:
            parts.append(f"container: {container.reason}")
        if container is not None and container.exitCode is not None:
            parts.append(f"exit code: {container.exitCode}")
        return "; ".join(parts)


class BatchJobStateEvent(MedicEvent):
    detail: BatchJobDetail
