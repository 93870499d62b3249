"""Node remediation: parse → load → decide (pure) → claim → execute → page → record."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from medic.adapters.aws import error_code
from medic.deps import Deps
from medic.domain.faults import classify
from medic.domain.models import (
    Action,
    EventEnvelope,
    Fault,
    NodeHealthEvent,
    Outcome,
    RemediationRecord,
    Trigger,
)
from medic.domain.pages import PageText, node_page, storm_page
from medic.domain.policy import NodeContext, NodeDecision, Page, decide_node
from medic.ledger import NodeClaim
from medic.obs import count, emit_record, logger

CLAIM_ATTEMPTS = 3  # a lost claim race re-reads and re-decides; the winner's claim then shows


def remediate_node(raw: Any, deps: Deps) -> dict:
    mode = deps.mode.current()
    try:
        event = NodeHealthEvent.model_validate(raw)
    except ValidationError as error:
        return _record_rejected(raw, error, mode)

    detail = event.detail
    base = {"trigger": Trigger.NODE_HEALTH, "event_id": event.id, "cluster": detail.ClusterName,
            "node_id": detail.InstanceId, "mode": mode,
            "incident": f"node:{detail.ClusterName}:{detail.InstanceId}"}
    cluster = deps.config.cluster(detail.ClusterName)
    fault = classify(detail.HealthSummary.HealthStatus, detail.HealthSummary.HealthStatusReason)
    if cluster is None:
        return _emit({**base, "fault": fault.value, "action": Action.NONE, "outcome": Outcome.IGNORED,
                      "reason": f"Cluster {detail.ClusterName} is not managed by Medic."})

    ledger = deps.ledger.for_mode(mode)
    node = None
    if fault not in (Fault.HEALTHY, Fault.USER_APP_ERROR):
        try:
            node = deps.hyperpod.describe_node(cluster.name, detail.InstanceId)
        except (ClientError, BotoCoreError) as error:
            return _failed_before_deciding(base, fault, deps, ledger, detail.HealthSummary.HealthStatusReason,
                                           f"Could not look the node up (DescribeClusterNode: {error_code(error)}).")
    if node is not None:
        base["instance_group"] = node.instance_group

    guardrails = deps.config.guardrails_for(cluster)
    now = deps.now()
    for _ in range(CLAIM_ATTEMPTS):
        state, cluster_state = ledger.load(cluster.name, detail.InstanceId)
        decision = decide_node(NodeContext(mode=mode, cluster=cluster, guardrails=guardrails, fault=fault,
                                           node=node, state=state, cluster_state=cluster_state,
                                           cluster_size=lambda: deps.hyperpod.cluster_size(cluster.name),
                                           now=now))
        if decision.outcome not in (Outcome.EXECUTED, Outcome.DRY_RUN):
            break
        claim = NodeClaim(cluster.name, detail.InstanceId, fault.value, decision.action.value,
                          decision.outcome.value, decision.attempt, now)
        if ledger.claim(claim, state, cluster_state, reboot=decision.action is Action.REBOOT_NODE):
            break
        logger.info("claim race lost; re-deciding", extra={"incident": base["incident"]})
    else:
        decision = NodeDecision(decision.action, Outcome.DUPLICATE,
                                "Another invocation is handling this node right now.", attempt=decision.attempt)

    if decision.close_incident:
        ledger.close_incident(base["incident"])
    if decision.executes:
        decision = _execute(decision, deps, cluster.name, detail.InstanceId)
        if decision.outcome is not Outcome.EXECUTED:
            ledger.set_outcome(cluster.name, detail.InstanceId, decision.outcome.value)

    record = _as_record(base, fault, decision)
    if mode != "dry_run":
        record["paged"] = _page(decision, record, deps, ledger, detail.HealthSummary.HealthStatusReason,
                                guardrails_window=timedelta(hours=1), cluster_state=cluster_state)
    return _emit(record)


def _execute(decision: NodeDecision, deps: Deps, cluster: str, node_id: str) -> NodeDecision:
    verb = decision.action.value
    try:
        result = deps.hyperpod.act(decision.action, cluster, node_id)
    except (ClientError, BotoCoreError) as error:
        return replace(decision, outcome=Outcome.FAILED, page=Page.INCIDENT,
                       reason=f"{verb} call failed ({error_code(error)}): {_short(str(error))}")
    if result.accepted:
        return decision
    if result.repair_in_progress:
        return replace(decision, outcome=Outcome.DEFERRED,
                       reason=f"HyperPod reports a repair already running ({result.error_code}): "
                              f"{_short(result.message or '')}")
    return replace(decision, outcome=Outcome.FAILED, page=Page.INCIDENT,
                   reason=f"{verb} was refused ({result.error_code}): {_short(result.message or '')}")


def _page(decision: NodeDecision, record: dict, deps: Deps, ledger: Any, health_reason: str,
          guardrails_window: timedelta, cluster_state: Any) -> bool:
    now = deps.now()
    if decision.page is Page.INCIDENT:
        if not ledger.claim_page(record["incident"], now):
            return False
        text = node_page(record, health_reason, deps.region)
        release = lambda: ledger.release_page(record["incident"])  # noqa: E731
    elif decision.page is Page.STORM:
        if not ledger.claim_storm_page(record["cluster"], now, guardrails_window):
            return False
        text = storm_page(record, cluster_state, deps.region, int(guardrails_window.total_seconds() // 60))
        release = lambda: ledger.release_storm_page(record["cluster"])  # noqa: E731
    else:
        return False
    return _publish(text, record, deps, release)


def _publish(text: PageText, record: dict, deps: Deps, release: Any) -> bool:
    try:
        deps.pager.page(text.subject, text.body, RemediationRecord.model_validate(
            {**record, "paged": True}).model_dump_json())
    except (ClientError, BotoCoreError) as error:
        # The record is still written; the page claim is released so the next event can page.
        logger.error("page failed", extra={"incident": record["incident"], "error_code": error_code(error)})
        count("PageFailures")
        release()
        return False
    count("Pages")
    return True


def _failed_before_deciding(base: dict, fault: Fault, deps: Deps, ledger: Any, health_reason: str,
                            reason: str) -> dict:
    record = _complete({**base, "fault": fault.value, "action": Action.NONE, "outcome": Outcome.FAILED,
                        "reason": reason})
    if base["mode"] != "dry_run":
        decision = NodeDecision(Action.NONE, Outcome.FAILED, reason, page=Page.INCIDENT)
        record["paged"] = _page(decision, record, deps, ledger, health_reason, timedelta(hours=1), None)
    return _emit(record)


def _as_record(base: dict, fault: Fault, decision: NodeDecision) -> dict:
    return _complete({**base, "fault": fault.value, "action": decision.action, "outcome": decision.outcome,
                      "reason": decision.reason, "attempt": decision.attempt})


def _record_rejected(raw: Any, error: ValidationError, mode: str) -> dict:
    try:
        event_id = EventEnvelope.model_validate(raw).id
    except ValidationError:
        event_id = "unknown"
    problems = "; ".join(
        f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']}" for item in error.errors()[:5]
    )
    return _emit({"incident": f"event:{_short(event_id, 80)}", "trigger": Trigger.NODE_HEALTH,
                  "event_id": _short(event_id, 80), "fault": Fault.INVALID.value, "action": Action.NONE,
                  "outcome": Outcome.REJECTED, "reason": _short(f"Invalid node health event: {problems}", 500),
                  "mode": mode})


def _complete(fields: dict) -> dict:
    """The record with every schema field present (null where not applicable)."""
    return RemediationRecord.model_validate(fields).model_dump(mode="json")


def _emit(fields: dict) -> dict:
    record = _complete(fields)
    emit_record(record)
    return record


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
