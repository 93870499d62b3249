"""The run-time mode (the SSM switch `medic mode` sets): what each mode lets Medic do, decided here once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol


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


@dataclass(frozen=True)
class ModeVersion:
    """One version of the mode parameter, as SSM's GetParameterHistory returns it: the value as written (not yet
    read as a Mode: an invalid one reads as paused), when, and who (LastModifiedUser: the IAM ARN of the caller)."""

    version: int
    value: str
    modified_at: datetime
    modified_by: str

    @property
    def mode(self) -> Mode:
        return Mode.of(self.value.strip())
