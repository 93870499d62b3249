"""Drain first, then call HyperPod (issue 27): the order of Slurm's side and HyperPod's side of a node action.

AWS's HyperPod Slurm guide ("Manually replace or reboot a node using Slurm", docs.aws.amazon.com/sagemaker/latest/dg/
sagemaker-hyperpod-resiliency-slurm-replace-faulty-instance.html: "Avoid changing the node state or restarting the
Slurm controller during the operation") rules out a drain that lands mid-operation, which a drain queued beside the
call does. Leaving Slurm's state to HyperPod instead would let new work land on the failing node until HyperPod takes
it, and can leave a quickly rebooted node DOWN ("Node unexpectedly rebooted" unless ReturnToService=2:
validate_node_specs, src/slurmctld/node_mgr.c) with nobody to resume it, as no AWS source says HyperPod does. So Medic
drains first and resumes after (AWS Labs' HyperPod Slurm guidance, awslabs/agent-plugins hyperpod-slurm-debugger:
drain before an intentional reboot, resume once it is back). On a Slurm cluster with a live agent, the node path
claims the action, queues `drain_node` and waits: the claim is `awaiting_drain` (ledger: the node's state item keeps
what the call needs). The call is made exactly once (a conditional update takes the claim), by whichever comes first:
  - the agent's drain result (flows/agent/slurm_node → call_after_drain): drained (or refused by Slurm: the repair
    matters more) → the call, recorded as the decision's final record;
  - its deadline (guardrails.drain_deadline_seconds), checked at each of the agent's heartbeats (every minute) and at
    each reconciler sweep (every 5 minutes) → call_overdue_drains: the drain is withdrawn unless the agent already
    took it (so it never lands mid-operation), and the call goes ahead without it, saying so.
A cluster without an agent, an agent down, or a node without a Slurm name: no drain, the call at once (as before).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from medic.config_core import Cluster
from medic.core.models import Action, NodeInfo, Outcome, Trigger, Why
from medic.core.pages import Page, PageSource, PageWindow
from medic.core.record import About, JobsHit
from medic.core.repairs import AwaitedCall, DrainNote
from medic.core.text import MedicText
from medic.deps import Deps
from medic.flows.node.actions import act_on_claim
from medic.flows.node.pages import node_page
from medic.flows.node.policy import NodeDecision
from medic.ledger.incidents import IncidentStore
from medic.ledger.nodes import NodeStore
from medic.ledger.table import Table
from medic.obs import logger
from medic.outbox.pages import page_incident
from medic.outbox.records import emit


def await_drain(decision: NodeDecision, deps: Deps, table: Table, cluster: Cluster, node: NodeInfo | None,
                node_id: str, version: int, drain: DrainNote, about: About, fault: str,
                health_reason: str) -> NodeDecision | None:
    """The claimed call waits for the drain just queued; None when the claim could not be kept waiting (then the
    caller calls at once)."""
    now = deps.now()
    deadline = deps.config.guardrails_for(cluster).drain_deadline_seconds
    call_by = now + timedelta(seconds=deadline)
    call = AwaitedCall(cluster=cluster.name, node_id=node_id, fault=fault, action=decision.action.value,
                       attempt=decision.attempt, version=version, trigger=about.trigger.value,
                       event_id=about.event_id, incident=about.incident, drain_command=drain.command_id or "",
                       node_name=drain.node_name or "", call_by=call_by,
                       instance_group=node.instance_group if node else None, health_reason=health_reason)
    if not NodeStore(table).await_drain(call):
        logger.warning("claim changed before the drain; calling at once", extra={"incident": about.incident})
        return None
    waits = (f"{drain.text} HyperPod's {decision.action.value} is called once the agent reports the drain, or at "
             f"{call_by:%H:%M:%S} UTC without it (drain_deadline_seconds: {deadline}).")
    return decision._replace(outcome=Outcome.DEFERRED, why=Why.AWAITING_DRAIN, drain=drain._replace(text=waits))


def call_after_drain(deps: Deps, cluster_name: str, node_id: str, command_id: str, drained: bool, said: str,
                     jobs: JobsHit | None) -> dict | None:
    """The agent reported the drain (`drained`: Slurm drained it; else it refused, in `said`): make the call that
    waited for it. None when no call waits for this drain (its deadline came first)."""
    cluster = deps.config.cluster(cluster_name)
    call = NodeStore(deps.table).awaited_call(cluster_name, node_id)
    if cluster is None or call is None or call.drain_command != command_id:
        return None
    if drained:
        how = f"Called after the agent drained {call.node_name} in Slurm (command {command_id})."
    else:
        how = (f"The agent could not drain {call.node_name} in Slurm (command {command_id}: {said}); called all the "
               "same: the repair matters more.")
    return _call(deps, cluster, call, how, DrainNote(how, call.node_name, queued=drained), jobs)


def call_overdue_drains(deps: Deps, cluster: Cluster, node_ids: Iterable[str] | None = None) -> list[dict]:
    """The calls whose drain did not come by its deadline: made now, without the drain. ``node_ids``: the nodes
    whose claims to look at (the reconciler has them); by default the cluster's recent actions' (one GetItem)."""
    if cluster.orchestrator != "slurm":
        return []
    store, now = NodeStore(deps.table), deps.now()
    if node_ids is None:
        node_ids = [action.node_id for action in store.cluster_state(cluster.name).actions]
    ids = list(node_ids)
    records = []
    for call in store.awaited_calls(cluster.name, ids) if ids else []:
        if now < call.call_by:
            continue
        seconds = deps.config.guardrails_for(cluster).drain_deadline_seconds
        note = deps.jobs_on(cluster).drain_overdue(deps, deps.table, cluster, call.node_id, call.node_name,
                                                   call.drain_command, now)
        how = (f"The agent did not report the drain of {call.node_name} within {seconds} s (drain_deadline_seconds): "
               f"{note.text}")
        record = _call(deps, cluster, call, how, note._replace(text=how), None, page_jobs=note.page)
        if record is not None:
            records.append(record)
    return records


def _end_holds(deps: Deps, incident: str) -> None:
    """The watched jobs the drain found were held for a repair that will not happen (the call failed, or the node
    left the cluster): their watches end, and their stall alarms act again (the node's page asks a human to look)."""
    store = IncidentStore(deps.table)
    for watch in store.recoveries():
        if watch.held_by == incident:
            store.end_recovery(watch.incident)


def _call(deps: Deps, cluster: Cluster, call: AwaitedCall, how: str, drain: DrainNote, jobs: JobsHit | None,
          page_jobs: bool = False) -> dict | None:
    """Take the awaited call (once), make it, and write the decision's final record."""
    store, now, mode = NodeStore(deps.table), deps.now(), deps.mode.current(call.cluster)
    action = Action(call.action)
    about = About(incident=call.incident, trigger=Trigger(call.trigger), event_id=call.event_id, mode=mode,
                  cluster=call.cluster, node_id=call.node_id, instance_group=call.instance_group)
    if not mode.acts:  # paused since the decision: nothing is called
        if not store.settle_awaited_call(call, Outcome.SUPPRESSED.value):
            return None
        deps.jobs_on(cluster).after_the_call(drain, Outcome.FAILED, deps.table, cluster, call.node_id)
        return emit(about.record(
            fault=call.fault, action=action, outcome=Outcome.SUPPRESSED, why=Why.PAUSED, attempt=call.attempt,
            jobs=jobs,
            reason=f"Medic is {mode.value}: the {action.value} that waited for the drain is not called. {how} "
                   f"{call.node_name} stays drained in Slurm until someone resumes it "
                   f"(scontrol update NodeName={call.node_name} State=RESUME)."))
    if not store.take_awaited_call(call, now):
        return None
    decision = act_on_claim(NodeDecision(action, Outcome.EXECUTED, how, attempt=call.attempt), deps, deps.table,
                            call.cluster, call.node_id)
    after = deps.jobs_on(cluster).after_the_call(drain, decision.outcome, deps.table, cluster, call.node_id)
    if decision.outcome in (Outcome.FAILED, Outcome.IGNORED):  # no repair came: the jobs it held are free again
        _end_holds(deps, call.incident)
    reason = decision.reason if decision.reason.startswith(how) else f"{how} {decision.reason}"
    if after.text != drain.text:  # a failed call: what it means for the drained node
        reason += after.text.removeprefix(drain.text)
    record = about.record(fault=call.fault, action=action, outcome=decision.outcome, reason=reason,
                          why=decision.why, attempt=call.attempt, jobs=jobs)
    if decision.page is Page.INCIDENT:
        text = node_page(record, call.health_reason or MedicText("(see the decision's record)"), deps.region)
        record = record.paged_if(page_incident(deps, deps.table, record, text,
                                               window=PageWindow.cluster(PageSource.NODE, cluster.name)))
    if page_jobs:
        record = record.paged_if(deps.jobs_on(cluster).page_jobs_unknown(deps, deps.table, cluster, record,
                                                                         call.node_name))
    return emit(record)
