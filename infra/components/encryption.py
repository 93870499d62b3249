from __future__ import annotations

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


def source_arn_pattern(service: str, resource: str) -> str:
    """An ARN pattern of this account and region (the key cannot name the topic, queues or alarms that use it:
    they refer to the key, and CloudFormation refuses the cycle)."""
    return f"arn:{Aws.PARTITION}:{service}:{Aws.REGION}:{Aws.ACCOUNT_ID}:{resource}"


# Who uses the key on Medic's behalf, and the request context that holds each use to this stack's account and
# region (confused-deputy prevention: IAM User Guide, "The confused deputy problem").
# - CloudWatch: Medic's health alarms publish to the encrypted paging topic (SNS Developer Guide, "Enable
#   compatibility between event sources from AWS services and encrypted topics"; alarms cannot use the AWS-managed
#   SNS key). The KMS request carries the alarm as aws:SourceArn and its account as aws:SourceAccount.
# - EventBridge writes undeliverable events into the rule targets' dead-letter queues, SNS undeliverable pages into
#   the subscriptions' queue (each queue's key must let the service use it). For EventBridge delivery to encrypted
#   SNS topics AWS documents that aws:SourceAccount/aws:SourceArn/aws:SourceOrgID are not supported in the key
#   policy (SNS Developer Guide, as quoted by AWS's MDAA grantCloudWatchAlarmsTopicAccess); no source says the
#   queue path differs, and a condition the request lacks would drop every dead letter silently. What every SQS
#   request to KMS carries is the queue's ARN as encryption context (SQS Developer Guide, "Encryption context"):
#   these two may use the key only for this account's and region's queues, which is what stops another
#   account's queue from borrowing the key.
QUEUE_WRITERS = ("events.amazonaws.com", "sns.amazonaws.com")


class MedicKey(Construct):
    """The customer-managed key for the ledger, the paging topic and the dead-letter queues.
    CloudWatch alarms cannot publish to a topic encrypted with the AWS-managed SNS key, and
    EventBridge (rule DLQs) and SNS (undelivered pages) cannot write to a queue under the
    AWS-managed SQS key: each needs this key's policy, for this account's resources only.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self, "Key",
            description="Medic: ledger, paging topic and dead-letter queues",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self._grant("cloudwatch.amazonaws.com", {
            "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
            "ArnLike": {"aws:SourceArn": source_arn_pattern("cloudwatch", "alarm:*")}})
        for service in QUEUE_WRITERS:
            self._grant(service, {"ArnLike": {"kms:EncryptionContext:aws:sqs:arn": source_arn_pattern("sqs", "*")}})

    def _grant(self, service: str, conditions: dict) -> None:
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid=f"Allow{service.split('.')[0].capitalize()}ToUseKey",
            principals=[iam.ServicePrincipal(service)],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],  # in a key policy "*" means this key
            conditions=conditions,
        ))
