"""``medic status``'s agents (issue 29, item 1): per configured cluster, the agent Medic counts, with its last heartbeat
by DynamoDB's clock (the results function's `agentseen#` note, as the reconciler judges it) and what it says of itself
(host, version, role: quoted), and each agent standing by."""

from __future__ import annotations

import json

from medic.ledger.agents import AgentStore
from tests.cli.conftest import CLUSTER, Deployed, ago

EKS = "finetune-eks"


def heartbeat(deployed: Deployed, minutes_ago: float, **said: str) -> None:
    """The results function's note of the primary agent's heartbeat (flows/agent/heartbeats.py)."""
    at = ago(minutes=minutes_ago)
    AgentStore(deployed.ledger()).record_heartbeat_seen(CLUSTER, at, at.isoformat(), said)


def standby(deployed: Deployed) -> None:
    """Another head node's agent, as the agent writes it (agent/medic_agent/ledger.py: `standby#<host>`)."""
    deployed.dynamodb.put_item(TableName="Medic-LedgerTable", Item={
        "pk": {"S": f"agent#{CLUSTER}"}, "sk": {"S": "standby#ip-10-1-0-11"}, "at": {"S": ago(minutes=1).isoformat()},
        "host": {"S": "ip-10-1-0-11"}, "version": {"S": "0.1.0"}, "role": {"S": "standby"},
        "reason": {"S": "slurmctld on ip-10-1-0-10 is in charge"}, "in_charge": {"S": "ip-10-1-0-10"}})


def agents(deployed: Deployed) -> dict[tuple[str, str], dict]:
    result = deployed.cli("status", "--config", str(deployed.config_file), "--json")
    assert result.code == 0, result.err
    return {(line["cluster"], line["role"]): line for line in json.loads(result.out)["agents"]}


def test_given_an_agent_that_reports_when_status_then_its_heartbeat_host_version_and_role_show(deployed: Deployed):
    # Given pretrain-slurm's primary agent seen 2 minutes ago by DynamoDB, and a second head node's agent standing by
    heartbeat(deployed, 2, host="ip-10-1-0-10", version="0.1.0", role="primary")
    standby(deployed)
    shown = agents(deployed)
    # Then the acting agent is ok, with DynamoDB's time and its own words quoted; the standby is listed, not counted
    acting = shown[(CLUSTER, "acting")]
    assert (acting["state"], acting["host"], acting["version"], acting["clock"]) == (
        "ok", '"ip-10-1-0-10"', '"0.1.0"', "DynamoDB")
    assert acting["last_heartbeat"] == ago(minutes=2).isoformat() and acting["detail"].startswith("2 min ago")
    waiting = shown[(CLUSTER, "standby")]
    assert (waiting["state"], waiting["host"], waiting["clock"]) == ("-", '"ip-10-1-0-11"', "agent")
    assert "never counted as alive" in waiting["detail"] and '"ip-10-1-0-10"' in waiting["detail"]


def test_given_an_agent_silent_past_its_bound_when_status_then_it_shows_silent(deployed: Deployed):
    # Given the agent last seen 40 minutes ago (agent_silence_minutes: 15 by default)
    heartbeat(deployed, 40, host="ip-10-1-0-10")
    # Then status says SILENT, with the bound
    acting = agents(deployed)[(CLUSTER, "acting")]
    assert acting["state"] == "SILENT" and "40 min ago (reported silent after agent_silence_minutes 15)" in \
        acting["detail"]


def test_given_an_agent_never_heard_from_when_status_then_its_line_says_so(deployed: Deployed):
    # Given nothing from either cluster's agent (finetune-eks has no watched job: its agent is not needed)
    shown = agents(deployed)
    # Then a Slurm cluster's missing agent is awaited until the reconciler's grace ends; the EKS one is not needed
    assert shown[(CLUSTER, "none")]["state"] == "waiting"
    assert shown[(EKS, "none")]["state"] == "-" and "not needed" in shown[(EKS, "none")]["detail"]


def test_given_a_watch_past_its_grace_when_status_then_a_never_reported_agent_is_no(deployed: Deployed):
    # Given the reconciler has watched pretrain-slurm for two days and never heard from its agent
    AgentStore(deployed.ledger()).watch_agent(CLUSTER, None, ago(days=2))
    # Then status says NO
    acting = agents(deployed)[(CLUSTER, "none")]
    assert acting["state"] == "NO" and "never reported (watched since" in acting["detail"]


def test_the_text_status_has_an_agents_section(deployed: Deployed):
    heartbeat(deployed, 2, host="ip-10-1-0-10", version="0.1.0", role="primary")
    result = deployed.cli("status", "--config", str(deployed.config_file))
    assert "Agents (last heartbeat by DynamoDB's clock" in result.out
    [line] = [line for line in result.out.splitlines() if line.startswith(f"  {CLUSTER}") and "acting" in line]
    assert "ok" in line and '"ip-10-1-0-10"' in line and "2 min ago" in line
