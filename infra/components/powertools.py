from __future__ import annotations

import re
from pathlib import Path

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.components.function import ARCHITECTURE, RUNTIME

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "requirements.txt"
PACKAGE = "aws-lambda-powertools"
_PIN = re.compile(rf"^{re.escape(PACKAGE)}==(?P<version>\d+\.\d+\.\d+)\s*(#.*)?$")


def pinned_version(requirements: Path = REQUIREMENTS) -> str:
    """The Powertools version requirements.txt pins (``aws-lambda-powertools==X.Y.Z``): the one the tests run."""
    pins = [match["version"] for line in requirements.read_text().splitlines()
            if (match := _PIN.match(line.strip()))]
    if len(pins) != 1:
        raise ValueError(f"{requirements} must pin {PACKAGE} exactly once as {PACKAGE}==X.Y.Z "
                         f"(found {len(pins)} such lines): the Lambda layer is resolved for that version")
    return pins[0]


def layer_parameter_name(version: str, architecture: lambda_.Architecture = ARCHITECTURE,
                         runtime: lambda_.Runtime = RUNTIME) -> str:
    """Powertools' public SSM parameter holding the layer ARN of one release for one architecture and runtime:
    ``/aws/service/powertools/python/<arch>/<python>/<version>``, e.g. ``.../arm64/python3.13/3.37.0`` (Powertools
    docs, "Using SSM Parameter Store"; its update_ssm workflow writes arm64|x86_64 and python3.10..3.14)."""
    return f"/aws/service/powertools/python/{architecture.name}/{runtime.name}/{version}"


class PowertoolsLayer(Construct):
    """The public Powertools v3 layer of exactly the pinned release, resolved by CloudFormation at deploy time from
    Powertools' SSM parameter in the deploying region (the layer's account and version number differ by partition
    and region; nothing is looked up at synth). The parameter exists in the commercial regions Powertools publishes
    to; elsewhere (China, GovCloud) the deploy stops with a parameter-not-found error naming it."""

    def __init__(self, scope: Construct, construct_id: str, *, requirements: Path = REQUIREMENTS) -> None:
        super().__init__(scope, construct_id)
        self.version = pinned_version(requirements)
        self.parameter_name = layer_parameter_name(self.version)
        # An AWS::SSM::Parameter::Value<String> stack parameter: CloudFormation reads it when it deploys.
        arn = ssm.StringParameter.value_for_string_parameter(self, self.parameter_name)
        self.layer = lambda_.LayerVersion.from_layer_version_arn(self, "Layer", arn)
