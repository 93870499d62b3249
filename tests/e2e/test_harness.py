"""Specification of the harness itself: the emulated HyperPod node actions, fault injection at the
HTTP layer, and the world built from a template (a hand-written one in the synthesized shape)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest
import time_machine
from botocore.exceptions import ClientError, ParamValidationError
from moto.core.models import botocore_stubber

from sim.contract import ContractViolation
from sim.faults import FaultSpecError, parse_fault
from sim.replay import Replay
from sim.scenario import DEMO_CONFIG
from sim.synth import load_config
from sim.world import World
from tests.e2e.conftest import sample
from tests.e2e.template_fixture import template, with_stream_mapping

CLUSTER = "pretrain-slurm"
NODE = "i-0d4e5f60718293a4b"


@pytest.fixture
def world_with(request) -> Iterator:
    worlds = []

    def _world(*faults: str) -> World:
        config = load_config(DEMO_CONFIG)
        world = World(template(config), config, [parse_fault(spec) for spec in faults]).__enter__()
        worlds.append(world)
        return world

    yield _world
    for world in reversed(worlds):
        world.__exit__()


@pytest.fixture
def world(world_with) -> World:
    world = world_with()
    world.prepare_for(sample("hyperpod-node-health-unhealthy"))  # pretrain-slurm, with NODE in it
    return world


def test_the_world_is_built_from_the_template(world):
    # Given the template's function environment refers to the table, topic and parameter
    env = world.functions["NodeFnABC"].environment
    # Then each reference resolves to an emulated resource that exists
    assert boto3.client("dynamodb").describe_time_to_live(TableName=env["LEDGER_TABLE"])[
        "TimeToLiveDescription"]["AttributeName"] == "expires_at"
    assert boto3.client("sns").get_topic_attributes(TopicArn=env["PAGE_TOPIC_ARN"])["Attributes"]["KmsMasterKeyId"]
    assert boto3.client("ssm").get_parameter(Name=env["MODE_PARAMETER"])["Parameter"]["Value"] == "act"
    assert env["STACK"] == "Medic-us-west-2"
    assert world.functions["NodeFnABC"].max_retries == 2


def test_routing_uses_the_rules_event_patterns(world):
    node_event = sample("hyperpod-node-health-unhealthy")
    assert [f.logical_id for f in world.route(node_event)] == ["NodeFnABC"]
    assert world.route({**node_event, "detail-type": "SageMaker HyperPod Cluster State Change"}) == []
    assert world.route(sample("training-job-failed")) == []


def test_a_configured_cluster_is_created_on_the_fly_and_an_undeclared_node_joins_the_workers(world):
    groups = boto3.client("sagemaker").describe_cluster(ClusterName=CLUSTER)["InstanceGroups"]
    assert {g["InstanceGroupName"]: g["CurrentCount"] for g in groups} == {"controller": 1, "workers": 17}
    node = boto3.client("sagemaker").describe_cluster_node(ClusterName=CLUSTER, NodeId=NODE)["NodeDetails"]
    assert (node["InstanceGroupName"], node["InstanceStatus"]["Status"]) == ("workers", "Running")
    # Emulated nodes carry valid instance ids, as real ones do
    listed = boto3.client("sagemaker").list_cluster_nodes(ClusterName=CLUSTER)["ClusterNodeSummaries"]
    assert all(s["InstanceId"].startswith("i-0") and len(s["InstanceId"]) == 19 for s in listed)


def test_invalid_instance_ids_and_unconfigured_clusters_are_left_alone(world):
    hostile = sample("hyperpod-node-health-unhealthy")
    hostile["detail"]["InstanceId"] = "i-0abc; rm -rf /"
    world.prepare_for(hostile)
    assert world.hyperpod.node(CLUSTER, "i-0abc; rm -rf /") is None
    elsewhere = sample("hyperpod-node-health-unhealthy")
    elsewhere["detail"]["ClusterName"] = "someone-elses"
    world.prepare_for(elsewhere)
    assert not world.hyperpod.has_cluster("someone-elses")


def test_batch_node_actions_answer_per_node_like_the_service(world):
    sagemaker = boto3.client("sagemaker")
    world.hyperpod.put_node(CLUSTER, "i-0c0ffee0c0ffee001", "controller")
    response = sagemaker.batch_replace_cluster_nodes(
        ClusterName=CLUSTER, NodeIds=[NODE, "i-0123456789abcdef0", "i-0c0ffee0c0ffee001"])
    assert response["Successful"] == [NODE]
    assert {f["NodeId"]: f["ErrorCode"] for f in response["Failed"]} == {
        "i-0123456789abcdef0": "InstanceIdNotFound", "i-0c0ffee0c0ffee001": "InvalidInstanceStatus"}
    assert "controller nodes cannot be replaced" in response["Failed"][1]["Message"]
    # A replacement is a new instance: new instance id, same NodeLogicalId, Pending while it is provisioned
    [replacement] = [n for n in sagemaker.list_cluster_nodes(ClusterName=CLUSTER, IncludeNodeLogicalIds=True)[
        "ClusterNodeSummaries"] if n["InstanceStatus"]["Status"] == "Pending"]
    assert replacement["InstanceId"] != NODE
    assert replacement["NodeLogicalId"] == world.hyperpod.logical_id_of(CLUSTER, replacement["InstanceId"])
    details = sagemaker.describe_cluster_node(ClusterName=CLUSTER, NodeId=replacement["InstanceId"])["NodeDetails"]
    assert details["NodeLogicalId"] == replacement["NodeLogicalId"]
    # The old instance id answers as a terminated node does: ResourceNotFound
    with pytest.raises(ClientError) as gone:
        sagemaker.describe_cluster_node(ClusterName=CLUSTER, NodeId=NODE)
    assert gone.value.response["Error"]["Code"] == "ResourceNotFound"
    # A node being repaired cannot be acted on again
    again = sagemaker.batch_reboot_cluster_nodes(ClusterName=CLUSTER, NodeIds=[replacement["InstanceId"]])
    assert again["Failed"][0]["ErrorCode"] == "InstanceIdInUse" and "Successful" not in again
    assert world.router.calls["sagemaker:BatchReplaceClusterNodes"] == 1


def test_slurm_controller_nodes_are_rebooted_but_never_replaced(world):
    """API reference, BatchReplaceClusterNodes NodeIds: Slurm controller nodes cannot be replaced."""
    sagemaker = boto3.client("sagemaker")
    world.hyperpod.put_node(CLUSTER, "i-0c0ffee0c0ffee001", "controller-machine")
    refused = sagemaker.batch_replace_cluster_nodes(ClusterName=CLUSTER, NodeIds=["i-0c0ffee0c0ffee001"])
    assert [f["ErrorCode"] for f in refused["Failed"]] == ["InvalidInstanceStatus"]
    rebooted = sagemaker.batch_reboot_cluster_nodes(ClusterName=CLUSTER, NodeIds=["i-0c0ffee0c0ffee001"])
    assert rebooted["Successful"] == ["i-0c0ffee0c0ffee001"]


def test_describe_cluster_says_what_moto_leaves_out(world):
    """DescribeCluster's NodeRecovery (the config's expectation until a directive says otherwise), the
    Slurm orchestrator and each group's SlurmConfig.NodeType; NodeProvisioningMode only when Continuous."""
    sagemaker = boto3.client("sagemaker")
    cluster = sagemaker.describe_cluster(ClusterName=CLUSTER)
    assert cluster["NodeRecovery"] == "None" and "NodeProvisioningMode" not in cluster
    assert {g["InstanceGroupName"]: g["SlurmConfig"]["NodeType"] for g in cluster["InstanceGroups"]} == {
        "controller": "Controller", "workers": "Compute"}
    world.hyperpod.configure(CLUSTER, node_recovery="Automatic", provisioning="Continuous")
    cluster = sagemaker.describe_cluster(ClusterName=CLUSTER)
    assert (cluster["NodeRecovery"], cluster["NodeProvisioningMode"]) == ("Automatic", "Continuous")


def test_the_repair_ends_after_its_emulated_duration(world):
    with time_machine.travel(datetime(2026, 11, 20, 8, 0, tzinfo=UTC), tick=False):
        boto3.client("sagemaker").batch_reboot_cluster_nodes(ClusterName=CLUSTER, NodeIds=[NODE])
    assert world.hyperpod.node(CLUSTER, NODE).status == "SystemUpdating"
    world.hyperpod.finish_repairs(datetime(2026, 11, 20, 8, 5, tzinfo=UTC))
    assert world.hyperpod.node(CLUSTER, NODE).status == "SystemUpdating"
    world.hyperpod.finish_repairs(datetime(2026, 11, 20, 8, 0, tzinfo=UTC) + timedelta(minutes=10))
    assert world.hyperpod.node(CLUSTER, NODE).status == "Running"


def test_invalid_parameters_fail_as_with_real_aws(world):
    sagemaker = boto3.client("sagemaker")
    # botocore validates against the real service model before anything is sent
    with pytest.raises(ParamValidationError):
        sagemaker.batch_replace_cluster_nodes(ClusterName=CLUSTER, NodeIds=[])
    # patterns are the service's to check: a handler sending one the model forbids fails the replay loudly
    with pytest.raises(ContractViolation, match=r"NodeIds\[0\] = 'i-0abc; rm -rf /': must satisfy the pattern"):
        sagemaker.batch_replace_cluster_nodes(ClusterName=CLUSTER, NodeIds=["i-0abc; rm -rf /"])
    with pytest.raises(ContractViolation, match="BatchReplaceClusterNodes request"):
        world.router.contract.raise_if_violated()
    with pytest.raises(ClientError) as missing:
        sagemaker.batch_reboot_cluster_nodes(ClusterName="no-such-cluster", NodeIds=[NODE])
    assert missing.value.response["Error"]["Code"] == "ResourceNotFound"
    assert world.hyperpod.actions == []


def test_the_router_is_the_only_before_send_responder_of_handler_clients(world):
    client = boto3.client("dynamodb")
    handlers = list(client.meta.events._emitter._handlers.prefix_search("before-send.dynamodb.PutItem"))
    assert botocore_stubber not in handlers
    assert handlers[0].__self__ is world.router


def test_a_faulted_call_fails_with_its_code_and_has_no_side_effect(world_with):
    world = world_with("dynamodb:PutItem=ValidationException:1")
    table = world.functions["NodeFnABC"].environment["LEDGER_TABLE"]
    dynamodb = boto3.client("dynamodb")
    with pytest.raises(ClientError) as error:
        dynamodb.put_item(TableName=table, Item={"pk": {"S": "a"}, "sk": {"S": "b"}})
    assert error.value.response["Error"]["Code"] == "ValidationException"
    assert "Item" not in dynamodb.get_item(TableName=table, Key={"pk": {"S": "a"}, "sk": {"S": "b"}})
    # the next call goes through
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "a"}, "sk": {"S": "b"}})
    assert dynamodb.get_item(TableName=table, Key={"pk": {"S": "a"}, "sk": {"S": "b"}})["Item"]


def test_throttling_is_retried_by_botocore_with_backoff_recorded_not_slept(world_with):
    world = world_with("ssm:GetParameter=ThrottlingException:2")
    name = world.functions["NodeFnABC"].environment["MODE_PARAMETER"]
    response = boto3.client("ssm").get_parameter(Name=name)
    assert response["ResponseMetadata"]["RetryAttempts"] == 2
    assert (world.router.calls["ssm:GetParameter"], world.router.attempts["ssm:GetParameter"]) == (1, 3)
    assert len(world.router.backoff_seconds) == 2


def test_faults_speak_each_protocol(world_with):
    world = world_with("sns:Publish=InternalError:99", "s3:ListBuckets=SlowDown:99",
                       "sagemaker:DescribeCluster=ServiceUnavailable:99")
    cases = [
        (lambda: boto3.client("sns").publish(TopicArn=world.topics[0], Message="x"), "InternalError", 500),
        (lambda: boto3.client("s3").list_buckets(), "SlowDown", 503),
        (lambda: boto3.client("sagemaker").describe_cluster(ClusterName=CLUSTER), "ServiceUnavailable", 503),
    ]
    for call, code, status in cases:
        with pytest.raises(ClientError) as error:
            call()
        assert error.value.response["Error"]["Code"] == code
        assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert world.drain_pages() == []  # the failed publish published nothing


def test_the_harness_own_clients_are_not_faulted(world_with):
    world = world_with("sqs:ReceiveMessage=AccessDenied:99")
    boto3.client("sns").publish(TopicArn=world.topics[0], Message="x")  # a handler's page
    assert [page["message"] for page in world.drain_pages()] == ["x"]  # read by the harness's own SQS client


@pytest.mark.parametrize(("spec", "complaint"), [
    ("sagemaker", "expected --fault service:Operation=ErrorCode:N"),
    ("sagemakr:BatchReplaceClusterNodes=X:1", "unknown service 'sagemakr' (did you mean sagemaker?)"),
    ("sagemaker:BatchReplaceNodes=X:1",
     "has no operation 'BatchReplaceNodes' (did you mean BatchReplaceClusterNodes?)"),
    ("sagemaker:BatchReplaceClusterNodes=Bad Code:1", "error code 'Bad Code'"),
    ("sagemaker:BatchReplaceClusterNodes=ThrottlingException:0", "count '0' must be a whole number >= 1"),
    ("sagemaker:BatchReplaceClusterNodes=ThrottlingException:two", "count 'two'"),
])
def test_a_bad_fault_spec_names_the_bad_part(spec, complaint):
    with pytest.raises(FaultSpecError) as error:
        parse_fault(spec)
    assert complaint in str(error.value)


@pytest.fixture
def stand_in(monkeypatch):
    from tests.e2e import standin

    monkeypatch.setattr(standin, "calls", [])
    config = load_config(DEMO_CONFIG)
    stack = template(config)
    stack["Resources"]["NodeFnABC"]["Properties"]["Handler"] = "tests.e2e.standin.handler"
    return stack, standin


def test_handler_output_stays_off_stdout_and_records_come_in_order(stand_in, capsys):
    import io

    from sim.replay import run

    stack, standin = stand_in
    handler_output, lines = io.StringIO(), []
    result = run([json.dumps(sample("hyperpod-node-health-unhealthy"))], DEMO_CONFIG, template=stack,
                 out=lines.append, handler_output=handler_output)
    assert capsys.readouterr().out == ""
    assert "EMF metric line" in handler_output.getvalue()
    assert lines == result.lines
    assert [(r["kind"], r["outcome"], r["function"]) for r in lines] == [("record", "executed", "Medic-NodeFnABC")]
    assert lines[0]["timestamp"] == "2026-11-20T08:14:05.000+00:00"  # the event's time, not the wall clock


def test_a_failing_handler_is_retried_like_an_async_lambda_invoke(stand_in, capsys):
    from sim.replay import run

    stack, standin = stand_in
    failing = sample("hyperpod-node-health-unhealthy")
    failing["detail"]["fail_times"] = 2
    result = run([json.dumps(failing)], DEMO_CONFIG, template=stack)
    # Lambda retries an async invoke twice, about a minute and then two minutes later
    assert [f"{at:%H:%M:%S}" for at in standin.calls] == ["08:14:05", "08:15:05", "08:17:05"]
    assert [r["attempt"] for r in result.records] == [3]
    assert len(result.errors) == 2 and "RuntimeError: stand-in failure" in capsys.readouterr().err


# DynamoDB stream → Lambda event source mapping
T_STREAM = datetime(2026, 11, 20, 8, 14, 5, tzinfo=UTC)


@pytest.fixture
def stream_world(monkeypatch) -> Iterator:
    from tests.e2e import standin_stream

    monkeypatch.setattr(standin_stream, "batches", [])
    monkeypatch.setattr(standin_stream, "script", [])
    config = load_config(DEMO_CONFIG)
    world = World(with_stream_mapping(template(config)), config).__enter__()
    yield world, standin_stream
    world.__exit__()


def _put(world: World, pk: str, sk: str, **attributes: str) -> None:
    table = world.functions["StreamFnABC"].environment["LEDGER_TABLE"]
    world.client("dynamodb").put_item(TableName=table, Item={
        "pk": {"S": pk}, "sk": {"S": sk}, **{key: {"S": value} for key, value in attributes.items()}})


def _settle(world: World) -> Replay:
    import io

    replay = Replay(world, lambda line: None, io.StringIO(), io.StringIO())
    with time_machine.travel(T_STREAM, tick=False) as clock:
        replay.settle(T_STREAM, clock)
    return replay


def test_the_stream_delivers_what_the_mapping_filter_keeps_in_lambdas_shape(stream_world):
    world, stand_in = stream_world
    # Given a claim, a result, a heartbeat, a changed result and a deleted result on the ledger
    _put(world, "command#1", "claim", host="ip-10-1-0-10")
    _put(world, "command#1", "result", status="executed")
    _put(world, "agent#pretrain-slurm", "heartbeat", at="2026-11-20T08:14:05+00:00")
    _put(world, "command#1", "result", status="failed")
    table = world.functions["StreamFnABC"].environment["LEDGER_TABLE"]
    world.client("dynamodb").delete_item(TableName=table, Key={"pk": {"S": "command#1"}, "sk": {"S": "result"}})
    replay = _settle(world)
    # Then only the INSERT and MODIFY of the result reach the function, in order, in one batch (size 2)
    assert [[(r["eventName"], r["dynamodb"]["NewImage"]["status"]["S"]) for r in batch]
            for batch in stand_in.batches] == [[("INSERT", "executed"), ("MODIFY", "failed")]]
    record = stand_in.batches[0][0]
    stream_arn = world.streams.mappings[0].stream_arn
    assert (record["eventSource"], record["eventVersion"], record["awsRegion"], record["eventSourceARN"]) == (
        "aws:dynamodb", "1.1", "us-west-2", stream_arn)
    assert record["dynamodb"]["Keys"] == {"pk": {"S": "command#1"}, "sk": {"S": "result"}}
    assert record["dynamodb"]["StreamViewType"] == "NEW_IMAGE"
    assert isinstance(record["dynamodb"]["ApproximateCreationDateTime"], int)
    assert replay.result.invocations["StreamFnABC"] == 1
    # And what was delivered is not delivered again
    _settle(world)
    assert len(stand_in.batches) == 1


def test_reported_batch_item_failures_are_retried_from_the_first_failed_record(stream_world):
    world, stand_in = stream_world
    for index in (1, 2, 3):
        _put(world, f"command#{index}", "result", status="executed")
    stand_in.script[:] = [[1], None, None]  # the second record of the first batch fails once
    _settle(world)
    assert [[r["dynamodb"]["Keys"]["pk"]["S"] for r in batch] for batch in stand_in.batches] == [
        ["command#1", "command#2"], ["command#2"], ["command#3"]]


def test_a_raising_handler_has_its_batch_bisected_then_dropped_after_the_retries(stream_world):
    world, stand_in = stream_world
    for index in (1, 2):
        _put(world, f"command#{index}", "result", status="executed")
    stand_in.script[:] = [RuntimeError("stand-in failure")] * 10
    replay = _settle(world)
    sizes = [len(batch) for batch in stand_in.batches]
    assert sizes[:2] == [2, 1]  # BisectBatchOnFunctionError: the failing batch is split
    dropped = [error for error in replay.result.errors if "on-failure destination" in error]
    assert len(dropped) == 2  # each half, after MaximumRetryAttempts (2)
    assert sizes == [2, 1, 1, 1, 1, 1]


def test_create_training_job_refuses_a_name_a_job_already_has_as_sagemaker_does(world):
    # Given a training job in the emulated SageMaker
    world.training.put({"TrainingJobName": "ft-taken", **world.training.defaults()})
    sagemaker = boto3.client("sagemaker")  # a handler's client: through the router
    other = {**world.training.defaults(),
             "AlgorithmSpecification": {"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/other:1",
                                        "TrainingInputMode": "File"}}
    # When a handler creates another job under that name (or the same name in other letter case)
    for name in ("ft-taken", "FT-Taken"):
        with pytest.raises(sagemaker.exceptions.ResourceInUse) as taken:
            sagemaker.create_training_job(TrainingJobName=name, **other)
        # Then SageMaker's error (the operation's declared ResourceInUse), in its words, naming the job's ARN
        assert "Training job names must be unique within an AWS account and region" in str(taken.value)
        assert "training-job/ft-taken" in str(taken.value)
    # And the job is the one it was (moto alone would have replaced it)
    assert sagemaker.describe_training_job(TrainingJobName="ft-taken")["AlgorithmSpecification"]["TrainingImage"] \
        == world.training.defaults()["AlgorithmSpecification"]["TrainingImage"]
    assert world.training.created == []


def test_a_batch_lambda_gives_up_on_is_reported_to_the_on_failure_queue_by_where_it_was(stream_world):
    # Lambda developer guide, "Using AWS Lambda with Amazon DynamoDB", Error handling: the on-failure destination gets
    # an invocation record with DDBStreamBatchInfo (shard, first and last sequence number, stream), not the records
    world, stand_in = stream_world
    for index in (1, 2):
        _put(world, f"command#{index}", "result", status="executed")
    stand_in.script[:] = [RuntimeError("stand-in failure")] * 10
    _settle(world)
    mapping = world.streams.mappings[0]
    with time_machine.travel(T_STREAM + timedelta(minutes=1), tick=False):  # (SQS expires messages by their age)
        sent = [json.loads(m["Body"]) for m in world.client("sqs").receive_message(
            QueueUrl=mapping.on_failure, MaxNumberOfMessages=10)["Messages"]]
    delivered = [batch[0] for batch in stand_in.batches if len(batch) == 1]
    assert len(sent) == 2  # one per half the bisection left, each after MaximumRetryAttempts
    for report in sent:
        assert set(report) == {"requestContext", "responseContext", "version", "timestamp", "DDBStreamBatchInfo"}
        assert report["requestContext"]["condition"] == "RetryAttemptsExhausted"
        assert report["responseContext"]["functionError"] == "Unhandled"
        info = report["DDBStreamBatchInfo"]
        assert (info["batchSize"], info["streamArn"], info["shardId"]) == (1, mapping.stream_arn, mapping.shard_id)
        assert info["startSequenceNumber"] == info["endSequenceNumber"] in {
            record["dynamodb"]["SequenceNumber"] for record in delivered}
    # and what it says is enough to read the records back from the stream (medic stream-failures does)
    from medic_cli.stream_failures import stream_records

    info = sent[0]["DDBStreamBatchInfo"]
    [record] = stream_records(world.client("dynamodbstreams"), info["streamArn"], info["shardId"],
                              info["startSequenceNumber"], info["endSequenceNumber"])
    assert record["dynamodb"]["Keys"]["sk"] == {"S": "result"}
