"""Shared boto3 client construction: standard retry mode, short timeouts, created lazily."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

# Standard mode retries throttling and 5xx with backoff; the connect/read timeouts keep a
# handler far inside its 60 s Lambda timeout even when a service hangs.
CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=5, read_timeout=10)


def client(service: str) -> Any:
    return boto3.client(service, config=CLIENT_CONFIG)


def error_code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code") or type(error).__name__)
