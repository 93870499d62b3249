"""SSM Parameter Store: the run-time mode switch (act | dry_run | paused), read with a short cache."""

from __future__ import annotations

import time
from typing import Any

from medic.adapters.aws import client as make_client
from medic.core.mode import Mode
from medic.obs import logger

VALID_MODES = tuple(mode.value for mode in Mode)
CACHE_SECONDS = 30


class ModeSwitch:
    def __init__(self, parameter: str, default: str, client: Any = None) -> None:
        self.parameter = parameter
        self.default = default
        self._client = client
        self._cached: tuple[float, Mode] | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("ssm")
        return self._client

    def current(self) -> Mode:
        if self._cached and time.monotonic() - self._cached[0] < CACHE_SECONDS:
            return self._cached[1]
        try:
            value = self.client.get_parameter(Name=self.parameter)["Parameter"]["Value"].strip()
        except Exception:  # noqa: BLE001 - any failure to read falls back, never blocks remediation
            fallback = self._cached[1] if self._cached else Mode.of(self.default)
            logger.warning("mode parameter unreadable; using fallback", extra={
                "parameter": self.parameter, "fallback_mode": fallback})
            return fallback
        if value not in VALID_MODES:
            # An operator typed something: the safe reading of an unclear switch is "do not act".
            logger.error("mode parameter has an invalid value; treating as paused", extra={
                "parameter": self.parameter, "value": value[:40], "valid": VALID_MODES})
            value = Mode.PAUSED
        mode = Mode(value)
        self._cached = (time.monotonic(), mode)
        return mode
