"""AWS Batch: describe a failed job and submit its clone."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from medic.adapters.aws import CLIENT_CONFIG
from medic.adapters.training import fit_to_shape, prune_empty

# SubmitJob is not idempotent: Batch takes a second job of the same name (no client token, botocore's batch
# model), so a retry after a timeout whose request AWS had accepted would submit the restart twice. Medic's
# Batch client therefore makes each call once: an error is a `failed` record and one page, never a second job.
SUBMIT_ONCE = CLIENT_CONFIG.merge(Config(retries={"mode": "standard", "max_attempts": 1}))
# "Environment variables cannot start with "AWS_BATCH". This naming convention is reserved for variables that Batch
# sets" (botocore's batch model, ContainerOverrides.environment): DescribeJobs may show them, a clone may not send
# them.
RESERVED_ENVIRONMENT = "AWS_BATCH"


class Unclonable(Exception):
    """A job Medic cannot submit a faithful clone of (its reason says why)."""


class BatchJobs:
    """AWS Batch through one client (given, or made on first use with SUBMIT_ONCE)."""

    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = boto3.client("batch", config=SUBMIT_ONCE)
        return self._client

    def describe(self, job_id: str) -> dict | None:
        """DescribeJobs of one job (None: Batch no longer knows it: jobs are kept about a week after they end)."""
        jobs = self.client.describe_jobs(jobs=[job_id]).get("jobs") or []
        return next((job for job in jobs if job.get("jobId") == job_id), None)

    def submit_clone(self, description: dict, name: str, tags: dict[str, str]) -> str:
        """SubmitJob of the job's clone under ``name``; returns the new jobId."""
        request = clone_request(self.client.meta.service_model, description)
        request["jobName"] = name
        if tags:
            request["tags"] = dict(sorted(tags.items()))
        return self.client.submit_job(**request)["jobId"]


def clone_request(service_model: Any, description: dict) -> dict:
    """SubmitJob's request for a faithful clone of a job (DescribeJobs' JobDetail): the exact job definition
    revision (jobDefinition is its ARN, `name:revision`), the queue, parameters, retry strategy, timeout,
    scheduling priority and share identifier (fair-share queues), tag propagation, and the job's container as
    overrides (command, environment, resources: its effective values, whether the definition or the submission
    set them); a multi-node parallel job's node ranges as node overrides. Not its dependencies (the jobs it waited
    for have run) nor an array (Medic never clones an array job: flows/jobs/batch). Raises Unclonable for a job
    Medic cannot clone faithfully (EKS or ECS-properties jobs)."""
    shape = service_model.operation_model("SubmitJob").input_shape
    if description.get("eksProperties") or description.get("ecsProperties"):
        raise Unclonable("it is an EKS or ECS-properties job: Medic clones container and multi-node parallel jobs "
                         "only")
    request: dict[str, Any] = {"jobQueue": description["jobQueue"], "jobDefinition": description["jobDefinition"]}
    for member in ("parameters", "retryStrategy", "timeout", "shareIdentifier", "propagateTags"):
        if description.get(member) not in (None, {}, []):
            request[member] = fit_to_shape(description[member], shape.members[member])
    if description.get("schedulingPriority") is not None:
        request["schedulingPriorityOverride"] = description["schedulingPriority"]
    overrides = shape.members["containerOverrides"]
    nodes = description.get("nodeProperties")
    if nodes:
        request["nodeOverrides"] = _node_overrides(nodes, shape.members["nodeOverrides"], overrides)
    elif description.get("container"):
        container = _container_overrides(description["container"], overrides)
        container.pop("instanceType", None)  # "isn't applicable to single-node container jobs" (the model)
        request["containerOverrides"] = container
    return prune_empty(request)


def _container_overrides(container: dict, shape: Any) -> dict:
    overrides = fit_to_shape(container, shape)
    overrides["environment"] = [variable for variable in overrides.get("environment") or []
                                if not str(variable.get("name", "")).startswith(RESERVED_ENVIRONMENT)]
    if overrides.get("resourceRequirements"):  # vcpus and memory are the deprecated spelling of the same
        overrides.pop("vcpus", None)
        overrides.pop("memory", None)
    return overrides


def _node_overrides(nodes: dict, shape: Any, container_shape: Any) -> dict:
    """Every node range, as the job ran. numNodes only where the definition lets a submission override it: "There
    must be at least one node range in your job definition that has an open upper boundary" (the model,
    NodeOverrides.numNodes); the job's ranges are the definition's, so an open one (`n:`) says it may."""
    ranges = []
    for node_range in nodes.get("nodeRangeProperties") or []:
        override: dict[str, Any] = {"targetNodes": node_range.get("targetNodes")}
        if node_range.get("container"):
            override["containerOverrides"] = _container_overrides(node_range["container"], container_shape)
        if node_range.get("instanceTypes"):
            override["instanceTypes"] = list(node_range["instanceTypes"])
        ranges.append(override)
    result: dict[str, Any] = {"nodePropertyOverrides": ranges}
    open_range = any(str(r.get("targetNodes", "")).endswith(":") for r in nodes.get("nodeRangeProperties") or [])
    if open_range and nodes.get("numNodes"):
        result["numNodes"] = nodes["numNodes"]
    return fit_to_shape(result, shape)
