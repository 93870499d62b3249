"""Specification: the reconciler's watch on each cluster's agent (issue 29, item 1), against emulated AWS (moto for
the ledger and SNS): a silent agent is reported once per silence, by DynamoDB's clock, and once when it is back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from medic.config import parse_config
from medic.flows.agent.silence import sweep_agent_silence
from medic.ledger.agents import AgentStore
from tests.functional.conftest import CLUSTER, CONFIG, Account, Medic, medic_world

EKS = "finetune-eks"
START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


@pytest.fixture
def world(aws: Account) -> Iterator[Medic]:
    """pretrain-slurm (Slurm: its agent is always needed) and finetune-eks (EKS, no watched job: not needed)."""
    yield from medic_world(parse_config(CONFIG), aws)


def heartbeat(medic: Medic, at: datetime) -> None:
    """The results function's note of the primary agent's heartbeat, timed by DynamoDB's stream record."""
    AgentStore(medic.deps.table).record_heartbeat_seen(CLUSTER, at, (at + timedelta(hours=1)).isoformat(),
                                                       {"host": "ip-10-1-0-10", "version": "0.1.0", "role": "primary"})


def sweeps(medic: Medic, *minutes: int) -> list[dict]:
    """The reconciler's agent watch at START + each of ``minutes``: every record it wrote."""
    written = []
    for minute in minutes:
        medic.clock[0] = START + timedelta(minutes=minute)
        written += sweep_agent_silence({"id": f"run-{minute}"}, medic.deps)
    return written


def test_an_agent_silent_past_its_bound_is_recorded_and_paged_once_then_once_more_when_it_is_back(world: Medic):
    # Given the agent heartbeating until 08:05 (its own clock says an hour later: never trusted)
    heartbeat(world, START + timedelta(minutes=5))
    # When the reconciler looks every 5 minutes until 08:40
    silent = sweeps(world, 5, 10, 15, 20, 25, 30, 35, 40)
    # Then the 08:25 look (20 min, more than agent_silence_minutes 15) records it once, paged; no later look repeats it
    assert [(r["fault"], r["outcome"], r["paged"]) for r in silent] == [("agent_silent", "failed", True)]
    assert "silent for 20 min (its last heartbeat 2026-11-20 08:05:00 UTC by DynamoDB's clock" in silent[0]["reason"]
    [page] = world.pages()
    assert page["Subject"] == f"[Medic] {CLUSTER}: its agent is silent"
    assert 'Agent:          host "ip-10-1-0-10"; version "0.1.0"; role "primary"' in page["Message"]
    assert "systemctl status medic-agent" in page["Message"]
    # When it heartbeats again at 08:42
    heartbeat(world, START + timedelta(minutes=42))
    back = sweeps(world, 45, 50)
    # Then one record says it is back, with one all-clear
    assert [(r["fault"], r["outcome"], r["paged"]) for r in back] == [("agent_back", "ignored", True)]
    assert [p["Subject"] for p in world.pages()] == [f"[Medic] RESOLVED {CLUSTER}: its agent reports again"]


def test_a_second_silence_is_a_new_one(world: Medic):
    heartbeat(world, START)
    first = sweeps(world, 20)
    heartbeat(world, START + timedelta(minutes=22))
    again = sweeps(world, 25, 45)
    assert [r["fault"] for r in first + again] == ["agent_silent", "agent_back", "agent_silent"]


def test_an_agent_never_heard_from_is_reported_after_the_install_grace(world: Medic):
    # Given no heartbeat ever; Medic began watching at its first sweep (08:00)
    early = sweeps(world, 0, 60 * 23)
    late = sweeps(world, 60 * 24 + 5, 60 * 25)
    # Then nothing within agent_install_grace_hours (24 h); one record after it, and no more
    assert early == []
    assert [(r["cluster"], r["fault"], r["paged"]) for r in late] == [(CLUSTER, "agent_silent", True)]
    assert "never reported since Medic began watching the cluster at 2026-11-20 08:00 UTC" in late[0]["reason"]
    assert [p["Subject"] for p in world.pages()] == [f"[Medic] {CLUSTER}: its agent has never reported"]


def test_an_eks_agent_without_watched_jobs_is_not_needed(world: Medic):
    # finetune-eks has no watched job: its agent's silence is measured, never paged
    assert [r["cluster"] for r in sweeps(world, 0, 60 * 25)] == [CLUSTER]


def test_a_silence_longer_than_the_heartbeat_items_day_is_still_the_same_silence(world: Medic):
    # Given the agent's `agentseen#` item expired (DynamoDB's TTL, one day) after it was reported silent
    heartbeat(world, START)
    assert len(sweeps(world, 20)) == 1
    world.deps.table.delete({"pk": {"S": f"agentseen#{CLUSTER}"}, "sk": {"S": "heartbeat"}})
    # Then the watch remembers the last heartbeat: no "never reported" page two days on
    assert sweeps(world, 60 * 48) == []


@pytest.fixture
def dry_run(aws: Account) -> Iterator[Medic]:
    yield from medic_world(parse_config({**CONFIG, "mode": "dry_run"}), aws)


def test_a_dry_run_records_the_silence_and_pages_nobody(dry_run: Medic):
    world = dry_run
    heartbeat(world, START)
    [record] = sweeps(world, 20)
    assert (record["fault"], record["paged"], record["mode"]) == ("agent_silent", False, "dry_run")
    assert world.pages() == []
