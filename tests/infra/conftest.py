"""One synthesized template per session (synth takes seconds): the stack as `cdk synth` builds it,
with cdk-nag's AwsSolutions checks, which fail the synth on any unacknowledged finding."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from infra.config import load_config
from infra.stack import MedicStack
from sim.synth import _cdk_context

ROOT = Path(__file__).resolve().parents[2]


def synthesize(config_path: Path, outdir: Path) -> tuple[Template, Path]:
    app = cdk.App(outdir=str(outdir), context=_cdk_context())
    stack = MedicStack(app, "Medic", config=load_config(config_path),
                       env=cdk.Environment(account="123456789012", region="us-west-2"))
    app.synth()
    return Template.from_stack(stack), outdir / "Medic.template.json"


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory) -> tuple[Template, Path]:
    return synthesize(ROOT / "medic.yaml", tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def example_raw(tmp_path_factory) -> dict:
    """The template for medic.example.yaml (every key set: every optional resource), synthesized once."""
    _, path = synthesize(ROOT / "medic.example.yaml", tmp_path_factory.mktemp("cdk.out.example"))
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def template(synthesized) -> Template:
    return synthesized[0]


@pytest.fixture(scope="session")
def raw(synthesized) -> dict:
    return json.loads(synthesized[1].read_text())


def resources(raw: dict, resource_type: str) -> dict[str, dict]:
    return {lid: res for lid, res in raw["Resources"].items() if res["Type"] == resource_type}


def one(raw: dict, resource_type: str, logical_prefix: str) -> dict:
    matching = [res for lid, res in resources(raw, resource_type).items() if lid.startswith(logical_prefix)]
    assert len(matching) == 1, f"expected one {resource_type} named {logical_prefix}*, got {len(matching)}"
    return matching[0]
