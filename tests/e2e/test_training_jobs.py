"""Specification: failed SageMaker training jobs, end to end — the synthesized stack's training job
rule, the real handler, and training jobs kept in the emulated SageMaker."""

from __future__ import annotations

import copy

from sim.scenario import SCENARIOS
from sim.scenarios.generate import (
    CHECKPOINT,
    CUDA_OOM,
    JOB,
    MALLORY_IMAGE,
    T_JOB,
    restart_failed,
    training_failed,
)
from tests.e2e.conftest import outcomes, sample

CREATE = "sagemaker:CreateTrainingJob"
CHECKPOINT_URI = "s3://ml-artifacts-123456789012/ft/checkpoints/ft-mistral-7b/"
LINEAGE = {"medic:lineage": JOB, "medic:attempt": "1", "medic:restarted-from": JOB}


def test_h_a_retryable_failure_restarts_the_job_from_its_checkpoint(replay):
    # Given a checkpoint under the job's CheckpointConfig.S3Uri and an InternalServerError failure
    result = replay(SCENARIOS / "h-training-job-restart.jsonl")
    # Then one clone is started, named <job>-r1, resuming from the same checkpoint URI, and nobody is paged
    assert outcomes(result) == [("restart_job", "executed")]
    record = result.records[0]
    assert (record["job"], record["fault"], record["attempt"], record["paged"]) == (JOB, "job_retryable", 1, False)
    assert record["incident"] == f"job:{JOB}"
    assert [job["name"] for job in result.training_jobs] == [f"{JOB}-r1"]
    job = result.training_jobs[0]
    assert (job["status"], job["checkpoint"]) == ("InProgress", CHECKPOINT_URI)
    assert job["tags"] == LINEAGE
    assert result.calls[CREATE] == 1
    assert result.pages == []


def test_h_the_clone_is_the_failed_job_with_a_new_name(replay):
    # Given the sample failure (its detail is the job's description) and a checkpoint
    failed = sample("training-job-failed")
    result = replay([{"sim": {"s3_put": CHECKPOINT}}, failed])
    # Then CreateTrainingJob got the failed job's definition: image, role, data, resources, checkpoint
    request = result.training_jobs[0]["request"]
    detail = failed["detail"]
    for member in ("HyperParameters", "AlgorithmSpecification", "RoleArn", "InputDataConfig", "OutputDataConfig",
                   "CheckpointConfig", "ResourceConfig", "StoppingCondition"):
        assert request[member] == detail[member], member
    assert request["TrainingJobName"] == f"{JOB}-r1"
    # And the stdout line comes before the record it belongs to (the incident's timeline waits for the clone to
    # train: no line yet)
    assert [line["kind"] for line in result.lines] == ["training_job", "record"]


def test_i_a_job_that_keeps_failing_is_restarted_until_the_budget_is_spent_then_pages_once(replay):
    # Given the job and each of its restarts failing the same way (budget: 3 restarts)
    result = replay(SCENARIOS / "i-training-job-gives-up.jsonl")
    # Then r1, r2 and r3 are started, the fourth failure gives up, and exactly one page goes out
    assert outcomes(result) == [("restart_job", "executed")] * 3 + [("restart_job", "suppressed")]
    assert [record["attempt"] for record in result.records] == [1, 2, 3, 4]
    assert [job["name"] for job in result.training_jobs] == [f"{JOB}-r1", f"{JOB}-r2", f"{JOB}-r3"]
    assert [job["tags"]["medic:attempt"] for job in result.training_jobs] == ["1", "2", "3"]
    assert {job["tags"]["medic:lineage"] for job in result.training_jobs} == {JOB}
    assert {job["checkpoint"] for job in result.training_jobs} == {CHECKPOINT_URI}
    assert result.calls[CREATE] == 3
    assert len(result.pages) == 1
    assert [record["paged"] for record in result.records] == [False, False, False, True]
    page = result.pages[0]
    assert page["record"]["incident"] == f"job:{JOB}" and page["record"]["outcome"] == "suppressed"
    assert "budget" in page["record"]["reason"]


def test_j_a_non_retryable_failure_pages_and_starts_nothing(replay):
    # Given the job failing with CUDA out of memory (its checkpoint is there)
    result = replay(SCENARIOS / "j-training-job-not-retryable.jsonl")
    # Then Medic does not restart it (it would fail the same way) and pages once
    assert [(record["fault"], record["action"], record["outcome"], record["paged"]) for record in result.records] == [
        ("job_not_retryable", "none", "deferred", True)]
    assert "out_of_memory" in result.records[0]["reason"]
    assert result.training_jobs == [] and CREATE not in result.calls
    assert len(result.pages) == 1
    assert "CUDA out of memory" in result.pages[0]["message"]


def test_a_retryable_failure_without_a_checkpoint_pages_instead_of_starting_from_scratch(replay):
    # Given a retryable failure and nothing stored under the job's checkpoint URI
    result = replay([sample("training-job-failed")])
    # Then Medic looked, found nothing, started no job and paged once
    assert outcomes(result) == [("restart_job", "suppressed")]
    assert "nothing is stored under its checkpoint S3 URI" in result.records[0]["reason"]
    assert result.calls["s3:ListObjectsV2"] == 1
    assert result.training_jobs == [] and CREATE not in result.calls
    assert len(result.pages) == 1 and result.records[0]["paged"] is True


def test_a_repeated_failure_event_starts_one_restart(replay):
    # Given SageMaker delivering the same failure twice
    failed = training_failed()
    result = replay([{"sim": {"s3_put": CHECKPOINT}}, failed, failed])
    # Then the second delivery is a duplicate: one clone, no page
    assert outcomes(result) == [("restart_job", "executed"), ("none", "duplicate")]
    assert result.calls[CREATE] == 1 and len(result.training_jobs) == 1
    assert result.pages == []


def test_the_lineage_of_a_restart_is_medics_note_of_the_job_it_created(replay):
    # Given r1's failure event carries no tags (and Medic would not believe them if it did)
    again = restart_failed(1, T_JOB.replace(hour=5))
    again["detail"]["Tags"] = {}
    result = replay([{"sim": {"s3_put": CHECKPOINT}}, training_failed(), again])
    # Then Medic's ledger, keyed by the job it created, says r1 is restart 1 of the job: r2 is attempt 2
    assert [record["attempt"] for record in result.records] == [1, 2]
    assert {record["incident"] for record in result.records} == {f"job:{JOB}"}
    assert [job["name"] for job in result.training_jobs] == [f"{JOB}-r1", f"{JOB}-r2"]
    assert result.training_jobs[1]["tags"]["medic:attempt"] == "2"


def test_zr_a_job_tagged_with_the_victims_lineage_gets_its_own_restart_and_the_victim_its_real_one(replay):
    # Given another job under the prefix, with its own image, tagged medic:lineage=<the victim> medic:attempt=0,
    # fails first; then the victim fails
    result = replay(SCENARIOS / "zr-job-lineage-tag-forged.jsonl")
    # Then each is restarted as itself: Mallory's job under its own name, lineage and image; the victim's real
    # restart with the victim's image, never a silent duplicate
    assert outcomes(result) == [("restart_job", "executed")] * 2
    assert [record["incident"] for record in result.records] == ["job:ft-mallory-01", f"job:{JOB}"]
    assert [(job["name"], job["request"]["AlgorithmSpecification"]["TrainingImage"])
            for job in result.training_jobs] == [
        ("ft-mallory-01-r1", MALLORY_IMAGE), (f"{JOB}-r1", "123456789012.dkr.ecr.us-west-2.amazonaws.com/ft:latest")]
    assert result.pages == []


def test_zs_a_job_holding_the_restarts_name_is_paged_never_a_silent_duplicate(replay):
    # Given a job someone created an hour earlier under the name of the victim's next restart
    result = replay(SCENARIOS / "zs-job-restart-name-taken.jsonl")
    # Then SageMaker refuses Medic's CreateTrainingJob, the job holding the name is not Medic's: failed, one page
    assert outcomes(result) == [("restart_job", "failed")]
    record = result.records[0]
    assert record["paged"] is True
    assert f"a training job named {JOB}-r1 already exists and is not Medic's restart of {JOB}" in record["reason"]
    assert result.calls[CREATE] == 1 and result.training_jobs == []
    [page] = result.pages
    assert f"{JOB}-r1" in page["message"]


def test_zt_a_superscript_attempt_tag_neither_crashes_the_handler_nor_counts(replay):
    # Given a job tagged medic:attempt=² (a valid tag value: TagValue allows any Unicode number)
    result = replay(SCENARIOS / "zt-job-attempt-tag-superscript.jsonl")
    # Then the handler neither crashes (nothing dropped to the DLQ) nor reads the tag: restart 1, named -r1
    assert result.dropped == []
    assert outcomes(result) == [("restart_job", "executed")]
    assert result.records[0]["attempt"] == 1
    assert [job["name"] for job in result.training_jobs] == [f"{JOB}-r1"]


def test_a_training_job_directive_defines_what_describe_returns_and_the_clone_copies(replay):
    # Given a job declared with members moto does not model (Environment, RetryStrategy) and a user tag,
    # and a failure event that carries only the basics
    job = {"TrainingJobName": "ft-llama-8b-0007", "RoleArn": "arn:aws:iam::123456789012:role/Trainer",
           "AlgorithmSpecification": {"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/ft:2",
                                      "TrainingInputMode": "FastFile"},
           "OutputDataConfig": {"S3OutputPath": "s3://ml-artifacts-123456789012/out/"},
           "CheckpointConfig": {"S3Uri": "s3://ml-artifacts-123456789012/ckpt/llama/"},
           "Environment": {"NCCL_DEBUG": "INFO"}, "RetryStrategy": {"MaximumRetryAttempts": 2},
           "Tags": {"team": "nlp"}}
    event = training_failed("ft-llama-8b-0007")  # an internal error: restarted at once (a capacity one waits: issue 32)
    event["detail"] = {key: event["detail"][key] for key in (
        "TrainingJobName", "TrainingJobArn", "TrainingJobStatus", "SecondaryStatus", "FailureReason", "Tags")}
    result = replay([{"sim": {"training_job": job}}, {"sim": {"s3_put": "s3://ml-artifacts-123456789012/ckpt/llama/s1"}},
                     event])
    # Then the clone carries the declared definition, the user's tag and Medic's lineage
    assert result.errors == []
    assert outcomes(result) == [("restart_job", "executed")]
    request = result.training_jobs[0]["request"]
    assert request["Environment"] == {"NCCL_DEBUG": "INFO"}
    assert request["RetryStrategy"] == {"MaximumRetryAttempts": 2}
    assert request["AlgorithmSpecification"] == job["AlgorithmSpecification"]  # nothing invented by moto
    assert result.training_jobs[0]["tags"] == {"team": "nlp", "medic:lineage": "ft-llama-8b-0007",
                                               "medic:attempt": "1", "medic:restarted-from": "ft-llama-8b-0007"}


def test_a_bad_training_job_directive_is_named_and_skipped(replay):
    # Given directives that are not DescribeTrainingJob-shaped
    result = replay([{"sim": {"training_job": {"TrainingJobName": "ft-x", "ResourceConfig": {"InstanceCount": "2"}}}},
                     {"sim": {"training_job": {"TrainingJobName": "ft-y", "TrainingJobStatus": "Exploded"}}},
                     {"sim": {"training_job": {"TrainingJobName": "ft x; rm -rf /"}}}])
    # Then each is reported by line, saying what is wrong
    assert [error.split(":")[0] for error in result.errors] == ["line 1", "line 2", "line 3"]
    assert "InstanceCount" in result.errors[0]
    assert "TrainingJobStatus" in result.errors[1]
    assert "TrainingJobName" in result.errors[2]


def test_a_failed_create_is_recorded_and_pages_and_no_job_appears(replay):
    # Given SageMaker refusing CreateTrainingJob (no retries help: a quota)
    result = replay([{"sim": {"s3_put": CHECKPOINT}}, training_failed()],
                    faults=[f"{CREATE}=ResourceLimitExceeded:1"])
    # Then the restart is recorded as failed, a human is paged, and no job line is printed
    assert outcomes(result) == [("restart_job", "failed")]
    assert "ResourceLimitExceeded" in result.records[0]["reason"]
    assert result.training_jobs == []
    assert len(result.pages) == 1


def test_jobs_outside_the_configured_prefixes_are_not_routed(replay):
    # Given a failed job no configured prefix matches
    other = copy.deepcopy(training_failed("llm-eval-0001", reason=CUDA_OOM))
    result = replay([other])
    # Then no rule delivers it: nothing happens
    assert (result.lines, dict(result.calls)) == ([], {})


def test_a_job_described_as_aws_describes_it_is_cloned_into_what_create_training_job_accepts(replay):
    # Given a job on SageMaker's built-in XGBoost whose description carries SageMaker's own metric definitions,
    # an empty VpcConfig and the read-only ResourceConfig members, as DescribeTrainingJob returns them
    image = "246618743249.dkr.ecr.us-west-2.amazonaws.com/sagemaker-xgboost:1.7-1"
    job = {"TrainingJobName": "ft-xgb-0001", "RoleArn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
           "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File",
                                      "MetricDefinitions": [{"Name": "validation:auc",
                                                             "Regex": ".*#011validation-auc:(\\\\S+)"}]},
           "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30,
                              "SelectedInstanceType": "ml.m5.xlarge", "SelectedInstanceCount": 1},
           "VpcConfig": {}, "HyperParameters": {},
           "OutputDataConfig": {"S3OutputPath": "s3://ml-artifacts-123456789012/out/"},
           "CheckpointConfig": {"S3Uri": "s3://ml-artifacts-123456789012/ckpt/xgb/"}}
    event = training_failed("ft-xgb-0001")
    event["detail"] = {key: event["detail"][key] for key in (
        "TrainingJobName", "TrainingJobArn", "TrainingJobStatus", "SecondaryStatus", "FailureReason")}
    result = replay([{"sim": {"training_job": job}}, {"sim": {"s3_put": "s3://ml-artifacts-123456789012/ckpt/xgb/s1"}},
                     event])
    # Then the emulated SageMaker (which refuses MetricDefinitions for built-in algorithms and the read-only
    # members, as SageMaker does) accepts the clone
    assert result.errors == []
    assert outcomes(result) == [("restart_job", "executed")]
    request = result.training_jobs[0]["request"]
    assert "MetricDefinitions" not in request["AlgorithmSpecification"]
    assert "VpcConfig" not in request and "HyperParameters" not in request
    assert request["ResourceConfig"] == {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30}


def test_a_training_job_event_naming_another_account_is_rejected_and_calls_nothing(replay):
    # Given a failure event of this account whose TrainingJobArn names another account
    event = training_failed()
    event["detail"]["TrainingJobArn"] = event["detail"]["TrainingJobArn"].replace("123456789012", "210987654321")
    result = replay([{"sim": {"s3_put": CHECKPOINT}}, event])
    # Then the record is rejected and Medic asked SageMaker nothing
    assert outcomes(result) == [("none", "rejected")]
    assert "210987654321" in result.records[0]["reason"]
    assert not [call for call in result.calls if call.startswith("sagemaker:")]
    assert result.training_jobs == [] and result.pages == []
