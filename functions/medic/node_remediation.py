"""Node remediation: parse → load → decide (pure) → claim → execute → page → record."""

from __future__ import annotations

import random
import time
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from medic.adapters.aws import error_code
from medic.adapters.hyperpod import AMBIGUOUS_ERRORS, INVALID_INSTANCE_STATUS
from medic.config import Cluster
from medic.deps import Deps
from medic.domain.faults import classify
from medic.domain.models import (
    Action,
    ClusterInfo,
    ClusterState,
    Fault,
    NodeHealthEvent,
    NodeInfo,
    Outcome,
    Trigger,
    foreign_cluster_arn,
)
from medic.domain.pages import PageText, console_link, node_page, storm_page
from medic.domain.policy import IN_REPAIR_STATUSES, NodeContext, NodeDecision, Page, decide_node
from medic.domain.reconcile import IN_FLIGHT, RESULT_UNKNOWN
from medic.ledger.nodes import ConfigMismatch, NodeClaim, NodeStore
from medic.ledger.pages import PageStore
from medic.ledger.requests import RequestStore
from medic.ledger.table import Table
from medic.obs import logger
from medic.paging import page_cluster_summary, page_incident
from medic.records import complete, emit, rejected, short

# A lost claim race re-reads and re-decides. Each loss means another claim won (this node's, then
# the decision is a duplicate; or another node's, which spends the cluster's budget, so the budget
# or breaker soon decides): the loop ends well before this bound unless many invocations collide.
CLAIM_ATTEMPTS = 12
STORM_WINDOW = timedelta(hours=1)  # the budget's rolling hour: one summary page per cluster per window


def remediate_node(raw: Any, deps: Deps) -> dict:
    mode = deps.mode.current()
    try:
        event = NodeHealthEvent.model_validate(raw)
    except ValidationError as error:
        return rejected(raw, error, mode, Trigger.NODE_HEALTH, "node health event")

    detail = event.detail
    health_reason = detail.HealthSummary.HealthStatusReason
    base = {"trigger": Trigger.NODE_HEALTH, "event_id": event.id, "cluster": detail.ClusterName,
            "node_id": detail.InstanceId, "mode": mode,
            "incident": f"node:{detail.ClusterName}:{detail.InstanceId}"}
    cluster = deps.config.cluster(detail.ClusterName)
    fault = classify(detail.HealthSummary.HealthStatus, health_reason)
    if cluster is None:
        return emit({**base, "fault": fault.value, "action": Action.NONE, "outcome": Outcome.IGNORED,
                     "reason": f"Cluster {detail.ClusterName} is not managed by Medic."})
    foreign = foreign_cluster_arn(detail.ClusterArn, account=deps.account, region=deps.region, name=cluster.name,
                                  cluster_id=cluster.id)
    if foreign:
        return emit({**base, "fault": Fault.INVALID.value, "action": Action.NONE, "outcome": Outcome.REJECTED,
                     "reason": short(f"{foreign} Medic acts only on its configured clusters; no call.", 500)})

    table = deps.table.for_mode(mode)
    # Each event id acts at most once (a DLQ redrive, an archive replay, a late duplicate acts no more).
    if not RequestStore(table).claim_request(str(Trigger.NODE_HEALTH), event.id, deps.now()):
        return emit({**base, "fault": fault.value, "action": Action.NONE, "outcome": Outcome.DUPLICATE,
                     "reason": f"Event {event.id} was already handled; an event acts at most once."})
    try:
        return _remediate(event, deps, table, mode, cluster, fault, base)
    except BaseException:
        RequestStore(table).release_node_event(event.id)  # Lambda's retry of this event may act
        raise


def _remediate(event: NodeHealthEvent, deps: Deps, table: Table, mode: str, cluster: Cluster, fault: Fault,
               base: dict) -> dict:
    detail = event.detail
    health_reason = detail.HealthSummary.HealthStatusReason
    node = None
    if fault is Fault.HEALTHY:
        node = _describe_quietly(deps, cluster.name, detail.InstanceId)  # its logical id links a replacement
    elif fault is not Fault.USER_APP_ERROR:
        try:
            node = deps.hyperpod.describe_node(cluster.name, detail.InstanceId)
        except (ClientError, BotoCoreError) as error:
            decision = NodeDecision(Action.NONE, Outcome.FAILED, page=Page.INCIDENT,
                                    reason=f"Could not look the node up (DescribeClusterNode: {error_code(error)}).")
            return _finish(base, fault, decision, deps, table, health_reason, cluster_state=None)
    if node is not None:
        base["instance_group"] = node.instance_group
    decision, cluster_state = decide_claim_act(deps, table, mode, cluster, detail.InstanceId, fault, node,
                                               base["incident"], event_time=event.time)
    if fault is Fault.HEALTHY:
        NodeStore(table).record_healthy(cluster.name, detail.InstanceId, event.time)
        if decision.close_incident:
            _close_replaced(table, cluster.name, detail.InstanceId, node)
    return _finish(base, fault, decision, deps, table, health_reason, cluster_state)


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


def decide_claim_act(deps: Deps, table: Table, mode: str, cluster: Cluster, node_id: str, fault: Fault,
                     node: NodeInfo | None, incident: str,
                     event_time: datetime | None = None) -> tuple[NodeDecision, ClusterState]:
    """The node path the event handler and the reconciler share: decide (pure), claim, act.

    The claim is written as in flight before the call and gets the call's outcome after it, so a run
    that dies in between leaves a claim the reconciler can tell from a finished one."""
    guardrails = deps.config.guardrails_for(cluster)
    now = deps.now()
    fetched: list[ClusterInfo] = []

    def cluster_info() -> ClusterInfo:
        info = deps.hyperpod.cluster_info(cluster.name)
        fetched.append(info)
        return info

    nodes = NodeStore(table)
    for _ in range(CLAIM_ATTEMPTS):
        state, cluster_state, healthy_at = nodes.load_with_health(cluster.name, node_id)
        decision = decide_node(NodeContext(mode=mode, cluster=cluster, guardrails=guardrails, fault=fault,
                                           node=node, state=state, cluster_state=cluster_state,
                                           cluster_info=cluster_info, now=now, event_time=event_time,
                                           last_healthy_at=healthy_at))
        if decision.outcome not in (Outcome.EXECUTED, Outcome.DRY_RUN):
            break
        claim = NodeClaim(cluster.name, node_id, fault.value, decision.action.value,
                          IN_FLIGHT if decision.executes else decision.outcome.value, decision.attempt, now,
                          logical_id=node.logical_id if node else None)
        if nodes.claim(claim, state, cluster_state, reboot=decision.action is Action.REBOOT_NODE):
            break
        logger.info("claim race lost; re-deciding", extra={"incident": incident})
        time.sleep(random.uniform(0, 0.05))  # noqa: S311 - jitter, not cryptography
    else:
        decision = NodeDecision(decision.action, Outcome.DEFERRED,
                                f"Lost the claim to concurrent decisions {CLAIM_ATTEMPTS} times; the reconciler "
                                "takes this node up on its next sweep.", attempt=decision.attempt)

    if decision.close_incident:
        PageStore(table).close_incident(incident)
    if fetched:
        report_node_recovery_mismatch(deps, table, mode, cluster, fetched[-1])
    if decision.executes:
        decision = act_on_claim(decision, deps, table, cluster.name, node_id)
    return decision, cluster_state


def report_node_recovery_mismatch(deps: Deps, table: Table, mode: str, cluster: Cluster, info: ClusterInfo,
                                  trigger: Trigger = Trigger.NODE_HEALTH, event_id: str = "") -> dict | None:
    """The cluster's real NodeRecovery decides; a config that says otherwise is recorded and paged once (the
    ledger item `cluster#<name>` / `node_recovery` is what `medic status` shows)."""
    if info.node_recovery is None or info.node_recovery == cluster.node_recovery:
        return None
    incident = f"cluster:{cluster.name}:node_recovery"
    mismatch = ConfigMismatch(cluster.name, cluster.node_recovery, info.node_recovery)
    if not NodeStore(table).report_config_mismatch(mismatch, deps.now()):
        return None
    actual = "Automatic" if info.node_recovery == "automatic" else "None"
    follows = ("defers failed nodes to HyperPod" if info.node_recovery == "automatic"
               else "reboots and replaces failed nodes itself")
    record = complete({"incident": incident, "trigger": trigger, "event_id": event_id or f"cluster-{cluster.name}",
                       "cluster": cluster.name, "fault": Fault.CONFIG_MISMATCH.value, "action": Action.NONE,
                       "outcome": Outcome.IGNORED, "mode": mode,
                       "reason": f"medic.yaml says node_recovery: {cluster.node_recovery}, but DescribeCluster says "
                                 f"NodeRecovery {actual}; Medic follows the cluster and {follows}. "
                                 f"Fix clusters[{cluster.name}].node_recovery in medic.yaml."})
    if mode != "dry_run":
        record["paged"] = page_incident(deps, table, record, _mismatch_page(record, deps.region))
    return emit(record)


def _mismatch_page(record: dict, region: str) -> PageText:
    subject = f"[Medic] {record['cluster']}: node_recovery in medic.yaml disagrees with the cluster"
    body = "\n".join([
        f"Cluster:        {record['cluster']}",
        f"What happened:  {record['reason']}",
        "",
        "What to do:     Set node_recovery in medic.yaml to the cluster's setting and redeploy "
        "(or change the cluster's NodeRecovery with UpdateCluster).",
        f"Console:        {console_link(region, record['cluster'])}",
        f"Incident:       {record['incident']} (mode {record['mode']})",
    ])
    return PageText(subject[:100], body)


def act_on_claim(decision: NodeDecision, deps: Deps, table: Table, cluster: str, node_id: str) -> NodeDecision:
    """Make the claimed call and write what came of it into the claim (the reconciler's retry too)."""
    decision, outcome = _execute(decision, deps, cluster, node_id)
    NodeStore(table).set_outcome(cluster, node_id, outcome)
    return decision


def _execute(decision: NodeDecision, deps: Deps, cluster: str, node_id: str) -> tuple[NodeDecision, str]:
    """The call; with the outcome its claim keeps in the ledger (unknown when the answer was lost)."""
    try:
        decided = _call(decision, deps, cluster, node_id)
    except AMBIGUOUS_ERRORS as error:
        # The request may have reached HyperPod: not repeated, not paged; the claim stays unknown and
        # the next attempt (or the reconciler) re-checks the node before any new call.
        unknown = replace(decision, outcome=Outcome.DEFERRED,
                          reason=f"Result unknown: the {decision.action.value} call was sent but its answer was "
                                 f"lost ({error_code(error)}); it may have gone through. Medic re-checks the node "
                                 "(DescribeClusterNode) before any new call and never repeats it blindly.")
        return unknown, RESULT_UNKNOWN
    return decided, decided.outcome.value


def _call(decision: NodeDecision, deps: Deps, cluster: str, node_id: str) -> NodeDecision:
    verb = decision.action.value
    try:
        result = deps.hyperpod.act(decision.action, cluster, node_id)
    except AMBIGUOUS_ERRORS:
        raise  # the caller records these as unknown
    except (ClientError, BotoCoreError) as error:
        return replace(decision, outcome=Outcome.FAILED, page=Page.INCIDENT,
                       reason=f"{verb} call failed ({error_code(error)}): {short(str(error))}")
    if result.accepted:
        if result.retried:
            return replace(decision, reason=f"{decision.reason} (accepted on the one retry after a per-node "
                                            "InternalServerError)")
        return decision
    if result.repair_in_progress:
        return replace(decision, outcome=Outcome.DEFERRED,
                       reason=f"HyperPod reports a repair already running ({result.error_code}): "
                              f"{short(result.message or '')}")
    if result.error_code == INVALID_INSTANCE_STATUS:
        return _recheck_after_invalid_status(decision, deps, cluster, node_id, result.message or "")
    again = " (asked twice: once more after a pause, never again)" if result.retried else ""
    return replace(decision, outcome=Outcome.FAILED, page=Page.INCIDENT,
                   reason=f"{verb} was refused ({result.error_code}){again}: {short(result.message or '')}")


def _recheck_after_invalid_status(decision: NodeDecision, deps: Deps, cluster: str, node_id: str,
                                  message: str) -> NodeDecision:
    """InvalidInstanceStatus means "a state that does not allow" the action, not that a repair runs: the
    node's status (DescribeClusterNode) says which."""
    verb, said = decision.action.value, short(message)
    try:
        node = deps.hyperpod.describe_node(cluster, node_id)
    except (ClientError, BotoCoreError) as error:
        return replace(decision, outcome=Outcome.FAILED, page=Page.INCIDENT,
                       reason=f"{verb} was refused (InvalidInstanceStatus: {said}) and the node could not be "
                              f"re-checked (DescribeClusterNode: {error_code(error)}).")
    if node is None or node.gone:
        return replace(decision, outcome=Outcome.IGNORED,
                       reason=f"{verb} was refused (InvalidInstanceStatus) and the node is no longer in the cluster: "
                              "nothing to do.")
    if node.status in IN_REPAIR_STATUSES:
        return replace(decision, outcome=Outcome.DEFERRED,
                       reason=f"{verb} was refused (InvalidInstanceStatus) and the node is {node.status}: a repair "
                              "is already in progress.")
    return replace(decision, outcome=Outcome.FAILED, page=Page.INCIDENT,
                   reason=f"{verb} was refused (InvalidInstanceStatus: {said}) and the node is {node.status}, not "
                          "in repair: a human should look at it.")


def _finish(base: dict, fault: Fault, decision: NodeDecision, deps: Deps, table: Table, health_reason: str,
            cluster_state: Any) -> dict:
    record = complete({**base, "fault": fault.value, "action": decision.action, "outcome": decision.outcome,
                       "reason": decision.reason, "attempt": decision.attempt})
    if base["mode"] != "dry_run":  # a dry run calls nothing, SNS included
        if decision.page is Page.INCIDENT:
            record["paged"] = page_incident(deps, table, record, node_page(record, health_reason, deps.region))
        elif decision.page is Page.STORM:
            text = storm_page(record, cluster_state, deps.region, int(STORM_WINDOW.total_seconds() // 60))
            record["paged"] = page_cluster_summary(deps, table, record, text, STORM_WINDOW)
    return emit(record)


def finish_node_decision(base: dict, fault: Fault, decision: NodeDecision, deps: Deps, table: Table,
                         health_reason: str, cluster_state: Any) -> dict:
    """The record (and page) of a node decision: the event path's last step, shared with the reconciler."""
    return _finish(base, fault, decision, deps, table, health_reason, cluster_state)
