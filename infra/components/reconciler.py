from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.components.function import METRICS_UNSCOPED, MedicFunction
from infra.components.node_remediation import cluster_arn, grant_training_plan_reads
from infra.components.shared import Shared
from infra.components.training_job_restarts import grant_training_restarts

RECONCILE_EVERY = Duration.minutes(5)
# ListClusterNodes to sweep; DescribeClusterNode to re-check a node before any retry; DescribeCluster for the
# breaker of the shared node path; the node actions for the one retry of a call that did not take.
RECONCILE_ACTIONS = ["sagemaker:ListClusterNodes", "sagemaker:DescribeCluster", "sagemaker:DescribeClusterNode",
                     "sagemaker:BatchRebootClusterNodes", "sagemaker:BatchReplaceClusterNodes"]


class Reconciler(Construct):
    """Every 5 minutes, the reconciler sweeps the configured clusters: failed nodes no incident covers,
    node actions claimed but never finished, repairs that take too long (events are best effort)."""

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared) -> None:
        super().__init__(scope, construct_id)
        config = shared.config
        # Watch by pattern (issue 33): the reconciler reads each watching cluster's runs (ListMetrics, GetMetricData)
        # and restarts a stalled one through its agent (the queues: AgentChannel.issue_node_commands)
        watching = any(cluster.watch for cluster in config.clusters)
        self.handler = MedicFunction(
            self, "Handler",
            handler="medic.handlers.reconcile.handler",
            description="Medic: reconcile HyperPod node status with Medic's ledger (missed events, unfinished "
                        "actions, long repairs)",
            # MEDIC_STACK: the stack's name, which its canary carries for the stack's own canary rule (canary.py)
            environment={**shared.environment(), "MEDIC_STACK": Stack.of(self).stack_name},
            layers=list(shared.layers),
            key=shared.key,
            reserved_concurrency=shared.reserved("reconciler"),
            unscoped_reason=METRICS_UNSCOPED if watching else "",
        )
        role = self.handler.role
        role.add_to_policy(iam.PolicyStatement(
            actions=RECONCILE_ACTIONS, resources=[cluster_arn(cluster.id) for cluster in config.clusters]))
        grant_training_plan_reads(role)  # the capacity check before a replace (issue 32)
        if config.training_jobs:  # a training job's restart after its capacity backoff is the reconciler's (issue 32)
            grant_training_restarts(role, config.training_jobs)
        shared.grant_ledger_paging_mode(role)
        if watching:
            role.add_to_policy(iam.PolicyStatement(actions=["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"],
                                                   resources=["*"]))

        self.schedule = events.Rule(
            self, "Schedule",
            description="Medic: reconcile cluster node status every 5 minutes",
            schedule=events.Schedule.rate(RECONCILE_EVERY),
        )
        self.handler.route(self.schedule, scheduled=True)
