"""Node memory: what Medic did to each node and cluster, healthy reports, repairs in progress.

Claims are optimistic: the caller reads the state, decides, and writes the claim back on
condition that nobody changed it in between (a version number per item, both items in one
transaction). A racing invocation loses the transaction, re-reads and sees the winner's claim.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import NamedTuple

from medic.core.models import ClusterAction, ClusterState, NodeState
from medic.core.repairs import AWAITING_DRAIN, IN_FLIGHT, AwaitedCall, PendingClaim, RepairWatch
from medic.ledger.table import Key, Table, epoch, expires, readable

CLUSTER_ACTION_HOURS = 2  # longer than any budget or repair window


class NodeClaim(NamedTuple):
    cluster: str
    node_id: str
    fault: str
    action: str
    outcome: str
    attempt: int
    at: datetime
    logical_id: str | None = None  # the node's NodeLogicalId: a replacement keeps it under a new instance id
    fault_at: datetime | None = None  # the health event's time (the incident's timeline; at = its receipt)


class ConfigMismatch(NamedTuple):
    """medic.yaml's node_recovery against the cluster's DescribeCluster NodeRecovery."""

    cluster: str
    configured: str  # automatic | none
    actual: str  # automatic | none


class NodeMemory(NamedTuple):
    """A node's last action, with the node it is about (an operator's overview of the ledger)."""

    cluster: str
    node_id: str
    state: NodeState


class NodeInRepair(NamedTuple):
    """A node a sweep saw in repair, with its cluster (an operator's overview of the ledger)."""

    cluster: str
    watch: RepairWatch


class NodeStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    # keys
    def node_key(self, cluster: str, node_id: str) -> Key:
        return self.table.key(f"node#{cluster}#{node_id}", "state")

    def cluster_key(self, cluster: str) -> Key:
        return self.table.key(f"cluster#{cluster}", "actions")

    def healthy_key(self, cluster: str, node_id: str) -> Key:
        return self.table.key(f"node#{cluster}#{node_id}", "healthy")

    def _reported_key(self, cluster: str, node_id: str) -> Key:
        return self.table.key(f"node#{cluster}#{node_id}", "reconciled")

    def _logical_key(self, cluster: str, logical_id: str) -> Key:
        return self.table.key(f"logical#{cluster}#{logical_id}", "node")

    def _node_recovery_key(self, cluster: str) -> Key:
        return self.table.key(f"cluster#{cluster}", "node_recovery")

    def _repair_key(self, cluster: str, node_id: str) -> Key:
        return self.table.key(f"repair#{cluster}", node_id)

    # reads
    def load(self, cluster: str, node_id: str) -> tuple[NodeState | None, ClusterState]:
        """The node's last action and the cluster's recent actions, in one round trip (the node path reads
        these with more in one `BatchGetItem`: ledger.node_event)."""
        items = self.table.batch_get([self.node_key(cluster, node_id), self.cluster_key(cluster)], attempts=1)
        node_item = next((i for i in items if i["sk"]["S"] == "state"), None)
        cluster_item = next((i for i in items if i["sk"]["S"] == "actions"), None)
        return node_state_of(node_item), cluster_state_of(cluster_item)

    def cluster_state(self, cluster: str) -> ClusterState:
        """The cluster's recent node actions (the claims the reconciler re-checks)."""
        return cluster_state_of(self.table.get(self.cluster_key(cluster)))

    def cluster_actions_since(self, cluster: str, since: datetime) -> int:
        """How many node actions Medic took on the cluster since then (its guardrail history)."""
        return sum(1 for action in self.cluster_state(cluster).actions if action.at >= since)

    def node_for_logical_id(self, cluster: str, logical_id: str) -> str | None:
        """The instance id Medic last acted on under this NodeLogicalId (a replacement has a new one)."""
        item = self.table.get(self._logical_key(cluster, logical_id))
        return item["instance_id"]["S"] if item else None

    def node_claims(self, cluster: str, node_ids: Iterable[str]) -> dict[str, PendingClaim]:
        """The node states of these nodes (with their retry count), by node id; nodes without one are absent."""
        items = self.table.batch_get(self.node_key(cluster, node_id) for node_id in dict.fromkeys(node_ids))
        claims = (_pending_claim(item) for item in items)
        return {claim.node_id: claim for claim in claims}

    # an operator's overview: this store's items among a scan of the whole table (Table.scan), unreadable ones left out
    def node_states_among(self, items: Iterable[dict]) -> list[NodeMemory]:
        """Every node's last action."""
        found = []
        for rest, _, item in self.table.among(items, "node#", "state"):
            cluster, _, node_id = rest.partition("#")
            state = readable(node_state_of, item)
            if state is not None:
                found.append(NodeMemory(cluster, node_id, state))
        return found

    def cluster_states_among(self, items: Iterable[dict]) -> dict[str, ClusterState]:
        """Every cluster's recent node actions, by cluster name."""
        found = {}
        for cluster, _, item in self.table.among(items, "cluster#", "actions"):
            state = readable(cluster_state_of, item)
            if state is not None:
                found[cluster] = state
        return found

    def repair_watches_among(self, items: Iterable[dict]) -> list[NodeInRepair]:
        """Every node a sweep saw in repair."""
        found = []
        for cluster, _, item in self.table.among(items, "repair#"):
            watch = readable(_repair_watch, item)
            if watch is not None:
                found.append(NodeInRepair(cluster, watch))
        return found

    # writes
    def record_healthy(self, cluster: str, node_id: str, at: datetime) -> None:
        """Remember the node's latest Healthy report (by the event's time): an older event about it is stale."""
        item = {**self.healthy_key(cluster, node_id), "at": {"S": at.isoformat()}, "expires_at": expires(at)}
        self.table.put_if(item, "attribute_not_exists(pk) OR #at < :at", {":at": {"S": at.isoformat()}}, {"#at": "at"})

    def claim(self, claim: NodeClaim, node: NodeState | None, cluster: ClusterState, reboot: bool,
              also: Iterable[dict] = ()) -> bool:
        """Record the action before it is taken; False when another invocation got there first. `also`: more
        writes of the same transaction (the event id's claim, so an event acts at most once)."""
        last_reboot = claim.at if reboot else (node.last_reboot_at if node else None)
        node_item = {
            **self.node_key(claim.cluster, claim.node_id),
            "fault": {"S": claim.fault},
            "action": {"S": claim.action},
            "outcome": {"S": claim.outcome},
            "acted_at": {"S": claim.at.isoformat()},
            "attempt": {"N": str(claim.attempt)},
            "version": {"N": str((node.version if node else 0) + 1)},
            "expires_at": expires(claim.at),
        }
        if last_reboot is not None:
            node_item["last_reboot_at"] = {"S": last_reboot.isoformat()}
        if claim.logical_id:
            node_item["logical_id"] = {"S": claim.logical_id}
        if claim.fault_at is not None:  # the timeline, read when the repair ends (flows/node/sweep_repairs)
            node_item["fault_at"] = {"S": claim.fault_at.isoformat()}
            node_item["detected_at"] = {"S": claim.at.isoformat()}
        horizon = claim.at - timedelta(hours=CLUSTER_ACTION_HOURS)
        actions = [a for a in cluster.actions if a.at > horizon]  # bounded: only the last hours' actions
        actions.append(ClusterAction(claim.node_id, claim.action, claim.at, claim.logical_id))
        cluster_item = {
            **self.cluster_key(claim.cluster),
            "actions": {"L": [{"M": {"node": {"S": a.node_id}, "action": {"S": a.action},
                                     "at": {"S": a.at.isoformat()},
                                     **({"logical": {"S": a.logical_id}} if a.logical_id else {})}}
                              for a in actions]},
            "version": {"N": str(cluster.version + 1)},
            "expires_at": expires(claim.at),
        }
        name = self.table.name
        writes = [
            {"Put": {"TableName": name, "Item": node_item, **_unchanged(node.version if node else 0)}},
            {"Put": {"TableName": name, "Item": cluster_item, **_unchanged(cluster.version)}},
        ]
        if claim.logical_id:  # the repair is found again from its logical id once the instance id changed
            writes.append({"Put": {"TableName": name, "Item": {
                **self._logical_key(claim.cluster, claim.logical_id), "instance_id": {"S": claim.node_id},
                "acted_at": {"S": claim.at.isoformat()}, "expires_at": expires(claim.at)}}})
        return self.table.transact([*writes, *also])

    def set_outcome(self, cluster: str, node_id: str, outcome: str) -> None:
        self.table.update(self.node_key(cluster, node_id), "SET outcome = :o", {":o": {"S": outcome}})

    # drain first (flows/node/drain_first): the claimed call waits for the agent's drain, or its deadline
    def await_drain(self, call: AwaitedCall) -> bool:
        """The claim just written (in flight) waits for the drain instead: what its call needs, kept with it."""
        values = {":o": {"S": AWAITING_DRAIN}, ":in": {"S": IN_FLIGHT}, ":v": {"N": str(call.version)},
                  ":next": {"N": str(call.version + 1)}, ":trigger": {"S": call.trigger},
                  ":event": {"S": call.event_id}, ":incident": {"S": call.incident},
                  ":command": {"S": call.drain_command}, ":name": {"S": call.node_name},
                  ":by": {"S": call.call_by.isoformat()}, ":reason": {"S": call.health_reason[:500] or "-"},
                  ":group": {"S": call.instance_group or "-"}}
        update = ("SET outcome = :o, version = :next, call_trigger = :trigger, call_event = :event, "
                  "call_incident = :incident, drain_command = :command, node_name = :name, call_by = :by, "
                  "health_reason = :reason, instance_group = :group")
        return self.table.update_if(self.node_key(call.cluster, call.node_id), update,
                                    "outcome = :in AND version = :v", values) is not None

    def awaited_calls(self, cluster: str, node_ids: Iterable[str]) -> list[AwaitedCall]:
        """The calls among these nodes' claims that wait for a drain (one BatchGetItem)."""
        items = self.table.batch_get(self.node_key(cluster, node_id) for node_id in dict.fromkeys(node_ids))
        return [call for item in items if (call := readable(_awaited_call, cluster, item)) is not None]

    def awaited_call(self, cluster: str, node_id: str) -> AwaitedCall | None:
        item = self.table.get(self.node_key(cluster, node_id))
        return readable(_awaited_call, cluster, item) if item else None

    def take_awaited_call(self, call: AwaitedCall, now: datetime) -> bool:
        """The one caller that makes the awaited call (the drain's result, or a deadline check): the claim is in
        flight again from now, the call's moment. False when another took it, or the claim changed."""
        values = {":o": {"S": IN_FLIGHT}, ":w": {"S": AWAITING_DRAIN}, ":v": {"N": str(call.version)},
                  ":next": {"N": str(call.version + 1)}, ":now": {"S": now.isoformat()}}
        update = "SET outcome = :o, version = :next, acted_at = :now"
        if call.action == "reboot_node":
            update += ", last_reboot_at = :now"
        return self.table.update_if(self.node_key(call.cluster, call.node_id), update,
                                    "outcome = :w AND version = :v", values) is not None

    def settle_awaited_call(self, call: AwaitedCall, outcome: str) -> bool:
        """An awaited call that will not be made (Medic paused meanwhile): its claim's final outcome."""
        return self.table.update_if(
            self.node_key(call.cluster, call.node_id), "SET outcome = :o, version = :next",
            "outcome = :w AND version = :v",
            {":o": {"S": outcome}, ":w": {"S": AWAITING_DRAIN}, ":v": {"N": str(call.version)},
             ":next": {"N": str(call.version + 1)}}) is not None

    def report_config_mismatch(self, mismatch: ConfigMismatch, now: datetime) -> bool:
        """Store the disagreement for `medic status`; True only the first time this exact one is seen."""
        return self.table.put_if(
            {**self._node_recovery_key(mismatch.cluster), "configured": {"S": mismatch.configured},
             "actual": {"S": mismatch.actual}, "seen_at": {"S": now.isoformat()}},
            "attribute_not_exists(pk) OR configured <> :c OR actual <> :a",
            {":c": {"S": mismatch.configured}, ":a": {"S": mismatch.actual}})

    def clear_config_mismatch(self, cluster: str) -> None:
        """The config and the cluster agree (again): nothing for `medic status` to show."""
        self.table.delete(self._node_recovery_key(cluster))

    # the reconciler: unfinished claims, repairs in progress, failed nodes already reported
    def retry_claim(self, cluster: str, claim: PendingClaim, now: datetime) -> bool:
        """Claim an unconfirmed action again (one more retry); False when the node state changed meanwhile."""
        values = {":v": {"N": str(claim.version)}, ":next": {"N": str(claim.version + 1)},
                  ":o": {"S": "in_flight"}, ":now": {"S": now.isoformat()}, ":one": {"N": "1"},
                  ":zero": {"N": "0"}}
        update = "SET outcome = :o, acted_at = :now, version = :next, retries = if_not_exists(retries, :zero) + :one"
        if claim.action == "reboot_node":
            update += ", last_reboot_at = :now"
        return self.table.update_if(self.node_key(cluster, claim.node_id), update, "version = :v", values) is not None

    def settle_claim(self, cluster: str, claim: PendingClaim, outcome: str) -> bool:
        """Write an unfinished claim's final outcome, unless the node state changed since it was read."""
        return self.table.update_if(
            self.node_key(cluster, claim.node_id), "SET outcome = :o, version = :next", "version = :v",
            {":o": {"S": outcome}, ":v": {"N": str(claim.version)}, ":next": {"N": str(claim.version + 1)}},
        ) is not None

    def repair_watches(self, cluster: str) -> dict[str, RepairWatch]:
        """The cluster's nodes a sweep saw in repair, by node id (one partition per cluster)."""
        watches: dict[str, RepairWatch] = {}
        for item in self.table.partition(f"repair#{cluster}"):
            watches[item["sk"]["S"]] = _repair_watch(item)
        return watches

    def watch_repair(self, cluster: str, node_id: str, status: str, since: datetime, medics: bool,
                     origin: str | None = None, slurm_node: str | None = None) -> None:
        """Remember that the node is in repair, since when and who started it (the first write wins), and the
        instance Medic acted on when Medic did (a replacement's old id: its claim holds the incident's timeline)."""
        values = {":since": {"S": since.isoformat()}, ":status": {"S": status},
                  ":by": {"S": "medic" if medics else "hyperpod"}, ":exp": expires(since)}
        update = ("SET since = if_not_exists(since, :since), started_by = if_not_exists(started_by, :by), "
                  "#status = :status, expires_at = :exp")
        if origin is not None:
            values[":origin"] = {"S": origin}
            update += ", origin = if_not_exists(origin, :origin)"
        if slurm_node is not None:  # which jobs' stall alarms this repair holds (flows/stall)
            values[":slurm"] = {"S": slurm_node}
            update += ", slurm_node = :slurm"
        self.table.update(self._repair_key(cluster, node_id), update, values, {"#status": "status"})

    def repair_reported(self, cluster: str, node_id: str, now: datetime) -> None:
        self.table.update(self._repair_key(cluster, node_id), "SET reported_at = :now",
                          {":now": {"S": now.isoformat()}})

    def end_repair_watch(self, cluster: str, node_id: str) -> None:
        self.table.delete(self._repair_key(cluster, node_id))

    def claim_failure_report(self, cluster: str, node_id: str, now: datetime, window: timedelta) -> bool:
        """True at most once per window for a failed node the reconciler found: it is reported once."""
        return self.table.put_if(
            {**self._reported_key(cluster, node_id), "reported_at": {"S": now.isoformat()},
             "expires_at": {"N": str(epoch(now + window))}},
            "attribute_not_exists(pk) OR reported_at < :cutoff", {":cutoff": {"S": (now - window).isoformat()}})

    def release_failure_report(self, cluster: str, node_id: str) -> None:
        self.table.delete(self._reported_key(cluster, node_id))


def _unchanged(version: int) -> dict:
    if version == 0:
        return {"ConditionExpression": "attribute_not_exists(pk)"}
    return {"ConditionExpression": "version = :v", "ExpressionAttributeValues": {":v": {"N": str(version)}}}


def node_state_of(item: dict | None) -> NodeState | None:
    if not item:
        return None
    reboot = item.get("last_reboot_at", {}).get("S")
    return NodeState(
        fault=item["fault"]["S"], action=item["action"]["S"], outcome=item["outcome"]["S"],
        acted_at=datetime.fromisoformat(item["acted_at"]["S"]), attempt=int(item["attempt"]["N"]),
        last_reboot_at=datetime.fromisoformat(reboot) if reboot else None, version=int(item["version"]["N"]),
        logical_id=item.get("logical_id", {}).get("S"),
    )


def cluster_state_of(item: dict | None) -> ClusterState:
    if not item:
        return ClusterState(actions=(), version=0)
    actions = tuple(
        ClusterAction(a["M"]["node"]["S"], a["M"]["action"]["S"], datetime.fromisoformat(a["M"]["at"]["S"]),
                      a["M"].get("logical", {}).get("S"))
        for a in item.get("actions", {}).get("L", [])
    )
    return ClusterState(actions=actions, version=int(item["version"]["N"]))


def _repair_watch(item: dict) -> RepairWatch:
    return RepairWatch(
        node_id=item["sk"]["S"], status=item.get("status", {}).get("S", "Unknown"),
        since=datetime.fromisoformat(item["since"]["S"]), reported="reported_at" in item,
        medics=item.get("started_by", {}).get("S") == "medic", origin=item.get("origin", {}).get("S"),
        slurm_node=item.get("slurm_node", {}).get("S"))


def _pending_claim(item: dict) -> PendingClaim:
    node_id = item["pk"]["S"].rsplit("#", 1)[-1]
    return PendingClaim(
        node_id=node_id, fault=item["fault"]["S"], action=item["action"]["S"], outcome=item["outcome"]["S"],
        acted_at=datetime.fromisoformat(item["acted_at"]["S"]), attempt=int(item["attempt"]["N"]),
        version=int(item["version"]["N"]), retries=int(item.get("retries", {}).get("N", "0")),
        fault_at=_moment(item, "fault_at"), detected_at=_moment(item, "detected_at"),
    )


def _awaited_call(cluster: str, item: dict) -> AwaitedCall | None:
    if item.get("outcome", {}).get("S") != AWAITING_DRAIN:
        return None
    group, reason = item["instance_group"]["S"], item["health_reason"]["S"]
    return AwaitedCall(
        cluster=cluster, node_id=item["pk"]["S"].rsplit("#", 1)[-1], fault=item["fault"]["S"],
        action=item["action"]["S"], attempt=int(item["attempt"]["N"]), version=int(item["version"]["N"]),
        trigger=item["call_trigger"]["S"], event_id=item["call_event"]["S"], incident=item["call_incident"]["S"],
        drain_command=item["drain_command"]["S"], node_name=item["node_name"]["S"],
        call_by=datetime.fromisoformat(item["call_by"]["S"]), instance_group=None if group == "-" else group,
        health_reason="" if reason == "-" else reason)


def _moment(item: dict, name: str) -> datetime | None:
    return datetime.fromisoformat(item[name]["S"]) if name in item else None
