"""Specification: what the Reconciler construct deploys (a stack holding only it and what it shares),
checked by cdk-nag's AwsSolutions pack at synth."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from infra.components.encryption import MedicKey
from infra.components.ledger import LedgerTable
from infra.components.mode import ModeParameter
from infra.components.paging import PagingTopic
from infra.components.powertools import PowertoolsLayer
from infra.components.reconciler import RECONCILE_ACTIONS, Reconciler
from infra.components.shared import Shared
from medic.config import parse_config

CONFIG = parse_config({
    "notify": {"emails": ["oncall@example.com"]},
    "clusters": [{"name": "pretrain-slurm", "id": "k3v9q2w8x1za", "orchestrator": "slurm"},
                 {"name": "finetune-eks", "id": "p7r2m4x9c1qa", "orchestrator": "eks", "node_recovery": "automatic"}],
})


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Template:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("cdk.out")))
    stack = cdk.Stack(app, "ReconcilerOnly", env=cdk.Environment(account="123456789012", region="us-west-2"))
    cdk.Validations.of(stack).add_plugins(AwsSolutionsChecks())
    key = MedicKey(stack, "Encryption").key
    shared = Shared(
        config=CONFIG, key=key, table=LedgerTable(stack, "Ledger", key=key).table,
        topic=PagingTopic(stack, "Paging", key=key, notify=CONFIG.notify).topic,
        mode=ModeParameter(stack, "Mode", initial_mode="act").parameter,
        layers=(PowertoolsLayer(stack, "Powertools").layer,),
    )
    Reconciler(stack, "Reconciler", shared=shared)
    app.synth()  # runs cdk-nag: an unacknowledged finding fails here
    return Template.from_stack(stack)


def test_the_reconciler_runs_every_five_minutes_into_its_handler_with_a_dead_letter_queue(template):
    [rule] = template.find_resources("AWS::Events::Rule").values()
    assert rule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"
    [target] = rule["Properties"]["Targets"]
    assert "Arn" in target["DeadLetterConfig"]
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 600, "MaximumRetryAttempts": 2}


def test_the_handler_is_the_reconcile_entry_point_inside_a_60_second_timeout(template):
    template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "medic.handlers.reconcile.handler", "Timeout": 60,
        "Environment": {"Variables": Match.object_like({
            "MEDIC_CONFIG": Match.any_value(), "LEDGER_TABLE": Match.any_value(),
            "PAGE_TOPIC_ARN": Match.any_value(), "MODE_PARAMETER": Match.any_value()})},
    })


def test_the_node_calls_are_allowed_only_on_the_configured_clusters(template):
    statements = [statement for policy in template.find_resources("AWS::IAM::Policy").values()
                  for statement in policy["Properties"]["PolicyDocument"]["Statement"]
                  if any(str(action).startswith("sagemaker:") for action in _list(statement["Action"]))]
    # (besides: DescribeTrainingPlan before a replace, and the restarts of training jobs after a capacity backoff:
    # issue 32, on training plans and job prefixes, never on clusters)
    [statement] = [statement for statement in statements if "sagemaker:ListClusterNodes" in statement["Action"]]
    assert all(not _joined(resource).split(":")[-1].startswith("cluster/")
               for other in statements if other is not statement for resource in _list(other["Resource"]))
    assert sorted(_list(statement["Action"])) == sorted(RECONCILE_ACTIONS)
    assert "sagemaker:ListClusterNodes" in statement["Action"]
    resources = [_joined(resource) for resource in _list(statement["Resource"])]
    assert resources == ["arn:aws:sagemaker:us-west-2:123456789012:cluster/k3v9q2w8x1za",
                         "arn:aws:sagemaker:us-west-2:123456789012:cluster/p7r2m4x9c1qa"]


def test_the_handler_reads_and_writes_the_ledger_pages_and_reads_the_mode(template):
    actions = {action for policy in template.find_resources("AWS::IAM::Policy").values()
               for statement in policy["Properties"]["PolicyDocument"]["Statement"]
               for action in _list(statement["Action"])}
    assert {"dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:UpdateItem", "dynamodb:PutItem",
            "dynamodb:DeleteItem", "sns:Publish", "ssm:GetParameter"} <= actions
    assert not any(action.endswith("*") for action in actions if not action.startswith(("xray:", "kms:")))


def _list(value) -> list:
    return value if isinstance(value, list) else [value]


def _joined(value) -> str:
    """A Fn::Join of the partition, region and account pseudo parameters, as CloudFormation resolves it."""
    if isinstance(value, str):
        return value
    pseudo = {"AWS::Partition": "aws", "AWS::Region": "us-west-2", "AWS::AccountId": "123456789012"}
    separator, parts = value["Fn::Join"]
    return separator.join(part if isinstance(part, str) else pseudo[part["Ref"]] for part in parts)
