"""Node remediation, what every node path shares (the health event's entry, flows/node/health_event.py, and the
reconciler's sweeps): load → decide (pure) → claim → execute → page → record."""

from __future__ import annotations

import random
import time
from datetime import datetime, timedelta

from medic.config_core import Cluster
from medic.core.mode import Mode
from medic.core.models import (
    Action,
    ClusterInfo,
    Fault,
    NodeInfo,
    Outcome,
    Trigger,
    Why,
)
from medic.core.pages import Page, PageSource, PageText, PageWindow, console_link
from medic.core.record import NOT_A_NODE_ACTION, About, Record
from medic.core.repairs import IN_FLIGHT
from medic.deps import Deps
from medic.flows.node.actions import act_on_claim
from medic.flows.node.capacity import replacement_capacity
from medic.flows.node.drain_first import await_drain
from medic.flows.node.follow import start_following
from medic.flows.node.pages import node_page, storm_page
from medic.flows.node.policy import (
    IN_REPAIR_STATUSES,
    NodeContext,
    NodeDecision,
    decide_node,
    is_slurm_controller,
)
from medic.ledger.capacity import failure_of
from medic.ledger.node_event import NodeEventView, load_node_event
from medic.ledger.nodes import ConfigMismatch, NodeClaim, NodeStore
from medic.ledger.pages import PageStore
from medic.ledger.requests import RequestStore
from medic.ledger.table import Table
from medic.obs import logger
from medic.outbox.pages import page_cluster_summary, page_incident
from medic.outbox.records import emit

# A lost claim race re-reads and re-decides. Each loss means another claim won (this node's, then
# the decision is a duplicate; or another node's, which spends the cluster's budget, so the budget
# or breaker soon decides): the loop ends well before this bound unless many invocations collide.
CLAIM_ATTEMPTS = 12
STORM_WINDOW = timedelta(hours=1)  # the budget's rolling hour: one summary page per cluster per window


def follow_hyperpod_repair(deps: Deps, table: Table, mode: Mode, cluster: Cluster, node: NodeInfo, fault: Fault,
                           incident: str, fault_at: datetime, event_id: str | None) -> None:
    """HyperPod repairs the node itself: follow the repair (flows/node/follow) and, the first time, learn the jobs on
    the node so the scheduler's side sees to them after it (deps.JobsOnNode.while_hyperpod_repairs)."""
    now = deps.now()
    if start_following(table, cluster.name, node, fault, incident, fault_at, now) and mode.acts:
        deps.jobs_on(cluster).while_hyperpod_repairs(deps, table, cluster, node, incident, fault.value, event_id, now)


def decide_claim_act(deps: Deps, table: Table, mode: Mode, cluster: Cluster, node_id: str, fault: Fault,
                     node: NodeInfo | None, about: About, event_time: datetime | None = None,
                     event_id: str | None = None, first_view: NodeEventView | None = None,
                     health_reason: str = "") -> tuple[NodeDecision, NodeEventView]:
    """The node path the event handler and the reconciler share: decide (pure), claim, act.

    One `BatchGetItem` reads what the decision needs (ledger.node_event). The claim is written as in flight
    before the call, in one transaction with the event id's claim (so an event acts at most once: a
    redelivery finds its id claimed); a run that dies before the call's answer leaves a claim the
    reconciler re-checks against the node's status. On a Slurm cluster whose agent drains the node first, the
    call waits for the drain (flows/node/drain_first): the decision is `deferred` until then."""
    incident = about.incident
    guardrails = deps.config.guardrails_for(cluster)
    now = deps.now()
    fetched: list[ClusterInfo] = []
    nodes, trigger = NodeStore(table), str(Trigger.NODE_HEALTH)
    version = 0
    for attempt in range(CLAIM_ATTEMPTS):
        # The handler's first read came before DescribeClusterNode: a node found in repair may be a racing
        # run's doing just now, so read again to see its claim (the event then reads as a duplicate).
        reuse = attempt == 0 and first_view is not None and not (node and node.status in IN_REPAIR_STATUSES)
        view = first_view if reuse else load_node_event(table, cluster.name, node_id, trigger, event_id, now)

        def cluster_info(view: NodeEventView = view) -> ClusterInfo:
            if view.cluster_info is not None:  # the reconciler's DescribeCluster, minutes old at most
                return view.cluster_info
            info = deps.hyperpod.cluster_info(cluster.name)
            fetched.append(info)
            return info

        decision = decide_node(NodeContext(mode=mode, cluster=cluster, guardrails=guardrails, fault=fault,
                                           node=node, state=view.state, cluster_state=view.cluster_state,
                                           cluster_info=cluster_info, now=now, event_time=event_time,
                                           last_healthy_at=view.healthy_at, event_acted=view.event_acted,
                                           capacity=lambda group, view=view: replacement_capacity(
                                               deps, table, cluster.name, group,
                                               lambda: failure_of(view.capacity_failures, group))))
        if decision.outcome not in (Outcome.EXECUTED, Outcome.DRY_RUN):
            break
        claim = NodeClaim(cluster.name, node_id, fault.value, decision.action.value,
                          IN_FLIGHT if decision.executes else decision.outcome.value, decision.attempt, now,
                          logical_id=node.logical_id if node else None,
                          fault_at=event_time or now)  # a sweep's find: the fault was at most a sweep earlier
        event_claim = [RequestStore(table).claim_write(trigger, event_id, now)] if event_id else []
        if nodes.claim(claim, view.state, view.cluster_state, reboot=decision.action is Action.REBOOT_NODE,
                       also=event_claim):
            version = (view.state.version if view.state else 0) + 1  # the claim's, as just written
            break
        logger.info("claim race lost; re-deciding", extra={"incident": incident})
        time.sleep(random.uniform(0, 0.05))  # noqa: S311 - jitter, not cryptography
    else:
        decision = NodeDecision(decision.action, Outcome.DEFERRED,
                                f"Lost the claim to concurrent decisions {CLAIM_ATTEMPTS} times; the reconciler "
                                "takes this node up on its next sweep.", attempt=decision.attempt,
                                why=Why.RETRY_LATER)

    if decision.close_incident:
        PageStore(table).close_incident(incident)
    if fetched:
        report_node_recovery_mismatch(deps, table, mode, cluster, fetched[-1])
    if decision.executes:
        jobs = deps.jobs_on(cluster)  # the scheduler's side: tell it first, never wait for it
        info = view.cluster_info or (fetched[-1] if fetched else None)
        controller = node is not None and is_slurm_controller(
            cluster, info or ClusterInfo(0, None, None, frozenset()), node.instance_group)
        drain = None if controller else jobs.before_repair(  # a head node runs no jobs: nothing to drain
            deps, table, cluster, node, node_id, incident, decision.action, fault.value, event_id, now,
            view.agent_seen_at)
        if drain is not None and drain.queued:  # drain first: the call waits for the agent's drain result
            waiting = await_drain(decision, deps, table, cluster, node, node_id, version, drain, about, fault.value,
                                  health_reason)
            if waiting is not None:
                return waiting, view
        decision = act_on_claim(decision, deps, table, cluster.name, node_id)
        if drain is not None:
            decision = decision._replace(drain=jobs.after_the_call(drain, decision.outcome, table, cluster, node_id))
    return decision, view


def report_node_recovery_mismatch(deps: Deps, table: Table, mode: Mode, cluster: Cluster, info: ClusterInfo,
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
    about = About(incident=incident, trigger=trigger, event_id=event_id or f"cluster-{cluster.name}", mode=mode,
                  cluster=cluster.name)
    record = about.record(fault=Fault.CONFIG_MISMATCH, action=Action.NONE, outcome=Outcome.IGNORED,
                          reason=f"medic.yaml says node_recovery: {cluster.node_recovery}, but DescribeCluster says "
                                 f"NodeRecovery {actual}; Medic follows the cluster and {follows}. "
                                 f"Fix clusters[{cluster.name}].node_recovery in medic.yaml.")
    return emit(record.paged_if(page_incident(deps, table, record, _mismatch_page(record, deps.region),
                                              window=PageWindow.cluster(PageSource.NODE, cluster.name))))


def _mismatch_page(record: Record, region: str) -> PageText:
    subject = f"[Medic] {record['cluster']}: node_recovery in medic.yaml disagrees with the cluster"
    lines = [
        f"Cluster:        {record['cluster']}",
        f"What happened:  {record['reason']}",
        "",
        "What to do:     Set node_recovery in medic.yaml to the cluster's setting and redeploy "
        "(or change the cluster's NodeRecovery with UpdateCluster).",
        f"Console:        {console_link(region, record['cluster'])}",
        f"Incident:       {record['incident']} (mode {record['mode']})",
    ]
    return PageText(subject[:100], lines)


def finish_node_decision(about: About, fault: Fault, decision: NodeDecision, deps: Deps, table: Table,
                         cluster: Cluster, health_reason: str, view: NodeEventView | None) -> dict:
    """The record (and page) of a node decision: the event path's last step, shared with the reconciler."""
    drain = decision.drain
    record = about.record(fault=fault, action=decision.action, outcome=decision.outcome,
                          reason=f"{decision.reason} {drain.text}" if drain else decision.reason,
                          attempt=decision.attempt, why=decision.why,
                          # a Slurm node action names the jobs it hit: unknown (None) until the agent reports
                          jobs=None if drain else NOT_A_NODE_ACTION)
    jobs_paged = False
    if drain is not None and drain.page:  # the node action went ahead; its jobs need a human (one page)
        jobs_paged = deps.jobs_on(cluster).page_jobs_unknown(deps, table, cluster, record, drain.node_name)
    if decision.page is Page.INCIDENT:
        record = record.paged_if(page_incident(deps, table, record, node_page(record, health_reason, deps.region),
                                               window=PageWindow.cluster(PageSource.NODE, cluster.name)))
    elif decision.page is Page.STORM and view is not None:
        record = record.paged_if(_storm_summary(deps, table, record, view))
    return emit(record.paged_if(jobs_paged))


def _storm_summary(deps: Deps, table: Table, record: Record, view: NodeEventView) -> bool:
    """One summary page per cluster per window; once it is out (read with the ledger), no write at all."""
    # <= as the claim's condition (paged_at < now - window): an event exactly one window later does not try
    if view.storm_paged_at is not None and deps.now() - view.storm_paged_at <= STORM_WINDOW:
        return False
    text = storm_page(record, view.cluster_state, deps.region, int(STORM_WINDOW.total_seconds() // 60))
    return page_cluster_summary(deps, table, record, text, STORM_WINDOW)


