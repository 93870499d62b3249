"""SSM Parameter Store: the run-time mode switch (act | dry_run | paused), read with a short cache.

A read that fails never silently falls back to the deployed mode: it keeps the last value known (this container's
last read, or the newest any function kept in the ledger, whichever is the newer parameter version), so an
operator's `paused` holds through an SSM outage or a throttled cold start (fail closed). With nothing known at all
(nothing was ever read) the deployed mode is all there is; when the memory itself cannot be read, `paused`. Every
failed read counts as `Medic/ModeReadFailures`, which pages (infra Operations).

The operators' pauses (`medic pause`, kept in the ledger: core.mode.PauseBook) are read with it, as often (one
Query per 30 s per container): a pause of a cluster (or of the whole stack) turns `act` into `paused` for that
cluster's decisions. A failed read of them keeps this container's last read; with none, every cluster reads as
paused (fail closed, counted as a failed read too). The node path reads the two pause items that can hold its
cluster with its other ledger items instead (current_given: no Query of its own, and never older than the event;
a failed read fails the event, which Lambda retries: nothing is decided without them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from medic.adapters.aws import client as make_client
from medic.core import clock
from medic.core.mode import Mode, ModeMemory, ModeVersion, Pause, PauseBook, mode_under, pause_of
from medic.obs import count, logger

VALID_MODES = tuple(mode.value for mode in Mode)
CACHE_SECONDS = 30
READ_FAILURES = "ModeReadFailures"  # the metric (namespace Medic) of failed reads of the switch


class ModeSwitch:
    def __init__(self, parameter: str, default: str, client: Any = None, memory: ModeMemory | None = None,
                 now: Callable[[], datetime] = clock.now, pauses: PauseBook | None = None) -> None:
        self.parameter = parameter
        self.default = default
        self.memory = memory
        self.now = now
        self.book = pauses
        self._client = client
        self._cached: tuple[float, Mode] | None = None
        self._known: tuple[Mode, int] | None = None  # this container's last good read: the mode and its version
        self._unremembered: tuple[Mode, int] | None = None  # read with stack(remember=False), not yet kept
        self._pauses: tuple[float, list[Pause] | None] | None = None  # None inside: unreadable, nothing known

    def current(self, cluster: str | None = None) -> Mode:
        """The mode a decision about ``cluster`` runs in: the switch's, lowered to `paused` by an operator's pause
        of the cluster or of the whole stack (``cluster`` None: a decision about no cluster, or about the stack)."""
        return mode_under(self.stack(), self.pause_of(cluster))

    def current_given(self, cluster: str, pauses: list[Pause]) -> Mode:
        """The mode a decision about ``cluster`` runs in, given the pauses that can hold it as the caller read them
        (its own and the whole stack's, with its other ledger items: the node path's one BatchGetItem) instead of
        this switch's Query of every pause: the switch's mode (cached 30 s), lowered by a pause that holds now."""
        return mode_under(self.stack(), pause_of(pauses, cluster, self.now()))

    def pause_of(self, cluster: str | None) -> Pause | None:
        """The operator's pause that holds ``cluster`` now; None when none does (or no pauses are kept here)."""
        if self.book is None:
            return None
        pauses = self.pauses()
        if pauses is None:  # unreadable and nothing known: fail closed
            return Pause(scope="*", by="unknown", reason="the pauses could not be read (fail closed)",
                         since=self.now())
        return pause_of(pauses, cluster, self.now())

    def pauses(self) -> list[Pause] | None:
        """Every pause kept (cached as the mode is); None when they cannot be read and none were ever read here."""
        if self.book is None:
            return []
        if self._pauses and time.monotonic() - self._pauses[0] < CACHE_SECONDS:
            return self._pauses[1]
        try:
            read: list[Pause] | None = self.book.pauses()
        except Exception as error:  # noqa: BLE001 - a failed read keeps the last known pauses, never blocks
            count(READ_FAILURES)
            read = self._pauses[1] if self._pauses else None
            logger.warning("pauses unreadable; keeping the last known", extra={
                "parameter": self.parameter, "known": read is not None, "error": type(error).__name__})
        self._pauses = (time.monotonic(), read)
        return read

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("ssm")
        return self._client

    def stack(self, remember: bool = True) -> Mode:
        """The switch's mode, the whole stack's (the SSM parameter, read at most every 30 s). A version this
        container did not know is kept in the memory at once, or (``remember`` False) by remember_unless_kept."""
        if self._cached and time.monotonic() - self._cached[0] < CACHE_SECONDS:
            return self._cached[1]
        try:
            parameter = self.client.get_parameter(Name=self.parameter)["Parameter"]
            value, version = parameter["Value"].strip(), int(parameter.get("Version", 0))
        except Exception as error:  # noqa: BLE001 - any failure to read keeps the last known mode, never blocks
            mode = self._fallback(error)
            self._cached = (time.monotonic(), mode)  # not every call of the next 30 s waits out SSM's retries
            return mode
        if value not in VALID_MODES:
            # An operator typed something: the safe reading of an unclear switch is "do not act".
            logger.error("mode parameter has an invalid value; treating as paused", extra={
                "parameter": self.parameter, "value": value[:40], "valid": VALID_MODES})
            value = Mode.PAUSED
        mode = Mode(value)
        self._cached = (time.monotonic(), mode)
        if self._known != (mode, version):
            self._known = (mode, version)
            if remember:
                self._remember(mode, version)
            else:
                self._unremembered = (mode, version)
        return mode

    def remember_unless_kept(self, kept: tuple[Mode, int] | None) -> None:
        """Keep the version stack(remember=False) read unless the memory (``kept``, as the caller read it with its
        other ledger items) holds it or a newer one already: a container's first read then costs no write of its
        own, save when the mode changed (the node path's call budget)."""
        pending, self._unremembered = self._unremembered, None
        if pending is not None and (kept is None or kept[1] < pending[1]):
            self._remember(*pending)

    def history(self) -> list[ModeVersion]:
        """Every version SSM keeps of the parameter (GetParameterHistory, every page), oldest first. ClientError
        (ParameterNotFound once deleted) and BotoCoreError propagate."""
        versions = []
        for page in self.client.get_paginator("get_parameter_history").paginate(Name=self.parameter):
            for item in page.get("Parameters", []):
                versions.append(ModeVersion(version=int(item["Version"]), value=str(item.get("Value", "")),
                                            modified_at=item["LastModifiedDate"],
                                            modified_by=str(item.get("LastModifiedUser", "unknown"))))
        return sorted(versions, key=lambda found: found.version)

    def _remember(self, mode: Mode, version: int) -> None:
        """Keep what was read for the next container whose read fails (best effort: the read itself worked)."""
        if self.memory is None:
            return
        try:
            self.memory.remember(mode, version, self.now())
        except Exception as error:  # noqa: BLE001 - the memory is a fallback's, never a reason to fail
            logger.warning("mode not remembered", extra={"parameter": self.parameter, "mode": mode,
                                                         "error": type(error).__name__})

    def _fallback(self, error: Exception) -> Mode:
        """The last mode known (the newer of this container's read and the ledger's), or why not."""
        count(READ_FAILURES)
        known, source = self._known, "this container's last read"
        try:
            kept = self.memory.last_known() if self.memory is not None else None
        except Exception as memory_error:  # noqa: BLE001 - the ledger is down too
            kept, source = None, f"the ledger is unreadable too ({type(memory_error).__name__})"
            if known is None:
                logger.error("mode parameter and its memory unreadable; treating as paused (fail closed)", extra={
                    "parameter": self.parameter, "error": type(error).__name__, "memory": source})
                return Mode.PAUSED
        if kept is not None and (known is None or kept[1] > known[1]):
            known, source = kept, "the ledger's last kept value"
        if known is None:
            mode, source = Mode.of(self.default), "nothing known: the deployed mode"
        else:
            mode = known[0]
        logger.warning("mode parameter unreadable; keeping the last known mode", extra={
            "parameter": self.parameter, "fallback_mode": mode, "from": source, "error": type(error).__name__})
        return mode
