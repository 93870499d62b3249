"""Amazon Bedrock model customization jobs in the emulated world: GetModelCustomizationJob,
CreateModelCustomizationJob and ListTagsForResource answered here, every answer checked against botocore's bedrock
model (sim.contract, CHECKED_RESPONSES) and every request too.

Why not moto's Bedrock: moto 5.2.5 (moto/bedrock/models.py ModelCustomizationJob) names a job's ARN by its name
where Bedrock uses an id, derives outputModelName as `<custom model>-<job>`, stamps every job with a failureMessage,
finds a job by its name only (GetModelCustomizationJob's jobIdentifier is "the Amazon Resource Name (ARN) or name",
botocore's model) and ignores clientRequestToken.

- a job comes from a ``{"sim": {"bedrock_job": {...}}}`` directive (GetModelCustomizationJob-shaped, checked
  against the model; ``tags``: an object, the job's tags) or from a "Model Customization Job State Change" for a
  configured prefix whose detail is valid as that response; an event for a known job moves it to its status,
  failureMessage, lastModifiedTime and endTime (members of GetModelCustomizationJob's answer the documented sample
  event carries: "How EventBridge for Amazon Bedrock works");
- CreateModelCustomizationJob creates an `InProgress` job (GetModelCustomizationJob's first status) under an id of
  twelve characters derived from its name (assumption, so a scenario can name Medic's clone); a request whose
  clientRequestToken an earlier one carried returns that job ("If this token matches a previous request, Amazon
  Bedrock ignores the request, but does not return an error", the model's clientRequestToken); a job name already
  taken is refused with ConflictException (an error the operation declares; the wording an assumption).
"""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlparse

from botocore.awsrequest import AWSPreparedRequest, AWSResponse

from sim.batch import json_answer
from sim.contract import response_violations
from sim.faults import error_response

BEDROCK_JOB_EVENT = "Model Customization Job State Change"


def job_id(name: str) -> str:
    """The id the emulator gives a job it creates under ``name``: the end of its ARN."""
    return hashlib.sha256(name.encode()).hexdigest()[:12]


class BedrockWorld:
    def __init__(self, account: str, region: str) -> None:
        self.account = account
        self.region = region
        self.jobs: dict[str, dict] = {}  # job name -> GetModelCustomizationJob's answer (wire form)
        self.tags: dict[str, dict[str, str]] = {}  # job ARN -> its tags
        self.tokens: dict[str, str] = {}  # clientRequestToken -> the job name it created
        self.created: list[dict] = []  # every CreateModelCustomizationJob the emulated Bedrock accepted
        self._undrained = 0

    def arn(self, name: str, base_model: str) -> str:
        """A job's ARN as botocore's bedrock model has it: model-customization-job/<base model id>/<id>."""
        model = base_model.rsplit("/", 1)[-1]
        return f"arn:aws:bedrock:{self.region}:{self.account}:model-customization-job/{model}/{job_id(name)}"

    def find(self, identifier: str) -> dict | None:
        return self.jobs.get(identifier) or next((job for job in self.jobs.values() if job["jobArn"] == identifier),
                                                 None)

    # jobs from directives and events
    def put(self, spec: Any) -> None:
        if not isinstance(spec, dict):
            raise ValueError("expected a GetModelCustomizationJob-shaped object")
        job = copy.deepcopy(spec)
        tags = job.pop("tags", {}) or {}
        job.setdefault("jobArn", self.arn(str(job.get("jobName")), str(job.get("baseModelArn", ""))))
        job.setdefault("creationTime", datetime.now(UTC).isoformat())
        violations = response_violations("bedrock", "GetModelCustomizationJob", job)
        if violations:
            raise ValueError("not a valid GetModelCustomizationJob answer: " + "; ".join(str(v) for v in violations))
        if job["jobName"] in self.jobs:
            raise ValueError(f"Bedrock job {job['jobName']!r} already exists")
        self.jobs[job["jobName"]] = job
        self.tags[job["jobArn"]] = dict(tags)

    def sync(self, detail: dict, create: bool) -> None:
        job = self.find(str(detail.get("jobName")))
        if job is None:
            if create:
                spec = {key: value for key, value in detail.items() if key not in ("version", "jobStatus")}
                try:
                    self.put({**spec, "status": detail.get("jobStatus")})
                except ValueError:
                    return  # left alone: the handler meets a job Bedrock does not know
            return
        if isinstance(detail.get("jobStatus"), str):
            job["status"] = detail["jobStatus"]
        for member in ("failureMessage", "lastModifiedTime", "endTime"):
            if isinstance(detail.get(member), str):
                job[member] = detail[member]

    # what the handlers call
    def get_job(self, request: AWSPreparedRequest) -> AWSResponse:
        identifier = unquote(urlparse(request.url).path.rsplit("/", 1)[-1])
        job = self.find(identifier)
        if job is None:
            return error_response(request.url, "rest-json", "ResourceNotFoundException", 404,
                                  f"Model customization job {identifier} not found.")
        return json_answer(request.url, job)

    def list_tags(self, request: AWSPreparedRequest) -> AWSResponse:
        arn = json.loads(request.body or b"{}").get("resourceARN", "")
        return json_answer(request.url, {"tags": [{"key": k, "value": v} for k, v in self.tags.get(arn, {}).items()]})

    def create_job(self, request: AWSPreparedRequest) -> AWSResponse:
        params = json.loads(request.body or b"{}")
        token, name = params.get("clientRequestToken"), params["jobName"]
        if token in self.tokens:  # Bedrock's idempotency: the job this token created, no second one
            return json_answer(request.url, {"jobArn": self.jobs[self.tokens[token]]["jobArn"]}, status=201)
        if name in self.jobs:
            return error_response(request.url, "rest-json", "ConflictException", 409,
                                  f"A model customization job named {name} already exists.")
        job = {key: value for key, value in params.items()
               if key not in ("customModelName", "baseModelIdentifier", "customModelKmsKeyId", "jobTags",
                              "customModelTags")}
        job.update(jobArn=self.arn(name, params["baseModelIdentifier"]), outputModelName=params["customModelName"],
                   status="InProgress", creationTime=datetime.now(UTC).isoformat(),
                   validationDataConfig=params.get("validationDataConfig", {"validators": []}),
                   baseModelArn=params["baseModelIdentifier"])
        if "customModelKmsKeyId" in params:
            job["outputModelKmsKeyArn"] = params["customModelKmsKeyId"]
        self.jobs[name] = job
        self.tags[job["jobArn"]] = {tag["key"]: tag["value"] for tag in params.get("jobTags", [])}
        if token:
            self.tokens[token] = name
        self.created.append({"name": name, "arn": job["jobArn"], "model": params["customModelName"],
                             "request": params})
        return json_answer(request.url, {"jobArn": job["jobArn"]}, status=201)

    def drain_created(self) -> list[dict]:
        new = self.created[self._undrained:]
        self._undrained = len(self.created)
        return new
