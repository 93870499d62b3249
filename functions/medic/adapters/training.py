"""SageMaker training jobs: describe a failed job and start its clone."""

from __future__ import annotations

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


def clone_request(service_model: Any, description: dict) -> dict:
    """The description filtered, recursively, to the members CreateTrainingJob's input shape has."""
    shape = service_model.operation_model("CreateTrainingJob").input_shape
    return _fit(description, shape)


def _fit(value: Any, shape: Any) -> Any:
    if shape.type_name == "structure":
        return {name: _fit(value[name], member) for name, member in shape.members.items()
                if isinstance(value, dict) and name in value and value[name] is not None}
    if shape.type_name == "list":
        return [_fit(item, shape.member) for item in value]
    if shape.type_name == "map":
        return {key: _fit(item, shape.value) for key, item in value.items()}
    return value
