"""The run-time mode (the SSM switch `medic mode` sets): what each mode lets Medic do, decided here once."""

from __future__ import annotations

from enum import StrEnum


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
