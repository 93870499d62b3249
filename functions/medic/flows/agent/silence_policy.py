"""When a cluster's agent is silent (issue 29, item 1): pure, from the times the ledger holds.

Medic needs an agent on every Slurm cluster (drains around node repairs, requeues) and on an EKS cluster with
watched jobs (their restarts). Its heartbeat is judged by DynamoDB's clock (`agentseen#`, flows/agent/heartbeats.py),
never the agent's. An agent silent longer than `agent_silence_minutes` is one silence, identified by its last
heartbeat (`since:<epoch>`): reported once, and once more when the agent reports again. An agent never heard from
since Medic began watching the cluster (its first sweep of it, about the deploy that configured it) is the silence
`never`, reported after `agent_install_grace_hours`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import NamedTuple

from medic.config_core import Cluster, CoreConfig, Guardrails

NEVER = "never"


class AgentState(StrEnum):
    REPORTING = "reporting"  # heartbeats within the bound
    SILENT = "silent"  # reported before, silent beyond the bound
    NEVER_REPORTED = "never_reported"  # never heard from, past the grace
    AWAITED = "awaited"  # never heard from, within the grace (being installed)


class AgentVerdict(NamedTuple):
    state: AgentState
    age: timedelta  # since the last heartbeat, or (never heard from) since Medic began watching
    silence: str  # the silence's key ('' while the agent reports)
    report: bool  # a new silence of an agent Medic needs: one record and one page
    back: bool  # the agent reports again after the silence Medic reported: one record and one page


def needs_agent(config: CoreConfig, cluster: Cluster) -> bool:
    """Every Slurm cluster needs its agent; an EKS cluster when it has watched jobs or watch rules (restarts go
    through it)."""
    return cluster.orchestrator == "slurm" or bool(config.watched_names(cluster.name)) or bool(cluster.watch)


def silence_key(last_seen: datetime | None) -> str:
    return f"since:{int(last_seen.timestamp())}" if last_seen is not None else NEVER


def judge_agent(*, needed: bool, last_seen: datetime | None, watching_since: datetime, reported: str,
                now: datetime, guardrails: Guardrails) -> AgentVerdict:
    """The agent's state now, and whether a silence is to be reported (once) or its end recorded (once)."""
    if last_seen is None:
        age = max(now - watching_since, timedelta(0))
        if age <= timedelta(hours=guardrails.agent_install_grace_hours):
            return AgentVerdict(AgentState.AWAITED, age, "", report=False, back=False)
        return AgentVerdict(AgentState.NEVER_REPORTED, age, NEVER, report=needed and reported != NEVER, back=False)
    age = max(now - last_seen, timedelta(0))
    if age <= timedelta(minutes=guardrails.agent_silence_minutes):
        return AgentVerdict(AgentState.REPORTING, age, "", report=False, back=bool(reported))
    key = silence_key(last_seen)
    return AgentVerdict(AgentState.SILENT, age, key, report=needed and reported != key, back=False)
