"""Shared boto3 client construction: standard retry mode, short timeouts, created lazily."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

# Standard mode retries throttling and 5xx with backoff. A call that hangs costs at most
# 3 x (3 s + 6 s) plus backoff, so a handler making a few calls stays inside its 60 s timeout;
# AWS answers these APIs in well under a second.
CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=3, read_timeout=6)


def client(service: str) -> Any:
    return boto3.client(service, config=CLIENT_CONFIG)


def error_code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code") or type(error).__name__)


def fit_to_shape(value: Any, shape: Any) -> Any:
    """The value filtered, recursively, to the members the botocore shape has (what an API accepts back)."""
    if shape.type_name == "structure":
        return {name: fit_to_shape(value[name], member) for name, member in shape.members.items()
                if isinstance(value, dict) and name in value and value[name] is not None}
    if shape.type_name == "list" and isinstance(value, list):
        return [fit_to_shape(item, shape.member) for item in value]
    if shape.type_name == "map" and isinstance(value, dict):
        return {key: fit_to_shape(item, shape.value) for key, item in value.items()}
    return value


def prune_empty(value: Any) -> Any:
    """Empty dicts and lists removed, recursively (a container emptied by pruning goes too)."""
    if isinstance(value, dict):
        pruned = {key: prune_empty(item) for key, item in value.items()}
        return {key: item for key, item in pruned.items() if item != {} and item != []}
    if isinstance(value, list):
        return [item for item in (prune_empty(item) for item in value) if item != {} and item != []]
    return value
