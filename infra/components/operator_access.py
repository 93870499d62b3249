"""Ready-made IAM policies for the people who run Medic (issue 29, item 12), as stack outputs to attach to their
roles: read-only (`medic status`, `history`, `report`) and operator (those, and `medic pause`/`resume`/`mode`, operator
requests, `medic backtest`). Each names the stack's own resources and the calls the CLI makes on them (cli/README.md,
the table of what each command reads and writes), nothing else."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Aws, CfnOutput, Stack, Validations
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.components.agent_channel import OPERATOR_DETAIL_TYPES, REQUEUE_SOURCE
from infra.components.event_archive import REPLAY_PREFIX, EventArchive
from infra.components.function import MedicFunction
from infra.components.node_remediation import cluster_arn
from infra.components.shared import Shared

# `medic status` reads the deployed config from these functions' environment (cli/medic_cli/context.py
# CONFIG_FUNCTION_OUTPUTS), the first that answers.
METRICS_ONLY_STAR = ("CloudWatch ListMetrics (medic status: Container Insights on an EKS cluster) and GetMetricData "
                     "(medic report: the probe's heartbeat) support no resource-level permissions; read only.")


class OperatorPolicies(Construct):
    """Two customer-managed policies: ReadOnly and Operator (a superset), their ARNs as stack outputs."""

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared, functions: list[MedicFunction],
                 config_functions: list[MedicFunction], archive: EventArchive) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        read = self._read_only(shared, functions, config_functions)
        self.read_only = iam.ManagedPolicy(
            self, "ReadOnly", statements=read,
            description="Medic: what medic status, history and report read (nothing they change)")
        self.operator = iam.ManagedPolicy(
            self, "Operator", statements=[*read, *self._operate(shared, archive)],
            description="Medic: medic status, history, report; pause/resume/mode, operator requests, backtest")
        for policy in (self.read_only, self.operator):
            Validations.of(policy).acknowledge(Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]", reason=METRICS_ONLY_STAR))
        Validations.of(self.operator).acknowledge(Acknowledgment(
            id=f"AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:events:<AWS::Region>:"
               f"<AWS::AccountId>:replay/{REPLAY_PREFIX}*]",
            reason="medic backtest names each replay it starts medic-backtest-<time>-<random>: the prefix is the "
                   "scope (the read-back rule takes only these)."))
        CfnOutput(stack, "OperatorReadOnlyPolicyArn", value=self.read_only.managed_policy_arn,
                  description="attach to who runs medic status, history and report")
        CfnOutput(stack, "OperatorPolicyArn", value=self.operator.managed_policy_arn,
                  description="attach to who also pauses Medic, sends it requests and runs medic backtest")

    @staticmethod
    def _read_only(shared: Shared, functions: list[MedicFunction],
                   config_functions: list[MedicFunction]) -> list[iam.PolicyStatement]:
        statements = [
            iam.PolicyStatement(actions=["cloudformation:DescribeStacks"], resources=[Aws.STACK_ID]),
            iam.PolicyStatement(actions=["ssm:GetParameter"], resources=[shared.mode_parameter_arn]),
            iam.PolicyStatement(actions=["dynamodb:Scan", "dynamodb:Query", "dynamodb:GetItem"],
                                resources=[shared.table.table_arn]),
            iam.PolicyStatement(actions=["kms:Decrypt"], resources=[shared.key.key_arn], conditions={
                "StringEquals": {"kms:ViaService": f"dynamodb.{Aws.REGION}.{Aws.URL_SUFFIX}"}}),
            iam.PolicyStatement(actions=["logs:FilterLogEvents"],
                                resources=[function.log_group.log_group_arn for function in functions]),
            iam.PolicyStatement(actions=["lambda:GetFunctionConfiguration"],
                                resources=[function.function.function_arn for function in config_functions]),
            iam.PolicyStatement(actions=["cloudwatch:ListMetrics", "cloudwatch:GetMetricData"], resources=["*"]),
        ]
        clusters = [cluster_arn(cluster.id) for cluster in shared.config.clusters]
        statements.append(iam.PolicyStatement(actions=["sagemaker:DescribeCluster"], resources=clusters))
        return statements

    @staticmethod
    def _operate(shared: Shared, archive: EventArchive) -> list[iam.PolicyStatement]:
        region, account = Aws.REGION, Aws.ACCOUNT_ID
        return [
            # medic pause / resume / mode: the switch, and who changed it, recorded under the stack's own key
            iam.PolicyStatement(actions=["ssm:PutParameter"], resources=[shared.mode_parameter_arn]),
            iam.PolicyStatement(actions=["dynamodb:PutItem"], resources=[shared.table.table_arn], conditions={
                "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [f"modechange#{Aws.STACK_NAME}"]}}),
            iam.PolicyStatement(actions=["kms:Encrypt", "kms:GenerateDataKey"], resources=[shared.key.key_arn],
                                conditions={"StringEquals": {
                                    "kms:ViaService": f"dynamodb.{region}.{Aws.URL_SUFFIX}"}}),
            # operator requests (a requeue; `medic release` of a quarantined node): only Medic's own kinds of event,
            # on the default bus its rule listens to
            iam.PolicyStatement(
                actions=["events:PutEvents"],
                resources=[f"arn:{Aws.PARTITION}:events:{region}:{account}:event-bus/default"],
                conditions={"StringEquals": {"events:source": REQUEUE_SOURCE,
                                             "events:detail-type": OPERATOR_DETAIL_TYPES}}),
            # medic backtest: replay the archive to the read-back rule only, and drain the read-back queue
            iam.PolicyStatement(actions=["events:DescribeArchive", "events:StartReplay"],
                                resources=[archive.archive.attr_arn]),
            iam.PolicyStatement(
                actions=["events:StartReplay", "events:DescribeReplay"],
                resources=[f"arn:{Aws.PARTITION}:events:{region}:{account}:replay/{REPLAY_PREFIX}*"]),
            iam.PolicyStatement(actions=["sqs:ReceiveMessage", "sqs:DeleteMessage"],
                                resources=[archive.readback_queue.queue_arn]),
            iam.PolicyStatement(actions=["kms:Decrypt"], resources=[shared.key.key_arn], conditions={
                "StringEquals": {"kms:ViaService": f"sqs.{region}.{Aws.URL_SUFFIX}"}}),
        ]
