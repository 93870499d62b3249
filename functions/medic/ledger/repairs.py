"""Slurm's side of a node action (issue 16): the node Medic drained before repairing it, and the jobs the repair
hit, kept until the node is back and each job has been seen to.

One item per repaired node, `slurmrepair#<cluster>` / `<instance id Medic acted on>`: written when the drain is
queued, given the jobs when the agent reports them, taken (once: a conditional update) by the reconciler's sweep
when the node (or its replacement, found by NodeLogicalId) is Running again, deleted when the job states are
seen to. Bounded by the cluster's node-action budget; TTL 7 days.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import NamedTuple

from medic.ledger.table import Table, expires

PARTITION = "slurmrepair#"


class SlurmRepair(NamedTuple):
    cluster: str
    node_id: str  # the instance Medic acted on (a replacement has a new one, same logical id)
    incident: str
    node_name: str  # its Slurm node name, as drained
    action: str  # reboot_node | replace_node
    fault: str
    acted_at: datetime
    logical_id: str | None = None
    drained: str = "pending"  # pending (the agent has not reported) | yes | no
    jobs: tuple[tuple[str, str], ...] | None = None  # (id, name); None: not reported, or unknown
    taken_at: datetime | None = None  # the sweep issued its resume / job states
    # jobs a sweep saw stopped while the node was in repair (requeued by Slurm, ended): RUNNING after that means Slurm
    # started them again, elsewhere (a job still RUNNING before is still on the node going down)
    stopped: frozenset[str] = frozenset()


class RepairStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def _key(self, cluster: str, node_id: str) -> dict:
        return self.table.key(f"{PARTITION}{cluster}", node_id)

    def remember(self, repair: SlurmRepair) -> None:
        item = {**self._key(repair.cluster, repair.node_id), "incident": {"S": repair.incident},
                "node_name": {"S": repair.node_name}, "action": {"S": repair.action}, "fault": {"S": repair.fault},
                "acted_at": {"S": repair.acted_at.isoformat()}, "drained": {"S": repair.drained},
                "expires_at": expires(repair.acted_at)}
        if repair.logical_id:
            item["logical_id"] = {"S": repair.logical_id}
        self.table.put(item)

    def drained(self, cluster: str, node_id: str, drained: bool, jobs: list[tuple[str, str]] | None) -> None:
        """The agent's drain result: drained or not, and the jobs on the node (None: unknown)."""
        values = {":d": {"S": "yes" if drained else "no"}}
        expression = "SET drained = :d"
        if jobs is not None:
            expression += ", jobs = :j"
            values[":j"] = {"S": json.dumps([list(job) for job in jobs])}
        self.table.update_if(self._key(cluster, node_id), expression, "attribute_exists(pk)", values)

    def repairs(self, cluster: str) -> list[SlurmRepair]:
        found = []
        for item in self.table.partition(f"{PARTITION}{cluster}"):
            try:
                jobs = json.loads(item["jobs"]["S"]) if "jobs" in item else None
                found.append(SlurmRepair(
                    cluster=cluster, node_id=item["sk"]["S"], incident=item["incident"]["S"],
                    node_name=item["node_name"]["S"], action=item["action"]["S"], fault=item["fault"]["S"],
                    acted_at=datetime.fromisoformat(item["acted_at"]["S"]),
                    logical_id=item.get("logical_id", {}).get("S"), drained=item["drained"]["S"],
                    jobs=None if jobs is None else tuple((str(job[0]), str(job[1])) for job in jobs),
                    taken_at=datetime.fromisoformat(item["taken_at"]["S"]) if "taken_at" in item else None,
                    stopped=frozenset(item.get("stopped", {}).get("SS", ()))))
            except (KeyError, TypeError, ValueError, IndexError):
                continue
        return found

    def drop_job(self, cluster: str, node_id: str, job_id: str) -> None:
        """A job seen to while the node is still in repair (requeued early): the follow-up leaves it out."""
        repair = self.get(cluster, node_id)
        if repair is None or repair.jobs is None:
            return
        left = [list(job) for job in repair.jobs if job[0] != job_id]
        self.table.update_if(self._key(cluster, node_id), "SET jobs = :j", "attribute_exists(pk)",
                             {":j": {"S": json.dumps(left)}})

    def mark_stopped(self, cluster: str, node_id: str, job_id: str) -> None:
        """A sweep saw the job stopped (not RUNNING) while the node was in repair."""
        self.table.update_if(self._key(cluster, node_id), "ADD stopped :s", "attribute_exists(pk)",
                             {":s": {"SS": [job_id]}})

    def get(self, cluster: str, node_id: str) -> SlurmRepair | None:
        return next((repair for repair in self.repairs(cluster) if repair.node_id == node_id), None)

    def take(self, cluster: str, node_id: str, now: datetime) -> bool:
        """The claim of the node's follow-up (resume, job states), by an agent heartbeat or the sweep: True once."""
        return self.table.update_if(self._key(cluster, node_id), "SET taken_at = :now",
                                    "attribute_exists(pk) AND attribute_not_exists(taken_at)",
                                    {":now": {"S": now.isoformat()}}) is not None

    def forget(self, cluster: str, node_id: str) -> None:
        self.table.delete(self._key(cluster, node_id))
