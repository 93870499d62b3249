from __future__ import annotations

from aws_cdk import Aws, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.components.function import MedicFunction
from infra.components.shared import Shared

# SSM sends this for Create, Update, Delete and LabelParameterVersion of a parameter (AWS Systems Manager User
# Guide, "Setting up notifications or trigger actions based on Parameter Store events", and its EventBridge event
# examples: source aws.ssm, detail name, type, operation; no value, no version).
PARAMETER_STORE_CHANGE = "Parameter Store Change"


def mode_parameter_name(stack: Stack) -> str:
    """The parameter's name, known at synth (its Ref is a token, and the watch's rule also needs it without the
    hierarchy's leading slash)."""
    return f"/medic/{stack.stack_name}/mode"


class ModeParameter(Construct):
    """``/medic/<stack>/mode``: act | dry_run | paused, set by operators without a deploy."""

    def __init__(self, scope: Construct, construct_id: str, *, initial_mode: str) -> None:
        super().__init__(scope, construct_id)
        self.parameter = ssm.StringParameter(
            self, "Parameter",
            parameter_name=mode_parameter_name(Stack.of(self)),
            string_value=initial_mode,
            description="Medic run-time mode: act | dry_run | paused (overrides the deployed mode)",
            allowed_pattern="^(act|dry_run|paused)$",
        )


class ModeWatch(Construct):
    """Every change of the mode parameter pages once, whoever made it (flows/mode): SSM's "Parameter Store Change"
    events of exactly this parameter → a function that reads the parameter's history (the value and who changed
    it) and pages the topic directly, in every mode."""

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared) -> None:
        super().__init__(scope, construct_id)
        name = mode_parameter_name(Stack.of(self))
        self.handler = MedicFunction(
            self, "Handler", handler="medic.handlers.mode_change.handler",
            description="Medic: page every change of the run-time mode parameter, whoever made it",
            environment=shared.environment(), layers=list(shared.layers), key=shared.key,
            reserved_concurrency=shared.reserved("mode_change"))
        shared.grant_ledger_paging_mode(self.handler.role)
        # The ARN where the stack is deployed, as the GetParameter grant's (Shared.mode_parameter_arn: the parameter's
        # own parameter_arn writes the synthesizing account and region)
        self.handler.role.add_to_principal_policy(iam.PolicyStatement(
            actions=["ssm:GetParameterHistory"], resources=[shared.mode_parameter_arn]))
        self.rule = events.Rule(
            self, "Rule",
            description="Changes of Medic's run-time mode parameter (SSM Parameter Store Change)",
            event_pattern=events.EventPattern(
                source=["aws.ssm"], detail_type=[PARAMETER_STORE_CHANGE], account=[Aws.ACCOUNT_ID],
                # AWS's examples name a parameter without its hierarchy's leading slash ("foo"); either spelling
                detail={"name": sorted({name, name.lstrip("/")})}),
        )
        self.handler.route(self.rule)
