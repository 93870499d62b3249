"""Amazon Bedrock model customization: read a failed job and create it again."""

from __future__ import annotations

from typing import Any

from medic.adapters.aws import client as make_client
from medic.adapters.training import fit_to_shape, prune_empty

# GetModelCustomizationJob's members CreateModelCustomizationJob takes under another name (botocore's bedrock model)
RENAMED = {"baseModelArn": "baseModelIdentifier", "outputModelKmsKeyArn": "customModelKmsKeyId"}


class BedrockJobs:
    """Bedrock through one client (given, or made on first use)."""

    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("bedrock")
        return self._client

    def describe(self, job: str) -> dict:
        """GetModelCustomizationJob (``job``: its ARN or name)."""
        return self.client.get_model_customization_job(jobIdentifier=job)

    def tags(self, arn: str) -> dict[str, str]:
        listed = self.client.list_tags_for_resource(resourceARN=arn).get("tags", [])
        return {tag["key"]: tag["value"] for tag in listed}

    def create_clone(self, description: dict, job_name: str, model_name: str, tags: dict[str, str],
                     token: str) -> str:
        """CreateModelCustomizationJob of the job again; ``token`` makes the call idempotent ("If this token matches
        a previous request, Amazon Bedrock ignores the request, but does not return an error", the model's
        clientRequestToken). Returns the new job's ARN."""
        request = clone_request(self.client.meta.service_model, description)
        request.update(jobName=job_name, customModelName=model_name, clientRequestToken=token)
        if tags:
            request["jobTags"] = [{"key": key, "value": value} for key, value in sorted(tags.items())]
        return self.client.create_model_customization_job(**request)["jobArn"]


def clone_request(service_model: Any, description: dict) -> dict:
    """CreateModelCustomizationJob's request from GetModelCustomizationJob's answer: the base model, customization
    type, hyperparameters, training, validation and output data, role, VPC, KMS key and customization config, as
    the failed job had them (its name, model name, token and tags are the caller's)."""
    shape = service_model.operation_model("CreateModelCustomizationJob").input_shape
    renamed = {RENAMED.get(key, key): value for key, value in description.items()}
    request = fit_to_shape(renamed, shape)
    for own in ("jobName", "customModelName", "clientRequestToken", "jobTags", "customModelTags"):
        request.pop(own, None)
    return prune_empty(request)
