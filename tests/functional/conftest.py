"""A Medic deployment in emulated AWS: moto for DynamoDB, SNS, SQS and SSM; botocore's Stubber
for SageMaker HyperPod, whose node APIs moto lacks (the Stubber validates every request
against the real service model)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from medic.adapters.hyperpod import HyperPod
from medic.adapters.mode import ModeSwitch
from medic.adapters.pager import Pager
from medic.config import MedicConfig, parse_config
from medic.deps import Deps
from medic.flows.node.health_event import remediate_node
from medic.ledger.table import Table
from medic.obs import logger as medic_logger
from medic.wiring import JOBS_ON_NODE

REGION = "us-west-2"
CLUSTER = "pretrain-slurm"
TABLE = "medic-ledger"
MODE_PARAMETER = "/medic/Medic/mode"
CONFIG = {
    "notify": {"emails": ["oncall@example.com"]},
    "clusters": [
        {"name": CLUSTER, "id": "k3v9q2w8x1za", "orchestrator": "slurm"},
        {"name": "finetune-eks", "id": "p7r2m4x9c1qa", "orchestrator": "eks", "node_recovery": "automatic"},
    ],
    "training_jobs": [{"prefix": "ft-", "max_restarts": 3,
                       "role_arns": ["arn:aws:iam::123456789012:role/SageMakerTrainingRole"],
                       "checkpoint_buckets": ["ml-artifacts-123456789012"]}],
}


class RecordLog(logging.Handler):
    """Collects the remediation log lines exactly as the Powertools formatter writes them."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict] = []
        self.messages: list[dict] = []  # every line, remediation records or not

    def emit(self, record: logging.LogRecord) -> None:
        line = json.loads(medic_logger.registered_formatter.format(record))
        self.messages.append(line)
        if line.get("message") == "remediation":
            self.lines.append(line)


class HyperPodStub:
    """Expected SageMaker calls, in order; an unexpected call fails the test."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.stubber = Stubber(client)
        self.stubber.activate()

    def node(self, node_id: str, group: str = "gpu-workers", status: str = "Running", cluster: str = CLUSTER,
             logical_id: str | None = None) -> None:
        details = {"InstanceGroupName": group, "InstanceId": node_id, "InstanceStatus": {"Status": status}}
        if logical_id:
            details["NodeLogicalId"] = logical_id
        self.stubber.add_response("describe_cluster_node", {"NodeDetails": details},
                                  {"ClusterName": cluster, "NodeId": node_id})

    def missing_node(self, node_id: str) -> None:
        self.stubber.add_client_error("describe_cluster_node", "ResourceNotFound", "Node not found", 400,
                                      expected_params={"ClusterName": CLUSTER, "NodeId": node_id})

    def size(self, nodes: int, cluster: str = CLUSTER, node_recovery: str | None = None,
             controller_group: str | None = None) -> None:
        """DescribeCluster: the node count, NodeRecovery (Automatic | None) and a SlurmConfig controller group."""
        groups: list[dict] = [{"InstanceGroupName": "gpu-workers", "CurrentCount": nodes}]
        if controller_group:
            groups.append({"InstanceGroupName": controller_group, "CurrentCount": 1,
                           "SlurmConfig": {"NodeType": "Controller"}})
        response = {"ClusterArn": f"arn:aws:sagemaker:{REGION}:123456789012:cluster/k3v9q2w8x1za",
                    "ClusterName": cluster, "ClusterStatus": "InService", "InstanceGroups": groups}
        if node_recovery:
            response["NodeRecovery"] = node_recovery
        self.stubber.add_response("describe_cluster", response, {"ClusterName": cluster})

    def node_action(self, operation: str, node_id: str, failed: str | None = None, cluster: str = CLUSTER) -> None:
        response: dict = {"Successful": [node_id]}
        if failed:
            response = {"Failed": [{"NodeId": node_id, "ErrorCode": failed, "Message": "no"}]}
        self.stubber.add_response(operation, response, {"ClusterName": cluster, "NodeIds": [node_id]})

    def node_action_error(self, operation: str, node_id: str, code: str) -> None:
        self.stubber.add_client_error(operation, code, f"{code} from the service", 400,
                                      expected_params={"ClusterName": CLUSTER, "NodeIds": [node_id]})

    def assert_all_called(self) -> None:
        self.stubber.assert_no_pending_responses()


@dataclass
class Medic:
    deps: Deps
    hyperpod: HyperPodStub
    log: RecordLog
    queue_url: str
    sqs: Any
    ssm: Any
    clock: list[datetime] = field(default_factory=lambda: [datetime(2026, 11, 20, 8, 14, 5, tzinfo=UTC)])
    slept: list[float] = field(default_factory=list)  # the adapter's pauses before a per-node retry

    def handle(self, event: dict) -> dict:
        return remediate_node(self.arrives(event), self.deps)

    def at(self, iso: str) -> None:
        self.clock[0] = datetime.fromisoformat(iso.replace("Z", "+00:00"))

    def arrives(self, event: dict) -> dict:
        """The event as EventBridge delivers it: not before it happened. A later `time` moves the clock there (a
        test's events come in time order); an earlier one leaves it (a late event arrives with its age)."""
        when = event.get("time") if isinstance(event, dict) else None
        try:
            moment = datetime.fromisoformat(when.replace("Z", "+00:00")) if isinstance(when, str) else None
        except ValueError:
            moment = None
        if moment is not None and moment.tzinfo is not None and moment > self.clock[0]:
            self.clock[0] = moment
        return event

    def set_mode(self, mode: str) -> None:
        self.ssm.put_parameter(Name=MODE_PARAMETER, Value=mode, Type="String", Overwrite=True)
        self.deps.mode._cached = None  # the 30 s cache would hide the switch inside one test

    def pages(self) -> list[dict]:
        found = []
        while True:
            messages = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get("Messages", [])
            if not messages:
                return found
            for message in messages:
                found.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])


class Account:
    """Medic's resources in moto's emulated account, and the clients that reach them. The clients are made once
    for the package and serve every test's moto: a boto3 client costs about 0.1 s to build, more than most
    tests take to run, while starting and stopping moto costs a few milliseconds."""

    def __init__(self) -> None:
        session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing",  # noqa: S106
                                region_name=REGION)
        self.dynamodb, self.sns, self.sqs, self.ssm = (
            session.client(name) for name in ("dynamodb", "sns", "sqs", "ssm"))
        self.topic = self.queue_url = ""

    def deploy(self, mode: str) -> None:
        """Medic's table, paging topic (with a queue subscribed to read the pages back) and mode parameter."""
        self.dynamodb.create_table(
            TableName=TABLE, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                  {"AttributeName": "sk", "AttributeType": "S"}])
        self.topic = self.sns.create_topic(Name="medic-pages")["TopicArn"]
        self.queue_url = self.sqs.create_queue(QueueName="pages")["QueueUrl"]
        queue_arn = self.sqs.get_queue_attributes(QueueUrl=self.queue_url,
                                                  AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.sns.subscribe(TopicArn=self.topic, Protocol="sqs", Endpoint=queue_arn)
        self.ssm.put_parameter(Name=MODE_PARAMETER, Value=mode, Type="String")


def medic_world(config: MedicConfig, aws: Account) -> Iterator[Medic]:
    """Medic deployed with ``config``: a fresh account, and a SageMaker client of its own whose Stubber holds
    this test's expected HyperPod calls."""
    aws.deploy(config.mode)
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    stub = HyperPodStub(sagemaker)
    log = RecordLog()
    logging.getLogger("medic").addHandler(log)
    medic = Medic(deps=None, hyperpod=stub, log=log, queue_url=aws.queue_url, sqs=aws.sqs, ssm=aws.ssm)  # type: ignore[arg-type]
    medic.deps = Deps(config=config, hyperpod=HyperPod(sagemaker, sleep=medic.slept.append),
                      table=Table(TABLE, aws.dynamodb), pager=Pager(aws.topic, aws.sns),
                      mode=ModeSwitch(MODE_PARAMETER, config.mode, aws.ssm), jobs_on_node=JOBS_ON_NODE,
                      region=REGION, now=lambda: medic.clock[0], account="123456789012")
    try:
        yield medic
    finally:
        logging.getLogger("medic").removeHandler(log)


@pytest.fixture(scope="package")
def account() -> Account:
    return Account()


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def aws(account: Account, aws_credentials: None) -> Iterator[Account]:
    """An empty emulated account for this test alone (moto's own reset when it starts); medic_world deploys
    Medic into it."""
    with mock_aws():
        yield account


@pytest.fixture
def medic(aws: Account) -> Iterator[Medic]:
    yield from medic_world(parse_config(CONFIG), aws)
