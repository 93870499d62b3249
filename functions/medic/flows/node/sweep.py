"""The scheduled reconciler: per configured cluster, list the nodes → settle unfinished claims → handle
failed nodes no incident covers (the event handler's own node path) → time repairs → page → report.

The policy, and why it pages instead of guessing a repair, is in :mod:`medic.flows.node.sweep_policy`.
Each run is bounded (nodes per cluster, and a time reserve before the function's timeout); what it
did not get to, the next run (5 minutes later) picks up, since every step is idempotent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import Field, ValidationError

from medic.adapters.aws import error_code
from medic.core.models import Action, Fault, MedicEvent, NodeInfo, Outcome, Trigger, Why
from medic.core.pages import Page, PageText
from medic.core.record import Record
from medic.core.repairs import AWAITING_DRAIN, PendingClaim
from medic.core.text import MedicText
from medic.deps import Deps
from medic.flows.node.actions import act_on_claim
from medic.flows.node.cluster_sweep import ClusterSweep, node_incident
from medic.flows.node.drain_first import call_overdue_drains
from medic.flows.node.pages import node_page
from medic.flows.node.policy import NodeDecision
from medic.flows.node.remediation import decide_claim_act, finish_node_decision, follow_hyperpod_repair
from medic.flows.node.sweep_capacity import retry_when_capacity_is_back
from medic.flows.node.sweep_follow import sweep_followed
from medic.flows.node.sweep_policy import (
    FAILURE,
    FAILURE_WITHOUT_REASON,
    LONG_REPAIR_STATUSES,
    NO_HEALTH_REASON,
    RESERVE_SECONDS,
    STORM_HOLD,
    Resolution,
    covered,
    decide_pending,
    describe_claim,
    latest_actions,
    needs_recheck,
    settles_quietly,
)
from medic.flows.node.sweep_repairs import claim_timeline, sweep_repairs
from medic.ledger.clusters import ClusterInfoStore
from medic.obs import cluster_gauges, count, emit_incident, logger
from medic.outbox.records import rejected


class ScheduleEvent(MedicEvent):
    """The EventBridge schedule's event: only its id matters (it names the run in every record)."""

    id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")
    source: Literal["aws.events"]
    detail_type: Literal["Scheduled Event"] = Field(alias="detail-type")
    detail: dict


def reconcile(raw: Any, deps: Deps, remaining_seconds: Callable[[], float] | None = None) -> dict:
    """One reconcile run over every configured cluster; returns what it did, per cluster."""
    mode = deps.mode.current()
    try:
        event = ScheduleEvent.model_validate(raw, context=deps.edge())
    except ValidationError as error:
        record = rejected(raw, error, mode, Trigger.RECONCILE, "schedule event")
        return {"run": record["event_id"], "mode": mode, "rejected": True, "clusters": []}
    remaining = remaining_seconds or (lambda: float("inf"))
    report: dict[str, Any] = {"run": event.id, "mode": mode, "clusters": []}
    for cluster in deps.config.clusters:
        if remaining() < RESERVE_SECONDS:
            report["clusters"].append({"cluster": cluster.name, "skipped": "no time left in this run"})
            continue
        # each cluster's sweep in its own mode: an operator's pause of the cluster lowers act to paused
        report["clusters"].append(Sweep(deps, deps.mode.current(cluster.name), event.id, cluster, remaining).run())
    logger.info("reconcile run", extra={"reconcile": report})
    return report


@dataclass
class Sweep(ClusterSweep):
    """The reconciler's sweep of one cluster: unfinished claims, failed nodes nobody covers, repairs."""

    def run(self) -> dict:
        try:
            nodes = self.deps.hyperpod.list_nodes(self.cluster.name)
            cluster_gauges(self.cluster.name, node_gauges(nodes))
            self._sweep(nodes)
        except (ClientError, BotoCoreError) as error:  # the next run tries again; a run is never retried
            logger.warning("reconcile sweep failed", extra={"cluster": self.cluster.name,
                                                            "error_code": error_code(error)})
            count("ReconcileErrors")
            self.report["error"] = error_code(error)
        finally:
            self.report["pages"] += self.outbox.send()
        return self.report

    # --- the three sweeps

    def _sweep(self, nodes: list[NodeInfo]) -> None:
        name = self.cluster.name
        self.by_id = {node.node_id: node for node in nodes}
        failed = [node for node in nodes if node.status == FAILURE]
        self.report.update(nodes=len(nodes), failed=len(failed))
        self._snapshot_cluster()
        cluster_state = self.node_store.cluster_state(name)
        acted = latest_actions((action.node_id, action.at) for action in cluster_state.actions)
        # A replacement is a new instance under the same NodeLogicalId: Medic's action is found by either id.
        acted_logical = latest_actions((action.logical_id, action.at) for action in cluster_state.actions)
        claims = self.node_store.node_claims(name, [*acted, *(node.node_id for node in failed)])

        awaiting = [claim.node_id for claim in claims.values() if claim.outcome == AWAITING_DRAIN]
        if awaiting:  # calls still waiting for the agent's drain: past their deadline, made without it
            call_overdue_drains(self.deps, self.cluster, awaiting)
        for claim in claims.values():
            if claim.pending and needs_recheck(claim, self.now, self.cooldown) and self.room():
                self._unfinished(claim)
        # While the guardrails hold a storm back, its failed nodes are the storm page's: a human was told,
        # and paging them one by one every sweep is the flood the guardrails exist to prevent.
        storm_at = self.page_store.storm_paged_at(name)
        held_back = storm_at is not None and self.now - storm_at < STORM_HOLD
        for node in failed:
            if covered(claims.get(node.node_id), self.now, self.cooldown) or not self.room():
                continue
            if held_back:
                self.report["held_by_guardrails"] = self.report.get("held_by_guardrails", 0) + 1
                continue
            if self.page_store.incident_paged(node_incident(name, node.node_id)):
                continue  # a human already owns this node's incident
            if self.node_store.claim_failure_report(name, node.node_id, self.now, self.cooldown):
                self._failed(node)
        sweep_repairs(self, nodes, acted, acted_logical)
        sweep_followed(self, nodes)  # HyperPod's own repairs (automatic node recovery), timed to their end
        retry_when_capacity_is_back(self)  # replaces held back for capacity (issue 32)
        self.deps.jobs_on(self.cluster).follow_up(self, nodes)  # the scheduler's side: resume, see to the jobs

    def _snapshot_cluster(self) -> None:
        """DescribeCluster once per sweep, kept in the ledger for the node path (ledger.clusters): its size,
        NodeRecovery and controller groups then cost no call of its own. A failure here only costs the node
        path its own DescribeCluster until the next sweep."""
        try:
            self.info = self.deps.hyperpod.cluster_info(self.cluster.name, refresh=True)
        except (ClientError, BotoCoreError) as error:
            logger.warning("cluster snapshot failed", extra={"cluster": self.cluster.name,
                                                             "error_code": error_code(error)})
            return
        ClusterInfoStore(self.table).save(self.cluster.name, self.info, self.now)
        self.check_node_recovery(self.info)  # report (or clear) a disagreement with the config

    def _unfinished(self, claim: PendingClaim) -> None:
        """A claim whose call may or may not have gone through: re-check the node, never call blindly."""
        name = self.cluster.name
        try:
            node = self.deps.hyperpod.describe_node(name, claim.node_id)
        except (ClientError, BotoCoreError) as error:
            logger.warning("re-check failed; next run", extra={"node_id": claim.node_id,
                                                               "error_code": error_code(error)})
            return
        self.decisions += 1
        decision = decide_pending(claim, node, self.now, self.mode)
        about = self.about(claim.node_id, node or self.by_id.get(claim.node_id))

        def claim_record(outcome: Outcome, reason: str, why: Why | None = None) -> Record:
            return about.record(fault=claim.fault, action=describe_claim(claim.action), outcome=outcome,
                                reason=reason, why=why, attempt=claim.attempt)

        if decision.resolution is Resolution.WAIT:
            return  # nothing to record yet: the next run looks again
        if decision.resolution is Resolution.RETRY:
            if not self.node_store.retry_claim(name, claim, self.now):
                return  # the node state changed meanwhile (an event acted): that invocation owns it
            retry = NodeDecision(describe_claim(claim.action), Outcome.EXECUTED, decision.reason,
                                 attempt=claim.attempt)
            done = act_on_claim(retry, self.deps, self.table, name, claim.node_id)
            self.report["retried"] += 1
            record = claim_record(done.outcome, done.reason, done.why)
            self.record(record, page=done.page is Page.INCIDENT, text=self._claim_page(record, claim))
            return
        if decision.ledger_outcome and not self.node_store.settle_claim(name, claim, decision.ledger_outcome):
            return  # settled or claimed anew meanwhile
        if decision.resolution is Resolution.CONFIRMED and settles_quietly(claim):
            # The usual end of a replacement: its run recorded it executed and left the claim to this sweep.
            logger.info("replacement confirmed", extra={"cluster": name, "node_id": claim.node_id,
                                                        "status": node.status if node else "gone"})
            count("ClaimsConfirmed")
            return
        self.report["confirmed" if decision.resolution is Resolution.CONFIRMED else "gave_up"] += 1
        record = claim_record(decision.outcome, decision.reason, decision.why)
        self.record(record, page=decision.page, text=self._claim_page(record, claim))
        if decision.resolution is Resolution.GIVE_UP:  # no repair came: the incident's line, a human owns it
            emit_incident(claim_timeline(self.incident(claim.node_id), name, claim, None, None))

    def _claim_page(self, record: Record, claim: PendingClaim) -> PageText:
        return node_page(record, MedicText(f"{claim.fault} (the fault Medic claimed a {claim.action} for)"),
                         self.deps.region)

    def _failed(self, node: NodeInfo) -> None:
        """A failed node no incident covers: the event handler's node path, with no health reason."""
        self.decisions += 1
        self.report["failures_reported"] += 1
        name = self.cluster.name
        about = self.about(node.node_id, node)
        decision, view = decide_claim_act(self.deps, self.table, self.mode, self.cluster, node.node_id,
                                          Fault.UNKNOWN, node, about, health_reason=NO_HEALTH_REASON)
        if decision.follows:  # found failed by this sweep: the fault was at most a sweep earlier
            follow_hyperpod_repair(self.deps, self.table, self.mode, self.cluster, node, Fault.UNKNOWN, about.incident,
                                   self.now, None)
        if decision.page is not Page.INCIDENT:
            finish_node_decision(about, Fault.UNKNOWN, decision, self.deps, self.table, self.cluster, NO_HEALTH_REASON,
                                 view)
            return
        if decision.action is Action.NONE:  # the unknown-fault branch: say why there is no reason to read
            decision = decision._replace(reason=FAILURE_WITHOUT_REASON)
        record = about.record(fault=Fault.UNKNOWN, action=decision.action, outcome=decision.outcome,
                              reason=decision.reason, why=decision.why, attempt=decision.attempt)

        def after(paged: bool) -> None:
            # A mode that pages, yet nothing paged: the page failed, so the next run reports the node again.
            if self.mode.pages and not paged and not self.page_store.incident_paged(about.incident):
                self.node_store.release_failure_report(name, node.node_id)

        self.record(record, page=True, after=after)

def node_gauges(nodes: list[NodeInfo]) -> dict[str, int]:
    """What a sweep saw, as the failed-node alarm's gauges: nodes in Failure, and nodes in a repair status."""
    return {"FailedNodes": sum(node.status == FAILURE for node in nodes),
            "NodesInRepair": sum(node.status in LONG_REPAIR_STATUSES for node in nodes)}
