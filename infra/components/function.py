from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.event_patterns import exclude_replays
from medic.config import DEAD_LETTER_RETENTION, EVENTBRIDGE_MAX_EVENT_AGE, LAMBDA_MAX_EVENT_AGE

if TYPE_CHECKING:
    from infra.components.shared import Shared

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "functions"
# Every Medic function: the Powertools layer is resolved for exactly this runtime and architecture.
RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64


# What to do when a dead-letter queue holds messages (its alarm's description says it): for most, the runbook's
# entry (docs/operator-runbook.md), which redrives the events as they are.
REDRIVE_RUNBOOK = "docs/operator-runbook.md 'A dead-letter queue has messages'"


class DeadLetterQueue(Construct):
    """Where events that could not be handled wait for an operator (14 days, encrypted, TLS only)."""

    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey, runbook: str = REDRIVE_RUNBOOK) -> None:
        super().__init__(scope, construct_id)
        self.runbook = runbook
        self.queue = sqs.Queue(
            self, "Queue",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            retention_period=_duration(DEAD_LETTER_RETENTION),
        )
        for rule in ("AwsSolutions::AwsSolutions-SQS3", "Serverless::Serverless-SQSRedrivePolicy"):
            Validations.of(self.queue).acknowledge(Acknowledgment(
                id=rule, reason="This queue is itself a dead-letter queue; its depth alarm pages an operator."))


# Reserved concurrency of each function (Shared.reserved): at most this many of its invocations run at once, and this
# many always can ("Reserved concurrency acts as both a lower and upper bound", Lambda developer guide, "Configuring
# reserved concurrency for a function"). A flood of one kind of event (an HMA storm, a burst of operator requests,
# a compromised agent's writes) then waits in Lambda's queue, retried for up to LAMBDA_MAX_EVENT_AGE ("For
# throttling errors (429) ... Lambda returns the event to the queue and attempts to run the function again for up to
# 6 hours", "How Lambda handles errors and retries with asynchronous invocation"), instead of taking the account's
# concurrency from Medic's other functions (the reconciler, the alarm handler) and the account's other workloads.
# Lambda keeps 100 of the account's concurrency unreserved ("You can reserve up to the Unreserved account
# concurrency value ... minus 100"): these need an account limit of sum + 100 (docs/deploy.md, "Before you deploy";
# medic.yaml `reserved_concurrency: false` reserves none). Each is far above what the function needs.
RESERVED_CONCURRENCY = {
    "node_health": 10,  # one per node event; a storm is decided in seconds, the guardrails suppress the rest
    "cluster_event": 5,
    "training_job": 5,
    "managed_job": 5,  # AWS Batch and Bedrock jobs' failures (one function for the services beside SageMaker)
    "operator_request": 5,  # any principal allowed events:PutEvents can send one
    "alarm": 5,
    "agent_results": 5,  # a stream: one batch per shard at a time anyway
    "reconciler": 2,  # a run every 5 minutes
    "recovery_check": 2,  # a run every 5 minutes
    "mode_change": 2,  # one per change of the mode parameter
}


METRICS_UNSCOPED = ("CloudWatch GetMetricData/ListMetrics support no resource-level permissions; "
                    "Medic reads the probe's and HyperPod's metrics with them, never writes.")

class MedicFunction(Construct):
    """A Medic handler: Python 3.13 on arm64, Powertools v3 and the pinned boto3 as layers, its own
    log group and least-privilege role, async retries twice, then its dead-letter queue; its reserved concurrency
    (RESERVED_CONCURRENCY) when the config reserves any."""

    def __init__(self, scope: Construct, construct_id: str, *, handler: str, description: str,
                 environment: dict[str, str], layers: list[lambda_.ILayerVersion], key: kms.IKey,
                 timeout_seconds: int = 60, memory_size: int = 512, unscoped_reason: str = "",
                 reserved_concurrency: int | None = None) -> None:
        super().__init__(scope, construct_id)
        self.timeout_seconds = timeout_seconds
        self.reserved_concurrency = reserved_concurrency
        self.dead_letters = DeadLetterQueue(self, "DeadLetters", key=key).queue
        self.log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_YEAR,
                                       removal_policy=RemovalPolicy.RETAIN)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description=f"Medic {construct_id}")
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[self.log_group.log_group_arn]))
        self.function = lambda_.Function(
            self, "Function",
            description=description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler,
            code=lambda_.Code.from_asset(str(FUNCTIONS), exclude=["**/__pycache__", "**/*.pyc"]),
            layers=layers,
            role=self.role,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            timeout=Duration.seconds(timeout_seconds),
            memory_size=memory_size,
            reserved_concurrent_executions=reserved_concurrency,
            tracing=lambda_.Tracing.ACTIVE,
            environment={"POWERTOOLS_SERVICE_NAME": "medic", "POWERTOOLS_METRICS_NAMESPACE": "Medic",
                         **environment},
            dead_letter_queue=self.dead_letters,
            retry_attempts=2,
            max_event_age=_duration(LAMBDA_MAX_EVENT_AGE),  # the handlers' age bound counts it (medic.config)
        )
        # Exact actions (no ReEncrypt*, no GenerateDataKey*): the ledger, the topic and the DLQ use this key.
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
            resources=[key.key_arn]))
        Validations.of(self.role).acknowledge(Acknowledgment(
            id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
            reason=("X-Ray PutTraceSegments/PutTelemetryRecords (active tracing) support no resource-level "
                    f"permissions. {unscoped_reason} Every other statement names its resources.")))
        self._ack_runtime()

    @classmethod
    def of_shared(cls, scope: Construct, construct_id: str, shared: Shared, *, handler: str, description: str,
                  concurrency: str) -> MedicFunction:
        """A handler with what every event handler shares: the config's environment, the layers, the key, and its
        entry of RESERVED_CONCURRENCY."""
        return cls(scope, construct_id, handler=handler, description=description, environment=shared.environment(),
                   layers=list(shared.layers), key=shared.key, reserved_concurrency=shared.reserved(concurrency))

    def route(self, rule: events.Rule, *, scheduled: bool = False) -> None:
        """Deliver the rule's events here, live events only (a replay from the archive never reaches a handler:
        exclude_replays). A delivery EventBridge cannot make (the invoke itself refused: throttled, no
        permission) is retried for a day (EventBridge's maximum: EventBridge user guide, "Event retry policy and
        using dead-letter queues", 24 hours and 185 attempts by default), then kept in the dead-letter queue; a
        scheduled run is not worth delivering late: the next one comes soon. Once Lambda accepted the event,
        retrying a failed handler is Lambda's (retry_attempts above: Lambda developer guide, "Asynchronous
        invocation"). Both windows come from medic.config, which derives from them the oldest event a handler
        accepts (EVENT_AGE_LIMIT): change them there, and the bound follows."""
        retries, age = (2, Duration.minutes(10)) if scheduled else (185, _duration(EVENTBRIDGE_MAX_EVENT_AGE))
        if not scheduled:
            exclude_replays(rule)
        rule.add_target(targets.LambdaFunction(self.function, dead_letter_queue=self.dead_letters,
                                               retry_attempts=retries, max_event_age=age))

    def _ack_runtime(self) -> None:
        for rule in ("AwsSolutions::AwsSolutions-L1", "Serverless::Serverless-LambdaLatestVersion"):
            Validations.of(self.function).acknowledge(Acknowledgment(
                id=rule, reason="Pinned to Python 3.13: the Powertools v3 layer and the tested runtime are python313."))
        Validations.of(self.function).acknowledge(Acknowledgment(
            id="Serverless::Serverless-LambdaAsyncFailureDestination",
            reason="Failed async invocations go to the function's dead-letter queue (the event itself, redrivable "
                   "as is, next to the rule's undeliverable events); a destination would deliver them twice."))


def _duration(delta: timedelta) -> Duration:
    return Duration.seconds(int(delta.total_seconds()))
