"""Wiring: the adapters a handler uses, built once per container from the environment.

The adapters only some handlers use (training jobs, checkpoints, training metrics, Slurm queues) are
imported and built on first use: a handler that never touches them never imports them (nor the domain
models behind them) at cold start.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from medic import clock
from medic.adapters.hyperpod import HyperPod
from medic.adapters.mode import ModeSwitch
from medic.adapters.pager import Pager
from medic.config import MedicConfig
from medic.ledger.table import Table

if TYPE_CHECKING:
    from medic.adapters.checkpoints import Checkpoints
    from medic.adapters.metrics import TrainingMetrics
    from medic.adapters.slurm_queue import SlurmQueues
    from medic.adapters.training import TrainingJobs


class _OnFirstUse:
    """A dataclass field whose default is built (and its module imported) on first access; a value passed to
    the constructor is used as is. (A data descriptor as a field default: dataclasses reads the default from
    ``__get__(None, cls)`` and the generated ``__init__`` assigns through ``__set__``.)"""

    def __init__(self, build: Callable[[], Any]) -> None:
        self.build = build
        self.slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance.__dict__.get(self.slot)
        if value is None:
            value = instance.__dict__[self.slot] = self.build()
        return value

    def __set__(self, instance: Any, value: Any) -> None:
        instance.__dict__[self.slot] = None if value is self else value


def _training() -> TrainingJobs:
    from medic.adapters.training import TrainingJobs

    return TrainingJobs()


def _checkpoints() -> Checkpoints:
    from medic.adapters.checkpoints import Checkpoints

    return Checkpoints()


def _metrics() -> TrainingMetrics:
    from medic.adapters.metrics import TrainingMetrics

    return TrainingMetrics()


def _slurm() -> SlurmQueues:
    from medic.adapters.slurm_queue import SlurmQueues

    return SlurmQueues.from_json(os.environ.get("AGENT_QUEUES"))


@dataclass
class Deps:
    config: MedicConfig
    hyperpod: HyperPod
    table: Table
    pager: Pager
    mode: ModeSwitch
    region: str
    now: Callable[[], datetime] = clock.now
    # The deploying account (from the page topic's ARN): events naming another account's cluster are rejected.
    account: str = ""
    training: TrainingJobs = _OnFirstUse(_training)  # type: ignore[assignment]
    checkpoints: Checkpoints = _OnFirstUse(_checkpoints)  # type: ignore[assignment]
    metrics: TrainingMetrics = _OnFirstUse(_metrics)  # type: ignore[assignment]
    # AGENT_QUEUES (cluster name -> agent queue URL), read on first use; unset: no queues
    slurm: SlurmQueues = _OnFirstUse(_slurm)  # type: ignore[assignment]


def account_of(arn: str) -> str:
    """The account of an ARN (arn:partition:service:region:account:resource); empty when it has none."""
    parts = arn.split(":")
    return parts[4] if len(parts) > 5 and parts[4].isdigit() else ""


@functools.cache
def dependencies() -> Deps:
    config = MedicConfig.from_env(os.environ["MEDIC_CONFIG"])
    return Deps(
        config=config,
        hyperpod=HyperPod(),
        table=Table(os.environ["LEDGER_TABLE"]),
        pager=Pager(os.environ["PAGE_TOPIC_ARN"]),
        mode=ModeSwitch(os.environ["MODE_PARAMETER"], default=config.mode),
        region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        account=account_of(os.environ["PAGE_TOPIC_ARN"]),
    )
