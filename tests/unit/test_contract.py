"""Specification: sim's contract check (sim/contract.py) holds requests and the emulator's answers to
AWS's service model: each kind of constraint botocore's model states is caught, with a message naming
the operation, the member path, the value and the constraint."""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
import pytest
from botocore.exceptions import ParamValidationError
from botocore.stub import Stubber

from sim.contract import ContractViolation, check_request, check_response, request_violations, response_violations

NODE = "i-0d4e5f60718293a4b"
ARN = "arn:aws:sagemaker:us-west-2:123456789012:cluster/k3v9q2w8x1za"


def only(violations):
    assert len(violations) == 1, [str(v) for v in violations]
    return violations[0]


# requests: what botocore's own ParamValidator lets through, and what it checks too
def test_botocore_itself_sends_what_the_service_rejects_max_lengths_patterns_and_enums():
    """Given a request breaking a maximum length, a pattern and an enum, botocore's client sends it (it
    checks types, required members and minimums only): the service would refuse it."""
    client = boto3.client("sagemaker", region_name="us-west-2")
    with Stubber(client) as stub:
        stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": []})
        client.list_cluster_nodes(ClusterName="x" * 300, SortBy="Newest", MaxResults=500)
    params = {"ClusterName": "x" * 300, "SortBy": "Newest", "MaxResults": 500}
    assert {v.path for v in request_violations("sagemaker", "ListClusterNodes", params)} == {
        "ClusterName", "SortBy", "MaxResults"}


def test_a_node_id_that_is_not_an_instance_id_breaks_the_pattern():
    violation = only(request_violations("sagemaker", "BatchRebootClusterNodes",
                                        {"ClusterName": "pretrain-slurm", "NodeIds": ["node-7; reboot"]}))
    assert violation.path == "NodeIds[0]"
    assert violation.value == "node-7; reboot"
    assert "pattern of ClusterNodeId" in violation.constraint
    assert str(violation).startswith("sagemaker:BatchRebootClusterNodes request violates AWS's service model: "
                                     "NodeIds[0] = 'node-7; reboot': must satisfy the pattern")


def test_more_than_25_nodes_in_one_batch_breaks_the_list_length():
    violation = only(request_violations("sagemaker", "BatchReplaceClusterNodes",
                                        {"ClusterName": "c1", "NodeIds": [NODE] * 26}))
    assert violation.path == "NodeIds"
    assert "at most 25 items (has 26)" in violation.constraint


def test_a_value_outside_the_enum_is_caught():
    violation = only(request_violations("sagemaker", "ListClusterNodes", {"ClusterName": "c1", "SortOrder": "Up"}))
    assert violation.path == "SortOrder"
    assert "enum SortOrder: Ascending, Descending" in violation.constraint


def test_a_string_longer_than_the_maximum_is_caught():
    violation = only(request_violations("dynamodb", "GetItem", {"TableName": "t" * 1025,
                                                                "Key": {"pk": {"S": "node#c1#i-1"}}}))
    assert violation.path == "TableName"
    assert "at most 1024 characters (has 1025)" in violation.constraint


def test_a_number_outside_the_range_is_caught():
    violation = only(request_violations("sagemaker", "ListClusterNodes", {"ClusterName": "c1", "MaxResults": 101}))
    assert (violation.path, violation.value, violation.constraint) == ("MaxResults", 101, "MaxResults must be <= 100")


def test_a_missing_required_member_is_caught():
    violation = only(request_violations("sagemaker", "BatchRebootClusterNodes", {"NodeIds": [NODE]}))
    assert (violation.path, violation.value) == ("ClusterName", None)
    assert "required member of BatchRebootClusterNodesRequest is missing" in violation.constraint


def test_a_value_of_the_wrong_type_is_caught():
    violation = only(request_violations("sagemaker", "BatchRebootClusterNodes", {"ClusterName": "c1",
                                                                                 "NodeIds": NODE}))
    assert violation.path == "NodeIds"
    assert "must be a list" in violation.constraint


def test_a_list_shorter_than_the_minimum_is_caught():
    violation = only(request_violations("sagemaker", "BatchRebootClusterNodes", {"ClusterName": "c1", "NodeIds": []}))
    assert violation.path == "NodeIds"
    assert "at least 1 items (has 0)" in violation.constraint


def test_a_string_shorter_than_the_minimum_is_caught():
    violation = only(request_violations("dynamodb", "GetItem", {"TableName": "", "Key": {"pk": {"S": "a"}}}))
    assert violation.path == "TableName"
    assert "at least 1 characters (has 0)" in violation.constraint


def test_a_member_the_operation_does_not_have_is_caught():
    violation = only(request_violations("sagemaker", "DescribeClusterNode", {"ClusterName": "c1", "NodeId": NODE,
                                                                             "Force": True}))
    assert violation.path == "Force"
    assert "has no member 'Force'" in violation.constraint


def test_a_union_with_two_members_set_is_caught():
    violations = request_violations("sagemaker", "CreateAutoMLJobV2", {
        "AutoMLJobName": "j", "RoleArn": "arn:aws:iam::123456789012:role/r",
        "AutoMLJobInputDataConfig": [{"ChannelType": "training",
                                      "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix",
                                                                      "S3Uri": "s3://b/p"}}}],
        "OutputDataConfig": {"S3OutputPath": "s3://b/out"},
        "AutoMLProblemTypeConfig": {"ImageClassificationJobConfig": {}, "TextClassificationJobConfig": {
            "ContentColumn": "c", "TargetLabelColumn": "t"}}})
    assert [v.path for v in violations] == ["AutoMLProblemTypeConfig"]
    assert "union: exactly one member" in violations[0].constraint


def test_patterns_written_in_java_unicode_classes_are_applied():
    """SageMaker's tag patterns use \\p{L}; a control character in a tag value breaks them."""
    violation = only(request_violations("sagemaker", "AddTags", {"ResourceArn": ARN,
                                                                 "Tags": [{"Key": "team", "Value": "nlp\x07"}]}))
    assert violation.path == "Tags[0].Value"
    assert "pattern of TagValue" in violation.constraint
    assert request_violations("sagemaker", "AddTags", {"ResourceArn": ARN,
                                                       "Tags": [{"Key": "équipe", "Value": "données"}]}) == []


def test_a_valid_request_passes():
    assert request_violations("sagemaker", "BatchReplaceClusterNodes", {"ClusterName": ARN, "NodeIds": [NODE]}) == []
    assert request_violations("cloudwatch", "GetMetricData", {
        "MetricDataQueries": [{"Id": "heartbeat", "MetricStat": {
            "Metric": {"Namespace": "Medic/Training", "MetricName": "Heartbeat",
                       "Dimensions": [{"Name": "Job", "Value": "llama3-70b"}]},
            "Period": 60, "Stat": "Sum"}}],
        "StartTime": datetime(2026, 11, 20, 8, tzinfo=UTC), "EndTime": datetime(2026, 11, 20, 9, tzinfo=UTC)}) == []


def test_check_request_raises_naming_every_violation():
    with pytest.raises(ContractViolation) as raised:
        check_request("sagemaker", "BatchRebootClusterNodes", {"ClusterName": "c1", "NodeIds": ["x", "y"]})
    assert [v.path for v in raised.value.violations] == ["NodeIds[0]", "NodeIds[1]"]
    assert "NodeIds[1] = 'y'" in str(raised.value)


def test_botocore_still_rejects_what_it_checks_itself():
    """The contract check adds to botocore's validation; botocore's own still runs on the handlers' clients."""
    client = boto3.client("sagemaker", region_name="us-west-2")
    with pytest.raises(ParamValidationError):  # raised before anything is signed or sent
        client.batch_reboot_cluster_nodes(NodeIds=[NODE])


# responses: what the emulator makes up, as the JSON body it hands botocore
def test_a_node_status_outside_the_cluster_instance_status_enum_is_caught():
    """moto could answer a status HyperPod never returns (ClusterInstanceStatus has seven values)."""
    body = {"ClusterNodeSummaries": [{"InstanceGroupName": "workers", "InstanceId": NODE,
                                      "InstanceType": "ml.p5.48xlarge", "LaunchTime": 1763625600.0,
                                      "InstanceStatus": {"Status": "Healthy"}}]}
    violation = only(response_violations("sagemaker", "ListClusterNodes", body))
    assert violation.direction == "response"
    assert violation.path == "ClusterNodeSummaries[0].InstanceStatus.Status"
    assert "enum ClusterInstanceStatus: Running, Failure, Pending, ShuttingDown, SystemUpdating, " \
           "DeepHealthCheckInProgress, NotFound" in violation.constraint


def test_a_member_the_model_does_not_have_is_caught_in_a_response():
    """botocore's parser silently drops unknown members: an emulator inventing one would go unnoticed."""
    violation = only(response_violations("sagemaker", "BatchRebootClusterNodes",
                                         {"Successful": [NODE], "Rebooted": [NODE]}))
    assert violation.path == "Rebooted"


def test_a_failed_node_without_its_required_message_is_caught():
    violation = only(response_violations("sagemaker", "BatchReplaceClusterNodes",
                                         {"Failed": [{"NodeId": NODE, "ErrorCode": "InstanceIdInUse"}]}))
    assert violation.path == "Failed[0].Message"


def test_an_error_code_outside_the_batch_error_enum_is_caught():
    violation = only(response_violations("sagemaker", "BatchRebootClusterNodes", {
        "Failed": [{"NodeId": NODE, "ErrorCode": "NodeBusy", "Message": "busy"}]}))
    assert violation.path == "Failed[0].ErrorCode"
    assert "InstanceIdInUse" in violation.constraint


def test_a_cluster_arn_with_the_name_where_aws_puts_the_id_is_caught():
    """Real cluster ARNs end in a 12-character id; moto's end in the name."""
    body = {"ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/pretrain-slurm",
            "ClusterStatus": "InService", "InstanceGroups": []}
    violation = only(response_violations("sagemaker", "DescribeCluster", body))
    assert violation.path == "ClusterArn"


def test_a_timestamp_that_is_neither_epoch_nor_iso_is_caught():
    body = {"NodeDetails": {"InstanceId": NODE, "LaunchTime": "yesterday", "InstanceStatus": {"Status": "Running"}}}
    violation = only(response_violations("sagemaker", "DescribeClusterNode", body))
    assert violation.path == "NodeDetails.LaunchTime"


def test_a_wire_type_mismatch_is_caught():
    body = {"NodeDetails": {"InstanceId": NODE, "ThreadsPerCore": "1", "InstanceStatus": {"Status": "Running"}}}
    violation = only(response_violations("sagemaker", "DescribeClusterNode", body))
    assert (violation.path, violation.value) == ("NodeDetails.ThreadsPerCore", "1")


def test_a_valid_response_passes_and_check_response_raises_on_an_invalid_one():
    check_response("sagemaker", "BatchReplaceClusterNodes", {
        "Successful": [NODE], "Failed": [{"NodeId": "i-0aaaaaaaaaaaaaaaa", "ErrorCode": "InvalidInstanceStatus",
                                          "Message": "controller nodes cannot be replaced"}]})
    with pytest.raises(ContractViolation, match="Successful"):
        check_response("sagemaker", "BatchReplaceClusterNodes", {"Successful": []})  # min 1 item


def test_describe_training_job_may_answer_an_empty_vpc_config_as_aws_does_but_not_a_half_one():
    # Given DescribeTrainingJob answers as AWS does for a job without a VPC: VpcConfig {} (the output shape
    # marks its members required, real responses leave them out)
    empty = response_violations("sagemaker", "DescribeTrainingJob", {"VpcConfig": {}})
    half = response_violations("sagemaker", "DescribeTrainingJob", {"VpcConfig": {"Subnets": ["subnet-0abc1234"]}})
    # Then the empty object passes, and one with only some members still breaks the model
    assert not [v for v in empty if v.path.startswith("VpcConfig")]
    assert [v.path for v in half if v.path.startswith("VpcConfig")] == ["VpcConfig.SecurityGroupIds"]
