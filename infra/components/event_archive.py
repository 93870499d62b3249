"""Keep every event Medic's rules matched, and a way to read them back, for ``medic backtest``.

An EventBridge archive on the default bus, kept ``event_archive_days``, whose pattern takes every kind of event
a Medic rule takes, coarsely: by source and detail-type, not by cluster, job or prefix (``ARCHIVED``). Its size
does not grow with the config, so it stays within EventBridge's "Event pattern size" quota whatever the stack
manages (the union of the rules' own patterns did not: 4 clusters, 8 watched jobs and 3 prefixes made it longer
than 2,048 characters, and the deploy failed at the archive); and a backtest of a candidate config that adds a
cluster or a prefix finds that cluster's or prefix's events in it. AWS offers no API that reads archived events:
StartReplay is the only way out, and it sends them back to the archive's own bus ("Cross event bus replay is not
permitted"), to the rules its ``Destination.FilterArns`` names. So the stack also has a read-back rule
that takes only replays Medic's backtest starts (``replay-name`` prefix) into an encrypted queue that
``medic backtest`` drains; naming only that rule in ``FilterArns`` keeps the replay away from the live
handlers. Replayed events are never archived again (CreateArchive: "all events are sent to the archive
except replayed events").
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Aws, CfnOutput, Duration, Stack, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.agent_channel import REQUEUE_DETAIL_TYPE, REQUEUE_SOURCE
from infra.components.cluster_events import CLUSTER_EVENT
from infra.components.function import DeadLetterQueue
from infra.components.managed_job_restarts import (
    BATCH_JOB_EVENT,
    BATCH_RUNNING,
    BEDROCK_JOB_EVENT,
    BEDROCK_RUNNING,
)
from infra.components.node_remediation import NODE_HEALTH_EVENT
from infra.components.shared import Shared
from infra.components.training_alarms import ALARM_EVENT
from infra.components.training_job_restarts import TRAINING_JOB_EVENT
from medic.config import ALARM_PREFIX

# StartReplay's ReplayName: [\.\-_A-Za-z0-9]+, at most 64 characters; medic backtest names its replays so.
REPLAY_PREFIX = "medic-backtest-"
READBACK_RETENTION = Duration.days(1)  # a backtest drains its replay within minutes; leftovers go after a day
# What the archive keeps: each kind of event a Medic rule takes, by source and detail-type, with only the filters
# whose size does not depend on the config (a training job's Failed state, Medic's alarm name prefix). Every event
# rule of the stack takes a subset of one branch (tests/infra/test_event_patterns.py checks each rule).
ARCHIVED = [
    {"source": ["aws.sagemaker"], "detail-type": [NODE_HEALTH_EVENT, CLUSTER_EVENT]},
    {"source": ["aws.sagemaker"], "detail-type": [TRAINING_JOB_EVENT], "detail": {"TrainingJobStatus": ["Failed"]}},
    {"source": ["aws.batch"], "detail-type": [BATCH_JOB_EVENT], "detail": {"status": ["FAILED", BATCH_RUNNING]}},
    {"source": ["aws.bedrock"], "detail-type": [BEDROCK_JOB_EVENT],
     "detail": {"jobStatus": ["Failed", BEDROCK_RUNNING]}},
    {"source": ["aws.cloudwatch"], "detail-type": [ALARM_EVENT], "detail": {"alarmName": [{"prefix": ALARM_PREFIX}]}},
    {"source": [REQUEUE_SOURCE], "detail-type": [REQUEUE_DETAIL_TYPE]},
]


class EventArchive(Construct):
    """The archive of what Medic received, and the read-back rule and queue for its replays."""

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.readback_queue = sqs.Queue(
            self, "ReadbackQueue", encryption=sqs.QueueEncryption.KMS, encryption_master_key=shared.key,
            enforce_ssl=True, retention_period=READBACK_RETENTION)
        for rule in ("AwsSolutions::AwsSolutions-SQS3", "Serverless::Serverless-SQSRedrivePolicy"):
            Validations.of(self.readback_queue).acknowledge(Acknowledgment(
                id=rule, reason="A read-back buffer medic backtest drains right after its replay: copies of archived "
                                "events (the archive keeps the originals) that expire after a day; a redrive would "
                                "only move copies a backtest skipped."))
        # L1: EventPattern has no replay-name member (the field EventBridge adds to every replayed event), and
        # CDK's SqsQueue target would also grant events.amazonaws.com the key without a condition; the key policy
        # already lets EventBridge use it for this account's queues only (encryption.py).
        dead_letters = DeadLetterQueue(self, "TargetDeadLetters", key=shared.key).queue
        self.readback_rule = events.CfnRule(
            self, "ReadbackRule",
            description="Replays that `medic backtest` starts from Medic's event archive, into its read-back queue",
            event_pattern={"account": [Aws.ACCOUNT_ID], "replay-name": [{"prefix": REPLAY_PREFIX}]},
            state="ENABLED",
            targets=[events.CfnRule.TargetProperty(
                id="ReadbackQueue", arn=self.readback_queue.queue_arn,
                dead_letter_config=events.CfnRule.DeadLetterConfigProperty(arn=dead_letters.queue_arn),
                retry_policy=events.CfnRule.RetryPolicyProperty(maximum_retry_attempts=3))])
        for queue in (self.readback_queue, dead_letters):
            queue.add_to_resource_policy(iam.PolicyStatement(
                principals=[iam.ServicePrincipal("events.amazonaws.com")], actions=["sqs:SendMessage"],
                resources=[queue.queue_arn], conditions={"ArnEquals": {"aws:SourceArn": self.readback_rule.attr_arn}}))

        self.archive = events.CfnArchive(
            self, "Archive",
            source_arn=f"arn:{Aws.PARTITION}:events:{Aws.REGION}:{Aws.ACCOUNT_ID}:event-bus/default",
            description="Every kind of event Medic's rules take, for medic backtest",
            event_pattern={"account": [Aws.ACCOUNT_ID], "$or": ARCHIVED},
            retention_days=shared.config.event_archive_days)
        CfnOutput(stack, "EventArchiveArn", value=self.archive.attr_arn)
        CfnOutput(stack, "BacktestRuleArn", value=self.readback_rule.attr_arn)
        CfnOutput(stack, "BacktestQueueUrl", value=self.readback_queue.queue_url)

