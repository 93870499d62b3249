#!/usr/bin/env python3
"""CDK entry point: load and validate the Medic config (``-c config=PATH``, default medic.yaml),
then synthesize one MedicStack for the account and region of the deploying credentials."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "functions"))  # the shared config model lives with the handlers

import aws_cdk as cdk  # noqa: E402

from infra.config import ConfigError, load_config  # noqa: E402
from infra.stack import MedicStack  # noqa: E402


def main() -> None:
    app = cdk.App()
    config_path = app.node.try_get_context("config") or "medic.yaml"
    stack_name = app.node.try_get_context("stack_name") or "Medic"
    env = cdk.Environment(account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION"))
    try:
        config = load_config(ROOT / config_path if not Path(config_path).is_absolute() else config_path)
        MedicStack(app, stack_name, config=config, env=env)  # a config AWS would refuse (a pattern quota) stops here
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    app.synth()


if __name__ == "__main__":
    main()
