"""Node remediation: parse → load → decide (pure) → claim → execute → page → record."""

from __future__ import annotations

import random
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from medic.adapters.aws import error_code
from medic.adapters.hyperpod import AMBIGUOUS_ERRORS
from medic.config import Cluster
from medic.deps import Deps
from medic.domain.faults import classify
from medic.domain.models import Action, ClusterState, Fault, NodeHealthEvent, NodeInfo, Outcome, Trigger
from medic.domain.pages import node_page, storm_page
from medic.domain.policy import NodeContext, NodeDecision, Page, decide_node
from medic.domain.reconcile import IN_FLIGHT, RESULT_UNKNOWN
from medic.ledger import Ledger, NodeClaim
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

    ledger = deps.ledger.for_mode(mode)
    node = None
    if fault not in (Fault.HEALTHY, Fault.USER_APP_ERROR):
        try:
            node = deps.hyperpod.describe_node(cluster.name, detail.InstanceId)
        except (ClientError, BotoCoreError) as error:
            decision = NodeDecision(Action.NONE, Outcome.FAILED, page=Page.INCIDENT,
                                    reason=f"Could not look the node up (DescribeClusterNode: {error_code(error)}).")
            return _finish(base, fault, decision, deps, ledger, health_reason, cluster_state=None)
    if node is not None:
        base["instance_group"] = node.instance_group
    decision, cluster_state = decide_claim_act(deps, ledger, mode, cluster, detail.InstanceId, fault, node,
                                               base["incident"])
    return _finish(base, fault, decision, deps, ledger, health_reason, cluster_state)


def decide_claim_act(deps: Deps, ledger: Ledger, mode: str, cluster: Cluster, node_id: str, fault: Fault,
                     node: NodeInfo | None, incident: str) -> tuple[NodeDecision, ClusterState]:
    """The node path the event handler and the reconciler share: decide (pure), claim, act.

    The claim is written as in flight before the call and gets the call's outcome after it, so a run
    that dies in between leaves a claim the reconciler can tell from a finished one."""
    guardrails = deps.config.guardrails_for(cluster)
    now = deps.now()
    for _ in range(CLAIM_ATTEMPTS):
        state, cluster_state = ledger.load(cluster.name, node_id)
        decision = decide_node(NodeContext(mode=mode, cluster=cluster, guardrails=guardrails, fault=fault,
                                           node=node, state=state, cluster_state=cluster_state,
                                           cluster_size=lambda: deps.hyperpod.cluster_size(cluster.name),
                                           now=now))
        if decision.outcome not in (Outcome.EXECUTED, Outcome.DRY_RUN):
            break
        claim = NodeClaim(cluster.name, node_id, fault.value, decision.action.value,
                          IN_FLIGHT if decision.executes else decision.outcome.value, decision.attempt, now)
        if ledger.claim(claim, state, cluster_state, reboot=decision.action is Action.REBOOT_NODE):
            break
        logger.info("claim race lost; re-deciding", extra={"incident": incident})
        time.sleep(random.uniform(0, 0.05))  # noqa: S311 - jitter, not cryptography
    else:
        decision = NodeDecision(decision.action, Outcome.DEFERRED,
                                f"Lost the claim to concurrent decisions {CLAIM_ATTEMPTS} times; the reconciler "
                                "takes this node up on its next sweep.", attempt=decision.attempt)

    if decision.close_incident:
        ledger.close_incident(incident)
    if decision.executes:
        decision = act_on_claim(decision, deps, ledger, cluster.name, node_id)
    return decision, cluster_state


def act_on_claim(decision: NodeDecision, deps: Deps, ledger: Ledger, cluster: str, node_id: str) -> NodeDecision:
    """Make the claimed call and write what came of it into the claim (the reconciler's retry too)."""
    decision, outcome = _execute(decision, deps, cluster, node_id)
    ledger.set_outcome(cluster, node_id, outcome)
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
        return decision
    if result.repair_in_progress:
        return replace(decision, outcome=Outcome.DEFERRED,
                       reason=f"HyperPod reports a repair already running ({result.error_code}): "
                              f"{short(result.message or '')}")
    return replace(decision, outcome=Outcome.FAILED, page=Page.INCIDENT,
                   reason=f"{verb} was refused ({result.error_code}): {short(result.message or '')}")


def _finish(base: dict, fault: Fault, decision: NodeDecision, deps: Deps, ledger: Ledger, health_reason: str,
            cluster_state: Any) -> dict:
    record = complete({**base, "fault": fault.value, "action": decision.action, "outcome": decision.outcome,
                       "reason": decision.reason, "attempt": decision.attempt})
    if base["mode"] != "dry_run":  # a dry run calls nothing, SNS included
        if decision.page is Page.INCIDENT:
            record["paged"] = page_incident(deps, ledger, record, node_page(record, health_reason, deps.region))
        elif decision.page is Page.STORM:
            text = storm_page(record, cluster_state, deps.region, int(STORM_WINDOW.total_seconds() // 60))
            record["paged"] = page_cluster_summary(deps, ledger, record, text, STORM_WINDOW)
    return emit(record)


def finish_node_decision(base: dict, fault: Fault, decision: NodeDecision, deps: Deps, ledger: Ledger,
                         health_reason: str, cluster_state: Any) -> dict:
    """The record (and page) of a node decision: the event path's last step, shared with the reconciler."""
    return _finish(base, fault, decision, deps, ledger, health_reason, cluster_state)
