"""Specification: starting failed Amazon Bedrock model customization jobs again (from scratch, where allowed), the
sibling of the SageMaker and Batch flows. Bedrock's API through botocore's Stubber; every request Medic sends is
also checked against botocore's bedrock model in full (sim.contract)."""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime

import pytest

from medic.adapters.bedrock import BedrockJobs
from medic.config import parse_config
from medic.flows.jobs.bedrock import restart_bedrock_job
from medic.ledger.jobs import JobStore
from sim.contract import request_violations
from tests.functional.conftest import CONFIG, REGION, medic_world
from tests.functional.test_batch_job_handler import Stubbed
from tests.helpers import load_event

ROLE = "arn:aws:iam::123456789012:role/BedrockCustomization"
JOB = "cpt-llama-0003"
JOB_ARN = ("arn:aws:bedrock:us-west-2:123456789012:model-customization-job/meta.llama3-1-8b-instruct-v1:0/"
           "k2j4h6g8f0d1")
BEDROCK = [{"prefix": "cpt-", "role_arns": [ROLE], "max_restarts": 2, "allow_restart_from_scratch": True},
           {"prefix": "sft-", "role_arns": [ROLE]}]
SERVICE_ERROR = "InternalServerException: An internal service error occurred. Please retry the job."


def failed(message: str = SERVICE_ERROR, name: str = JOB, arn: str = JOB_ARN) -> dict:
    """AWS's documented sample event ("How EventBridge for Amazon Bedrock works"), as a failed job of this account
    and region."""
    event = copy.deepcopy(load_event("aws-docs-bedrock-model-customization-job-state-change"))
    event.update(region=REGION, time="2026-11-20T08:14:00Z", id="6a1d4c2e-8b3f-4e5a-9c7d-0e1f2a3b4c5d",
                 resources=[arn])
    event["detail"].update(jobName=name, jobArn=arn, roleArn=ROLE, failureMessage=message,
                           outputModelName=f"{name}-model")
    return event


def description(name: str = JOB, arn: str = JOB_ARN, role: str = ROLE) -> dict:
    """GetModelCustomizationJob's answer for the failed job (botocore's bedrock model)."""
    return {"jobArn": arn, "jobName": name, "outputModelName": f"{name}-model", "roleArn": role, "status": "Failed",
            "failureMessage": SERVICE_ERROR, "creationTime": datetime(2026, 11, 20, 2, 14, tzinfo=UTC),
            "endTime": datetime(2026, 11, 20, 8, 14, tzinfo=UTC), "clientRequestToken": "abc",
            "baseModelArn": "arn:aws:bedrock:us-west-2::foundation-model/meta.llama3-1-8b-instruct-v1:0",
            "customizationType": "CONTINUED_PRE_TRAINING",
            "hyperParameters": {"epochCount": "2", "batchSize": "8", "learningRate": "0.00001"},
            "trainingDataConfig": {"s3Uri": "s3://ml-data-123456789012/cpt/train/"},
            "validationDataConfig": {"validators": [{"s3Uri": "s3://ml-data-123456789012/cpt/valid/"}]},
            "outputDataConfig": {"s3Uri": "s3://ml-artifacts-123456789012/cpt/"},
            "outputModelKmsKeyArn": "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            "vpcConfig": {"subnetIds": ["subnet-0123456789abcdef0"], "securityGroupIds": ["sg-0123456789abcdef0"]}}


class Bedrock(Stubbed):
    """Medic's Bedrock client, its CreateModelCustomizationJob requests kept."""

    def __init__(self, medic) -> None:
        super().__init__("bedrock", "CreateModelCustomizationJob")
        medic.deps.bedrock = BedrockJobs(self.client)

    def describes(self, answer: dict) -> None:
        self.stub.add_response("get_model_customization_job", answer, {"jobIdentifier": answer["jobName"]})

    def tagged(self, tags: dict[str, str]) -> None:
        self.stub.add_response("list_tags_for_resource", {"tags": [{"key": k, "value": v} for k, v in tags.items()]},
                               {"resourceARN": JOB_ARN})

    def creates(self, arn: str = JOB_ARN.replace("k2j4h6g8f0d1", "z9y8x7w6v5u4")) -> None:
        self.stub.add_response("create_model_customization_job", {"jobArn": arn})


@pytest.fixture
def world(aws):
    for medic in medic_world(parse_config({**CONFIG, "bedrock_jobs": BEDROCK}), aws):
        yield medic, Bedrock(medic)


def test_a_service_error_where_allowed_starts_the_job_again_from_scratch_saying_what_it_repeats(world):
    medic, bedrock = world
    bedrock.describes(description())
    bedrock.tagged({"team": "cpt"})
    bedrock.creates()
    record = restart_bedrock_job(medic.arrives(failed()), medic.deps)
    assert (record["action"], record["outcome"], record["incident"], record["attempt"]) == (
        "restart_job", "executed", f"bedrock-job:{JOB}", 1)
    assert "from scratch" in record["reason"] and "repeats the failed job's 6.0 h of training" in record["reason"]
    [request] = bedrock.sent
    assert request_violations("bedrock", "CreateModelCustomizationJob", request) == []
    assert (request["jobName"], request["customModelName"]) == (f"{JOB}-r1", f"{JOB}-model-r1")
    assert request["baseModelIdentifier"].endswith("foundation-model/meta.llama3-1-8b-instruct-v1:0")
    assert request["customModelKmsKeyId"].endswith(":key/1234abcd-12ab-34cd-56ef-1234567890ab")
    assert request["roleArn"] == ROLE and request["vpcConfig"]["subnetIds"] == ["subnet-0123456789abcdef0"]
    assert request["validationDataConfig"] == {"validators": [{"s3Uri": "s3://ml-data-123456789012/cpt/valid/"}]}
    assert {tag["key"]: tag["value"] for tag in request["jobTags"]} == {
        "team": "cpt", "medic:lineage": JOB, "medic:attempt": "1", "medic:restarted-from": JOB}
    assert request["clientRequestToken"] != "abc"  # Medic's own token for this restart, not the failed job's
    assert JobStore(medic.deps.table).restart(f"bedrock/{JOB}-r1").attempt == 1
    assert medic.pages() == []
    # And the same event again is a duplicate
    assert restart_bedrock_job(medic.arrives(failed()), medic.deps)["outcome"] == "duplicate"
    assert len(bedrock.sent) == 1


def test_a_service_error_where_restarting_from_scratch_is_not_allowed_pages_and_says_why(world):
    medic, bedrock = world
    arn = JOB_ARN.replace("k2j4h6g8f0d1", "q1w2e3r4t5y6")
    bedrock.describes(description("sft-mistral-0001", arn))
    record = restart_bedrock_job(medic.arrives(failed(name="sft-mistral-0001", arn=arn)), medic.deps)
    assert (record["outcome"], record["why"], record["paged"]) == ("suppressed", "no_checkpoint", True)
    assert "does not resume from a checkpoint" in record["reason"] and "allow_restart_from_scratch" in record["reason"]
    assert bedrock.sent == []
    [page] = medic.pages()
    assert "a restart starts over" in page["Message"]


@pytest.mark.parametrize("message", [
    "ValidationException: The provided training data does not match the format expected.",
    "AccessDeniedException: Bedrock is not authorized to access the S3 bucket.",
    "ServiceQuotaExceededException: The request would exceed the quota for custom models.",
])
def test_the_jobs_own_failures_page_without_a_restart(world, message):
    medic, bedrock = world
    record = restart_bedrock_job(medic.arrives(failed(message)), medic.deps)
    assert (record["fault"], record["outcome"]) == ("job_not_retryable", "deferred") and bedrock.sent == []


def test_a_role_outside_the_entry_is_not_passed(world):
    medic, bedrock = world
    bedrock.describes(description(role="arn:aws:iam::123456789012:role/Mallory"))
    record = restart_bedrock_job(medic.arrives(failed()), medic.deps)
    assert (record["outcome"], record["why"]) == ("suppressed", "not_allowed") and "Mallory" in record["reason"]
    assert bedrock.sent == []


def test_the_documented_sample_as_aws_sends_it_is_rejected_for_its_region(world):
    medic, bedrock = world
    sample = load_event("aws-docs-bedrock-model-customization-job-state-change")
    medic.at(sample["time"])
    record = restart_bedrock_job(sample, medic.deps)
    assert record["outcome"] == "rejected" and bedrock.sent == []


def in_progress(name: str, arn: str, at: str) -> dict:
    """The job's InProgress state change (Bedrock publishes a job's every change of state)."""
    event = failed(name=name, arn=arn)
    event.update(time=at, id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{arn}/{at}")))
    event["detail"].update(jobStatus="InProgress", failureMessage="")
    return event


def test_a_restarts_incident_line_is_written_when_the_new_job_is_in_progress(world):
    from datetime import timedelta

    from tests.functional.test_alarm_timelines import incident_lines

    medic, bedrock = world
    bedrock.describes(description())
    bedrock.tagged({})
    # Given Bedrock created the job again under Medic's name (CreateModelCustomizationJob answered its ARN)
    clone_arn = JOB_ARN.replace("k2j4h6g8f0d1", "z9y8x7w6v5u4")
    bedrock.creates(clone_arn)
    assert incident_lines(lambda: restart_bedrock_job(medic.arrives(failed()), medic.deps)) == []
    restarted = medic.clock[0]
    # When another job of that name's ARN is InProgress (not the one Medic created), then Medic's, in the sample's
    # shorter ARN form (model-customization-job/<id>)
    other = in_progress(f"{JOB}-r1", JOB_ARN.replace("k2j4h6g8f0d1", "a1a1a1a1a1a1"), "2026-11-20T08:15:00Z")
    assert incident_lines(lambda: restart_bedrock_job(medic.arrives(other), medic.deps)) == []
    short = "arn:aws:bedrock:us-west-2:123456789012:model-customization-job/z9y8x7w6v5u4"
    [line] = incident_lines(lambda: restart_bedrock_job(
        medic.arrives(in_progress(f"{JOB}-r1", short, "2026-11-20T08:16:00Z")), medic.deps))
    # Then the restart's line resumes at the InProgress event: the new job runs (from scratch)
    assert (line["incident"], line["kind"], line["acted_at"]) == (f"bedrock-job:{JOB}", "bedrock_job",
                                                                   restarted.isoformat())
    assert line["resumed_at"] == (restarted.replace(minute=16, second=0)).isoformat()
    assert line["time_to_resume_s"] == timedelta(minutes=2).total_seconds()


def test_a_new_job_in_progress_before_its_restarts_handling_ended_still_closes_the_line_once(world):
    from datetime import timedelta

    from medic.ledger.jobs import MedicRestart
    from tests.functional.test_alarm_timelines import incident_lines

    medic, bedrock = world
    clone_arn = JOB_ARN.replace("k2j4h6g8f0d1", "z9y8x7w6v5u4")
    store = JobStore(medic.deps.table)
    # Given the InProgress of Medic's new job arrives while the restart's handling has not written its watch yet
    # (CreateModelCustomizationJob answered, the note has the ARN; Bedrock's job is InProgress at once)
    store.intend_restart(MedicRestart(name=f"bedrock/{JOB}-r1", root=JOB, attempt=1, restarted_from=JOB,
                                      intended_at=medic.clock[0]))
    store.note_submitted(f"bedrock/{JOB}-r1", clone_arn)
    running_at = medic.clock[0] + timedelta(seconds=2)
    early = in_progress(f"{JOB}-r1", clone_arn, running_at.strftime("%Y-%m-%dT%H:%M:%SZ"))
    # Then it writes no line yet (no watch to close), and notes the run
    assert incident_lines(lambda: restart_bedrock_job(medic.arrives(early), medic.deps)) == []
    assert store.clone_ran(f"bedrock/{JOB}-r1") == running_at
    # When the restart's handling ends (here: the failure handled, the watch written after the create call)
    store.table.delete(store.restart_key(f"bedrock/{JOB}-r1"))
    bedrock.describes(description())
    bedrock.tagged({})
    bedrock.creates(clone_arn)
    [line] = incident_lines(lambda: restart_bedrock_job(medic.arrives(failed()), medic.deps))
    # Then the line is written then, resumed when the new job was InProgress; nothing waits any more
    assert (line["kind"], line["resumed_at"]) == ("bedrock_job", running_at.isoformat())
    assert store.clone_watch(f"bedrock/{JOB}-r1") is None
