"""Load and validate medic.yaml at synth: a bad file stops synth with an error naming the key; a config that
synthesizes but would not do what its author means gets warnings (``config_warnings``), shown at synth (CDK
annotations, infra/stack.py) and by ``medic validate``. One code path for both: ``medic validate`` runs these very
functions, without a synth."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from medic.config import ConfigError, MedicConfig, cluster_id_notices, parse_config

# Lambda allows 4 KB for all of a function's environment variables together.
MAX_ENV_CONFIG_BYTES = 3000
# PyTorch's NCCL watchdog aborts a collective (all-reduce, ...) that has not finished within the process group's
# timeout, 10 minutes unless the training script says otherwise: `kProcessGroupNCCLDefaultTimeout =
# std::chrono::milliseconds(10 * 60 * 1000)` (pytorch/pytorch, torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp),
# `torch.distributed.init_process_group(timeout=None)`: "Default value is 10 minutes for NCCL and 30 minutes for
# other backends" (torch/distributed/distributed_c10d.py; `default_pg_nccl_timeout`, torch/distributed/constants.py).
# With TORCH_NCCL_ASYNC_ERROR_HANDLING at its default the watchdog then tears the process down: a job hung in a
# collective ends as a crash at 10 minutes, before a stall alarm of 10 minutes or more sees it stalled.
NCCL_WATCHDOG_DEFAULT_MINUTES = 10
# A job-name prefix (training_jobs, batch_jobs, bedrock_jobs) with fewer letters and digits than this is "short":
# Medic restarts (and may pass a role to) every failed job of the account and region whose name starts with it (a
# Batch job: in its entry's queues), and SageMaker, Batch and Bedrock job names are free text
# any team picks (ft-, llm-, bert: other teams' jobs too). Medic's own choice: 6 is a word and a separator
# (`mistral-`, `llama3-`), 2-5 are the team-wide abbreviations seen in job naming schemes.
MIN_PREFIX_CHARS = 6
_ROLE_ACCOUNT = re.compile(r"^arn:aws[a-z-]*:iam::([0-9]{12}):role/")

__all__ = ["ConfigError", "MedicConfig", "config_warnings", "load_config", "read_yaml"]


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a mapping naming a key twice is an error: PyYAML keeps the last value and
    drops the first silently (a second `notify:` or `guardrails:` would undo the first without a word)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} at line {line} (first at line {seen[key]}): YAML would keep "
                                "only the last one; remove or merge one of them", key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """The file's mapping of keys, or ConfigError naming the file and what is wrong (duplicate keys included)."""
    path = Path(path)
    try:
        with path.open() as stream:  # PyYAML's marks then name the file: in "medic.yaml", line 21, column 1
            data = yaml.load(stream, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader: plain data only)
    except OSError as error:
        raise ConfigError(f"cannot read Medic config {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"Medic config {path} is not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"Medic config {path} must be a mapping of keys (mode, clusters, ...), "
                          f"got {type(data).__name__}")
    return data


def load_config(path: str | Path) -> MedicConfig:
    """medic.yaml → the typed config, or ConfigError naming each mistake synth refuses."""
    data = read_yaml(path)
    config = parse_config(data, str(path))
    notify = config.notify
    if not notify.emails and not notify.https and not notify.subscribed_elsewhere:
        raise ConfigError(f"invalid Medic config {path}:\n  notify: nobody would get Medic's pages (no emails, no "
                          "https): every page would go to a topic with no subscriber. Set notify.emails or "
                          "notify.https, or notify.subscribed_elsewhere: true when you subscribe the topic (stack "
                          "output PagingTopicArn) yourself")
    for notice in cluster_id_notices(data):  # an ARN given for an id: say which id was taken
        print(f"note: Medic config {path}: {notice}", file=sys.stderr)
    size = len(config.to_env().encode())
    if size > MAX_ENV_CONFIG_BYTES:
        raise ConfigError(f"Medic config {path} is too large for the functions' environment "
                          f"({size} bytes as JSON, at most {MAX_ENV_CONFIG_BYTES}): split it across stacks")
    return config


def config_warnings(config: MedicConfig, account: str | None = None) -> list[str]:
    """What a config that synthesizes may not do as meant, one sentence each naming the key. ``account``: the
    deploying account when known (synth with credentials, ``medic validate --account`` or ``--live``)."""
    warnings = []
    for index, job in enumerate(config.jobs):
        if job.stall_minutes >= NCCL_WATCHDOG_DEFAULT_MINUTES:
            warnings.append(
                f"jobs.{index}.stall_minutes: {job.stall_minutes} ({job.name}) is at or above PyTorch's NCCL watchdog "
                f"default of {NCCL_WATCHDOG_DEFAULT_MINUTES} minutes (ProcessGroupNCCL.hpp "
                "kProcessGroupNCCLDefaultTimeout): a job hung in a collective is aborted by the watchdog before Medic "
                f"sees it stalled, and Medic then requeues a job that has crashed. Set stall_minutes below "
                f"{NCCL_WATCHDOG_DEFAULT_MINUTES}, or give init_process_group(timeout=...) more than stall_minutes "
                "in the training script")
    # Each managed service's entries, by their key: what a short prefix reaches, and the roles Medic may pass.
    services = (("training_jobs", "training job of the account", config.training_jobs),
                ("batch_jobs", "AWS Batch job in its job_queues", config.batch_jobs),
                ("bedrock_jobs", "Bedrock model customization job of the account", config.bedrock_jobs))
    for key, reached, specs in services:
        for index, spec in enumerate(specs):
            warnings += _short_prefix(f"{key}.{index}.prefix", spec.prefix, reached)
            warnings += _foreign_roles(f"{key}.{index}.role_arns", getattr(spec, "role_arns", ()), account)
    return warnings


def _short_prefix(key: str, prefix: str, reached: str) -> list[str]:
    """A job-name prefix too short to be one team's (MIN_PREFIX_CHARS): Medic restarts other teams' jobs too."""
    significant = sum(char.isalnum() for char in prefix)
    if significant >= MIN_PREFIX_CHARS:
        return []
    return [f"{key}: {prefix!r} has {significant} letters and digits (fewer than {MIN_PREFIX_CHARS}): Medic restarts "
            f"any failed {reached} whose name starts with it, other teams' too ({prefix}anything); give the jobs' "
            f"own stem (e.g. {prefix}<model>-)"]


def _foreign_roles(key: str, role_arns: Iterable[str], account: str | None) -> list[str]:
    """Roles of another account than the deploying one: a job here does not run as them, and Medic would be
    allowed to pass another account's role."""
    warnings = []
    for arn in role_arns:
        found = _ROLE_ACCOUNT.match(arn)
        if account and found and found.group(1) != account:
            warnings.append(f"{key}: {arn} is a role of account {found.group(1)}, not the deploying account "
                            f"{account}: a job here does not run as it, and Medic would be allowed to pass another "
                            "account's role")
    return warnings
