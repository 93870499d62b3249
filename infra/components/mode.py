from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ssm as ssm
from constructs import Construct


class ModeParameter(Construct):
    """``/medic/<stack>/mode``: act | dry_run | paused, set by operators without a deploy."""

    def __init__(self, scope: Construct, construct_id: str, *, initial_mode: str) -> None:
        super().__init__(scope, construct_id)
        self.parameter = ssm.StringParameter(
            self, "Parameter",
            parameter_name=f"/medic/{Stack.of(self).stack_name}/mode",
            string_value=initial_mode,
            description="Medic run-time mode: act | dry_run | paused (overrides the deployed mode)",
            allowed_pattern="^(act|dry_run|paused)$",
        )
