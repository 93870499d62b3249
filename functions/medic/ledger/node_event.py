"""Everything the node path reads before it decides, in one `BatchGetItem`.

The node's last action and healthy report, the cluster's recent actions (nodes.NodeStore), whether
this event id already acted (requests.RequestStore), when the cluster's last storm summary paged
(pages.PageStore), the reconciler's DescribeCluster snapshot (clusters.ClusterInfoStore) and when the
cluster's agent last reported (agents.seen_key: whether a Slurm node can be drained before its repair; always
the real item, whatever the mode) and, when asked, the operators' pauses that can hold the cluster (pauses.PauseStore)
and the mode memory (modes.SeenModes), both never prefixed either. Each store keeps its own keys; this module only
gathers them into one round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from medic.core.models import ClusterInfo, ClusterState, NodeState
from medic.ledger.agents import heartbeat_seen_at, seen_key
from medic.ledger.capacity import CapacityStore
from medic.ledger.clusters import ClusterInfoStore, fresh_cluster_info
from medic.ledger.nodes import NodeStore, cluster_state_of, node_state_of
from medic.ledger.pages import PageStore
from medic.ledger.requests import RequestStore
from medic.ledger.table import Key, Table


class NodeEventView(NamedTuple):
    state: NodeState | None
    cluster_state: ClusterState
    healthy_at: datetime | None
    event_acted: bool  # this event id already acted (a redelivery, a replay)
    storm_paged_at: datetime | None  # the cluster's last guardrail summary page
    cluster_info: ClusterInfo | None  # the reconciler's DescribeCluster, when fresh
    agent_seen_at: datetime | None = None  # when DynamoDB wrote the cluster's agent's last heartbeat (None: never)
    pause_items: tuple[dict, ...] = ()  # the pause items asked for that exist (pauses.PauseStore.keys_holding)
    mode_memory: dict | None = None  # the mode memory's item, when asked for (modes.SeenModes.key)
    capacity_failures: dict | None = None  # the cluster's capacity failures per group (capacity.failure_of)


def load_node_event(table: Table, cluster: str, node_id: str, trigger: str, event_id: str | None,
                    now: datetime, pause_keys: Sequence[Key] = (), memory_key: Key | None = None) -> NodeEventView:
    nodes, pages, info = NodeStore(table), PageStore(table), ClusterInfoStore(table)
    wanted = {"state": nodes.node_key(cluster, node_id), "actions": nodes.cluster_key(cluster),
              "healthy": nodes.healthy_key(cluster, node_id), "storm": pages.storm_key(cluster),
              "info": info.key(cluster), "agent": seen_key(cluster),
              "capacity": CapacityStore(table).failed_key(cluster)}
    if event_id is not None:
        wanted["event"] = RequestStore(table).claim_key(trigger, event_id)
    wanted.update({f"pause{index}": key for index, key in enumerate(pause_keys)})
    if memory_key is not None:
        wanted["memory"] = memory_key
    by_key = {(item["pk"]["S"], item["sk"]["S"]): item for item in table.batch_get(wanted.values(), attempts=1)}
    found = {name: by_key.get((key["pk"]["S"], key["sk"]["S"])) for name, key in wanted.items()}
    pauses = tuple(item for name, item in found.items() if name.startswith("pause") and item is not None)
    healthy, storm = found["healthy"], found["storm"]
    return NodeEventView(
        state=node_state_of(found["state"]), cluster_state=cluster_state_of(found["actions"]),
        healthy_at=datetime.fromisoformat(healthy["at"]["S"]) if healthy else None,
        event_acted=found.get("event") is not None,
        storm_paged_at=datetime.fromisoformat(storm["paged_at"]["S"]) if storm and "paged_at" in storm else None,
        cluster_info=fresh_cluster_info(found["info"], now), agent_seen_at=heartbeat_seen_at(found["agent"]),
        pause_items=pauses, mode_memory=found.get("memory"), capacity_failures=found["capacity"])
