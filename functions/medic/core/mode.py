"""The run-time mode (the SSM switch `medic mode` sets): what each mode lets Medic do, decided here once."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from enum import StrEnum
from typing import NamedTuple, Protocol


class Mode(StrEnum):
    ACT = "act"
    DRY_RUN = "dry_run"  # decide and record as if acting; call nothing (HyperPod, SageMaker, agents, SNS)
    PAUSED = "paused"  # decide and record; act on nothing; people are still told

    @classmethod
    def of(cls, value: object) -> Mode:
        """A mode from a record or a ledger item; anything else reads as paused (act on nothing, page people)."""
        try:
            return cls(value)
        except ValueError:
            return cls.PAUSED

    @property
    def acts(self) -> bool:
        """Medic may change something: call HyperPod or SageMaker, or queue a command for an agent."""
        return self is Mode.ACT

    @property
    def pages(self) -> bool:
        """Medic may page a human. A dry run calls nothing, SNS included; a pause still tells people."""
        return self is not Mode.DRY_RUN


class ModeMemory(Protocol):
    """The last run-time mode any of Medic's functions read from the switch (its SSM parameter version), kept where
    a fresh container finds it (the ledger: ledger/modes.py SeenModes). A read of the switch that fails keeps the
    last known value instead of falling back to the deployed mode, so a `paused` holds (fail closed)."""

    def remember(self, mode: Mode, version: int, at: datetime) -> None:
        """Keep ``mode`` (the parameter's ``version``) unless a newer version is kept already."""

    def last_known(self) -> tuple[Mode, int] | None:
        """The mode last kept and its version; None when none was ever kept. Raises when it cannot be read."""


class ModeVersion(NamedTuple):
    """One version of the mode parameter, as SSM's GetParameterHistory returns it: the value as written (not yet
    read as a Mode: an invalid one reads as paused), when, and who (LastModifiedUser: the IAM ARN of the caller)."""

    version: int
    value: str
    modified_at: datetime
    modified_by: str

    @property
    def mode(self) -> Mode:
        return Mode.of(self.value.strip())


ALL_CLUSTERS = "*"  # a pause's scope when it holds the whole stack (`medic pause` without --cluster)
PAUSE_REMINDER = timedelta(days=1)  # a pause set without an end pages once when it is still on after this long


class Pause(NamedTuple):
    """An operator's pause (`medic pause`): one cluster's, or the whole stack's (scope ALL_CLUSTERS). While it holds,
    a cluster's decisions run as in mode paused (record everything, act on nothing) and page at most once per
    cluster per window (outbox/pages.py). It ends by itself at ``until`` (None: only `medic resume` ends it). The
    stack's mode parameter stays the big switch: a pause only ever lowers `act` to `paused`."""

    scope: str
    by: str  # who paused (the caller's IAM ARN, as the CLI read it from STS)
    reason: str
    since: datetime
    until: datetime | None = None
    paged: frozenset[str] = frozenset()  # the pause's own pages already out (ledger/pauses.py: its notices)

    def holds(self, now: datetime) -> bool:
        return self.until is None or now < self.until

    def covers(self, cluster: str | None) -> bool:
        return self.scope == ALL_CLUSTERS or (cluster is not None and self.scope == cluster)

    @property
    def what(self) -> str:
        return "the whole stack" if self.scope == ALL_CLUSTERS else f"cluster {self.scope}"


def pause_of(pauses: Iterable[Pause], cluster: str | None, now: datetime) -> Pause | None:
    """The pause that holds ``cluster`` now (its own, else the whole stack's); None when none does. ``cluster`` None:
    a decision about no cluster (a training job), which only a whole-stack pause holds."""
    holding = [pause for pause in pauses if pause.covers(cluster) and pause.holds(now)]
    return min(holding, key=lambda pause: pause.scope == ALL_CLUSTERS) if holding else None


def mode_under(mode: Mode, pause: Pause | None) -> Mode:
    """The mode a decision runs in: a pause turns `act` into `paused`; a dry run or a paused stack stays as it is."""
    return Mode.PAUSED if pause is not None and mode is Mode.ACT else mode


class PauseBook(Protocol):
    """Where the operators' pauses are kept (the ledger: ledger/pauses.py PauseStore), read by every function's
    ModeSwitch with the mode."""

    def pauses(self) -> list[Pause]:
        """Every pause kept, ended or not. Raises when it cannot be read."""
