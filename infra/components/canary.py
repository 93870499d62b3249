from __future__ import annotations

from aws_cdk import Aws, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.components.function import MedicFunction
from infra.components.shared import Shared
from medic.config import CANARY_DETAIL_TYPE, CANARY_SOURCE


class Canary(Construct):
    """Medic's canary (functions/medic/flows/canary/pipeline.py): the reconciler puts one event per run on the default
    bus; this rule takes its own stack's canaries to the node remediation function, on the path HyperPod's node events
    take (the rule's target has the function's dead-letter queue and retries, as every target: MedicFunction.route).
    The alarm on how long ago the last one arrived is Operations' CanaryLate."""

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared, sender: MedicFunction,
                 receiver: MedicFunction) -> None:
        super().__init__(scope, construct_id)
        # PutEvents on the default bus, for the canary's source and detail-type only (EventBridge's condition keys
        # events:source and events:detail-type: EventBridge user guide, "Using IAM policy conditions in Amazon
        # EventBridge"): the reconciler can put no event any other rule takes.
        sender.role.add_to_policy(iam.PolicyStatement(
            actions=["events:PutEvents"],
            resources=[f"arn:{Aws.PARTITION}:events:{Aws.REGION}:{Aws.ACCOUNT_ID}:event-bus/default"],
            conditions={"StringEquals": {"events:source": CANARY_SOURCE, "events:detail-type": CANARY_DETAIL_TYPE}}))
        self.rule = events.Rule(
            self, "Rule",
            description="Medic's canary: the reconciler's proof that an event still reaches the node remediation "
                        "function",
            event_pattern=events.EventPattern(
                source=[CANARY_SOURCE], detail_type=[CANARY_DETAIL_TYPE], account=[Aws.ACCOUNT_ID],
                detail={"stack": [Stack.of(self).stack_name]}),  # this stack's canaries only (the reconciler's
            # MEDIC_STACK: reconciler.py); the stack name is known at synth, so the pattern's size is too
        )
        receiver.route(self.rule)
