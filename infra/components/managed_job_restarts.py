"""Failed jobs of the managed services beside SageMaker (AWS Batch, Amazon Bedrock) → restart (resubmit), or page;
and Medic's restarts running → their incident lines (the resume). One function for them all
(medic.handlers.managed_job): one reserved concurrency, one dead-letter queue, two rules per service."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Aws, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.components.function import MedicFunction
from infra.components.shared import Shared

BATCH_JOB_EVENT = "Batch Job State Change"
BEDROCK_JOB_EVENT = "Model Customization Job State Change"
# This stack's Batch resources (job-queue/<name>, job-definition/<name>:<revision>, job/<id>)
BATCH_ARN = f"arn:{Aws.PARTITION}:batch:{Aws.REGION}:{Aws.ACCOUNT_ID}:"
# The states that mean a restart runs again: Batch's RUNNING ("Job states", AWS Batch user guide; an event for every
# state change: "Job state change events"); Bedrock's InProgress (ModelCustomizationJobStatus, botocore's bedrock
# model: a job's first status; Bedrock publishes an event "whenever there is a change in the state of a job", "How
# EventBridge for Amazon Bedrock works").
BATCH_RUNNING, BEDROCK_RUNNING = "RUNNING", "InProgress"


def bedrock_job_arns() -> str:
    """This account's Bedrock model customization jobs: Bedrock names them by ids (model-customization-job/<id>)."""
    return f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}:{Aws.ACCOUNT_ID}:model-customization-job/*"


def restart_names(prefix: str) -> dict:
    """Medic's restarts of a prefix's jobs, by name: `<base>-r<k>` (Lineage.next_name), an EventBridge wildcard
    ("Wildcard matching", EventBridge user guide: `*` any run of characters). The handler holds each to Medic's
    ledger note of the restart (its id), so another job named like one is left alone."""
    return {"wildcard": f"{prefix}*-r*"}

class ManagedJobRestarts(Construct):
    """Failed AWS Batch jobs in a configured queue, under a configured prefix → resubmit a clone (or page); failed
    Amazon Bedrock model customization jobs under a configured prefix → create them again (or page)."""

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared) -> None:
        super().__init__(scope, construct_id)
        self.handler = MedicFunction.of_shared(
            self, "Handler", shared, handler="medic.handlers.managed_job.handler",
            description="Medic: restart failed AWS Batch and Bedrock customization jobs", concurrency="managed_job")
        shared.grant_ledger_paging_mode(self.handler.role)
        self.rules: list[events.Rule] = []
        if shared.config.batch_jobs:
            self._batch(shared)
        if shared.config.bedrock_jobs:
            self._bedrock(shared)

    def _batch(self, shared: Shared) -> None:
        role, specs = self.handler.role, shared.config.batch_jobs
        queues = sorted({queue for spec in specs for queue in spec.job_queues})
        definitions = sorted({definition for spec in specs for definition in spec.job_definitions})
        # SubmitJob authorizes on the job queue and on the job definition; the definition's ARN with its revision
        # ("job-definition/<name>:*": the revision format, "Restrict job submission by resource tags on job
        # definition and job queue", AWS Batch user guide). Medic submits the failed job's exact revision.
        role.add_to_policy(iam.PolicyStatement(
            actions=["batch:SubmitJob"],
            resources=[BATCH_ARN + f"job-queue/{queue}" for queue in queues]
            + [BATCH_ARN + f"job-definition/{definition}:*" for definition in definitions]))
        for definition in definitions:
            Validations.of(role).acknowledge(Acknowledgment(
                id=f"AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:batch:<AWS::Region>:"
                   f"<AWS::AccountId>:job-definition/{definition}:*]",
                reason=f"Every revision of the configured job definition {definition}: a restart submits the failed "
                       "job's own revision."))
        # DescribeJobs has no resource-level permissions (Service Authorization Reference, AWS Batch: no resource
        # type); a job's ARN carries its id, not its name, so tagging the jobs Medic submits (tags on SubmitJob:
        # TagResource, assumption) cannot be scoped to a name either.
        role.add_to_policy(iam.PolicyStatement(actions=["batch:DescribeJobs"], resources=["*"]))
        role.add_to_policy(iam.PolicyStatement(actions=["batch:TagResource"], resources=[BATCH_ARN + "job/*"]))
        Validations.of(role).acknowledge(Acknowledgment(
            id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
            reason="batch:DescribeJobs supports no resource-level permissions; read-only."))
        Validations.of(role).acknowledge(Acknowledgment(
            id="AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:batch:<AWS::Region>:"
               "<AWS::AccountId>:job/*]",
            reason="The tags of the restarts Medic submits: a Batch job's ARN names its id, unknown before SubmitJob."))
        buckets = sorted({location.bucket for spec in specs for location in spec.checkpoint_buckets})
        if buckets:  # ListBucket on exactly those (Medic never reads an object)
            role.add_to_policy(iam.PolicyStatement(
                actions=["s3:ListBucket"], resources=[f"arn:{Aws.PARTITION}:s3:::{bucket}" for bucket in buckets]))
        # The queue by its ARN's end: a pattern holds no token but the account id (infra/event_patterns); the
        # account filter and the handler's check of the ARN's partition, account and region (flows/jobs/batch) make
        # it this stack's queue.
        failed = events.EventPattern(
            source=["aws.batch"], detail_type=[BATCH_JOB_EVENT], account=[Aws.ACCOUNT_ID],
            detail={"status": ["FAILED"], "jobQueue": [{"suffix": f":job-queue/{queue}"} for queue in queues],
                    "jobName": [{"prefix": spec.prefix} for spec in specs]})
        rule = events.Rule(self, "BatchRule", description="Failed AWS Batch jobs Medic may restart",
                           event_pattern=failed)
        self.handler.route(rule)
        self.rules.append(rule)
        running = events.EventPattern(
            source=["aws.batch"], detail_type=[BATCH_JOB_EVENT], account=[Aws.ACCOUNT_ID],
            detail={"status": [BATCH_RUNNING], "jobQueue": [{"suffix": f":job-queue/{queue}"} for queue in queues],
                    "jobName": [restart_names(spec.prefix) for spec in specs]})
        self._clones(events.Rule(self, "BatchCloneRule", event_pattern=running,
                                 description="Medic's AWS Batch restarts running: their incident lines"))

    def _bedrock(self, shared: Shared) -> None:
        """Bedrock's customization jobs and custom models are named by ids in their ARNs
        (model-customization-job/<id>, custom-model/<base model>/<id>), so the job-name prefixes scope the rule, not
        IAM; the roles Medic may pass are exactly the configured ones, to Bedrock only."""
        role, specs = self.handler.role, shared.config.bedrock_jobs
        bedrock = f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}:"
        role.add_to_policy(iam.PolicyStatement(
            actions=["bedrock:GetModelCustomizationJob", "bedrock:CreateModelCustomizationJob",
                     "bedrock:ListTagsForResource", "bedrock:TagResource"],
            resources=[bedrock_job_arns(),
                       f"{bedrock}{Aws.ACCOUNT_ID}:custom-model/*", f"{bedrock}:foundation-model/*"]))
        for resource in ("<AWS::AccountId>:model-customization-job/*", "<AWS::AccountId>:custom-model/*",
                         ":foundation-model/*"):
            Validations.of(role).acknowledge(Acknowledgment(
                id=f"AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:<AWS::Region>:{resource}]",
                reason="Bedrock names customization jobs and custom models by ids in their ARNs: the configured "
                       "job-name prefixes scope the rule that reaches Medic; the base model is the failed job's."))
        role.add_to_policy(iam.PolicyStatement(
            actions=["iam:PassRole"], resources=sorted({arn for spec in specs for arn in spec.role_arns}),
            conditions={"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}}))
        failed = events.EventPattern(
            source=["aws.bedrock"], detail_type=[BEDROCK_JOB_EVENT], account=[Aws.ACCOUNT_ID],
            detail={"jobStatus": ["Failed"], "jobName": [{"prefix": spec.prefix} for spec in specs]})
        rule = events.Rule(self, "BedrockRule", description="Failed Bedrock customization jobs Medic may restart",
                           event_pattern=failed)
        self.handler.route(rule)
        self.rules.append(rule)
        running = events.EventPattern(
            source=["aws.bedrock"], detail_type=[BEDROCK_JOB_EVENT], account=[Aws.ACCOUNT_ID],
            detail={"jobStatus": [BEDROCK_RUNNING], "jobName": [restart_names(spec.prefix) for spec in specs]})
        self._clones(events.Rule(self, "BedrockCloneRule", event_pattern=running,
                                 description="Medic's Bedrock restarts running: their incident lines"))

    def _clones(self, rule: events.Rule) -> None:
        """A rule of Medic's restarts running, to the same function (its dead-letter queue): the handler writes the
        restart's incident line with its resume (flows/jobs/managed.clone_running); it calls nothing."""
        self.handler.route(rule)
        self.rules.append(rule)
