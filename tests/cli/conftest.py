"""A deployed Medic in emulated AWS for the ``medic`` CLI: a CloudFormation stack (moto) whose outputs
name the ledger table, the mode parameter and the functions' log groups, as the real stack's do."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

CLI = Path(__file__).resolve().parents[2] / "cli"
if str(CLI) not in sys.path:  # the tests run without `pip install -e ./cli`
    sys.path.insert(0, str(CLI))

from medic_cli.context import Context  # noqa: E402
from medic_cli.main import main  # noqa: E402

from medic.ledger.nodes import NodeClaim, NodeStore  # noqa: E402
from medic.ledger.table import Table  # noqa: E402
from medic.obs import logger as medic_logger  # noqa: E402

REGION = "us-west-2"
STACK = "Medic"
TABLE = "Medic-LedgerTable"
MODE_PARAMETER = f"/medic/{STACK}/mode"
NODE_LOGS = "/aws/lambda/Medic-NodeRemediation"
JOB_LOGS = "/aws/lambda/Medic-TrainingJobRestarts"
CLUSTER = "pretrain-slurm"
CALLER = "arn:aws:sts::123456789012:user/moto"  # moto's identity
# Log events must be recent (CloudWatch Logs, and moto, refuse events older than 14 days): the clock
# the CLI sees is the real time, truncated so that tests can compute moments relative to it.
NOW = datetime.now(UTC).replace(microsecond=0)

CONFIG_YAML = f"""
mode: act
notify:
  emails: [oncall@example.com]
guardrails:
  max_node_actions_per_hour: 4
  repair_minutes: 30
clusters:
  - name: {CLUSTER}
    id: k3v9q2w8x1za
    orchestrator: slurm
    protected_groups: [controller, login]
  - name: finetune-eks
    id: p7r2m4x9c1qa
    orchestrator: eks
    node_recovery: automatic
    guardrails:
      max_node_actions_per_hour: 2
training_jobs:
  - prefix: ft-
    max_restarts: 3
    role_arns: [arn:aws:iam::123456789012:role/SageMakerTrainingRole]
    checkpoint_buckets: [ml-artifacts-123456789012]
"""

TEMPLATE = {
    "Resources": {
        "LedgerTable": {"Type": "AWS::DynamoDB::Table", "Properties": {
            "TableName": TABLE, "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                     {"AttributeName": "sk", "AttributeType": "S"}]}},
        "ModeParameter": {"Type": "AWS::SSM::Parameter", "Properties": {
            "Name": MODE_PARAMETER, "Type": "String", "Value": "act", "AllowedPattern": "^(act|dry_run|paused)$"}},
        "NodeLogs": {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": NODE_LOGS}},
        "JobLogs": {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": JOB_LOGS}},
    },
    "Outputs": {
        "LedgerTableName": {"Value": {"Ref": "LedgerTable"}},
        "ModeParameterName": {"Value": {"Ref": "ModeParameter"}},
        "NodeRemediationLogGroup": {"Value": {"Ref": "NodeLogs"}},
        "TrainingJobRestartsLogGroup": {"Value": {"Ref": "JobLogs"}},
        "PagingTopicArn": {"Value": "arn:aws:sns:us-west-2:123456789012:Medic-Paging"},
    },
}


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json_lines(self) -> list[dict]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


class Clients:
    """The helpers' clients, made once for the package and used by every test's moto: a boto3 client takes
    longer to build than most of these tests take to run. The CLI under test still builds its own."""

    def __init__(self) -> None:
        session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing",  # noqa: S106
                                region_name=REGION)
        self.cloudformation, self.dynamodb, self.ssm, self.logs = (
            session.client(name) for name in ("cloudformation", "dynamodb", "ssm", "logs"))


class Deployed:
    """The emulated deployment, and helpers to put it into a given state."""

    def __init__(self, tmp_path: Path, clients: Clients) -> None:
        self.tmp_path = tmp_path
        self.dynamodb, self.ssm, self.logs = clients.dynamodb, clients.ssm, clients.logs
        self.config_file = tmp_path / "team.medic.yaml"
        self.config_file.write_text(CONFIG_YAML)
        self._streams: set[str] = set()
        self.context: Context | None = None

    @staticmethod
    def new_context() -> Context:
        return Context(region=REGION, clock=lambda: NOW)

    def cli(self, *args: str, stdin: str | None = None, context: Context | None = None) -> Result:
        """Run ``medic ARGS`` in-process against the emulated account; the clock reads NOW."""
        out, err = io.StringIO(), io.StringIO()
        self.context = context or self.new_context()
        old_stdin = sys.stdin
        if stdin is not None:
            sys.stdin = io.StringIO(stdin)
        try:
            code = main(list(args), out=out, err=err, context=self.context)
        finally:
            sys.stdin = old_stdin
        return Result(code, out.getvalue(), err.getvalue())

    # --- state

    def set_mode(self, value: str) -> None:
        self.ssm.put_parameter(Name=MODE_PARAMETER, Value=value, Overwrite=True)

    def mode(self) -> str:
        return self.ssm.get_parameter(Name=MODE_PARAMETER)["Parameter"]["Value"]

    def ledger(self, mode: str = "act") -> Table:
        """The ledger for Medic's stores: state is written as the functions write it (dry_run: their copy)."""
        return Table(TABLE, self.dynamodb).for_mode(mode)

    def items(self) -> list[dict]:
        return self.dynamodb.scan(TableName=TABLE)["Items"]

    def node_state(self, node: str, *, action: str, at: datetime, outcome: str = "executed",
                   fault: str = "gpu_fatal", attempt: int = 1, cluster: str = CLUSTER, mode: str = "act") -> None:
        """Medic's action on the node, claimed as the node path claims it: the node's state, and the action
        in the cluster's recent actions (its budget)."""
        nodes = NodeStore(self.ledger(mode))
        state, cluster_state = nodes.load(cluster, node)
        assert nodes.claim(NodeClaim(cluster, node, fault, action, outcome, attempt, at), state, cluster_state,
                           reboot=action == "reboot_node")

    def cluster_actions(self, moments: list[datetime], cluster: str = CLUSTER, mode: str = "act") -> None:
        """Medic's node actions on the cluster at these moments, one node each (oldest first)."""
        for i, at in enumerate(moments):
            self.node_state(f"i-0{i:016x}", action="replace_node", at=at, cluster=cluster, mode=mode)

    # --- the remediation log

    def log(self, group: str, at: datetime, **fields: Any) -> dict:
        """One remediation record exactly as the functions' Powertools logger writes it."""
        record = remediation(**fields)
        log_record = logging.LogRecord("medic", logging.INFO, __file__, 1, "remediation", None, None)
        log_record.__dict__.update(record)
        self.write(group, at, medic_logger.registered_formatter.format(log_record))
        return record

    def write(self, group: str, at: datetime, message: str) -> None:
        stream = "2026/12/03/[$LATEST]0123456789abcdef"
        if (group, stream) not in self._streams:
            self.logs.create_log_stream(logGroupName=group, logStreamName=stream)
            self._streams.add((group, stream))
        self.logs.put_log_events(logGroupName=group, logStreamName=stream,
                                 logEvents=[{"timestamp": int(at.timestamp() * 1000), "message": message}])


def remediation(**fields: Any) -> dict:
    node = fields.get("node_id", "i-0d4e5f60718293a4b")
    record = {"incident": f"node:{CLUSTER}:{node}", "trigger": "node_health", "event_id": "evt-1",
              "cluster": CLUSTER, "instance_group": "workers", "node_id": node, "job": None,
              "fault": "gpu_fatal", "action": "replace_node", "outcome": "executed",
              "reason": "Fault gpu_fatal calls for replace.", "paged": False, "mode": "act", "attempt": 1}
    record.update(fields)
    return record


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        yield


@pytest.fixture(scope="package")
def clients() -> Clients:
    return Clients()


@pytest.fixture
def deployed(aws: None, clients: Clients, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Deployed:
    """The Medic stack deployed (its outputs, table, mode parameter and log groups), run from an empty directory."""
    monkeypatch.chdir(tmp_path)  # no ./medic.yaml unless a test writes one
    clients.cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(TEMPLATE))
    return Deployed(tmp_path, clients)


def ago(**delta: float) -> datetime:
    return NOW - timedelta(**delta)
