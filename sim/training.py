"""SageMaker training jobs in the emulated world, kept in moto's own SageMaker backend.

moto implements CreateTrainingJob / DescribeTrainingJob / ListTags, but every job it creates is
``Completed`` at once, it invents ``MetricDefinitions``, and it drops the CreateTrainingJob members
it does not model (``Environment``, ``RetryStrategy``, ...). Here:

- a job comes from a ``{"sim": {"training_job": {...}}}`` directive (DescribeTrainingJob-shaped,
  checked against the service model) or from a "SageMaker Training Job State Change" event for a
  configured prefix; an event for a known job moves it to the event's status and FailureReason;
- every CreateTrainingJob moto accepts is adjusted (``InProgress``, the members moto dropped kept,
  so DescribeTrainingJob returns what was asked for) and recorded in ``created``; one whose name a job
  already has is refused with ``ResourceInUse``, as SageMaker refuses it (moto would replace the job);
- ListTags on a training-job ARN is answered here: ARNs carry the name lower-cased, and a missing
  job is a ``ValidationException`` as with SageMaker (moto crashes on it).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.validate import ParamValidator
from moto.sagemaker.models import sagemaker_backends

from sim.faults import error_response, raw_response

JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")  # TrainingJobName in the service model
TRAINING_JOB_ARN = re.compile(r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-job/(.+)$")
# How long a job CreateTrainingJob started stays `Starting` before its secondary status is `Training`: no AWS source
# gives a duration (SageMaker launches the instances, prepares them and downloads the data and image first; API
# reference, SecondaryStatusTransition); 5 minutes is an assumption. A job created by a directive or an event keeps
# the status it was given.
STARTING = timedelta(minutes=5)
SECONDARY = {"InProgress": "Starting", "Completed": "Completed", "Failed": "Failed", "Stopping": "Stopping",
             "Stopped": "Stopped", "Deleting": "Stopped"}
# What moto keeps itself (or computes): never copied over its own attributes.
_MOTO_OWNED = frozenset({"TrainingJobName", "TrainingJobArn", "CreationTime", "TrainingStartTime", "TrainingEndTime",
                         "LastModifiedTime", "SecondaryStatusTransitions", "FinalMetricDataList"})


@functools.cache
def _sagemaker_model() -> Any:
    return botocore.session.get_session().get_service_model("sagemaker")


def describe_shape() -> Any:
    return _sagemaker_model().operation_model("DescribeTrainingJob").output_shape


def create_shape() -> Any:
    return _sagemaker_model().operation_model("CreateTrainingJob").input_shape


def fit(value: Any, shape: Any) -> Any:
    """The value filtered, recursively, to the members the shape has."""
    if shape.type_name == "structure":
        return {name: fit(value[name], member) for name, member in shape.members.items()
                if isinstance(value, dict) and name in value and value[name] is not None}
    if shape.type_name == "list" and isinstance(value, list):
        return [fit(item, shape.member) for item in value]
    if shape.type_name == "map" and isinstance(value, dict):
        return {key: fit(item, shape.value) for key, item in value.items()}
    return value


def _without_empty(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: item for key, item in ((k, _without_empty(v)) for k, v in value.items()) if item not in ({}, [])}
    if isinstance(value, list):
        return [item for item in (_without_empty(v) for v in value) if item not in ({}, [])]
    return value


def tag_list(tags: Any) -> list[dict[str, str]]:
    """Tags as ``{"k": "v"}`` (events) or ``[{"Key": .., "Value": ..}]`` (the API)."""
    if tags is None:
        return []
    if isinstance(tags, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
        return [{"Key": key, "Value": value} for key, value in tags.items()]
    if isinstance(tags, list) and all(isinstance(t, dict) and isinstance(t.get("Key"), str)
                                      and isinstance(t.get("Value", ""), str) for t in tags):
        return [{"Key": t["Key"], "Value": t.get("Value", "")} for t in tags]
    raise ValueError("'Tags' must be {\"key\": \"value\", ...} or [{\"Key\": ..., \"Value\": ...}, ...]")


class TrainingWorld:
    def __init__(self, account: str, region: str, client: Callable[[str], Any]) -> None:
        self.account = account
        self.region = region
        self.client = client  # the harness's own (unrouted, unfaulted) clients, by service
        self.created: list[dict] = []  # every CreateTrainingJob the emulated SageMaker accepted, in order
        self._undrained = 0

    @property
    def backend(self) -> Any:
        return sagemaker_backends[self.account][self.region]

    def job(self, name: str) -> Any:
        jobs = self.backend.training_jobs
        if name in jobs:
            return jobs[name]
        lowered = name.lower()  # training job names are case-insensitive; ARNs carry them lower-cased
        return next((job for key, job in jobs.items() if key.lower() == lowered), None)

    def defaults(self) -> dict:
        """What a directive may leave out: enough for CreateTrainingJob."""
        return {
            "AlgorithmSpecification": {
                "TrainingImage": f"{self.account}.dkr.ecr.{self.region}.amazonaws.com/train:latest",
                "TrainingInputMode": "File"},
            "RoleArn": f"arn:aws:iam::{self.account}:role/SageMakerTrainingRole",
            "OutputDataConfig": {"S3OutputPath": f"s3://medic-sim-artifacts-{self.account}/output/"},
            "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "VolumeSizeInGB": 100},
            "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        }

    # jobs from directives and events
    def put(self, spec: dict, tags: Any = None) -> None:
        """Create a job from a DescribeTrainingJob-shaped spec; ValueError names what is wrong with it."""
        if not isinstance(spec, dict):
            raise ValueError("expected a DescribeTrainingJob-shaped object")
        spec = copy.deepcopy(spec)
        tags = tag_list(spec.pop("Tags", None) if tags is None else tags)
        name = spec.get("TrainingJobName")
        if not isinstance(name, str) or not JOB_NAME.match(name):
            raise ValueError(f"'TrainingJobName' must be a training job name (got {name!r})")
        if self.job(name) is not None:
            raise ValueError(f"training job {name!r} already exists")
        status = spec.setdefault("TrainingJobStatus", "InProgress")
        statuses = describe_shape().members["TrainingJobStatus"].enum
        if status not in statuses:
            raise ValueError(f"'TrainingJobStatus' must be one of {', '.join(statuses)} (got {status!r})")
        spec.setdefault("SecondaryStatus", SECONDARY[status])
        for key, value in self.defaults().items():
            spec.setdefault(key, value)
        spec.setdefault("TrainingJobArn", self.arn(name))
        spec.setdefault("ModelArtifacts", {"S3ModelArtifacts": spec["OutputDataConfig"].get("S3OutputPath", "")})
        spec.setdefault("CreationTime", datetime.now(UTC))
        # DescribeTrainingJob returns empty containers for what a job was created without (VpcConfig: {}),
        # although the output shape marks their members required: checked without them.
        report = ParamValidator().validate(_without_empty(spec), describe_shape())
        if report.has_errors():
            raise ValueError("not a valid DescribeTrainingJob response: "
                             + report.generate_report().replace("\n", "; "))
        # What the job was created with: DescribeTrainingJob's empty containers (VpcConfig: {}) were not part of it
        request = _without_empty(fit(spec, create_shape()))
        if tags:
            request["Tags"] = tags
        self.client("sagemaker").create_training_job(**request)
        self._adjust(self.job(name), spec)
        self.buckets_for(spec)

    def buckets_for(self, spec: dict) -> None:
        """A job that ran had its output and checkpoint buckets: they exist (maybe empty) in the world."""
        s3 = self.client("s3")
        for uri in ((spec.get("OutputDataConfig") or {}).get("S3OutputPath"),
                    (spec.get("CheckpointConfig") or {}).get("S3Uri")):
            match = re.match(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/|$)", uri if isinstance(uri, str) else "")
            if match:
                with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
                    s3.create_bucket(Bucket=match.group(1),
                                     CreateBucketConfiguration={"LocationConstraint": self.region})

    def sync(self, detail: dict, create: bool) -> None:
        """A state change event: a known job takes its status; an unknown one is created when ``create``."""
        name = detail.get("TrainingJobName")
        if not isinstance(name, str) or not JOB_NAME.match(name):
            return
        job = self.job(name)
        if job is None:
            if not create:
                return
            members = describe_shape().members
            spec = {key: value for key, value in detail.items()
                    if key in members and members[key].type_name != "timestamp" and key not in _MOTO_OWNED}
            spec["TrainingJobName"] = name
            try:
                self.put(spec, detail.get("Tags") or [])
            except (ValueError, TypeError):
                return  # left alone: the handler meets the missing job, as it would in AWS
            return
        status = detail.get("TrainingJobStatus")
        if status in describe_shape().members["TrainingJobStatus"].enum and status != job.training_job_status:
            self._set_status(job, status, detail.get("SecondaryStatus"), detail.get("FailureReason"))

    def _set_status(self, job: Any, status: str, secondary: Any = None, reason: Any = None) -> None:
        now = datetime.now(UTC)  # the replay clock
        job.training_job_status = status
        job.secondary_status = secondary if isinstance(secondary, str) and secondary else SECONDARY[status]
        job.last_modified_time = now
        if status in ("InProgress", "Stopping"):
            job.training_end_time = None
            job.final_metric_data_list = []
        else:
            job.training_end_time = now
        if status == "Failed" and isinstance(reason, str):
            job.failure_reason = reason
        elif status != "Failed":
            job.failure_reason = None

    def _adjust(self, job: Any, spec: dict) -> None:
        """Make moto's job what was asked for: status, the members moto dropped, no invented metrics."""
        if "AlgorithmSpecification" in spec:
            job.algorithm_specification = copy.deepcopy(spec["AlgorithmSpecification"])
        present = job.response_object
        for member in describe_shape().members:
            if member in spec and member not in present and member not in _MOTO_OWNED:
                setattr(job, member, copy.deepcopy(spec[member]))  # no underscore: moto's response keeps the name
        self._set_status(job, spec.get("TrainingJobStatus", "InProgress"), spec.get("SecondaryStatus"),
                         spec.get("FailureReason"))

    def arn(self, name: str) -> str:
        return f"arn:aws:sagemaker:{self.region}:{self.account}:training-job/{name.lower()}"

    # what the handlers call
    def observe_create(self, request: AWSPreparedRequest, response: AWSResponse) -> None:
        """A CreateTrainingJob moto accepted: the new job starts InProgress and keeps every member asked for."""
        if response.status_code != 200:
            return
        params = json.loads(request.body or b"{}")
        job = self.job(params.get("TrainingJobName", ""))
        if job is None:
            return
        self._adjust(job, {**params, "TrainingJobStatus": "InProgress"})
        tags = {tag["Key"]: tag.get("Value", "") for tag in params.get("Tags", [])}
        self.created.append({
            "name": job.training_job_name, "arn": job.arn, "status": job.training_job_status,
            "checkpoint": (params.get("CheckpointConfig") or {}).get("S3Uri"), "tags": tags, "request": params})

    def refuse_create(self, request: AWSPreparedRequest) -> AWSResponse | None:
        """CreateTrainingJob refused as SageMaker refuses it beyond what botocore's client checks (None: moto
        answers): a name a job already has (``ResourceInUse``; moto would silently replace the job), more than 50
        tags (the model's max, which botocore does not enforce on lists), AlgorithmName with TrainingImage
        (mutually exclusive, API reference), the read-only ResourceConfig.Selected* members, and
        MetricDefinitions for a built-in algorithm (SageMaker defines those metrics itself)."""
        params = json.loads(request.body or b"{}")
        existing = self.job(str(params.get("TrainingJobName", "")))
        if existing is not None:
            return error_response(request.url, "json", "ResourceInUse", 400, name_in_use(existing.arn))
        problem = refused_create(params)
        if problem is None:
            return None
        return error_response(request.url, "json", "ValidationException", 400, problem)

    def catch_up(self, now: datetime) -> None:
        """Each job Medic created that is still `Starting` STARTING after its creation is `Training` from then:
        DescribeTrainingJob's SecondaryStatusTransitions end `Starting` and add `Training` with that StartTime (the
        transitions SageMaker lists, API reference SecondaryStatusTransition: Status and StartTime required)."""
        for created in self.created:
            job = self.job(created["name"])
            if job is None or job.training_job_status != "InProgress" or job.secondary_status != "Starting":
                continue
            created_at = job.creation_time  # moto keeps naive UTC times
            created_at = created_at.replace(tzinfo=UTC) if created_at.tzinfo is None else created_at
            began = created_at + STARTING
            if began > now:
                continue
            job.secondary_status = "Training"
            job.training_start_time = began
            job.secondary_status_transitions = [
                {"Status": "Starting", "StartTime": created_at, "EndTime": began,
                 "StatusMessage": "Preparing the instances for training"},
                {"Status": "Training", "StartTime": began,
                 "StatusMessage": "Training image download completed. Training in progress."}]

    def drain_created(self) -> list[dict]:
        new = self.created[self._undrained:]
        self._undrained = len(self.created)
        return new

    def list_tags(self, request: AWSPreparedRequest) -> AWSResponse | None:
        """ListTags for a training job answered from moto's job; anything else is left to moto."""
        params = json.loads(request.body or b"{}")
        match = TRAINING_JOB_ARN.match(str(params.get("ResourceArn", "")))
        if not match:
            return None
        job = self.job(match.group(1))
        if job is None:
            return error_response(request.url, "json", "ValidationException", 400,
                                  f"Could not find training job '{params.get('ResourceArn')}'.")
        body = json.dumps({"Tags": list(job.tags)}).encode()
        return raw_response(request.url, 200, {"Content-Type": "application/x-amz-json-1.1",
                                               "x-amzn-RequestId": str(uuid.uuid4())}, body)


def name_in_use(arn: str) -> str:
    """SageMaker's answer to a CreateTrainingJob whose name is taken. The operation declares ``ResourceInUse``
    among its errors (botocore's sagemaker service-2.json, CreateTrainingJob ``errors``: ResourceNotFound,
    ResourceInUse, ResourceLimitExceeded); its wording is SageMaker's as users quote it ("An error occurred
    (ResourceInUse) when calling the CreateTrainingJob operation: Training job names must be unique within an
    AWS account and region, and a training job with this name already exists (arn:...)",
    github.com/aws/amazon-sagemaker-examples pull 3108). Names differing only in case collide too
    (``TrainingWorld.job``): an assumption, since a job's ARN carries its name lower-cased and two such jobs
    would share one ARN. A name is free again once its job is deleted (DeleteTrainingJob: "After deleting the job,
    you can reuse its name", botocore's model); moto has no DeleteTrainingJob, nor does the emulator."""
    return ("Training job names must be unique within an AWS account and region, and a training job with this "
            f"name already exists ({arn})")


TAG_LIMIT = 50  # CreateTrainingJob Tags: max 50 (botocore's sagemaker model)
# Built-in algorithm repositories, "Docker Registry Paths and Example Code"
# (docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-algo-docker-registry-paths.html); kept here, not taken
# from Medic, so the emulator does not share the handler's assumptions.
_BUILT_IN_REPOSITORIES = frozenset({
    "blazingtext", "factorization-machines", "forecasting-deepar", "image-classification", "ipinsights", "kmeans",
    "knn", "lda", "linear-learner", "ntm", "object2vec", "object-detection", "pca", "randomcutforest",
    "semantic-segmentation", "seq2seq", "xgboost", "sagemaker-xgboost"})
_IMAGE = re.compile(r"^([0-9]{12})\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/([a-z0-9._/-]+?)(?::[\w.-]+|@.+)?$")


def refused_create(params: dict) -> str | None:
    """What SageMaker's CreateTrainingJob says about a request it refuses (None: accepted)."""
    tags = params.get("Tags") or []
    if len(tags) > TAG_LIMIT:
        return (f"1 validation error detected: Value at 'tags' failed to satisfy constraint: Member must have "
                f"length less than or equal to {TAG_LIMIT}")
    algorithm = params.get("AlgorithmSpecification") or {}
    if algorithm.get("AlgorithmName") and algorithm.get("TrainingImage"):
        return "AlgorithmName and TrainingImage are mutually exclusive: specify one of them."
    resources = params.get("ResourceConfig") or {}
    for member in ("SelectedInstanceType", "SelectedInstanceCount"):
        if member in resources:
            return f"ResourceConfig.{member} is read-only and isn't accepted in CreateTrainingJob requests."
    match = _IMAGE.match(algorithm.get("TrainingImage", ""))
    script_mode = "sagemaker_program" in (params.get("HyperParameters") or {})
    if (algorithm.get("MetricDefinitions") and match and match.group(2) in _BUILT_IN_REPOSITORIES
            and not (match.group(2) == "sagemaker-xgboost" and script_mode)):
        return "MetricDefinitions cannot be specified for a SageMaker built-in algorithm: it defines its metrics."
    return None
