from __future__ import annotations

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


def source_arn_pattern(service: str, resource: str) -> str:
    """An ARN of this account and region for ``aws:SourceArn`` (the key cannot name the topic, queues or alarms
    that it encrypts: they refer to the key, and CloudFormation refuses the cycle)."""
    return f"arn:{Aws.PARTITION}:{service}:{Aws.REGION}:{Aws.ACCOUNT_ID}:{resource}"


# Who uses the key on Medic's behalf, for what, and the request context that ties each use to this stack's
# account and region (confused-deputy prevention: IAM User Guide, "The confused deputy problem"; KMS "AWS global
# condition keys"). SQS encrypts each message with the queue's ARN as encryption context (SQS Developer Guide,
# "Encryption context"), so a grant used only to write to queues names the account's queues there too.
SERVICE_GRANTS = {
    # Rule targets' dead-letter queues: EventBridge writes undeliverable events into them, for rules of this
    # account (EventBridge User Guide, "Using dead-letter queues": the DLQ's key must let EventBridge use it).
    "events.amazonaws.com": ("rule/*", True),
    # Medic's health alarms publish to the encrypted paging topic (SNS Developer Guide, "Enable compatibility
    # between event sources from AWS services and encrypted topics"; alarms cannot use the AWS-managed SNS key).
    "cloudwatch.amazonaws.com": ("alarm:*", False),
    # The paging topic's subscriptions keep undeliverable pages in an encrypted dead-letter queue (SNS Developer
    # Guide, "Amazon SNS dead-letter queues": an encrypted DLQ's key must let SNS use it).
    "sns.amazonaws.com": ("*", True),
}


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
        for service, (resource, writes_queues) in SERVICE_GRANTS.items():
            prefix = service.split(".")[0]
            arn_like = {"aws:SourceArn": source_arn_pattern(prefix, resource)}
            if writes_queues:
                arn_like["kms:EncryptionContext:aws:sqs:arn"] = source_arn_pattern("sqs", "*")
            self.key.add_to_resource_policy(iam.PolicyStatement(
                sid=f"Allow{prefix.capitalize()}ToUseKey",
                principals=[iam.ServicePrincipal(service)],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy "*" means this key
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}, "ArnLike": arn_like},
            ))
