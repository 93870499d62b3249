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
