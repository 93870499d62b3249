from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aws_cdk import Acknowledgment, Aws, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.components.function import MedicFunction
from infra.components.shared import Shared

TRAINING_JOB_EVENT = "SageMaker Training Job State Change"


def training_job_arn(name_pattern: str) -> str:
    return f"arn:{Aws.PARTITION}:sagemaker:{Aws.REGION}:{Aws.ACCOUNT_ID}:training-job/{name_pattern}"


def acknowledge_prefix_scope(role: Any, prefixes: Iterable[str], reason: str) -> None:
    """cdk-nag's IAM5 on `training-job/<prefix>*`: the configured prefix is the scope (``reason``, {prefix} filled)."""
    for prefix in prefixes:
        Validations.of(role).acknowledge(Acknowledgment(
            id=f"AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:"
               f"<AWS::AccountId>:training-job/{prefix}*]",
            reason=reason.format(prefix=prefix)))


class TrainingJobRestarts(Construct):
    """Failed training jobs under a configured prefix → restart from the checkpoint (or page)."""

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared) -> None:
        super().__init__(scope, construct_id)
        specs = shared.config.training_jobs
        self.handler = MedicFunction(
            self, "Handler",
            handler="medic.handlers.training_job.handler",
            description="Medic: restart failed SageMaker training jobs from their checkpoints",
            environment=shared.environment(),
            layers=list(shared.layers),
            key=shared.key,
            reserved_concurrency=shared.reserved("training_job"),
        )
        role = self.handler.role
        grant_training_restarts(role, specs)
        shared.grant_ledger_paging_mode(role)

        self.rule = events.Rule(
            self, "Rule",
            description="Failed SageMaker training jobs Medic may restart",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=[TRAINING_JOB_EVENT],
                account=[Aws.ACCOUNT_ID],
                detail={"TrainingJobStatus": ["Failed"],
                        "TrainingJobName": [{"prefix": spec.prefix} for spec in specs]},
            ),
        )
        self.handler.route(self.rule)

def grant_training_restarts(role: iam.IRole, specs) -> None:
    """What restarting a configured training job takes: the event's function, and the reconciler's (a restart after a
    capacity backoff, issue 32)."""
    # Lower-case too: SageMaker ARNs carry the job name lower-cased.
    prefixes = sorted({spec.prefix for spec in specs} | {spec.prefix.lower() for spec in specs})
    role.add_to_policy(iam.PolicyStatement(
        actions=["sagemaker:DescribeTrainingJob", "sagemaker:ListTags", "sagemaker:CreateTrainingJob",
                 "sagemaker:AddTags"],
        resources=[training_job_arn(f"{prefix}*") for prefix in prefixes]))
    acknowledge_prefix_scope(role, prefixes,
                             "Restarts create new jobs named {prefix}...-r<k>: the configured prefix is the scope.")
    role.add_to_policy(_pass_role(specs))
    role.add_to_policy(_list_checkpoints(specs))
    plans = _use_training_plans(specs)
    if plans is not None:
        role.add_to_policy(plans)


def _pass_role(specs) -> iam.PolicyStatement:
    # role_arns is required (config): exactly the jobs' execution roles, and only to SageMaker.
    roles = sorted({arn for spec in specs for arn in spec.role_arns})
    return iam.PolicyStatement(actions=["iam:PassRole"], resources=roles,
                               conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}})


def _list_checkpoints(specs) -> iam.PolicyStatement:
    # checkpoint_buckets is required (config): ListBucket on exactly those (Medic never reads an object).
    buckets = sorted({bucket for spec in specs for bucket in spec.checkpoint_buckets})
    return iam.PolicyStatement(actions=["s3:ListBucket"],
                               resources=[f"arn:{Aws.PARTITION}:s3:::{bucket}" for bucket in buckets])


def _use_training_plans(specs) -> iam.PolicyStatement | None:
    """A restart of a job on a training plan is a CreateTrainingJob on the plan too (the Service Authorization
    Reference, Amazon SageMaker AI: CreateTrainingJob takes the training-plan resource type,
    arn:${Partition}:sagemaker:${Region}:${Account}:training-plan/${TrainingPlanName}): only the listed plans."""
    plans = sorted({plan for spec in specs for plan in spec.training_plans})
    if not plans:
        return None
    return iam.PolicyStatement(
        actions=["sagemaker:CreateTrainingJob"],
        resources=[f"arn:{Aws.PARTITION}:sagemaker:{Aws.REGION}:{Aws.ACCOUNT_ID}:training-plan/{plan}"
                   for plan in plans])
