"""A node position in a repair loop kept out of service, and its release (issue 32, `quarantine_repeat_offenders`),
through the cluster's agent, on Slurm and EKS alike.

Hold (the node flow's port, deps.NodeQuarantine; flows/node/loops.note_repair calls it when a position that already
reached `repair_loop_count` repairs within `repair_loop_days` is repaired once more, on a cluster with the option):
  the node's name (Slurm: DescribeClusterNode's hostname; EKS: `hyperpod-<instance id>`) → an agent queue, an agent
  alive? → the mode acts? → hold the position in the ledger (`quarantine#<cluster>`, once) → remember and queue
  `quarantine_node` → a `deferred` record (queued_for_agent) and one page saying how to return the node.
  After the repair, never before it: a repair's own drain and resume (Medic's, or HyperPod's) come first, and the
  agent then sets the quarantine over them (Slurm keeps a DRAIN and its reason across the node's reboot:
  sim/slurm.py node_back, src/slurmctld/node_mgr.c).
Release ("Medic Release Node", source medic.operator: `medic release NODE --cluster C` sends it; the requeue
  function's rule takes it):
  parse → a cluster Medic manages? → a position held there under that name? (else `rejected`, naming what is held) →
  the mode acts? → release it in the ledger (a conditional update: a second request is a `duplicate`, one release) →
  withdraw the quarantine_node if its agent has not taken it yet (it would drain the node again) → queue
  `release_node` → a `deferred` record naming who asked (`requester`).
Results (results.py): an `executed` or `failed` record against the same incident, `quarantine:<cluster>:<position>`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from medic.adapters.aws import error_code
from medic.config_core import Cluster
from medic.core.agent_command import CommandContext
from medic.core.mode import Mode
from medic.core.models import Action, Fault, NodeInfo, Outcome, Requester, Trigger, Why
from medic.core.pages import PageSource, PageText, PageWindow, console_link
from medic.core.record import About, Record
from medic.core.text import quoted, short
from medic.deps import Deps
from medic.flows.agent.agent_result import AgentResult
from medic.flows.agent.commands import COMMAND_DEADLINE, InvalidCommand, heartbeat_is_fresh, hold_command, quoted_agent
from medic.flows.agent.requests import ReleaseNodeEvent
from medic.ledger.agents import AgentStore, CommandRef
from medic.ledger.quarantine import Quarantine, QuarantineStore
from medic.ledger.table import Table
from medic.outbox.pages import page_incident
from medic.outbox.records import emit, rejected

ACTIONS = {"quarantine_node": Action.QUARANTINE_NODE, "release_node": Action.RELEASE_NODE}


def quarantine_incident(cluster: str, position: str) -> str:
    return f"quarantine:{cluster}:{position}"


def node_name(cluster: Cluster, node: NodeInfo) -> str | None:
    """The name the cluster's agent knows the node by: Slurm's node name, or HyperPod EKS's `hyperpod-<instance id>`
    (flows/agent/eks.py)."""
    return node.slurm_node if cluster.orchestrator == "slurm" else f"hyperpod-{node.node_id}"


# --- hold


def hold_node(deps: Deps, table: Table, cluster: Cluster, node: NodeInfo, position: str, why: str, about: About,
              now: datetime) -> dict | None:
    """Take the repaired node out of service through the agent; the record of it (None: held already)."""
    name = node_name(cluster, node)
    incident = quarantine_incident(cluster.name, position)
    about = about.but(incident=incident, trigger=Trigger.NODE_REPAIR, node_id=node.node_id,
                      instance_group=node.instance_group)
    verb = "drain" if cluster.orchestrator == "slurm" else "cordon"

    def cannot(reason: str) -> dict:
        record = about.record(fault=Fault.REPAIR_LOOP, action=Action.QUARANTINE_NODE, outcome=Outcome.FAILED,
                              reason=short(f"Could not quarantine node position {position}: {reason} {verb.title()} "
                                           f"{name or node.node_id} by hand to keep it out of service.", 500))
        return emit(record.paged_if(page_incident(deps, table, record, _hold_page(record, name, verb, deps.region),
                                                  claim=f"{incident}@{now:%Y%m%dT%H%M}",
                                                  window=PageWindow.cluster(PageSource.NODE, cluster.name))))

    held_now = QuarantineStore(table).find(cluster.name, position)
    if held_now is not None and held_now.held:
        return None  # held already: its record and page went out then
    if not about.mode.acts:
        outcome, said = (Outcome.DRY_RUN, None) if about.mode is Mode.DRY_RUN else (Outcome.SUPPRESSED, Why.PAUSED)
        return emit(about.record(fault=Fault.REPAIR_LOOP, action=Action.QUARANTINE_NODE, outcome=outcome, why=said,
                                 reason=short(f"Would quarantine node position {position} ({name or node.node_id}): "
                                              f"{why} (mode {about.mode}).", 500)))
    if name is None:
        return cannot("DescribeClusterNode gave no Slurm node name (PrivateDnsHostname).")
    if not deps.agents.has_queue(cluster.name):
        return cannot(f"Medic has no agent queue for {cluster.name} (AGENT_QUEUES).")
    heartbeat = AgentStore(deps.table).agent_heartbeat(cluster.name)
    if not heartbeat_is_fresh(heartbeat, now):
        return cannot(f"the Medic agent on {cluster.name} is not reporting.")
    try:
        request = f"{about.event_id}:{int(now.timestamp())}"
        command = hold_command(cluster.name, "quarantine_node", incident, now, request, name, cluster.orchestrator)
    except InvalidCommand as error:
        return cannot(f"refused to queue it: {error}.")
    held = Quarantine(cluster=cluster.name, position=position, node_id=node.node_id, node_name=name, since=now,
                      why=short(why, 1000), command_id=command.command_id)
    if not QuarantineStore(table).hold(held):
        return None  # held already: its record and page went out then
    try:
        AgentStore(table).record_command(command.command_id, CommandContext(
            cluster=cluster.name, kind=command.kind, target=command.target, incident=incident,
            trigger=Trigger.NODE_REPAIR, event_id=about.event_id, fault=Fault.REPAIR_LOOP.value,
            action=Action.QUARANTINE_NODE, node_id=node.node_id, node_name=name,
            instance_group=node.instance_group), now)
        deps.agents.send(command)
    except (ClientError, BotoCoreError) as error:
        return cannot(f"the command could not be queued ({error_code(error)}); the ledger still holds the position "
                      f"(`medic release {name} --cluster {cluster.name}` clears it).")
    record = about.record(fault=Fault.REPAIR_LOOP, action=Action.QUARANTINE_NODE, outcome=Outcome.DEFERRED,
                          why=Why.QUEUED_FOR_AGENT, needs_human=True,
                          reason=short(f"Node position {position} was repaired again after its repair loop: Medic "
                                       f"quarantines it (quarantine_repeat_offenders): the agent on {cluster.name} "
                                       f"{_how(verb, name)} (command {command.command_id}) until `medic release "
                                       f"{name} --cluster {cluster.name}`. {why}", 500))
    return emit(record.paged_if(page_incident(deps, table, record, _hold_page(record, name, verb, deps.region),
                                              claim=f"{incident}@{now:%Y%m%dT%H%M}",
                                              window=PageWindow.cluster(PageSource.NODE, cluster.name))))


def _how(verb: str, name: str) -> str:
    return f"drains {name} in Slurm with Medic's quarantine reason" if verb == "drain" else \
        f"cordons {name} (spec.unschedulable)"


def _verb(deps: Deps, cluster: str) -> str:
    configured = deps.config.cluster(cluster)
    return "cordon" if configured is not None and configured.orchestrator == "eks" else "drain"


def _hold_page(record: Record, name: str | None, verb: str, region: str) -> PageText:
    cluster = record["cluster"]
    subject = f"[Medic] {cluster}: node {name or record['node_id']} quarantined (repair loop)"
    did = (f"asked its agent to {verb} the node (quarantine)" if record["outcome"] == Outcome.DEFERRED.value
           else "nothing (it could not)")
    lines = [
        f"Cluster:        {cluster}",
        f"Node:           {name or 'unknown'} (instance {record['node_id']}, group {record['instance_group'] or '?'})",
        f"What happened:  {record['reason']}",
        "",
        f"What Medic did: {did}",
        "What to do:     Look at the hardware behind the node (ask AWS support about the instance's host); when it "
        f"is fixed, `medic release {name or record['node_id']} --cluster {cluster}` returns it to service.",
        f"Console:        {console_link(region, cluster)}",
        f"Incident:       {record['incident']} (mode {record['mode']})",
    ]
    return PageText(subject[:100], lines)


# --- release


def handle_release_event(raw: Any, deps: Deps) -> dict:
    """A "Medic Release Node" event (source medic.operator) → one remediation record."""
    mode = deps.mode.current()
    try:
        event = ReleaseNodeEvent.model_validate(raw, context=deps.edge())
    except ValidationError as error:
        return rejected(raw, error, mode, Trigger.OPERATOR, "release request")
    detail = event.detail
    mode = deps.mode.current(detail.cluster)
    requester = Requester(account=event.account, source=event.source, claimed_by=detail.requested_by)
    who = detail.requested_by or f"account {event.account}"
    cluster = deps.config.cluster(detail.cluster)
    store = QuarantineStore(deps.table)
    held = store.find(detail.cluster, detail.node) if cluster is not None else None
    about = About(incident=quarantine_incident(detail.cluster, held.position if held else detail.node),
                  trigger=Trigger.OPERATOR, event_id=event.id, mode=mode, cluster=detail.cluster,
                  node_id=held.node_id if held else None, requester=requester)

    def finish(outcome: Outcome, reason: str, why: Why | None = None) -> dict:
        action = Action.NONE if outcome in (Outcome.REJECTED, Outcome.DUPLICATE) else Action.RELEASE_NODE
        return emit(about.record(fault=Fault.OPERATOR_REQUEST, action=action, outcome=outcome, why=why,
                                 reason=short(reason, 500)))

    refused = release_refused(detail.cluster, detail.node, cluster, held, deps.config.clusters, store.held, mode)
    if refused is not None:
        return finish(*refused)
    assert cluster is not None and held is not None  # release_refused refuses without them
    now = deps.now()
    try:
        command = hold_command(cluster.name, "release_node", about.incident, now, event.id, held.node_name,
                               cluster.orchestrator)
    except InvalidCommand as error:  # unreachable: the name was checked when the node was quarantined
        return finish(Outcome.REJECTED, f"Refused: {error}.")
    if not store.release(cluster.name, held.position, who, command.command_id, now):
        return finish(Outcome.DUPLICATE, f"{held.node_name} ({held.position}) on {cluster.name} was released by "
                                         "another request; nothing more to do.")
    _withdraw_hold(deps, held, now)
    if not deps.agents.has_queue(cluster.name):
        return finish(Outcome.FAILED, f"Released {held.node_name} ({held.position}) in Medic's ledger, but Medic has "
                                      f"no agent queue for {cluster.name}: return the node to service by hand.")
    AgentStore(deps.table).record_command(command.command_id, CommandContext(
        cluster=cluster.name, kind=command.kind, target=command.target, incident=about.incident,
        trigger=Trigger.OPERATOR, event_id=event.id, fault=Fault.OPERATOR_REQUEST.value, action=Action.RELEASE_NODE,
        node_id=held.node_id, node_name=held.node_name), now)
    deps.agents.send(command)
    return finish(Outcome.DEFERRED, release_reason(held, who, command.command_id, detail.reason),
                  why=Why.QUEUED_FOR_AGENT)


def release_refused(cluster_name: str, node: str, cluster: Cluster | None, held: Quarantine | None,
                    clusters: Iterable[Cluster], held_there: Callable[[str], list[Quarantine]],
                    mode: Mode) -> tuple[Outcome, str, Why | None] | None:
    """A release request's decision before Medic acts (also `medic explain`'s): the record's outcome, reason and why
    when it is refused (an unmanaged cluster, a node not quarantined there), already done (released) or not acted on
    (the mode); None: release it."""
    if cluster is None:
        names = ", ".join(one.name for one in clusters) or "none"
        return Outcome.REJECTED, f"Refused: cluster {cluster_name} is not managed by Medic ({names}).", None
    if held is None:
        listed = ", ".join(f"{one.node_name} ({one.position})" for one in held_there(cluster.name)) or "none"
        return (Outcome.REJECTED, f"Refused: Medic has not quarantined {node} on {cluster.name} "
                                  f"(quarantined there: {listed}).", None)
    if not held.held:
        return (Outcome.DUPLICATE, f"{held.node_name} ({held.position}) on {cluster.name} was already released "
                                   f"at {held.released_at:%Y-%m-%d %H:%M} UTC by "
                                   f"{quoted(held.released_by or 'unknown', 130)}; nothing more to do.", None)
    if not mode.acts:
        outcome, said = (Outcome.DRY_RUN, None) if mode is Mode.DRY_RUN else (Outcome.SUPPRESSED, Why.PAUSED)
        return (outcome, f"Would release {held.node_name} ({held.position}) on {cluster.name} "
                         f"(mode {mode}): still quarantined.", said)
    return None


def release_reason(held: Quarantine, who: str, command_id: str, reason: str | None) -> str:
    """The `deferred` record's reason of a release queued for the agent."""
    why_text = f" Their reason: {quoted(reason, 300)}." if reason else ""
    return (f"Released node position {held.position} ({held.node_name}) on {held.cluster}, quarantined since "
            f"{held.since:%Y-%m-%d %H:%M} UTC, at the request of {quoted(who, 130)}: the agent returns it to service "
            f"(command {command_id}).{why_text}")


def _withdraw_hold(deps: Deps, held: Quarantine, now: datetime) -> None:
    """A quarantine_node its agent has not taken yet never runs after the release (it would drain the node again):
    withdrawn in one transaction (the agent's claim checks it), its final record claimed and the command closed, as
    the command sweep does, so it neither runs late nor pages. Only within the command's deadline: after it, the sweep
    has closed it already."""
    if not held.command_id or now - held.since >= COMMAND_DEADLINE:
        return
    store, ref = AgentStore(deps.table), CommandRef(held.cluster, held.command_id)
    if store.withdraw_command(ref, now) and store.claim_command_record(ref, now):
        store.close_command(held.command_id)


# --- results


def record_hold_result(result: AgentResult, context: CommandContext, cluster: str, stream_event_id: str,
                       deps: Deps) -> dict:
    """The final record of a quarantine_node / release_node result (already checked and claimed)."""
    kind = result.kind
    about = About(incident=context.incident or f"command:{cluster}:{result.command_id}",
                  trigger=context.trigger or Trigger.NODE_REPAIR, event_id=context.event_id or stream_event_id,
                  mode=context.mode, cluster=cluster, node_id=context.node_id, instance_group=context.instance_group)
    said = quoted_agent(result.message) if result.message else "no output"
    name = context.node_name or "the node"
    if result.status != "executed":
        verb = "quarantine" if kind == "quarantine_node" else "release"
        record = about.record(fault=context.fault or Fault.REPAIR_LOOP, action=ACTIONS[kind], outcome=Outcome.FAILED,
                              reason=short(f"The agent on {cluster} could not {verb} {name} (command "
                                           f"{result.command_id}): {said}", 500))
        text = _hold_page(record, context.node_name, _verb(deps, cluster), deps.region)
        return emit(record.paged_if(page_incident(deps, deps.table, record, text, claim=f"{about.incident}:failed",
                                                  window=PageWindow.cluster(PageSource.AGENT, cluster))))
    if kind == "quarantine_node":
        did = (f"took {name} out of service" if result.held == "true"
               else f"left {name} as it was (someone else had taken it out of service)")
    else:
        did = (f"returned {name} to service" if result.resumed == "true"
               else f"left {name} as it was (not held by Medic's quarantine)")
    return emit(about.record(fault=context.fault or Fault.REPAIR_LOOP, action=ACTIONS[kind], outcome=Outcome.EXECUTED,
                             reason=short(f"The agent on {cluster} {did} (command {result.command_id}): {said}",
                                          500)))


def expire_hold_command(context: CommandContext, cluster: str, command_id: str, run_id: str, minutes: int,
                        what: str, deps: Deps) -> dict:
    """The sweep's record of a quarantine_node / release_node its agent never answered: a human sees to the node."""
    kind = context.kind or ""
    about = About(incident=context.incident or f"command:{cluster}:{command_id}",
                  trigger=context.trigger or Trigger.NODE_REPAIR, event_id=run_id, mode=context.mode,
                  cluster=cluster, node_id=context.node_id, instance_group=context.instance_group)
    record = about.record(fault=context.fault or Fault.REPAIR_LOOP, action=ACTIONS.get(kind, Action.NONE),
                          outcome=Outcome.FAILED,
                          reason=f"No result from the agent on {cluster} for its {kind} command {command_id} within "
                                 f"{minutes} minutes: the agent {what}. {context.node_name or 'The node'} needs a "
                                 "look: is it in service?")
    text = _hold_page(record, context.node_name, _verb(deps, cluster), deps.region)
    return emit(record.paged_if(page_incident(deps, deps.table, record, text, claim=f"{about.incident}:failed",
                                              window=PageWindow.cluster(PageSource.AGENT, cluster))))


class AgentQuarantine:
    """The node flow's quarantine port (medic.deps.NodeQuarantine), through the cluster's agent."""

    def hold(self, deps: Deps, table: Table, cluster: Cluster, node: NodeInfo, position: str, why: str,
             about: About, now: datetime) -> dict | None:
        return hold_node(deps, table, cluster, node, position, why, about, now)
