"""HyperPod's node health event ("SageMaker HyperPod Cluster Node Health Event", source aws.sagemaker) and the node
function's entry for it: parse → load → decide (pure) → claim → execute → page → record (flows/node/remediation.py
holds the decision and action every node path shares). Only the node function loads it: the reconciler's sweeps
decide and act through remediation.py without building the event's models.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from medic.adapters.aws import error_code
from medic.config_core import CLUSTER_NAME_PATTERN, Cluster
from medic.core.models import (
    CLUSTER_ARN_PATTERN,
    INSTANCE_ID_PATTERN,
    Action,
    Fault,
    MedicEvent,
    NodeInfo,
    Outcome,
    Trigger,
    foreign_cluster_arn,
    mismatched_cluster_id,
)
from medic.core.pages import Page
from medic.core.record import About
from medic.core.repairs import PENDING_OUTCOMES
from medic.core.text import short
from medic.deps import Deps
from medic.flows.node.cluster_id import cluster_id_reason, page_cluster_id
from medic.flows.node.faults import classify
from medic.flows.node.follow import end_on_healthy
from medic.flows.node.loops import note_repair, repair_of
from medic.flows.node.policy import NodeDecision
from medic.flows.node.remediation import decide_claim_act, finish_node_decision, follow_hyperpod_repair
from medic.ledger.capacity import CapacityStore, CapacityWait
from medic.ledger.modes import SeenModes
from medic.ledger.node_event import NodeEventView, load_node_event
from medic.ledger.nodes import NodeStore
from medic.ledger.pages import PageStore
from medic.ledger.pauses import PauseStore
from medic.ledger.table import Table
from medic.obs import logger
from medic.outbox.records import emit, rejected


class HealthSummary(BaseModel):
    model_config = ConfigDict(extra="ignore")

    HealthStatus: str = Field(min_length=1, max_length=64)
    HealthStatusReason: str = Field(default="", max_length=4096)
    RepairAction: str | None = Field(default=None, max_length=256)
    Recommendation: str | None = Field(default=None, max_length=1024)


class NodeHealthDetail(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ClusterName: str = Field(pattern=CLUSTER_NAME_PATTERN)
    ClusterArn: str = Field(pattern=CLUSTER_ARN_PATTERN)
    InstanceId: str = Field(pattern=INSTANCE_ID_PATTERN)
    HealthSummary: HealthSummary


class NodeHealthEvent(MedicEvent):
    detail: NodeHealthDetail



def remediate_node(raw: Any, deps: Deps) -> dict:
    try:
        event = NodeHealthEvent.model_validate(raw, context=deps.edge())
    except ValidationError as error:
        return rejected(raw, error, deps.mode.current(), Trigger.NODE_HEALTH, "node health event")

    detail = event.detail
    health_reason = detail.HealthSummary.HealthStatusReason
    cluster = deps.config.cluster(detail.ClusterName)
    fault = classify(detail.HealthSummary.HealthStatus, health_reason)
    foreign = cluster is not None and foreign_cluster_arn(
        detail.ClusterArn, account=deps.account, region=deps.region, name=cluster.name, cluster_id=cluster.id,
        partition=deps.partition)
    if cluster is not None and not foreign:
        return _remediate(event, deps, cluster, fault)
    # an event Medic does not act on: its record's mode is the cluster's (an operator's pause lowers act to paused)
    about = About(incident=f"node:{detail.ClusterName}:{detail.InstanceId}", trigger=Trigger.NODE_HEALTH,
                  event_id=event.id, mode=deps.mode.current(detail.ClusterName), cluster=detail.ClusterName,
                  node_id=detail.InstanceId)
    if cluster is None:
        return emit(about.record(fault=fault, action=Action.NONE, outcome=Outcome.IGNORED,
                                 reason=f"Cluster {detail.ClusterName} is not managed by Medic."))
    wrong_id = mismatched_cluster_id(detail.ClusterArn, account=deps.account, region=deps.region,
                                     name=cluster.name, cluster_id=cluster.id, partition=deps.partition)
    said = (f"{cluster_id_reason(cluster, wrong_id)} No call." if wrong_id
            else f"{foreign} Medic acts only on its configured clusters; no call.")
    record = about.record(fault=Fault.INVALID, action=Action.NONE, outcome=Outcome.REJECTED, reason=short(said, 500))
    return emit(record.paged_if(page_cluster_id(deps, record, cluster, wrong_id)) if wrong_id else record)


def _remediate(event: NodeHealthEvent, deps: Deps, cluster: Cluster, fault: Fault) -> dict:
    detail = event.detail
    health_reason = detail.HealthSummary.HealthStatusReason
    # The ledger first: a redelivered event (a DLQ redrive, an archive replay) costs this one read. It reads the
    # operators' pauses that can hold the cluster too (no Query of their own): a pause lowers the switch's `act` to
    # `paused`, which keeps the same ledger items (only a dry run has its own), so the table is the switch's mode's.
    # And the mode memory: a container's first read of the switch writes it only when it keeps an older version.
    stack = deps.mode.stack(remember=False)
    table = deps.table.for_mode(stack)
    book, memory = deps.mode.book, deps.mode.memory
    pause_keys = book.keys_holding(cluster.name) if isinstance(book, PauseStore) else []
    view = load_node_event(table, cluster.name, detail.InstanceId, str(Trigger.NODE_HEALTH), event.id, deps.now(),
                           pause_keys=pause_keys, memory_key=memory.key() if isinstance(memory, SeenModes) else None)
    deps.mode.remember_unless_kept(SeenModes.kept_of(view.mode_memory) if isinstance(memory, SeenModes) else None)
    mode = (deps.mode.current_given(cluster.name, PauseStore.of_items(list(view.pause_items))) if pause_keys
            else deps.mode.current(cluster.name))
    about = About(incident=f"node:{detail.ClusterName}:{detail.InstanceId}", trigger=Trigger.NODE_HEALTH,
                  event_id=event.id, mode=mode, cluster=detail.ClusterName, node_id=detail.InstanceId)
    if view.event_acted:
        return emit(about.record(fault=fault, action=Action.NONE, outcome=Outcome.DUPLICATE,
                                 reason=_already_acted(event.id, view)))
    node = None
    if fault is Fault.HEALTHY:
        node = _describe_quietly(deps, cluster.name, detail.InstanceId)  # its logical id links a replacement
    elif fault is not Fault.USER_APP_ERROR:
        try:
            node = deps.hyperpod.describe_node(cluster.name, detail.InstanceId)
        except (ClientError, BotoCoreError) as error:
            decision = NodeDecision(Action.NONE, Outcome.FAILED, page=Page.INCIDENT,
                                    reason=f"Could not look the node up (DescribeClusterNode: {error_code(error)}).")
            return finish_node_decision(about, fault, decision, deps, table, cluster, health_reason, view=None)
    if node is not None:
        about = about.but(instance_group=node.instance_group)
    decision, view = decide_claim_act(deps, table, about.mode, cluster, detail.InstanceId, fault, node, about,
                                      event_time=event.time, event_id=event.id, first_view=view,
                                      health_reason=health_reason)
    if fault is Fault.HEALTHY and decision.outcome is not Outcome.DUPLICATE:
        NodeStore(table).record_healthy(cluster.name, detail.InstanceId, event.time)
        if decision.close_incident:
            _close_replaced(table, cluster.name, detail.InstanceId, node)
            ended = end_on_healthy(table, cluster.name, detail.InstanceId, node, event.time)
            if ended is not None:  # HyperPod's repair of the node is over: one more in the position's history
                note_repair(deps, table, about, cluster, ended.logical_id,
                            repair_of(ended.incident, ended.node_id, ended.fault,
                                      "reboot" if ended.node_id == detail.InstanceId else "replace", "hyperpod",
                                      event.time, ended.fault_at), deps.now(), node)
    if decision.waits_for_capacity and node is not None:  # a replace that cannot be served: a sweep retries it
        CapacityStore(table).wait(cluster.name, CapacityWait(node.node_id, fault.value, health_reason, deps.now(),
                                                             decision.waits_for_capacity))
    if decision.follows and node is not None:  # HyperPod repairs it (automatic node recovery): followed
        follow_hyperpod_repair(deps, table, about.mode, cluster, node, fault, about.incident, event.time, event.id)
    return finish_node_decision(about, fault, decision, deps, table, cluster, health_reason, view)


def _already_acted(event_id: str, view: NodeEventView) -> str:
    reason = f"Event {event_id} was already handled; an event acts at most once."
    state = view.state
    if state is not None and state.outcome in PENDING_OUTCOMES:  # e.g. Lambda's retry of a run that died
        reason += (f" Its {state.action} claimed at {state.acted_at:%H:%M:%S} UTC is still unconfirmed: Medic's "
                   "reconciler settles it from the node's status (DescribeClusterNode).")
    return reason


def _describe_quietly(deps: Deps, cluster: str, node_id: str) -> NodeInfo | None:
    try:
        return deps.hyperpod.describe_node(cluster, node_id)
    except (ClientError, BotoCoreError) as error:
        logger.warning("node lookup failed", extra={"node_id": node_id, "error_code": error_code(error)})
        return None


def _close_replaced(table: Table, cluster: str, node_id: str, node: NodeInfo | None) -> None:
    """A replacement is a new instance under the same NodeLogicalId: its healthy report closes the incident
    Medic opened under the old instance id."""
    if node is None or not node.logical_id:
        return
    previous = NodeStore(table).node_for_logical_id(cluster, node.logical_id)
    if previous and previous != node_id:
        PageStore(table).close_incident(f"node:{cluster}:{previous}")
