from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


class MedicKey(Construct):
    """The customer-managed key for the ledger, the paging topic and the dead-letter queues.

    CloudWatch alarms cannot publish to a topic encrypted with the AWS-managed SNS key, and
    EventBridge (rule DLQs) and SNS (undelivered pages) cannot write to a queue under the
    AWS-managed SQS key: each needs this key's policy.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self, "Key",
            description="Medic: ledger, paging topic and dead-letter queues",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        for service in ("events.amazonaws.com", "cloudwatch.amazonaws.com", "sns.amazonaws.com"):
            self.key.add_to_resource_policy(iam.PolicyStatement(
                sid=f"Allow{service.split('.')[0].capitalize()}ToUseKey",
                principals=[iam.ServicePrincipal(service)],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy "*" means this key
            ))
