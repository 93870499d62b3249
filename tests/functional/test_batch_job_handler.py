"""Specification: restarting failed AWS Batch jobs (resubmitting a faithful clone), the sibling of the SageMaker
training-job flow. Batch's API through botocore's Stubber (moto's Batch drops what a clone carries: sim/batch.py);
every request Medic sends is also checked against botocore's batch model in full (sim.contract: patterns, enums,
lengths, which botocore's own validator leaves to the service)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.stub import Stubber

from medic.adapters.batch import SUBMIT_ONCE, BatchJobs
from medic.config import parse_config
from medic.flows.jobs.batch import restart_batch_job
from medic.ledger.jobs import JobStore, MedicRestart
from sim.contract import request_violations
from tests.functional.conftest import CONFIG, REGION, medic_world
from tests.helpers import load_event

QUEUE = "arn:aws:batch:us-west-2:123456789012:job-queue/gpu-training"
DEFINITION = "arn:aws:batch:us-west-2:123456789012:job-definition/pretrain-mnp:7"
BUCKET = "ml-checkpoints-123456789012"
JOB, JOB_ID = "pt-llama-0007", "9b2f6c1e-4a7d-4e3b-8c5f-0d1e2a3b4c5d"
HOST = "Host EC2 (instance i-0b7c9d1e2f3a4b5c6) terminated."
BATCH = {"prefix": "pt-", "job_queues": ["gpu-training"], "job_definitions": ["pretrain-mnp", "eval-single"],
         "max_restarts": 2, "checkpoint_buckets": [{"bucket": BUCKET, "prefix": "pretrain/{lineage}/"}]}


def failed(reason: str = HOST, exit_code: int | None = None, **changes) -> dict:
    """AWS's documented sample event (Batch user guide, "Job state change events"), as a FAILED multi-node
    parallel job of the configured queue in this account and region."""
    event = copy.deepcopy(load_event("aws-docs-batch-job-state-change"))
    event.update(region=REGION, time="2026-11-20T08:14:00Z")
    attempt_container = {"reason": reason, **({} if exit_code is None else {"exitCode": exit_code})}
    detail = event["detail"]
    detail.pop("container")
    detail.update({
        "jobArn": f"arn:aws:batch:us-west-2:123456789012:job/{JOB_ID}", "jobName": JOB, "jobId": JOB_ID,
        "jobQueue": QUEUE, "status": "FAILED", "statusReason": reason, "jobDefinition": DEFINITION,
        "createdAt": 1795162440000, "startedAt": 1795162500000, "parameters": {"epochs": "3"},
        "timeout": {"attemptDurationSeconds": 172800},
        "schedulingPriority": 50, "shareIdentifier": "pretrain", "tags": {"team": "pretrain"}, "propagateTags": True,
        "retryStrategy": {"attempts": 2, "evaluateOnExit": []},
        "attempts": [{"statusReason": reason, "container": attempt_container}] * 2,
        "nodeProperties": {"numNodes": 4, "mainNode": 0, "nodeRangeProperties": [{
            "targetNodes": "0:", "container": {
                "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/pretrain:1.4", "command": ["torchrun", "t.py"],
                "environment": [{"name": "CHECKPOINT_DIR", "value": f"s3://{BUCKET}/pretrain/{JOB}/"},
                                {"name": "AWS_BATCH_JOB_MAIN_NODE_INDEX", "value": "0"}],
                "resourceRequirements": [{"type": "GPU", "value": "8"}], "vcpus": 96, "memory": 1000000,
                "instanceType": "p4d.24xlarge", "jobRoleArn": "arn:aws:iam::123456789012:role/Trainer"}}]},
        **changes})
    event["resources"] = [detail["jobArn"]]
    return event


class Stubbed:
    """A service client of Medic's under botocore's Stubber, the requests of one operation kept as sent (API
    parameters)."""

    def __init__(self, service: str, kept: str, **client_options) -> None:
        self.client = boto3.client(service, region_name=REGION, **client_options)
        self.stub = Stubber(self.client)
        self.sent: list[dict] = []
        self.client.meta.events.register(f"provide-client-params.{service}.{kept}",
                                         lambda params, **_: self.sent.append(copy.deepcopy(params)))
        self.stub.activate()


class Batch(Stubbed):
    """Medic's Batch client, its SubmitJob requests kept."""

    def __init__(self, medic) -> None:
        super().__init__("batch", "SubmitJob", config=SUBMIT_ONCE)
        medic.deps.batch = BatchJobs(self.client)

    def describes(self, event: dict) -> None:
        self.stub.add_response("describe_jobs", {"jobs": [event["detail"]]}, {"jobs": [event["detail"]["jobId"]]})

    def accepts(self, name: str, job_id: str = "c0ffee00-0000-4000-8000-000000000001") -> None:
        self.stub.add_response("submit_job", {"jobArn": f"arn:aws:batch:us-west-2:123456789012:job/{job_id}",
                                              "jobName": name, "jobId": job_id})


@pytest.fixture
def world(aws):
    for medic in medic_world(parse_config({**CONFIG, "batch_jobs": [BATCH]}), aws):
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        yield medic, Batch(medic), s3


def checkpoint_saved(s3, lineage: str = JOB) -> None:
    s3.put_object(Bucket=BUCKET, Key=f"pretrain/{lineage}/step-4800/model.pt", Body=b"weights")


def restartable(world) -> dict:
    """Given the multi-node job's failure on a terminated host, its checkpoint in S3, Batch answering for it."""
    _, batch, s3 = world
    checkpoint_saved(s3)
    event = failed()
    batch.describes(event)
    batch.accepts(f"{JOB}-r1")
    return event


def test_a_multi_node_job_on_a_terminated_host_is_resubmitted_once_as_a_faithful_clone(world):
    medic, batch, _ = world
    # Given a multi-node job Batch retried twice and then failed on a terminated host, its checkpoint in S3
    event = restartable(world)
    # When Batch reports it FAILED
    record = restart_batch_job(medic.arrives(event), medic.deps)
    # Then one SubmitJob: the same revision, queue, parameters, node ranges, timeout, priority, share, tags
    assert (record["action"], record["outcome"], record["fault"], record["incident"], record["attempt"]) == (
        "restart_job", "executed", "job_retryable", f"batch-job:{JOB}", 1)
    assert "host_terminated" in record["reason"] and "Batch made 2 attempt(s)" in record["reason"]
    assert f"s3://{BUCKET}/pretrain/{JOB}/" in record["reason"]
    [request] = batch.sent
    assert request_violations("batch", "SubmitJob", request) == []
    assert {key: request[key] for key in ("jobName", "jobQueue", "jobDefinition", "parameters", "timeout",
                                          "schedulingPriorityOverride", "shareIdentifier", "propagateTags")} == {
        "jobName": f"{JOB}-r1", "jobQueue": QUEUE, "jobDefinition": DEFINITION, "parameters": {"epochs": "3"},
        "timeout": {"attemptDurationSeconds": 172800}, "schedulingPriorityOverride": 50,
        "shareIdentifier": "pretrain", "propagateTags": True}
    assert request["retryStrategy"] == {"attempts": 2}
    # the node ranges as overrides: Batch's own variables left out, the deprecated spelling dropped, numNodes kept
    # (the range 0: is open), the role not (the definition holds it)
    assert request["nodeOverrides"] == {"numNodes": 4, "nodePropertyOverrides": [{"targetNodes": "0:",
        "containerOverrides": {"command": ["torchrun", "t.py"], "instanceType": "p4d.24xlarge",
                               "environment": [{"name": "CHECKPOINT_DIR", "value": f"s3://{BUCKET}/pretrain/{JOB}/"}],
                               "resourceRequirements": [{"type": "GPU", "value": "8"}]}}]}
    assert "containerOverrides" not in request
    assert request["tags"] == {"team": "pretrain", "medic:lineage": JOB, "medic:attempt": "1",
                               "medic:restarted-from": JOB}
    # And the ledger holds the restart (its lineage, and the job id Batch gave it), and nobody is paged
    noted = JobStore(medic.deps.table).restart(f"batch/{JOB}-r1")
    assert (noted.root, noted.attempt, noted.submitted_id) == (JOB, 1, "c0ffee00-0000-4000-8000-000000000001")
    assert medic.pages() == []
    batch.stub.assert_no_pending_responses()


def test_a_redelivered_failure_is_a_duplicate_and_submits_nothing(world):
    medic, batch, _ = world
    event = restartable(world)
    restart_batch_job(medic.arrives(event), medic.deps)
    # When EventBridge delivers the same failure again
    again = restart_batch_job(medic.arrives(copy.deepcopy(event)), medic.deps)
    assert again["outcome"] == "duplicate" and len(batch.sent) == 1


def test_no_checkpoint_where_the_entry_says_pages_instead_of_restarting_from_scratch(world):
    medic, batch, _ = world
    record = restart_batch_job(medic.arrives(failed()), medic.deps)
    assert (record["outcome"], record["why"], record["paged"]) == ("suppressed", "no_checkpoint", True)
    assert f"nothing is stored under s3://{BUCKET}/pretrain/{JOB}/" in record["reason"]
    assert batch.sent == []
    [page] = medic.pages()
    assert "Batch job" in page["Subject"]


def test_a_jobs_own_non_zero_exit_pages_quoting_batch_and_never_restarts(world):
    medic, batch, s3 = world
    checkpoint_saved(s3)
    event = failed("Essential container in task exited", exit_code=1)
    record = restart_batch_job(medic.arrives(event), medic.deps)
    assert (record["fault"], record["outcome"], record["why"]) == ("job_not_retryable", "deferred", "not_retryable")
    assert "job_exit_code" in record["reason"] and batch.sent == []
    [page] = medic.pages()
    assert '"statusReason: Essential container in task exited' in page["Message"]
    assert "FAILED after 2 attempt(s) of its own retry strategy" in page["Message"]


@pytest.mark.parametrize(("reason", "label"), [
    ("CannotPullContainerError: failed to resolve ref: 123456789012.dkr.ecr.us-west-2.amazonaws.com/x:1: "
     "not found", "image_not_found"),
    ("OutOfMemoryError: Container killed due to memory usage", "out_of_memory"),
    ("Job attempt duration exceeded timeout", "job_timeout"),
])
def test_the_jobs_own_failures_are_not_retryable(world, reason, label):
    medic, batch, s3 = world
    checkpoint_saved(s3)
    record = restart_batch_job(medic.arrives(failed(reason)), medic.deps)
    assert record["fault"] == "job_not_retryable" and label in record["reason"] and batch.sent == []


@pytest.mark.parametrize("reason", [
    "CannotPullContainerError: pull image manifest has been retried 5 time(s): context deadline exceeded",
    "ResourceInitializationError: unable to pull secrets or registry auth",
    "CannotStartContainerError: Error response from daemon: OCI runtime create failed",
])
def test_infrastructure_failures_are_retryable(world, reason):
    medic, batch, s3 = world
    checkpoint_saved(s3)
    event = failed(reason)
    batch.describes(event)
    batch.accepts(f"{JOB}-r1")
    record = restart_batch_job(medic.arrives(event), medic.deps)
    assert (record["fault"], record["outcome"]) == ("job_retryable", "executed")


def test_an_array_jobs_child_is_left_to_the_array_and_the_array_pages_without_a_restart(world):
    medic, batch, s3 = world
    checkpoint_saved(s3)
    child = failed(jobId=f"{JOB_ID}:3", arrayProperties={"index": 3})
    assert restart_batch_job(medic.arrives(child), medic.deps)["outcome"] == "ignored"
    parent = failed(arrayProperties={"size": 8, "statusSummary": {"FAILED": 1, "SUCCEEDED": 7}})
    record = restart_batch_job(medic.arrives(parent), medic.deps)
    assert (record["outcome"], record["why"], record["paged"]) == ("deferred", "human_decides", True)
    assert "never resubmits an array job" in record["reason"] and batch.sent == []


def test_a_node_of_a_multi_node_job_is_left_to_the_job(world):
    medic, batch, _ = world
    node = failed(jobId=f"{JOB_ID}#1", nodeDetails={"nodeIndex": 1, "isMainNode": False})
    assert restart_batch_job(medic.arrives(node), medic.deps)["outcome"] == "ignored"


def test_a_job_of_an_unconfigured_definition_or_queue_is_not_submitted(world):
    medic, batch, s3 = world
    checkpoint_saved(s3)
    other = failed(jobDefinition="arn:aws:batch:us-west-2:123456789012:job-definition/mallory:1")
    record = restart_batch_job(medic.arrives(other), medic.deps)
    assert (record["outcome"], record["why"]) == ("suppressed", "not_allowed") and "mallory" in record["reason"]
    queue = failed(jobQueue="arn:aws:batch:us-west-2:123456789012:job-queue/someone-elses",
                   jobId="0f0f0f0f-0000-4000-8000-000000000002")
    assert restart_batch_job(medic.arrives(queue), medic.deps)["outcome"] == "ignored"
    assert batch.sent == []


def test_an_earlier_run_that_began_the_submission_is_never_submitted_twice(world):
    medic, batch, s3 = world
    checkpoint_saved(s3)
    event = failed()
    # Given a run that noted the restart a while ago, then died before Batch's answer was recorded
    JobStore(medic.deps.table).intend_restart(MedicRestart(
        name=f"batch/{JOB}-r1", root=JOB, attempt=1, restarted_from=JOB,
        intended_at=medic.clock[0] - timedelta(minutes=5),
        restarted_from_created=medic.deps.now().fromtimestamp(1795162440, medic.clock[0].tzinfo)))
    batch.describes(event)
    record = restart_batch_job(medic.arrives(event), medic.deps)
    # Then Medic does not submit again (Batch takes two jobs of one name) and a human looks
    assert (record["outcome"], record["paged"]) == ("failed", True) and batch.sent == []
    assert "does not submit again" in record["reason"]


def test_the_budget_is_per_lineage(world):
    medic, batch, s3 = world
    checkpoint_saved(s3)
    # Given Medic's own r2 of the lineage (max_restarts 2), created when Medic submitted it
    JobStore(medic.deps.table).intend_restart(MedicRestart(
        name=f"batch/{JOB}-r2", root=JOB, attempt=2, restarted_from=f"{JOB}-r1", intended_at=medic.clock[0]))
    r2 = failed(jobName=f"{JOB}-r2", jobId="1d1d1d1d-0000-4000-8000-000000000003",
                createdAt=int(medic.clock[0].timestamp() * 1000) + 1000)
    batch.describes(r2)
    record = restart_batch_job(medic.arrives(r2), medic.deps)
    assert (record["outcome"], record["why"], record["attempt"], record["incident"]) == (
        "suppressed", "budget_spent", 3, f"batch-job:{JOB}")
    # And a job that only shares the name (not created while Medic submitted it) is the root of its own lineage
    impostor = failed(jobName=f"{JOB}-r2", jobId="2e2e2e2e-0000-4000-8000-000000000004", createdAt=1000)
    checkpoint_saved(s3, f"{JOB}-r2")
    batch.describes(impostor)
    batch.describes(impostor)
    batch.accepts(f"{JOB}-r2-r1")
    record = restart_batch_job(medic.arrives(impostor), medic.deps)
    assert (record["outcome"], record["attempt"], record["incident"]) == ("executed", 1, f"batch-job:{JOB}-r2")


def test_the_documented_sample_as_aws_sends_it_is_rejected_for_its_region(world):
    medic, batch, _ = world
    # AWS's sample, at its own time: us-east-1, RUNNABLE: its detail parses (a real event's shape) and the event is
    # rejected as another region's
    sample = load_event("aws-docs-batch-job-state-change")
    medic.at(sample["time"])
    medic.deps.account = "123456789012"
    record = restart_batch_job(sample, medic.deps)
    assert record["outcome"] == "rejected" and "us-east-1" in record["reason"] and batch.sent == []


@pytest.mark.parametrize(("mode", "outcome", "pages"), [("dry_run", "dry_run", 0), ("paused", "suppressed", 1)])
def test_a_dry_run_or_a_pause_submits_nothing(world, mode, outcome, pages):
    medic, batch, s3 = world
    checkpoint_saved(s3)
    medic.set_mode(mode)
    record = restart_batch_job(medic.arrives(failed()), medic.deps)
    assert (record["outcome"], record["mode"]) == (outcome, mode) and batch.sent == []
    assert len(medic.pages()) == pages
    # a dry run notes no restart in the real namespace: the lineage is untouched
    assert JobStore(medic.deps.table).restart(f"batch/{JOB}-r1") is None


def running(name: str, job_id: str, started_at: int) -> dict:
    """The job's RUNNING state change (Batch publishes every state change: "Job state change events")."""
    event = failed(jobName=name, jobId=job_id, jobArn=f"arn:aws:batch:us-west-2:123456789012:job/{job_id}",
                   status="RUNNING", statusReason="", attempts=[], startedAt=started_at)
    event["time"] = datetime.fromtimestamp(started_at / 1000 + 5, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return event


def test_a_restarts_incident_line_waits_for_its_clone_to_run_and_resumes_then(world):
    from tests.functional.test_alarm_timelines import incident_lines

    medic, _, _ = world
    # Given Medic resubmitted the failed job (SubmitJob answered the clone's id)
    lines = incident_lines(lambda: restart_batch_job(medic.arrives(restartable(world)), medic.deps))
    restarted, clone_id = medic.clock[0], "c0ffee00-0000-4000-8000-000000000001"
    # Then no incident line yet (before: one at once, with no resume)
    assert lines == []
    # When another job named like the clone runs, then the clone itself (startedAt 9 minutes after the restart)
    started = restarted + timedelta(minutes=9)
    other = running(f"{JOB}-r1", "0ther000-0000-4000-8000-000000000009", int(started.timestamp() * 1000))
    assert incident_lines(lambda: restart_batch_job(medic.arrives(other), medic.deps)) == []
    event = running(f"{JOB}-r1", clone_id, int(started.timestamp() * 1000))
    [line] = incident_lines(lambda: restart_batch_job(medic.arrives(event), medic.deps))
    # Then the restart's line: acted and repaired at the call, resumed and resolved when the clone ran
    assert (line["incident"], line["kind"], line["job"], line["fault"]) == (
        f"batch-job:{JOB}", "batch_job", JOB, "job_retryable")
    assert (line["acted_at"], line["repaired_at"]) == (restarted.isoformat(), restarted.isoformat())
    assert line["resumed_at"] == line["resolved_at"] == started.isoformat()
    # And its redelivery writes nothing more
    assert incident_lines(lambda: restart_batch_job(medic.arrives(copy.deepcopy(event)), medic.deps)) == []


def test_a_clone_that_fails_before_running_ends_its_restarts_line_without_a_resume(world):
    from tests.functional.test_alarm_timelines import incident_lines

    medic, batch, s3 = world
    restart_batch_job(medic.arrives(restartable(world)), medic.deps)
    restarted = medic.clock[0]
    medic.clock[0] += timedelta(minutes=15)
    # When the clone fails before it ran (Medic's own r1: noted, submitted, created after the note)
    clone = failed(jobName=f"{JOB}-r1", jobId="c0ffee00-0000-4000-8000-000000000001",
                   createdAt=int(restarted.timestamp() * 1000) + 1000)
    batch.describes(clone)
    batch.describes(clone)
    batch.accepts(f"{JOB}-r2", "c0ffee00-0000-4000-8000-000000000002")
    lines = incident_lines(lambda: restart_batch_job(medic.arrives(clone), medic.deps))
    # Then the first restart's line ends without a resume, and the clone's failure is the lineage's restart 2
    [line] = lines
    assert (line["incident"], line["acted_at"], line["resumed_at"], line["resolved_at"]) == (
        f"batch-job:{JOB}", restarted.isoformat(), None, None)
    assert [request["jobName"] for request in batch.sent] == [f"{JOB}-r1", f"{JOB}-r2"]


def test_a_clone_that_never_runs_is_given_up_at_the_deadline_by_the_recovery_check(world):
    from medic.flows.jobs.timeline import conclude_clone_timelines
    from tests.functional.test_alarm_timelines import incident_lines

    medic, _, _ = world
    restart_batch_job(medic.arrives(restartable(world)), medic.deps)
    # Then the recovery check reads no Batch job (nothing stubbed): it waits, and writes the line at the deadline
    assert incident_lines(lambda: conclude_clone_timelines(medic.deps)) == []
    medic.clock[0] += timedelta(hours=24)
    [line] = incident_lines(lambda: conclude_clone_timelines(medic.deps))
    assert (line["kind"], line["resumed_at"]) == ("batch_job", None)
