"""The composition root: the one place that builds a handler's dependencies from its environment (once per
container) and picks the implementation behind each port (the jobs on a node, per orchestrator)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from medic.adapters.hyperpod import HyperPod
from medic.adapters.mode import ModeSwitch
from medic.adapters.pager import Pager
from medic.config_core import CoreConfig
from medic.deps import Deps, JobsOnNode
from medic.ledger.modes import SeenModes
from medic.ledger.pauses import PauseStore
from medic.ledger.table import Table


class _BuiltOnFirstUse:
    """A port whose implementation (and its modules) is built on the first call of one of its methods: most
    invocations never repair a Slurm node, and the agent flow need not load at every handler's cold start."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._port: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._port is None:
            self._port = self._build()
        return getattr(self._port, name)


def _slurm_jobs_on_node() -> JobsOnNode:
    from medic.flows.agent.slurm_node import SlurmJobsOnNode

    return SlurmJobsOnNode()


# Which flow sees to the jobs on a node the node flow repairs, per orchestrator. EKS has no entry: the EKS agent's
# node reports (flows/agent/eks_nodes.py, in the reconciler's run) see to the pods on failing nodes.
JOBS_ON_NODE: dict[str, JobsOnNode] = {"slurm": _BuiltOnFirstUse(_slurm_jobs_on_node)}  # type: ignore[dict-item]


def account_of(arn: str) -> str:
    """The account of an ARN (arn:partition:service:region:account:resource); empty when it has none."""
    parts = arn.split(":")
    return parts[4] if len(parts) > 5 and parts[4].isdigit() else ""


def partition_of(arn: str) -> str:
    """The partition of an ARN (aws, aws-us-gov, aws-cn, aws-iso-b, ...); "aws" when it names none."""
    parts = arn.split(":")
    return parts[1] if len(parts) > 5 and parts[0] == "arn" and parts[1] else "aws"


@functools.cache
def dependencies() -> Deps:
    config = CoreConfig.from_env(os.environ["MEDIC_CONFIG"])  # the job sections: Deps.jobs_config, on first use
    table, parameter = Table(os.environ["LEDGER_TABLE"]), os.environ["MODE_PARAMETER"]
    return Deps(
        config=config,
        hyperpod=HyperPod(),
        table=table,
        pager=Pager(os.environ["PAGE_TOPIC_ARN"]),
        # a failed read keeps the last mode any function read (the ledger's), never the deployed one: fail closed
        # and the operators' pauses (`medic pause`) with it: a paused cluster's decisions run as in mode paused
        mode=ModeSwitch(parameter, default=config.mode, memory=SeenModes(table, parameter),
                        pauses=PauseStore(table, parameter)),
        jobs_on_node=JOBS_ON_NODE,
        region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        account=account_of(os.environ["PAGE_TOPIC_ARN"]),
        partition=partition_of(os.environ["PAGE_TOPIC_ARN"]),
        stack=os.environ.get("MEDIC_STACK", ""),
    )
