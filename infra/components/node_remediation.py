from __future__ import annotations

from aws_cdk import Acknowledgment, Aws, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.components.function import MedicFunction
from infra.components.shared import Shared

NODE_HEALTH_EVENT = "SageMaker HyperPod Cluster Node Health Event"
NODE_ACTIONS = ["sagemaker:DescribeCluster", "sagemaker:DescribeClusterNode",
                "sagemaker:BatchRebootClusterNodes", "sagemaker:BatchReplaceClusterNodes"]


def cluster_arn(cluster_id: str) -> str:
    return f"arn:{Aws.PARTITION}:sagemaker:{Aws.REGION}:{Aws.ACCOUNT_ID}:cluster/{cluster_id}"


def grant_training_plan_reads(role: iam.IRole) -> None:
    """Before a replace, the capacity check reads the instance group's training plan (issue 32): DescribeTrainingPlan
    on the training-plan resource type (Service Authorization Reference, Amazon SageMaker AI). Which plans a
    cluster's groups run on is DescribeCluster's to say, at run time: the account's and region's plans, read only."""
    role.add_to_policy(iam.PolicyStatement(
        actions=["sagemaker:DescribeTrainingPlan"],
        resources=[f"arn:{Aws.PARTITION}:sagemaker:{Aws.REGION}:{Aws.ACCOUNT_ID}:training-plan/*"]))
    Validations.of(role).acknowledge(Acknowledgment(
        id="AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:"
           "<AWS::AccountId>:training-plan/*]",
        reason="DescribeTrainingPlan (read only) of the plan DescribeCluster names for a configured cluster's "
               "instance group; plan names are not known at deploy time."))


class NodeRemediation(Construct):
    """Node health events of the configured clusters → the node remediation function."""

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared) -> None:
        super().__init__(scope, construct_id)
        config = shared.config
        self.handler = MedicFunction(
            self, "Handler",
            handler="medic.handlers.node_health.handler",
            description="Medic: reboot or replace unhealthy HyperPod nodes under guardrails",
            environment=shared.environment(),
            layers=list(shared.layers),
            key=shared.key,
            reserved_concurrency=shared.reserved("node_health"),
        )
        role = self.handler.role
        role.add_to_policy(iam.PolicyStatement(
            actions=NODE_ACTIONS, resources=[cluster_arn(cluster.id) for cluster in config.clusters]))
        grant_training_plan_reads(role)
        shared.grant_ledger_paging_mode(role)

        self.rule = events.Rule(
            self, "Rule",
            description="HyperPod node health events of the clusters Medic manages",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=[NODE_HEALTH_EVENT],
                account=[Aws.ACCOUNT_ID],
                detail={"ClusterName": [cluster.name for cluster in config.clusters]},
            ),
        )
        self.handler.route(self.rule)
