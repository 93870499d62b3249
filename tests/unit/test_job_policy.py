"""Specification: training job lineage, restart names and the clone request."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.stub import Stubber

from medic.adapters.training import TrainingJobs, clone_request, is_built_in_algorithm, training_plan_arns
from medic.config import DEFAULT_FAILURE_RULES
from medic.core.models import Fault
from medic.flows.jobs.faults import classify_failure
from medic.flows.jobs.policy import Lineage, lineage_of, not_medics_restart
from medic.ledger.jobs import MedicRestart


def test_restart_names_count_up_from_the_root():
    assert Lineage("ft-mistral-7b-0042", 0).next_name() == "ft-mistral-7b-0042-r1"
    assert Lineage("ft-mistral-7b-0042", 2).next_name() == "ft-mistral-7b-0042-r3"


def test_long_names_stay_within_63_characters_and_distinct():
    a, b = "ft-" + "a" * 60, "ft-" + "a" * 59 + "b"
    names = {Lineage(root, 11).next_name() for root in (a, b)}
    assert len(names) == 2
    assert all(len(name) <= 63 and name.endswith("-r12") for name in names)


MEDIC_DECIDED = datetime(2026, 11, 20, 8, 14, 5, tzinfo=UTC)
R2 = MedicRestart(name="ft-x-r2", root="ft-x", attempt=2, restarted_from="ft-x-r1", intended_at=MEDIC_DECIDED)


def test_lineage_comes_from_medics_note_of_the_job_it_created_never_from_tags_or_the_name():
    # Medic's note of ft-x-r2, and the job of that name created while Medic's call ran: attempt 2 of ft-x
    assert lineage_of("ft-x-r2", R2, MEDIC_DECIDED + timedelta(seconds=2)) == Lineage("ft-x", 2)
    # No note: whatever the name looks like, the job is the root of its own lineage
    assert lineage_of("ft-x-r2", None, MEDIC_DECIDED) == Lineage("ft-x-r2", 0)
    # A job created an hour before Medic decided, or a day after (its name reused): not the job Medic created
    assert lineage_of("ft-x-r2", R2, MEDIC_DECIDED - timedelta(hours=1)) == Lineage("ft-x-r2", 0)
    assert lineage_of("ft-x-r2", R2, MEDIC_DECIDED + timedelta(days=1)) == Lineage("ft-x-r2", 0)
    assert lineage_of("ft-x-r2", R2, None) == Lineage("ft-x-r2", 0)


def test_medics_restart_is_a_job_created_while_a_run_could_have_been_calling():
    # from the decision (less SageMaker's clock skew) until the claim of a run that died goes stale
    assert R2.made(MEDIC_DECIDED - timedelta(seconds=59))
    assert R2.made(MEDIC_DECIDED + timedelta(seconds=149))
    assert not R2.made(MEDIC_DECIDED - timedelta(seconds=61))
    assert not R2.made(MEDIC_DECIDED + timedelta(seconds=151))


def test_a_taken_restart_name_is_medics_own_only_for_this_failure_and_in_time():
    r1_created = MEDIC_DECIDED - timedelta(hours=3)
    r2 = MedicRestart(name="ft-x-r2", root="ft-x", attempt=2, restarted_from="ft-x-r1", intended_at=MEDIC_DECIDED,
                      restarted_from_created=r1_created)
    assert not_medics_restart(r2, "ft-x-r1", r1_created, MEDIC_DECIDED) is None
    assert not_medics_restart(None, "ft-x-r1", r1_created, MEDIC_DECIDED) == "Medic has no record of creating it"
    # the note is for another job's failure, or for an earlier job of the same name (a name is reusable)
    assert "for the failure of ft-x-r1, not of this one" in not_medics_restart(r2, "ft-y", r1_created, MEDIC_DECIDED)
    assert "an earlier job named ft-x-r1" in not_medics_restart(r2, "ft-x-r1", r1_created + timedelta(days=9),
                                                                 MEDIC_DECIDED)
    # created an hour before Medic decided: someone else's
    assert "created at 2026-11-20 07:14:05 UTC" in not_medics_restart(r2, "ft-x-r1", r1_created,
                                                                       MEDIC_DECIDED - timedelta(hours=1))


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


def aws_description(**changes) -> dict:
    """DescribeTrainingJob as AWS returns it for a job without VPC, debugger or profiler rules: empty containers
    (VpcConfig: {}, DebugRuleConfigurations: []), read-only members (SelectedInstanceType) and SageMaker's own."""
    description = {
        **FULL_DESCRIPTION,
        "VpcConfig": {}, "HyperParameters": {}, "Environment": {}, "DebugRuleConfigurations": [],
        "ProfilerRuleConfigurations": [], "InputDataConfig": [],
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2, "VolumeSizeInGB": 500,
                           "SelectedInstanceType": "ml.p5.48xlarge", "SelectedInstanceCount": 2,
                           "InstanceGroups": []},
        "ProfilerConfig": {"S3OutputPath": "s3://ml-artifacts/ft/profiler/", "ProfilingParameters": {}},
        "DebugHookConfig": {"S3OutputPath": "s3://ml-artifacts/ft/debug/", "CollectionConfigurations": [],
                            "HookParameters": {}},
    }
    description.update(changes)
    return description


def clone_through_the_model(description: dict) -> dict:
    """start_clone with a Stubber: botocore validates the request against the real CreateTrainingJob model."""
    client = boto3.client("sagemaker", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    request = {**clone_request(client.meta.service_model, description), "TrainingJobName": "ft-mistral-7b-0042-r1",
               "Tags": [{"Key": "medic:attempt", "Value": "1"}]}
    stubber = Stubber(client)
    stubber.add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:us-west-2:123456789012:"
                                                 "training-job/ft-mistral-7b-0042-r1"}, request)
    with stubber:
        TrainingJobs(client).start_clone(description, "ft-mistral-7b-0042-r1", {"medic:attempt": "1"})
    stubber.assert_no_pending_responses()
    return request


def test_the_clone_of_a_job_described_with_empty_containers_is_what_create_accepts():
    # Given DescribeTrainingJob's answer for a job without a VPC (VpcConfig: {}) and read-only members
    request = clone_through_the_model(aws_description())
    # Then no empty container is sent (CreateTrainingJob requires SecurityGroupIds and Subnets in a VpcConfig),
    # nor what SageMaker chose itself
    for dropped in ("VpcConfig", "HyperParameters", "Environment", "DebugRuleConfigurations", "InputDataConfig",
                    "ProfilerRuleConfigurations"):
        assert dropped not in request, dropped
    assert request["ResourceConfig"] == {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2, "VolumeSizeInGB": 500}
    assert request["ProfilerConfig"] == {"S3OutputPath": "s3://ml-artifacts/ft/profiler/"}
    assert request["DebugHookConfig"] == {"S3OutputPath": "s3://ml-artifacts/ft/debug/"}
    assert request["CheckpointConfig"] == FULL_DESCRIPTION["CheckpointConfig"]


METRICS = [{"Name": "train:loss", "Regex": "loss: ([0-9.]+)"}]


def test_a_built_in_algorithm_clone_leaves_the_metric_definitions_to_sagemaker():
    # Given a job on SageMaker's built-in XGBoost (AWS's registry), whose description carries its metrics
    algorithm = {"TrainingImage": "246618743249.dkr.ecr.us-west-2.amazonaws.com/sagemaker-xgboost:1.7-1",
                 "TrainingInputMode": "File", "MetricDefinitions": METRICS}
    request = clone_through_the_model(aws_description(AlgorithmSpecification=algorithm))
    # Then the clone does not send them back
    assert request["AlgorithmSpecification"] == {"TrainingImage": algorithm["TrainingImage"],
                                                 "TrainingInputMode": "File"}


def test_an_algorithm_resource_clone_sends_the_algorithm_name_only():
    algorithm = {"AlgorithmName": "arn:aws:sagemaker:us-west-2:123456789012:algorithm/my-algo",
                 "TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-algo:1",
                 "TrainingInputMode": "File", "MetricDefinitions": METRICS}
    request = clone_through_the_model(aws_description(AlgorithmSpecification=algorithm))
    assert request["AlgorithmSpecification"] == {"AlgorithmName": algorithm["AlgorithmName"],
                                                 "TrainingInputMode": "File"}


def test_a_custom_image_keeps_its_metric_definitions():
    # Given the team's own image, and one in the job's own registry merely named like a built-in algorithm
    for image in ("763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.5-gpu-py311",
                  "123456789012.dkr.ecr.us-west-2.amazonaws.com/xgboost:latest"):
        algorithm = {"TrainingImage": image, "TrainingInputMode": "File", "MetricDefinitions": METRICS}
        request = clone_through_the_model(aws_description(AlgorithmSpecification=algorithm))
        assert request["AlgorithmSpecification"]["MetricDefinitions"] == METRICS, image


def test_xgboost_in_script_mode_keeps_its_metric_definitions():
    algorithm = {"TrainingImage": "246618743249.dkr.ecr.us-west-2.amazonaws.com/sagemaker-xgboost:1.7-1",
                 "TrainingInputMode": "File", "MetricDefinitions": METRICS}
    description = aws_description(AlgorithmSpecification=algorithm, HyperParameters={"sagemaker_program": "train.py"})
    assert is_built_in_algorithm(algorithm["TrainingImage"], description) is False


def test_the_training_plans_a_job_ran_on_are_found_where_the_model_puts_them():
    plan = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/p5-december"
    other = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/p5-flex"
    description = aws_description(ResourceConfig={
        "InstanceCount": 2, "VolumeSizeInGB": 500, "TrainingPlanArn": plan,
        "InstancePreferences": [{"InstanceType": "ml.p5.48xlarge", "TrainingPlanArns": [other]}]})
    assert training_plan_arns(description) == [plan, other]


# --- a restart's timeline: when its clone trained (issue 29)

def test_a_clone_resumes_at_its_first_training_status_and_is_waited_for_until_then():
    from datetime import UTC, datetime, timedelta

    from medic.flows.jobs.policy import clone_progress

    created = datetime(2026, 11, 21, 2, 40, 12, tzinfo=UTC)
    deadline, now = created + timedelta(hours=24), created + timedelta(minutes=10)
    starting = {"Status": "Starting", "StartTime": created}
    training = {"Status": "Training", "StartTime": created + timedelta(minutes=7)}
    # Given DescribeTrainingJob of the clone: still Starting, then Training (SecondaryStatusTransitions)
    waiting = clone_progress({"TrainingJobStatus": "InProgress", "SecondaryStatusTransitions": [starting]},
                             now, deadline)
    assert (waiting.done, waiting.resumed_at) == (False, None)
    trained = clone_progress({"TrainingJobStatus": "InProgress",
                              "SecondaryStatusTransitions": [starting, training]}, now, deadline)
    # Then it resumed at the Training entry's StartTime, not at CreateTrainingJob's return
    assert (trained.done, trained.resumed_at) == (True, created + timedelta(minutes=7))
    # ... a clone that ended without training never resumed; nor one gone, nor one still starting at the deadline
    failed = clone_progress({"TrainingJobStatus": "Failed", "SecondaryStatusTransitions": [starting]}, now, deadline)
    assert (failed.done, failed.resumed_at) == (True, None)
    assert clone_progress(None, now, deadline) == clone_progress({"TrainingJobStatus": "InProgress"}, deadline,
                                                                 deadline)
    assert clone_progress(None, now, deadline).done and clone_progress(None, now, deadline).resumed_at is None
    # ... and a completed one without the entry resumed at its TrainingStartTime
    completed = clone_progress({"TrainingJobStatus": "Completed", "TrainingStartTime": training["StartTime"]},
                               now, deadline)
    assert completed.resumed_at == training["StartTime"]
