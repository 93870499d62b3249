from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm

from medic.config import MedicConfig

LEDGER_ACTIONS = ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
                  "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem", "dynamodb:Query"]


@dataclass(frozen=True)
class Shared:
    """What every handler construct uses: the config, the key, the ledger, the pager, the mode."""

    config: MedicConfig
    key: kms.IKey
    table: dynamodb.Table
    topic: sns.ITopic
    mode: ssm.IStringParameter
    layers: tuple[lambda_.ILayerVersion, ...]

    def grant_ledger_paging_mode(self, role: iam.IRole) -> None:
        """The ledger operations Medic uses (claims are transactions of conditional writes), publishing
        pages and reading the mode; the key's use is granted with the function."""
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=LEDGER_ACTIONS, resources=[self.table.table_arn]))
        role.add_to_principal_policy(iam.PolicyStatement(actions=["sns:Publish"], resources=[self.topic.topic_arn]))
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["ssm:GetParameter"], resources=[self.mode.parameter_arn]))

    def environment(self) -> dict[str, str]:
        return {
            "MEDIC_CONFIG": self.config.to_env(),
            "LEDGER_TABLE": self.table.table_name,
            "PAGE_TOPIC_ARN": self.topic.topic_arn,
            "MODE_PARAMETER": self.mode.parameter_name,
        }
