from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm

from medic.config import MedicConfig

LEDGER_ACTIONS = ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
                  "dynamodb:ConditionCheckItem", "dynamodb:Query"]
# The only item families Medic's ledger deletes (a page, storm page, failure report or job-failure claim given
# back when its call failed; an alarm's incident, a recovery or repair watch that ended; a clone watch, a capacity
# backoff or wait, a followed repair taken once: Table.delete_if), in both the real and the dry-run namespace. Every
# function shares the ledger module, so every function gets this one list; what it keeps out of reach: restart
# budgets (lineage#), event claims (request#), agent commands and heartbeats.
# tests/infra/test_least_privilege.py reads the ledger's delete calls (delete and delete_if) and fails when one is
# missing here.
LEDGER_DELETED_PREFIXES = ("incident#", "cluster#", "node#", "repair#", "slurmrepair#", "alarm#", "recovery#",
                           "jobfail#", "eksjobwatch#", "jobclone#", "jobbackoff#", "capacity#", "follow#")
LEDGER_NAMESPACES = ("", "dry_run#")


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
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["dynamodb:DeleteItem"], resources=[self.table.table_arn],
            conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [
                f"{namespace}{prefix}*" for namespace in LEDGER_NAMESPACES for prefix in LEDGER_DELETED_PREFIXES]}}))
        role.add_to_principal_policy(iam.PolicyStatement(actions=["sns:Publish"], resources=[self.topic.topic_arn]))
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["ssm:GetParameter"], resources=[self.mode_parameter_arn]))

    @property
    def mode_parameter_arn(self) -> str:
        """The mode parameter's ARN where the stack is deployed: the partition, region and account CloudFormation
        resolves at deploy (AWS::Partition, AWS::Region, AWS::AccountId). The parameter's own `parameter_arn` writes
        the region and account the app was synthesized for (app.py's CDK_DEFAULT_REGION, the synthesizing
        credentials' default), which a template deployed elsewhere would not match: the functions could not read
        the mode, and would run on the deployed one."""
        return f"arn:{Aws.PARTITION}:ssm:{Aws.REGION}:{Aws.ACCOUNT_ID}:parameter{self.mode.parameter_name}"

    def reserved(self, function: str) -> int | None:
        """The function's reserved concurrency (function.RESERVED_CONCURRENCY); None when the config reserves none."""
        from infra.components.function import RESERVED_CONCURRENCY

        return RESERVED_CONCURRENCY[function] if self.config.reserved_concurrency else None

    def environment(self) -> dict[str, str]:
        return {
            "MEDIC_CONFIG": self.config.to_env(),
            "LEDGER_TABLE": self.table.table_name,
            "PAGE_TOPIC_ARN": self.topic.topic_arn,
            "MODE_PARAMETER": self.mode.parameter_name,
        }
