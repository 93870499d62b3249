"""Wiring: the adapters a handler uses, built once per container from the environment."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from medic import clock
from medic.adapters.checkpoints import Checkpoints
from medic.adapters.hyperpod import HyperPod
from medic.adapters.metrics import TrainingMetrics
from medic.adapters.mode import ModeSwitch
from medic.adapters.pager import Pager
from medic.adapters.slurm_queue import SlurmQueues
from medic.adapters.training import TrainingJobs
from medic.config import MedicConfig
from medic.ledger.table import Table


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
    training: TrainingJobs = field(default_factory=TrainingJobs)
    checkpoints: Checkpoints = field(default_factory=Checkpoints)
    metrics: TrainingMetrics = field(default_factory=TrainingMetrics)
    slurm: SlurmQueues = field(default_factory=lambda: SlurmQueues({}))


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
        slurm=SlurmQueues.from_json(os.environ.get("SLURM_QUEUES")),
    )
