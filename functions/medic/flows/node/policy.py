"""The node remediation policy: a pure function from what Medic knows to what it should do.

No I/O here. Everything the decision needs is passed in, so every rule is testable alone.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NamedTuple

from medic.config_core import KNOWN_CONTROLLER_GROUPS, Cluster, Guardrails
from medic.core.mode import Mode
from medic.core.models import Action, ClusterInfo, ClusterState, Fault, NodeInfo, NodeState, Outcome, Why
from medic.core.pages import Page
from medic.core.repairs import DrainNote
from medic.flows.node.capacity import Capacity
from medic.flows.node.faults import ACTION_FOR_FAULT

# DescribeClusterNode statuses that mean a repair (or boot) is already under way.
IN_REPAIR_STATUSES = frozenset({"Pending", "ShuttingDown", "SystemUpdating", "DeepHealthCheckInProgress"})


class NodeContext(NamedTuple):
    mode: Mode  # compared with ==: `medic explain` passes the mode it read as a plain str
    cluster: Cluster
    guardrails: Guardrails
    fault: Fault
    node: NodeInfo | None  # None: the node is not (or no longer) in the cluster
    state: NodeState | None
    cluster_state: ClusterState
    # DescribeCluster (cached by the adapter): consulted only once the node is known and the fault actionable.
    cluster_info: Callable[[], ClusterInfo]
    now: datetime
    event_time: datetime | None = None  # the event's `time`; None: no event (the reconciler's sweep)
    last_healthy_at: datetime | None = None  # the node's latest Healthy report Medic has seen
    event_acted: bool = False  # this event id already acted (a DLQ redrive, an archive replay, a late duplicate)
    # Before a replace: what would serve it (flows/node/capacity), asked only then; None: not asked
    capacity: Callable[[str], Capacity] | None = None


def node_recovery(ctx: NodeContext) -> str:
    """The cluster's real NodeRecovery (DescribeCluster); the config's expectation only when AWS does not say."""
    return ctx.cluster_info().node_recovery or ctx.cluster.node_recovery


def is_slurm_controller(cluster: Cluster, info: ClusterInfo, group: str) -> bool:
    """A Slurm controller node: its group's SlurmConfig.NodeType is Controller, or it is named as AWS names
    controller groups (lifecycle-script clusters say which group is the controller only on the node)."""
    return cluster.orchestrator == "slurm" and (group in info.controller_groups or group in KNOWN_CONTROLLER_GROUPS)


class NodeDecision(NamedTuple):
    action: Action
    outcome: Outcome  # EXECUTED here means "claim and execute"; the adapter's answer decides the rest
    reason: str
    page: Page = Page.NONE
    attempt: int = 0
    close_incident: bool = False
    drain: DrainNote | None = None  # the scheduler's side of the action (deps.JobsOnNode); None: nothing to tell
    why: Why | None = None  # the outcome's sub-reason (None: the outcome's only one)
    follows: bool = False  # HyperPod's automatic node recovery repairs the node: Medic follows it (flows/node/follow)
    waits_for_capacity: str | None = None  # a replace that cannot be served: the capacity signal (held for a sweep)

    @property
    def executes(self) -> bool:
        return self.outcome is Outcome.EXECUTED


def decide_node(ctx: NodeContext) -> NodeDecision:
    if ctx.event_acted:
        return NodeDecision(Action.NONE, Outcome.DUPLICATE, "This event was already handled: its id acted "
                                                            "before, and an event acts at most once.")
    fault = ctx.fault
    state = ctx.state
    stale = _stale(ctx)
    if fault is Fault.HEALTHY:
        if stale:
            return NodeDecision(Action.NONE, Outcome.IGNORED, f"Stale healthy report: {stale}")
        return NodeDecision(Action.NONE, Outcome.IGNORED, "Node reported healthy again; incident closed.",
                            close_incident=True)
    if fault is Fault.USER_APP_ERROR:
        return NodeDecision(Action.NONE, Outcome.IGNORED,
                            "XID user application error: the job's fault, not the node's; no node action.")

    action, escalation = _intended_action(ctx)
    attempt = _attempt(ctx)
    cooldown = timedelta(minutes=ctx.guardrails.node_cooldown_minutes)
    in_cooldown = state is not None and ctx.now - state.acted_at < cooldown
    # Before the node's status: after Medic's own repair the node is Pending (or, replaced, gone under its
    # old instance id), and a repeat of the event must read as the duplicate it is.
    if in_cooldown and state.fault == fault.value and state.action == action.value:
        return NodeDecision(action, Outcome.DUPLICATE,
                            f"Already handled: {state.action} for {state.fault} at {_hhmm(state.acted_at)} "
                            f"({state.outcome}), inside the {cooldown_minutes(ctx)}-minute cooldown.",
                            attempt=state.attempt)
    if stale:
        return NodeDecision(Action.NONE, Outcome.IGNORED, f"Stale event: {stale}")
    if ctx.node is None or ctx.node.gone:
        replaced = (f" Medic replaced it at {_hhmm(state.acted_at)}."
                    if state is not None and state.action == Action.REPLACE_NODE.value else "")
        status = " (status NotFound)" if ctx.node is not None else ""
        return NodeDecision(Action.NONE, Outcome.IGNORED,
                            f"Node is no longer in the cluster{status} (already replaced or removed).{replaced}")
    if node_recovery(ctx) == "automatic":
        return NodeDecision(Action.NONE, Outcome.DEFERRED,
                            "Cluster has HyperPod automatic node recovery (DescribeCluster NodeRecovery Automatic); "
                            "HyperPod repairs this node itself; Medic follows the repair to its end.",
                            why=Why.HYPERPOD_REPAIRING, follows=True)
    if fault is Fault.UNKNOWN:
        return NodeDecision(Action.NONE, Outcome.DEFERRED,
                            "Unrecognized health reason; Medic takes no action and a human decides.",
                            page=Page.INCIDENT, why=Why.HUMAN_DECIDES)
    group = ctx.node.instance_group
    if group in ctx.cluster.protected_groups:
        return NodeDecision(action, Outcome.SUPPRESSED,
                            f"Instance group {group} is protected; Medic never acts on it. "
                            f"A human should {_verb(action)} the node.",
                            page=Page.INCIDENT, attempt=attempt, why=Why.PROTECTED)
    if is_slurm_controller(ctx.cluster, ctx.cluster_info(), group):
        if action is Action.REPLACE_NODE:
            return NodeDecision(action, Outcome.SUPPRESSED,
                                f"Node is a Slurm controller (instance group {group}): AWS does not replace Slurm "
                                "controller nodes, so Medic never asks. A human should recover the controller.",
                                page=Page.INCIDENT, attempt=attempt, why=Why.PROTECTED)
        if not ctx.cluster.allow_controller_reboot:
            return NodeDecision(action, Outcome.SUPPRESSED,
                                f"Node is a Slurm controller (instance group {group}); Medic reboots a controller "
                                "only with allow_controller_reboot: true. A human should reboot the node.",
                                page=Page.INCIDENT, attempt=attempt, why=Why.PROTECTED)
    if ctx.node.status in IN_REPAIR_STATUSES:
        return NodeDecision(action, Outcome.DEFERRED,
                            f"Node status is {ctx.node.status}: a repair is already in progress.", attempt=attempt,
                            why=Why.HYPERPOD_REPAIRING)
    if in_cooldown and not escalation:
        return NodeDecision(action, Outcome.SUPPRESSED,
                            f"Node was acted on at {_hhmm(state.acted_at)} ({state.action}), inside the "
                            f"{cooldown_minutes(ctx)}-minute cooldown; it is failing again ({fault.value}).",
                            page=Page.INCIDENT, attempt=attempt, why=Why.COOLDOWN)

    because = (f"rebooted at {_hhmm(state.last_reboot_at)} and failed again: escalating to replace"
               if escalation and state and state.last_reboot_at else f"fault {fault.value} calls for {_verb(action)}")
    if ctx.mode == Mode.PAUSED:
        return NodeDecision(action, Outcome.SUPPRESSED, f"Medic is paused; would {_verb(action)} ({because}).",
                            page=Page.INCIDENT, attempt=attempt, why=Why.PAUSED)

    recent = _actions_since(ctx.cluster_state, ctx.now - timedelta(hours=1))
    budget = ctx.guardrails.max_node_actions_per_hour
    if recent >= budget:
        return NodeDecision(action, Outcome.SUPPRESSED,
                            f"Cluster budget spent: {recent} node actions in the last hour (max {budget}).",
                            page=Page.STORM, attempt=attempt, why=Why.RATE_LIMIT)
    in_repair = _actions_since(ctx.cluster_state, ctx.now - timedelta(minutes=ctx.guardrails.repair_minutes))
    limit = ctx.guardrails.max_fraction_in_repair
    size = ctx.cluster_info().size
    if size <= 0 or (in_repair + 1) / size > limit:
        return NodeDecision(action, Outcome.SUPPRESSED,
                            f"Breaker open: {in_repair} of {size} nodes already in repair; "
                            f"another would exceed {limit:.0%}.",
                            page=Page.STORM, attempt=attempt, why=Why.BREAKER)
    if action is Action.REPLACE_NODE and ctx.capacity is not None:  # issue 32: can the replace be served?
        capacity = ctx.capacity(group)
        if capacity.short and ACTION_FOR_FAULT.get(fault) is Action.REBOOT_NODE:  # its catalog allows a reboot
            action, because = Action.REBOOT_NODE, f"a replace cannot be served ({capacity.said}): rebooting instead"
        elif capacity.short:
            return NodeDecision(action, Outcome.DEFERRED,
                                f"Would replace ({because}), but a replace cannot be served: {capacity.said}. Medic "
                                "does not call it; each sweep checks capacity again and replaces the node once it is "
                                "back.", page=Page.INCIDENT, attempt=attempt, why=Why.RETRY_LATER,
                                waits_for_capacity=capacity.said)
        else:
            because = f"{because}; capacity: {capacity.said}"
    if ctx.mode == Mode.DRY_RUN:
        return NodeDecision(action, Outcome.DRY_RUN, f"Dry run: would {_verb(action)} ({because}).",
                            attempt=attempt)
    return NodeDecision(action, Outcome.EXECUTED, f"{because[0].upper()}{because[1:]}.", attempt=attempt)


def _intended_action(ctx: NodeContext) -> tuple[Action, bool]:
    """The fault's action, escalated to replace when a reboot recently failed to fix the node."""
    action = ACTION_FOR_FAULT.get(ctx.fault, Action.NONE)  # unknown faults: no action of their own
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


def _stale(ctx: NodeContext) -> str | None:
    """Why the event is older than what Medic already knows of the node (None: it is not)."""
    if ctx.event_time is None:
        return None
    if ctx.last_healthy_at is not None and ctx.event_time < ctx.last_healthy_at:
        return (f"the event's time {_hhmm_ss(ctx.event_time)} is before the node's last healthy report at "
                f"{_hhmm_ss(ctx.last_healthy_at)}; no action.")
    if ctx.state is not None and ctx.event_time < ctx.state.acted_at:
        return (f"the event's time {_hhmm_ss(ctx.event_time)} is before Medic's last action on the node "
                f"({ctx.state.action} at {_hhmm_ss(ctx.state.acted_at)}); no action.")
    return None


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


def _hhmm_ss(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _hhmm(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else "unknown time"
