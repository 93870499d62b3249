from __future__ import annotations

import shutil
from importlib import metadata
from pathlib import Path

from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.components.function import ARCHITECTURE, RUNTIME

ROOT = Path(__file__).resolve().parents[2]
# What boto3 needs beyond the standard library, all pure Python: copied, not built, so no Docker.
PACKAGES = ("boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "urllib3", "six")


def stage_boto3(destination: Path | None = None) -> Path:
    """Copy the installed (pinned) boto3 and its dependencies into a layer folder, once per version."""
    version = metadata.version("botocore")
    destination = destination or ROOT / "build" / "layers" / f"boto3-{version}"
    if (destination / ".complete").is_file():
        return destination
    staging = destination.with_name(destination.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    python = staging / "python"
    python.mkdir(parents=True)
    for package in PACKAGES:
        for file in metadata.distribution(package).files or []:
            if ".." in file.parts or "__pycache__" in file.parts or file.parts[0].endswith(".dist-info"):
                continue  # scripts outside site-packages, bytecode of this Python, install records
            target = python / Path(*file.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(file.locate()), target)
    (staging / ".complete").write_text(version)
    shutil.rmtree(destination, ignore_errors=True)
    staging.rename(destination)
    return destination


class Boto3Layer(Construct):
    """A layer with the pinned boto3: the runtime's own is too old for BatchReplaceClusterNodes."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        staged = stage_boto3()
        self.layer = lambda_.LayerVersion(
            self, "Layer",
            code=lambda_.Code.from_asset(str(staged), exclude=[".complete"]),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description=f"boto3/botocore {metadata.version('botocore')} for Medic",
        )
