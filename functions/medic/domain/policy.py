"""The node remediation policy: a pure function from what Medic knows to what it should do.

No I/O here. Everything the decision needs is passed in, so every rule is testable alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from medic.config import Cluster, Guardrails
from medic.domain.faults import ACTION_FOR_FAULT
from medic.domain.models import Action, ClusterState, Fault, NodeInfo, NodeState, Outcome

# DescribeClusterNode statuses that mean a repair (or boot) is already under way.
IN_REPAIR_STATUSES = frozenset({"Pending", "ShuttingDown", "SystemUpdating", "DeepHealthCheckInProgress"})


class Page(StrEnum):
    NONE = "none"
    INCIDENT = "incident"  # at most one page per incident
    STORM = "storm"  # one summary page per cluster per guardrail window


@dataclass(frozen=True)
class NodeContext:
    mode: str  # act | dry_run | paused
    cluster: Cluster
    guardrails: Guardrails
    fault: Fault
    node: NodeInfo | None  # None: the node is not (or no longer) in the cluster
    state: NodeState | None
    cluster_state: ClusterState
    cluster_size: Callable[[], int]  # node count; consulted only by the breaker (it costs an API call)
    now: datetime


@dataclass(frozen=True)
class NodeDecision:
    action: Action
    outcome: Outcome  # EXECUTED here means "claim and execute"; the adapter's answer decides the rest
    reason: str
    page: Page = Page.NONE
    attempt: int = 0
    close_incident: bool = False

    @property
    def executes(self) -> bool:
        return self.outcome is Outcome.EXECUTED


def decide_node(ctx: NodeContext) -> NodeDecision:
    fault = ctx.fault
    if fault is Fault.HEALTHY:
        return NodeDecision(Action.NONE, Outcome.IGNORED, "Node reported healthy again; incident closed.",
                            close_incident=True)
    if fault is Fault.USER_APP_ERROR:
        return NodeDecision(Action.NONE, Outcome.IGNORED,
                            "XID user application error: the job's fault, not the node's; no node action.")
    if ctx.node is None:
        return NodeDecision(Action.NONE, Outcome.IGNORED,
                            "Node is no longer in the cluster (already replaced or removed).")
    if ctx.cluster.node_recovery == "automatic":
        return NodeDecision(Action.NONE, Outcome.DEFERRED,
                            "Cluster has HyperPod automatic node recovery; HyperPod repairs this node itself.")
    if fault is Fault.UNKNOWN:
        return NodeDecision(Action.NONE, Outcome.DEFERRED,
                            "Unrecognized health reason; Medic takes no action and a human decides.",
                            page=Page.INCIDENT)

    action, escalation = _intended_action(ctx)
    attempt = _attempt(ctx)
    state, cooldown = ctx.state, timedelta(minutes=ctx.guardrails.node_cooldown_minutes)
    in_cooldown = state is not None and ctx.now - state.acted_at < cooldown
    # Before the node's status: after Medic's own repair the node is Pending, and a redelivered
    # event must read as the duplicate it is, not as someone else's repair.
    if in_cooldown and state.fault == fault.value and state.action == action.value:
        return NodeDecision(action, Outcome.DUPLICATE,
                            f"Already handled: {state.action} for {state.fault} at {_hhmm(state.acted_at)} "
                            f"({state.outcome}), inside the {cooldown_minutes(ctx)}-minute cooldown.",
                            attempt=state.attempt)
    if ctx.node.instance_group in ctx.cluster.protected_groups:
        return NodeDecision(action, Outcome.SUPPRESSED,
                            f"Instance group {ctx.node.instance_group} is protected; Medic never acts on it. "
                            f"A human should {_verb(action)} the node.",
                            page=Page.INCIDENT, attempt=attempt)
    if ctx.node.status in IN_REPAIR_STATUSES:
        return NodeDecision(action, Outcome.DEFERRED,
                            f"Node status is {ctx.node.status}: a repair is already in progress.", attempt=attempt)
    if in_cooldown and not escalation:
        return NodeDecision(action, Outcome.SUPPRESSED,
                            f"Node was acted on at {_hhmm(state.acted_at)} ({state.action}), inside the "
                            f"{cooldown_minutes(ctx)}-minute cooldown; it is failing again ({fault.value}).",
                            page=Page.INCIDENT, attempt=attempt)

    because = (f"rebooted at {_hhmm(state.last_reboot_at)} and failed again: escalating to replace"
               if escalation and state and state.last_reboot_at else f"fault {fault.value} calls for {_verb(action)}")
    if ctx.mode == "paused":
        return NodeDecision(action, Outcome.SUPPRESSED, f"Medic is paused; would {_verb(action)} ({because}).",
                            page=Page.INCIDENT, attempt=attempt)

    recent = _actions_since(ctx.cluster_state, ctx.now - timedelta(hours=1))
    budget = ctx.guardrails.max_node_actions_per_hour
    if recent >= budget:
        return NodeDecision(action, Outcome.SUPPRESSED,
                            f"Cluster budget spent: {recent} node actions in the last hour (max {budget}).",
                            page=Page.STORM, attempt=attempt)
    in_repair = _actions_since(ctx.cluster_state, ctx.now - timedelta(minutes=ctx.guardrails.repair_minutes))
    limit = ctx.guardrails.max_fraction_in_repair
    size = ctx.cluster_size()
    if size <= 0 or (in_repair + 1) / size > limit:
        return NodeDecision(action, Outcome.SUPPRESSED,
                            f"Breaker open: {in_repair} of {size} nodes already in repair; "
                            f"another would exceed {limit:.0%}.",
                            page=Page.STORM, attempt=attempt)
    if ctx.mode == "dry_run":
        return NodeDecision(action, Outcome.DRY_RUN, f"Dry run: would {_verb(action)} ({because}).",
                            attempt=attempt)
    return NodeDecision(action, Outcome.EXECUTED, f"{because[0].upper()}{because[1:]}.", attempt=attempt)


def _intended_action(ctx: NodeContext) -> tuple[Action, bool]:
    """The fault's action, escalated to replace when a reboot recently failed to fix the node."""
    action = ACTION_FOR_FAULT[ctx.fault]
    state = ctx.state
    if action is Action.REBOOT_NODE and state is not None and state.last_reboot_at is not None:
        window = timedelta(hours=ctx.guardrails.reboot_escalation_hours)
        rebooted_before_this = ctx.now - state.last_reboot_at
        cooldown = timedelta(minutes=ctx.guardrails.node_cooldown_minutes)
        same_incident_repeat = state.fault == ctx.fault.value and rebooted_before_this < cooldown
        if rebooted_before_this < window and not same_incident_repeat:
            return Action.REPLACE_NODE, True
    if action is Action.REPLACE_NODE and state is not None and state.action == Action.REBOOT_NODE.value:
        return action, True
    return action, False


def _attempt(ctx: NodeContext) -> int:
    state = ctx.state
    if state is None or ctx.now - state.acted_at > timedelta(hours=ctx.guardrails.reboot_escalation_hours):
        return 1
    return state.attempt + 1


def _actions_since(cluster_state: ClusterState, since: datetime) -> int:
    return sum(1 for action in cluster_state.actions if action.at > since)


def cooldown_minutes(ctx: NodeContext) -> int:
    return ctx.guardrails.node_cooldown_minutes


def _verb(action: Action) -> str:
    return {Action.REBOOT_NODE: "reboot", Action.REPLACE_NODE: "replace"}.get(action, "act on")


def _hhmm(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else "unknown time"
