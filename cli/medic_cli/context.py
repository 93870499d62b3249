"""What every command needs: AWS clients for the chosen region, the stack's outputs, the ledger
table, the mode parameter, the log groups and the Medic config, each resolved once and lazily."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from medic.config import ConfigError, MedicConfig
from medic.ledger.table import Table
from medic_cli.shared import ensure_infra

# Operators wait at a terminal: retry throttling a few times, never hang for long.
CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=20)
DEFAULT_STACK = "Medic"
DEFAULT_CONFIG_FILE = "medic.yaml"
# The functions that carry the deployed config (MEDIC_CONFIG), in the order they are asked.
CONFIG_FUNCTION_OUTPUTS = ("NodeRemediationFunctionName", "TrainingJobRestartsFunctionName",
                           "ManagedJobRestartsFunctionName", "AlarmResponseFunctionName")


class CliError(Exception):
    """A problem the operator can fix (missing stack, table, parameter, bad option); exit status 1."""


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class LoadedConfig:
    config: MedicConfig | None
    source: str  # where it came from, shown to the operator


@dataclass
class Context:
    stack: str = DEFAULT_STACK
    region: str | None = None
    profile: str | None = None
    table_name: str | None = None
    config_path: str | None = None
    log_group_names: list[str] = field(default_factory=list)
    clock: Callable[[], datetime] = now
    session: Any = None
    stack_problem: str = field(default="", init=False)  # why the stack's outputs could not be read
    _clients: dict[str, Any] = field(default_factory=dict, init=False)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            if self.session is None:
                self.session = boto3.Session(profile_name=self.profile, region_name=self.region)
            self._clients[service] = self.session.client(service, config=CLIENT_CONFIG)
        return self._clients[service]

    def now(self) -> datetime:
        return self.clock()

    # --- the stack

    @cached_property
    def outputs(self) -> dict[str, str]:
        """The stack's outputs (empty when the stack cannot be read; see ``stack_problem``)."""
        try:
            stacks = self.client("cloudformation").describe_stacks(StackName=self.stack)["Stacks"]
        except ClientError as error:
            self.stack_problem = f"stack {self.stack!r}: {error.response.get('Error', {}).get('Message', error)}"
            return {}
        return {o["OutputKey"]: o["OutputValue"] for o in (stacks[0].get("Outputs") or []) if "OutputValue" in o}

    @cached_property
    def table(self) -> str:
        name = self.table_name or self.outputs.get("LedgerTableName")
        if not name:
            problem = self.stack_problem or f"stack {self.stack!r} has no LedgerTableName output"
            raise CliError(f"cannot find the ledger table: {problem}. "
                           "Pass --table NAME (or --stack/--region for another stack).")
        return name

    def ledger(self, mode: str = "act") -> Table:
        """The ledger table for its stores: the real items, or (mode dry_run) the dry run's own copy."""
        return Table(self.table, self.client("dynamodb")).for_mode(mode)

    @cached_property
    def mode_parameter(self) -> str:
        return self.outputs.get("ModeParameterName") or f"/medic/{self.stack}/mode"

    @cached_property
    def log_groups(self) -> list[str]:
        if self.log_group_names:
            return list(self.log_group_names)
        groups = [value for key, value in sorted(self.outputs.items()) if key.endswith("LogGroup")]
        if not groups:
            problem = self.stack_problem or f"stack {self.stack!r} has no *LogGroup outputs"
            raise CliError(f"cannot find Medic's log groups: {problem}. "
                           "Pass --log-group NAME (repeatable), or --from-file FILE.")
        return groups

    # --- the config (guardrails, clusters, failure rules)

    @cached_property
    def loaded_config(self) -> LoadedConfig:
        """--config, else what the deployed functions run with, else ./medic.yaml, else none."""
        if self.config_path:
            return LoadedConfig(load_config_file(Path(self.config_path)), self.config_path)
        deployed = self._deployed_config()
        if deployed is not None:
            return deployed
        if Path(DEFAULT_CONFIG_FILE).is_file():
            return LoadedConfig(load_config_file(Path(DEFAULT_CONFIG_FILE)), f"./{DEFAULT_CONFIG_FILE}")
        return LoadedConfig(None, "none (pass --config medic.yaml)")

    @property
    def config(self) -> MedicConfig | None:
        return self.loaded_config.config

    def _deployed_config(self) -> LoadedConfig | None:
        for output in CONFIG_FUNCTION_OUTPUTS:
            function = self.outputs.get(output)
            if not function:
                continue
            try:
                configuration = self.client("lambda").get_function_configuration(FunctionName=function)
            except (ClientError, BotoCoreError):
                continue  # no lambda:GetFunctionConfiguration: fall back to the local file
            value = (configuration.get("Environment") or {}).get("Variables", {}).get("MEDIC_CONFIG")
            if value:
                try:
                    return LoadedConfig(MedicConfig.from_env(value), f"deployed (function {function})")
                except ValueError:
                    continue
        return None

    # --- who is asking

    def caller_arn(self) -> str:
        try:
            return self.client("sts").get_caller_identity()["Arn"]
        except (ClientError, BotoCoreError) as error:
            raise CliError(f"cannot tell who you are (sts:GetCallerIdentity: {error}); "
                           "nothing was changed") from None


def load_config_file(path: Path) -> MedicConfig:
    """A medic.yaml read and refused exactly as synth reads it (infra/config.py: duplicate keys, no notify, ...)."""
    ensure_infra()
    from infra.config import load_config

    try:
        return load_config(path)
    except ConfigError as error:
        raise CliError(str(error)) from None
