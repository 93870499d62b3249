"""AWS Batch jobs in the emulated world: DescribeJobs and SubmitJob answered here, every answer checked against
botocore's batch model (sim.contract, CHECKED_RESPONSES) and every request too (as every request is).

Why not moto's Batch: moto 5.2.5's SubmitJob drops what a faithful clone carries (its BatchBackend.submit_job
takes no nodeOverrides, shareIdentifier, schedulingPriorityOverride, retryStrategy nor propagateTags:
moto/batch/models.py), runs every job in Docker, or (batch_simple, `use_docker: False`) marks it SUCCEEDED at once
(moto/batch_simple/models.py _mark_job_as_finished). A replay needs the job a handler submitted as submitted.

- a job comes from a ``{"sim": {"batch_job": {...}}}`` directive (DescribeJobs' JobDetail, checked against the
  model) or from a "Batch Job State Change" event for a configured prefix (its detail is the JobDetail: "Job state
  change events", AWS Batch user guide); an event for a known job moves it to the event's status and reasons;
- SubmitJob creates a SUBMITTED job (the first status of a job: "Job states", AWS Batch user guide) in a queue the
  world knows (one a job ran in), of a job definition the world knows (one a job used); another is refused with
  ClientException, the error botocore's batch model declares for a client's mistake (the wording an assumption);
- a submitted job's id is derived from its name (uuid5): Batch's ids are random UUIDs (JobDetail.jobId), but a
  scenario must be able to name the clone in the clone's own later events (assumption, the emulator's only);
- Batch takes two jobs of one name (SubmitJob has no client token: botocore's model); so does the emulator.
"""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from botocore.awsrequest import AWSPreparedRequest, AWSResponse

from sim.contract import response_violations
from sim.faults import error_response, raw_response

BATCH_JOB_EVENT = "Batch Job State Change"
SUBMITTED_IDS = uuid.UUID("7d9a4b52-3c1e-4f55-9a3e-2b6c1d0e8f11")  # the namespace of submitted jobs' ids
# JobDetail members a status change carries (the rest of a job does not change after its submission)
_CHANGING = ("status", "statusReason", "attempts", "container", "startedAt", "stoppedAt")


def submitted_job_id(name: str, nth: int = 1) -> str:
    """The id the emulator gives the ``nth`` job submitted under ``name`` (scenarios name clones by it)."""
    return str(uuid.uuid5(SUBMITTED_IDS, name if nth == 1 else f"{name}#{nth}"))


class BatchWorld:
    def __init__(self, account: str, region: str) -> None:
        self.account = account
        self.region = region
        self.jobs: dict[str, dict] = {}  # jobId -> JobDetail (wire form: epoch milliseconds)
        self.submitted: list[dict] = []  # every SubmitJob the emulated Batch accepted, in order
        self._undrained = 0

    def arn(self, resource: str) -> str:
        return f"arn:aws:batch:{self.region}:{self.account}:{resource}"

    # jobs from directives and events
    def put(self, spec: Any) -> None:
        """A job from a JobDetail-shaped directive; ValueError names what is wrong with it."""
        if not isinstance(spec, dict):
            raise ValueError("expected a DescribeJobs JobDetail-shaped object")
        job = copy.deepcopy(spec)
        job.setdefault("jobArn", self.arn(f"job/{job.get('jobId')}"))
        job.setdefault("createdAt", _millis(datetime.now(UTC)))
        violations = response_violations("batch", "DescribeJobs", {"jobs": [job]})
        if violations:
            raise ValueError("not a valid DescribeJobs JobDetail: " + "; ".join(str(v) for v in violations))
        if job["jobId"] in self.jobs:
            raise ValueError(f"Batch job {job['jobId']!r} already exists")
        self.jobs[job["jobId"]] = job

    def sync(self, detail: dict, create: bool) -> None:
        """A state change event: a known job takes its status and reasons; an unknown one is created when
        ``create`` (and valid: else left alone, and the handler meets a job Batch does not know)."""
        job_id = detail.get("jobId")
        if not isinstance(job_id, str):
            return
        job = self.jobs.get(job_id)
        if job is None:
            if create:
                try:
                    self.put(detail)
                except ValueError:
                    return
            return
        for member in _CHANGING:
            if member in detail:
                job[member] = copy.deepcopy(detail[member])

    # what the handlers call
    def describe_jobs(self, request: AWSPreparedRequest) -> AWSResponse:
        params = json.loads(request.body or b"{}")
        wanted = params.get("jobs") or []
        found = [self.jobs[job_id] for job_id in wanted if job_id in self.jobs]
        found += [job for job in self.jobs.values() if job["jobArn"] in wanted and job not in found]
        return json_answer(request.url, {"jobs": found})

    def submit_job(self, request: AWSPreparedRequest) -> AWSResponse:
        params = json.loads(request.body or b"{}")
        queue, definition = _arn_of(params.get("jobQueue", ""), self.arn("job-queue/")), params.get("jobDefinition", "")
        if queue not in {job["jobQueue"] for job in self.jobs.values()}:
            return error_response(request.url, "rest-json", "ClientException", 400,
                                  f"Job queue {params.get('jobQueue')} does not exist.")
        if definition not in {job["jobDefinition"] for job in self.jobs.values()}:
            return error_response(request.url, "rest-json", "ClientException", 400,
                                  f"Job definition {definition} does not exist.")
        name = params["jobName"]
        nth = 1 + sum(1 for entry in self.submitted if entry["name"] == name)
        job_id = submitted_job_id(name, nth)
        job = {"jobArn": self.arn(f"job/{job_id}"), "jobName": name, "jobId": job_id, "jobQueue": queue,
               "status": "SUBMITTED", "createdAt": _millis(datetime.now(UTC)), "jobDefinition": definition,
               "attempts": [], "dependsOn": [], "parameters": params.get("parameters", {}),
               "tags": params.get("tags", {}), "propagateTags": params.get("propagateTags", False)}
        for member, detail_member in (("timeout", "timeout"), ("retryStrategy", "retryStrategy"),
                                      ("shareIdentifier", "shareIdentifier"),
                                      ("schedulingPriorityOverride", "schedulingPriority")):
            if member in params:
                job[detail_member] = params[member]
        if "nodeOverrides" in params:
            nodes = params["nodeOverrides"]
            job["nodeProperties"] = {"numNodes": nodes.get("numNodes", len(nodes.get("nodePropertyOverrides", []))),
                                     "mainNode": 0,
                                     "nodeRangeProperties": [{"targetNodes": o["targetNodes"],
                                                              "container": o.get("containerOverrides", {})}
                                                             for o in nodes.get("nodePropertyOverrides", [])]}
        elif "containerOverrides" in params:
            job["container"] = copy.deepcopy(params["containerOverrides"])
        self.jobs[job_id] = job
        self.submitted.append({"name": name, "job_id": job_id, "queue": queue.rsplit("/", 1)[-1],
                               "definition": definition, "request": params})
        return json_answer(request.url, {"jobArn": job["jobArn"], "jobName": name, "jobId": job_id})

    def drain_submitted(self) -> list[dict]:
        new = self.submitted[self._undrained:]
        self._undrained = len(self.submitted)
        return new


def _arn_of(name_or_arn: str, prefix: str) -> str:
    """SubmitJob's jobQueue is "the job queue ... name or the Amazon Resource Name (ARN)" (botocore's model)."""
    return name_or_arn if name_or_arn.startswith("arn:") else prefix + name_or_arn


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def json_answer(url: str, body: dict, status: int = 200) -> AWSResponse:
    """A rest-json service's answer (Batch's, Bedrock's)."""
    return raw_response(url, status, {"Content-Type": "application/json", "x-amzn-RequestId": str(uuid.uuid4())},
                        json.dumps(body).encode())
