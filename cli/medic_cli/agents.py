"""`medic status`'s agents: per configured cluster, the agent Medic counts (its last heartbeat by DynamoDB's clock, as
the reconciler judges it: medic.flows.agent.silence_policy) and each agent standing by, with what each says of itself
(host, version, role: the agent's word, shown quoted)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from medic.config import Cluster, MedicConfig
from medic.core.text import quoted
from medic.flows.agent.silence_policy import AgentState, judge_agent, needs_agent
from medic.ledger.agents import AgentStore, AgentWatch
from medic.ledger.table import Table
from medic_cli.render import when

STATE_SHOWN = {AgentState.REPORTING: "ok", AgentState.SILENT: "SILENT", AgentState.NEVER_REPORTED: "NO",
               AgentState.AWAITED: "waiting"}


@dataclass(frozen=True)
class AgentLine:
    cluster: str
    role: str  # acting (the heartbeat Medic counts) | standby | none (never heard from)
    state: str  # ok | SILENT | NO | waiting | - (a standby, or an agent Medic does not need)
    host: str
    version: str
    last_heartbeat: datetime | None
    clock: str  # whose clock says last_heartbeat: "DynamoDB" | "agent"
    detail: str

    def as_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "role": self.role, "state": self.state, "host": self.host,
                "version": self.version,
                "last_heartbeat": self.last_heartbeat.isoformat() if self.last_heartbeat else None,
                "clock": self.clock, "detail": self.detail}


def read(table: Table, config: MedicConfig, now: datetime) -> list[AgentLine]:
    """One line per configured cluster's counted agent, then one per agent standing by."""
    store, lines = AgentStore(table), []
    for cluster in config.clusters:
        lines.append(acting(cluster, config, store.agent_heartbeat(cluster.name), store.heartbeat_said(cluster.name),
                            store.read_watch(cluster.name), now))
        lines += [standby(cluster, said) for said in store.standbys(cluster.name)]
    return lines


def acting(cluster: Cluster, config: MedicConfig, seen: datetime | None, said: dict[str, str],
           watch: AgentWatch | None, now: datetime) -> AgentLine:
    """The agent Medic counts, judged as the reconciler judges it (its watch keeps heartbeats past a day)."""
    known = watch.last_seen if watch else None
    last = max((moment for moment in (seen, known) if moment is not None), default=None)
    needed, bounds = needs_agent(config, cluster), config.guardrails_for(cluster)
    verdict = judge_agent(needed=needed, last_seen=last, watching_since=watch.watching_since if watch else now,
                          reported=watch.reported if watch else "", now=now, guardrails=bounds)
    if last is None:
        detail = (f"never reported (watched since {when(watch.watching_since)} UTC; reported after "
                  f"agent_install_grace_hours {bounds.agent_install_grace_hours} h)" if watch else
                  "never reported (the reconciler has not looked for it yet)")
    else:
        detail = (f"{int(verdict.age.total_seconds() // 60)} min ago (reported silent after agent_silence_minutes "
                  f"{bounds.agent_silence_minutes})")
    if not needed:
        detail += "; not needed: no watched jobs on this EKS cluster"
    return AgentLine(cluster.name, "acting" if last else "none", STATE_SHOWN[verdict.state] if needed else "-",
                     _shown(said.get("host")), _shown(said.get("version")), last, "DynamoDB", detail)


def standby(cluster: Cluster, said: dict[str, str]) -> AgentLine:
    """A standby's heartbeat reaches no Medic function (the stream's filter keeps only `heartbeat`): its own clock."""
    try:
        at = datetime.fromisoformat(said["at"]) if "at" in said else None
    except ValueError:
        at = None
    detail = "stands by (never counted as alive)"
    if said.get("reason"):
        detail += f": {quoted(said['reason'], 120)}"
    if said.get("in_charge"):
        detail += f"; in charge: {quoted(said['in_charge'], 64)}"
    return AgentLine(cluster.name, "standby", "-", _shown(said.get("host")), _shown(said.get("version")), at,
                     "agent", detail)


def _shown(value: str | None) -> str:
    return quoted(value, 64) if value else "-"
