"""Specification: training job lineage, restart names and the clone request."""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber

from medic.adapters.training import TrainingJobs, clone_request
from medic.config import DEFAULT_FAILURE_RULES
from medic.domain.job_faults import classify_failure
from medic.domain.job_policy import Lineage, lineage_of
from medic.domain.models import Fault


def test_restart_names_count_up_from_the_root():
    assert Lineage("ft-mistral-7b-0042", 0).next_name() == "ft-mistral-7b-0042-r1"
    assert Lineage("ft-mistral-7b-0042", 2).next_name() == "ft-mistral-7b-0042-r3"


def test_long_names_stay_within_63_characters_and_distinct():
    a, b = "ft-" + "a" * 60, "ft-" + "a" * 59 + "b"
    names = {Lineage(root, 11).next_name() for root in (a, b)}
    assert len(names) == 2
    assert all(len(name) <= 63 and name.endswith("-r12") for name in names)


def test_lineage_comes_from_medic_tags_not_from_the_name():
    assert lineage_of("ft-x-r2", {"medic:lineage": "ft-x", "medic:attempt": "2"}) == Lineage("ft-x", 2)
    assert lineage_of("ft-x-r2", {}) == Lineage("ft-x-r2", 0)
    assert lineage_of("ft-x", {"medic:lineage": "ft-x", "medic:attempt": "two"}) == Lineage("ft-x", 0)


def test_the_first_matching_rule_wins():
    rules = list(DEFAULT_FAILURE_RULES)
    assert classify_failure("InternalServerError: We encountered an internal error.", rules).fault \
        is Fault.JOB_RETRYABLE
    assert classify_failure("CapacityError: Unable to provision requested ML compute capacity.", rules).label \
        == "insufficient_capacity"
    assert classify_failure("ValidationException: InternalServerError in your text", rules).fault \
        is Fault.JOB_NOT_RETRYABLE


# FailureReason as SageMaker writes it (ExecuteUserScriptError carries the script's exit code and last error line).
USER_SCRIPT_KEYERROR = ('AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "KeyError: '
                        '\'hardware_profile\'"\nCommand "/opt/conda/bin/python3.10 train.py --epochs 3", exit code: 1')
USER_TRACEBACK_HEALTH_CHECK = ('AlgorithmError: framework error: \nTraceback (most recent call last):\n  File '
                               '"/opt/ml/code/health_check.py", line 12, in <module>\n    spot = cfg["spot"]\n'
                               'KeyError: \'spot\'')


@pytest.mark.parametrize(("reason", "fault", "label"), [
    (USER_SCRIPT_KEYERROR, Fault.JOB_NOT_RETRYABLE, "user_code_error"),
    (USER_TRACEBACK_HEALTH_CHECK, Fault.JOB_NOT_RETRYABLE, "user_code_error"),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"ValueError: internal error in my "
     "tokenizer\"", Fault.JOB_NOT_RETRYABLE, "user_code_error"),
    ("ClientError: Data download failed:Could not download s3://ml-data/ft/train/part-0.", Fault.JOB_NOT_RETRYABLE,
     "user_code_error"),
    ("InternalServerError: We encountered an internal error. Please try again.", Fault.JOB_RETRYABLE,
     "internal_error"),
    ("CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML "
     "instance type.", Fault.JOB_RETRYABLE, "insufficient_capacity"),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"RuntimeError: [Rank 3] Watchdog caught "
     "collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE) ran for 1800000 ms\"",
     Fault.JOB_RETRYABLE, "collective_timeout"),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"RuntimeError: CUDA error: uncorrectable "
     "ECC error encountered\"", Fault.JOB_RETRYABLE, "instance_health"),
])
def test_user_code_signals_win_over_generic_retryable_words(reason, fault, label):
    # Given a FailureReason shaped as SageMaker writes it
    failure = classify_failure(reason, list(DEFAULT_FAILURE_RULES))
    # Then a Python exception in user code is not retried, whatever words it prints ("hardware", "spot",
    # "health check", "internal error"), while SageMaker's own and infrastructure signatures still are
    assert (failure.fault, failure.label) == (fault, label)


FULL_DESCRIPTION = {
    "TrainingJobName": "ft-mistral-7b-0042",
    "TrainingJobArn": "arn:aws:sagemaker:us-west-2:123456789012:training-job/ft-mistral-7b-0042",
    "TrainingJobStatus": "Failed", "SecondaryStatus": "Failed", "FailureReason": "InternalServerError",
    "CreationTime": datetime(2026, 11, 21, tzinfo=UTC), "ModelArtifacts": {"S3ModelArtifacts": "s3://b/m"},
    "HyperParameters": {"epochs": "3"},
    "AlgorithmSpecification": {"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/ft:latest",
                               "TrainingInputMode": "File", "EnableSageMakerMetricsTimeSeries": True},
    "RoleArn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
    "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://ml-data/ft/train/", "S3DataDistributionType": "FullyReplicated"}}}],
    "OutputDataConfig": {"S3OutputPath": "s3://ml-artifacts/ft/output/", "KmsKeyId": "alias/ml"},
    "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 500,
                       "VolumeKmsKeyId": "alias/ml"},
    "VpcConfig": {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
    "StoppingCondition": {"MaxRuntimeInSeconds": 432000},
    "EnableNetworkIsolation": True, "EnableInterContainerTrafficEncryption": True,
    "EnableManagedSpotTraining": False,
    "CheckpointConfig": {"S3Uri": "s3://ml-artifacts/ft/checkpoints/", "LocalPath": "/opt/ml/checkpoints"},
    "Environment": {"NCCL_DEBUG": "INFO"},
    "RetryStrategy": {"MaximumRetryAttempts": 2},
    "SecondaryStatusTransitions": [{"Status": "Starting", "StartTime": datetime(2026, 11, 21, tzinfo=UTC)}],
}


def test_the_clone_carries_every_field_create_accepts_and_nothing_else():
    client = boto3.client("sagemaker", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    request = clone_request(client.meta.service_model, FULL_DESCRIPTION)
    for kept in ("CheckpointConfig", "VpcConfig", "Environment", "RetryStrategy", "EnableNetworkIsolation",
                 "EnableInterContainerTrafficEncryption", "OutputDataConfig", "ResourceConfig", "HyperParameters"):
        assert request[kept] == FULL_DESCRIPTION[kept]
    for dropped in ("TrainingJobArn", "TrainingJobStatus", "FailureReason", "CreationTime", "ModelArtifacts",
                    "SecondaryStatusTransitions"):
        assert dropped not in request
    # And the real service model accepts the request (Stubber validates parameters)
    stubber = Stubber(client)
    expected = {**request, "TrainingJobName": "ft-mistral-7b-0042-r1", "Tags": [{"Key": "medic:attempt", "Value": "1"}]}
    stubber.add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:us-west-2:123456789012:"
                                                 "training-job/ft-mistral-7b-0042-r1"}, expected)
    with stubber:
        TrainingJobs(client).start_clone(FULL_DESCRIPTION, "ft-mistral-7b-0042-r1", {"medic:attempt": "1"})
    stubber.assert_no_pending_responses()
