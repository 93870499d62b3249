"""Load and validate medic.yaml at synth: a bad file stops synth with an error naming the key."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from medic.config import ConfigError, MedicConfig, cluster_id_notices, parse_config

# Lambda allows 4 KB for all of a function's environment variables together.
MAX_ENV_CONFIG_BYTES = 3000

__all__ = ["ConfigError", "MedicConfig", "load_config"]


def load_config(path: str | Path) -> MedicConfig:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"cannot read Medic config {path}: {error.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"Medic config {path} is not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"Medic config {path} must be a mapping of keys (mode, clusters, ...), "
                          f"got {type(data).__name__}")
    config = parse_config(data, str(path))
    for notice in cluster_id_notices(data):  # an ARN given for an id: say which id was taken
        print(f"note: Medic config {path}: {notice}", file=sys.stderr)
    size = len(config.to_env().encode())
    if size > MAX_ENV_CONFIG_BYTES:
        raise ConfigError(f"Medic config {path} is too large for the functions' environment "
                          f"({size} bytes as JSON, at most {MAX_ENV_CONFIG_BYTES}): split it across stacks")
    return config
