"""Ready-made IAM policies for the people who run Medic (issue 29, item 12), as stack outputs to attach to their
roles: read-only (`medic status`, `history`, `report`, `explain`) and operator (those, and `medic pause`/`resume`/
`mode`, operator requests, `medic backtest`). Each names the stack's own resources and the calls the CLI makes on
them (cli/README.md, the table of what each command reads and writes), nothing else."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Aws, CfnOutput, Stack, Validations
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.components.agent_channel import REQUEUE_DETAIL_TYPE, REQUEUE_SOURCE
from infra.components.event_archive import REPLAY_PREFIX, EventArchive
from infra.components.function import MedicFunction
from infra.components.managed_job_restarts import bedrock_job_arns
from infra.components.node_remediation import cluster_arn
from infra.components.shared import Shared
from infra.components.training_job_restarts import acknowledge_prefix_scope, training_job_arn
from medic.config import MedicConfig

# `medic status` reads the deployed config from these functions' environment (cli/medic_cli/context.py
# CONFIG_FUNCTION_OUTPUTS), the first that answers.
METRICS_ONLY_STAR = ("CloudWatch ListMetrics (medic status: Container Insights on an EKS cluster) and GetMetricData "
                     "(medic report: the probe's heartbeat) support no resource-level permissions; read only.")
DESCRIBE_JOBS_STAR = (" AWS Batch DescribeJobs (medic explain: a Batch job Medic restarted) has no resource type "
                      "either (Service Authorization Reference, AWS Batch).")


class OperatorPolicies(Construct):
    """Two customer-managed policies: ReadOnly and Operator (a superset), their ARNs as stack outputs."""

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared, functions: list[MedicFunction],
                 config_functions: list[MedicFunction], archive: EventArchive) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        read = [*self._read_only(shared, functions, config_functions), *explain_reads(shared.config)]
        self.read_only = iam.ManagedPolicy(
            self, "ReadOnly", statements=read,
            description="Medic: what medic status, history, report and explain read (nothing they change)")
        self.operator = iam.ManagedPolicy(
            self, "Operator", statements=[*read, *self._operate(shared, archive)],
            description="Medic: medic status, history, report; pause/resume/mode, operator requests, backtest")
        config = shared.config
        for policy in (self.read_only, self.operator):
            Validations.of(policy).acknowledge(Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason=METRICS_ONLY_STAR + (DESCRIBE_JOBS_STAR if config.batch_jobs else "")))
            _acknowledge_explain_scopes(policy, config)
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
            # operator requests: only Medic's own kind of event, on the default bus its rule listens to
            iam.PolicyStatement(
                actions=["events:PutEvents"],
                resources=[f"arn:{Aws.PARTITION}:events:{region}:{account}:event-bus/default"],
                conditions={"StringEquals": {"events:source": REQUEUE_SOURCE,
                                             "events:detail-type": REQUEUE_DETAIL_TYPE}}),
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


def explain_reads(config: MedicConfig) -> list[iam.PolicyStatement]:
    """Exactly the reads `medic explain` makes beyond status' (cli/medic_cli/explain.py), each on the configured
    resources: the node (DescribeClusterNode on the configured clusters), a training job (DescribeTrainingJob under
    the configured prefixes, as the restart function's grant), a checkpoint (ListBucket, ListObjectsV2's action, on
    the configured checkpoint buckets), a Batch job (DescribeJobs: no resource type), a Bedrock job
    (GetModelCustomizationJob on this account's customization jobs: named by ids, as the restart function's grant)."""
    statements = []
    if config.clusters:
        statements.append(iam.PolicyStatement(actions=["sagemaker:DescribeClusterNode"],
                                              resources=[cluster_arn(cluster.id) for cluster in config.clusters]))
    if config.training_jobs:
        statements.append(iam.PolicyStatement(actions=["sagemaker:DescribeTrainingJob"],
                                              resources=[training_job_arn(f"{prefix}*")
                                                         for prefix in _training_prefixes(config)]))
    buckets = sorted({bucket for spec in config.training_jobs for bucket in spec.checkpoint_buckets}
                     | {location.bucket for spec in config.batch_jobs for location in spec.checkpoint_buckets})
    if buckets:
        statements.append(iam.PolicyStatement(actions=["s3:ListBucket"],
                                              resources=[f"arn:{Aws.PARTITION}:s3:::{bucket}" for bucket in buckets]))
    if config.batch_jobs:
        statements.append(iam.PolicyStatement(actions=["batch:DescribeJobs"], resources=["*"]))
    if config.bedrock_jobs:
        statements.append(iam.PolicyStatement(actions=["bedrock:GetModelCustomizationJob"],
                                              resources=[bedrock_job_arns()]))
    return statements


def _training_prefixes(config: MedicConfig) -> list[str]:
    # SageMaker ARNs carry the job name lower-cased (as grant_training_restarts)
    prefixes = {spec.prefix for spec in config.training_jobs}
    return sorted(prefixes | {prefix.lower() for prefix in prefixes})


def _acknowledge_explain_scopes(policy: iam.ManagedPolicy, config: MedicConfig) -> None:
    acknowledge_prefix_scope(policy, _training_prefixes(config),
                             "medic explain reads a failed training job under the configured prefix {prefix}: the "
                             "prefix is the scope; read only.")
    if config.bedrock_jobs:
        Validations.of(policy).acknowledge(Acknowledgment(
            id="AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:<AWS::Region>:"
               "<AWS::AccountId>:model-customization-job/*]",
            reason="medic explain reads a failed Bedrock customization job (GetModelCustomizationJob): Bedrock names "
                   "them by ids in their ARNs; this account's only; read only."))
