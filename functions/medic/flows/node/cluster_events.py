"""HyperPod cluster events (Error, and repair-related Warn): record them against the node's open
incident. A repair Medic started that HyperPod could not complete (no capacity, a failed reboot or
replacement) closes Medic's action as `failed`; every such event pages once per incident with the
event's description and the log group to read."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import ValidationError

from medic.core.models import (
    Action,
    Fault,
    NodeState,
    Outcome,
    Trigger,
    Why,
    foreign_cluster_arn,
    mismatched_cluster_id,
)
from medic.core.pages import PageSource, PageWindow
from medic.core.record import About
from medic.core.repairs import AWAITING_DRAIN, IN_FLIGHT, RESULT_UNKNOWN
from medic.core.text import quoted, short
from medic.deps import Deps
from medic.flows.node.cluster_event_policy import ClusterEvent, classify_cluster_event, cluster_log_group
from medic.flows.node.cluster_id import cluster_id_reason, page_cluster_id
from medic.flows.node.pages import cluster_event_page
from medic.ledger.capacity import CapacityStore
from medic.ledger.nodes import NodeStore
from medic.ledger.requests import RequestStore
from medic.ledger.table import Table
from medic.outbox.pages import page_incident
from medic.outbox.records import emit, rejected

# A claim whose call went out (or may have): the repair is Medic's.
MEDICS_REPAIR_STATES = frozenset({Outcome.EXECUTED.value, IN_FLIGHT, RESULT_UNKNOWN, AWAITING_DRAIN})
# Causes that end a repair Medic started; a lifecycle-script failure on the new node does too.
ENDS_MEDICS_REPAIR = frozenset({Fault.CAPACITY_SHORTFALL, Fault.REPAIR_FAILED, Fault.LIFECYCLE_SCRIPT_FAILED})


def record_cluster_event(raw: Any, deps: Deps) -> dict:
    mode = deps.mode.current()
    try:
        event = ClusterEvent.model_validate(raw, context=deps.edge())
    except ValidationError as error:
        return rejected(raw, error, mode, Trigger.CLUSTER_EVENT, "HyperPod cluster event")
    details, now = event.detail.EventDetails, deps.now()
    mode = deps.mode.current(details.ClusterName)  # an operator's pause of the cluster lowers act to paused
    fault = classify_cluster_event(details)
    message = details.failure_message
    about = About(incident=(f"node:{details.ClusterName}:{details.InstanceId}" if details.InstanceId
                            else f"cluster:{details.ClusterName}:{details.InstanceGroupName or '-'}"),
                  trigger=Trigger.CLUSTER_EVENT, event_id=event.id, mode=mode, cluster=details.ClusterName,
                  instance_group=details.InstanceGroupName, node_id=details.InstanceId)
    cluster = deps.config.cluster(details.ClusterName)
    if cluster is None:
        return emit(about.record(fault=fault, action=Action.NONE, outcome=Outcome.IGNORED,
                                 reason=f"Cluster {details.ClusterName} is not managed by Medic."))
    foreign = foreign_cluster_arn(details.ClusterArn, account=deps.account, region=deps.region, name=cluster.name,
                                  cluster_id=cluster.id, partition=deps.partition)
    if foreign:
        wrong_id = mismatched_cluster_id(details.ClusterArn, account=deps.account, region=deps.region,
                                         name=cluster.name, cluster_id=cluster.id, partition=deps.partition)
        said = (cluster_id_reason(cluster, wrong_id) if wrong_id
                else f"{foreign} Medic records events of its configured clusters only.")
        record = about.record(fault=Fault.INVALID, action=Action.NONE, outcome=Outcome.REJECTED,
                              reason=short(said, 500))
        return emit(record.paged_if(page_cluster_id(deps, record, cluster, wrong_id)) if wrong_id else record)
    table = deps.table.for_mode(mode)
    if not RequestStore(table).claim_request(str(Trigger.CLUSTER_EVENT), details.EventId, now):
        return emit(about.record(fault=fault, action=Action.NONE, outcome=Outcome.DUPLICATE,
                                 reason=f"HyperPod event {details.EventId} was already recorded."))

    said = quoted(f"{details.Description} {message}".strip(), 400)  # HyperPod's words, never as if Medic's
    if fault is Fault.CAPACITY_SHORTFALL and details.InstanceGroupName:  # a replace in the group may not be served
        CapacityStore(table).replacement_failed(cluster.name, details.InstanceGroupName, event.time,
                                                f"{details.Description} {message}".strip())
    acted_on, state = _medics_node(table, cluster.name, details.InstanceId, details.node_logical_id)
    guardrails = deps.config.guardrails_for(cluster)
    window = timedelta(minutes=max(guardrails.repair_minutes, guardrails.node_cooldown_minutes))
    medics_repair = (state is not None and acted_on is not None and state.outcome in MEDICS_REPAIR_STATES
                     and now - state.acted_at <= window and fault in ENDS_MEDICS_REPAIR)
    if medics_repair:
        NodeStore(table).set_outcome(cluster.name, acted_on, Outcome.FAILED.value)
        replacement = (f" (its replacement {details.InstanceId}, logical id {details.node_logical_id})"
                       if details.InstanceId and acted_on != details.InstanceId else "")
        on_medics_node = about.but(incident=f"node:{cluster.name}:{acted_on}", node_id=acted_on)
        record = on_medics_node.record(
            fault=fault, action=state.action, outcome=Outcome.FAILED, attempt=state.attempt,
            reason=f"HyperPod could not complete Medic's {state.action} of {acted_on}{replacement} "
                   f"(started {state.acted_at:%H:%M} UTC): {said}")
    else:
        record = about.record(fault=fault, action=Action.NONE, outcome=Outcome.DEFERRED, why=Why.HUMAN_DECIDES,
                              reason=f"HyperPod reports ({details.EventLevel}): {said} A human decides.")
    text = cluster_event_page(record, details.Description, message,
                              cluster_log_group(cluster.name, details.ClusterArn), deps.region)
    return emit(record.paged_if(page_incident(deps, table, record, text,
                                              window=PageWindow.cluster(PageSource.CLUSTER_EVENT, cluster.name))))


def _medics_node(table: Table, cluster: str, instance_id: str | None,
                 logical_id: str | None) -> tuple[str | None, NodeState | None]:
    """The instance Medic acted on that this event concerns, with Medic's state of it: the event's instance, or,
    since a replacement is a new instance under the same NodeLogicalId, the one Medic acted on under that id."""
    state = NodeStore(table).load(cluster, instance_id)[0] if instance_id else None
    if state is not None or not logical_id:
        return instance_id, state
    previous = NodeStore(table).node_for_logical_id(cluster, logical_id)
    if previous is None:
        return instance_id, None
    return previous, NodeStore(table).load(cluster, previous)[0]
