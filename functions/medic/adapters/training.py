"""SageMaker training jobs: describe a failed job and start its clone."""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import ClientError

from medic.adapters.aws import client as make_client
from medic.adapters.aws import error_code


class JobAlreadyExists(Exception):
    """The restart's name is taken: an earlier invocation already started this restart."""


class TrainingJobs:
    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("sagemaker")
        return self._client

    def describe(self, name: str) -> dict:
        return self.client.describe_training_job(TrainingJobName=name)

    def tags(self, arn: str) -> dict[str, str]:
        tags: dict[str, str] = {}
        for page in self.client.get_paginator("list_tags").paginate(ResourceArn=arn):
            tags.update({tag["Key"]: tag["Value"] for tag in page.get("Tags", [])})
        return tags

    def start_clone(self, description: dict, name: str, tags: dict[str, str]) -> str:
        """CreateTrainingJob with every field the API accepts back from DescribeTrainingJob."""
        request = clone_request(self.client.meta.service_model, description)
        request["TrainingJobName"] = name
        request["Tags"] = [{"Key": key, "Value": value} for key, value in sorted(tags.items())]
        try:
            return self.client.create_training_job(**request)["TrainingJobArn"]
        except ClientError as error:
            if error_code(error) == "ResourceInUse":
                raise JobAlreadyExists(name) from error
            raise


# ResourceConfig members DescribeTrainingJob returns that CreateTrainingJob refuses ("read-only and isn't
# accepted in CreateTrainingJob requests", botocore's sagemaker model).
READ_ONLY_RESOURCE_CONFIG = ("SelectedInstanceType", "SelectedInstanceCount")
# SageMaker's built-in algorithms (their image repositories in "Docker Registry Paths and Example Code",
# docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-algo-docker-registry-paths.html): "metrics are already
# defined for you" (.../automatic-model-tuning-define-metrics-variables.html), DescribeTrainingJob returns them
# and CreateTrainingJob refuses them back. sagemaker-xgboost is built in unless it runs a script (script mode).
BUILT_IN_ALGORITHMS = frozenset({
    "blazingtext", "factorization-machines", "forecasting-deepar", "image-classification", "ipinsights", "kmeans",
    "knn", "lda", "linear-learner", "ntm", "object2vec", "object-detection", "pca", "randomcutforest",
    "semantic-segmentation", "seq2seq", "xgboost", "sagemaker-xgboost"})
_ECR_IMAGE = re.compile(r"^(?P<account>[0-9]{12})\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/"
                        r"(?P<repository>[a-z0-9._/-]+?)(?::[\w.-]+|@sha256:[0-9a-f]{64})?$")


def clone_request(service_model: Any, description: dict) -> dict:
    """The description filtered, recursively, to what CreateTrainingJob accepts back: its input shape's members,
    no empty containers (DescribeTrainingJob returns e.g. ``VpcConfig: {}``), no read-only members, and no
    MetricDefinitions where SageMaker defines them (built-in algorithms, algorithm resources)."""
    shape = service_model.operation_model("CreateTrainingJob").input_shape
    request = _fit(description, shape)
    resources = request.get("ResourceConfig", {})
    for member in READ_ONLY_RESOURCE_CONFIG:
        resources.pop(member, None)
    algorithm = request.get("AlgorithmSpecification", {})
    if algorithm.get("AlgorithmName"):
        # An algorithm resource brings its image and metrics; TrainingImage is mutually exclusive with it.
        algorithm.pop("TrainingImage", None)
        algorithm.pop("MetricDefinitions", None)
    elif is_built_in_algorithm(algorithm.get("TrainingImage", ""), description):
        algorithm.pop("MetricDefinitions", None)
    return _prune(request)


def is_built_in_algorithm(image: str, description: dict) -> bool:
    """A SageMaker built-in algorithm image: an AWS registry (not the job's own account), a built-in repository."""
    match = _ECR_IMAGE.match(image)
    if not match or match.group("repository") not in BUILT_IN_ALGORITHMS:
        return False
    job_account = str(description.get("TrainingJobArn", "")).split(":")[4:5]
    if job_account == [match.group("account")]:
        return False  # the job's own registry: a custom image that happens to share the name
    script_mode = "sagemaker_program" in (description.get("HyperParameters") or {})
    return not (match.group("repository") == "sagemaker-xgboost" and script_mode)


def training_plan_arns(description: dict) -> list[str]:
    """The training plans the job ran on (ResourceConfig.TrainingPlanArn, InstancePreferences[].TrainingPlanArns)."""
    resources = description.get("ResourceConfig") or {}
    arns = [resources["TrainingPlanArn"]] if resources.get("TrainingPlanArn") else []
    for preference in resources.get("InstancePreferences") or []:
        arns.extend(preference.get("TrainingPlanArns") or [])
    return sorted(set(arns))


def _fit(value: Any, shape: Any) -> Any:
    if shape.type_name == "structure":
        return {name: _fit(value[name], member) for name, member in shape.members.items()
                if isinstance(value, dict) and name in value and value[name] is not None}
    if shape.type_name == "list" and isinstance(value, list):
        return [_fit(item, shape.member) for item in value]
    if shape.type_name == "map" and isinstance(value, dict):
        return {key: _fit(item, shape.value) for key, item in value.items()}
    return value


def _prune(value: Any) -> Any:
    """Empty dicts and lists removed, recursively (a container emptied by pruning goes too)."""
    if isinstance(value, dict):
        pruned = {key: _prune(item) for key, item in value.items()}
        return {key: item for key, item in pruned.items() if item != {} and item != []}
    if isinstance(value, list):
        return [item for item in (_prune(item) for item in value) if item != {} and item != []]
    return value


# The same filter and pruning, for the other adapters that clone a job from its description (adapters/batch).
fit_to_shape, prune_empty = _fit, _prune
