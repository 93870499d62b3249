"""The agents' command results, from the ledger's stream (handlers/agent_results.py), checked against what
Medic issued.

An agent writes only under its own cluster's keys (IAM: dynamodb:LeadingKeys), so the key of a result
item says which cluster's agent wrote it, and nothing else in the item is trusted: the incident, job and
attempt of the final record come from Medic's own `command#<cluster>#<id>/issued`. A result Medic cannot match to a
command it issued to that cluster, of that kind, for that target and incident, is `rejected`: recorded under
its own incident (`command:<cluster>:<id>`) and paged (once per cluster: rejected_page_claim), never
`executed`, and it never touches the incident of the command it names (that one still pages when its own
command fails or times out).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from medic.core.agent_command import CommandContext
from medic.core.models import Action, Fault, Outcome, Trigger
from medic.core.pages import PageSource, PageWindow
from medic.core.record import About, Record
from medic.core.text import short, validation_problems
from medic.deps import Deps
from medic.flows.agent.agent_result import AgentResult, requeue_found
from medic.flows.agent.commands import (
    EKS_REFUSALS,
    HOLD_KINDS,
    K8S_OBJECT_NAME,
    NODE_KINDS,
    NOT_WATCHED,
    SQUEUE_JOB_ID,
    forged_result_page,
    matches,
    parse_agent_command_pk,
    quoted_agent,
    slurm_job_page,
)
from medic.ledger.agents import AgentStore, CommandRef
from medic.ledger.incidents import IncidentStore
from medic.ledger.jobs import JobStore
from medic.ledger.pages import PageStore
from medic.ledger.requests import operator_hour
from medic.obs import logger
from medic.outbox.pages import page_incident
from medic.outbox.records import emit

if TYPE_CHECKING:  # the stream model costs cold-start time; only the stream handler needs it
    from medic.flows.agent.stream import StreamRecord


def rejected_page_claim(cluster: str) -> str:
    """The one page for results rejected from a cluster's agent (its claim: `incident#agent:<cluster>:rejected`)."""
    return f"agent:{cluster}:rejected"


def is_command_result(record: StreamRecord) -> bool:
    """An agent's `agent#<cluster>#command#<id>/result` item being written (not a claim, heartbeat, TTL delete)."""
    keys = record.dynamodb.Keys
    return (record.eventName in ("INSERT", "MODIFY") and keys.get("sk") == "result"
            and parse_agent_command_pk(keys.get("pk")) is not None)


def rejected_stream_record(raw: Any, error: Exception, deps: Deps) -> dict:
    """A stream record Medic cannot read (not something DynamoDB sends): one rejected record, no retry."""
    event_id = str(raw.get("eventID", "unknown"))[:80] if isinstance(raw, dict) else "unknown"
    problems = (validation_problems(error) if isinstance(error, ValidationError)
                else f"{type(error).__name__}: {error}")
    about = About(incident=f"stream:{event_id}", trigger=Trigger.RECONCILE, event_id=event_id,
                  mode=deps.mode.current())
    return emit(about.record(fault=Fault.INVALID, action=Action.NONE, outcome=Outcome.REJECTED,
                             reason=short(f"Unreadable ledger stream record: {problems}", 500)))


def mismatch(context: CommandContext | None, cluster: str, result: AgentResult) -> str | None:
    """Why the result does not answer a command Medic issued to this cluster; None when it does."""
    if context is None:  # commands are kept per cluster: one issued to another cluster is not found under this one
        return f"Medic never issued this command to {cluster}"
    if context.cluster != cluster:  # a command issued before commands were keyed by cluster (CommandRef.legacy)
        return "Medic issued this command to another cluster"
    for field in ("kind", "target", "incident"):
        if getattr(result, field) != getattr(context, field):
            return f"its {field} {quoted_agent(getattr(result, field))} is not the {field} Medic issued"
    return None


def record_agent_result(record: StreamRecord, deps: Deps) -> dict | None:
    """The final record for one agent result; None when the stream record is not one (or already recorded).

    AWS errors propagate: the stream redelivers the record (a batch item failure) and nothing was claimed yet.
    """
    if not is_command_result(record):
        return None
    cluster, command_id = parse_agent_command_pk(record.dynamodb.Keys["pk"])  # type: ignore[misc]
    table = deps.table
    try:
        result = AgentResult.model_validate(record.dynamodb.NewImage or {})
    except ValidationError as error:
        problems = validation_problems(error)
        return _rejected(cluster, command_id, record.eventID, f"the result is invalid ({problems})", "", deps)

    ref, context = AgentStore(table).find_command(cluster, command_id)
    why = mismatch(context, cluster, result)
    if why is not None:
        return _rejected(cluster, command_id, record.eventID, why, result.message, deps)
    if not AgentStore(table).claim_command_record(ref, deps.now()):
        logger.info("agent result already recorded", extra={"command_id": command_id})
        return None
    AgentStore(table).close_command(command_id)  # answered: the reconciler's sweep leaves it alone
    if result.kind in NODE_KINDS:  # around a node action (issue 16): slurm_node.py
        from medic.flows.agent.slurm_node import record_node_result

        return record_node_result(result, context, cluster, record.eventID, deps)
    if result.kind in HOLD_KINDS:  # a node in a repair loop quarantined, or released (issue 32)
        from medic.flows.agent.quarantine import record_hold_result

        return record_hold_result(result, context, cluster, record.eventID, deps)
    found = requeue_found(result) if context.kind == "requeue_job" else None
    if found == "completed":
        return _completed(result, context, cluster, record.eventID, deps)
    final = _final_record(result, context, cluster, record.eventID)
    if final.outcome is Outcome.FAILED:
        restart = context.kind == "restart_job"
        if found == "not_requeueable":  # Slurm refused a job it never requeues: the restart was not spent
            _give_back_restart(context, deps)
        situation = result.refusal if restart and result.refusal in EKS_REFUSALS else found or "failed"
        text = slurm_job_page(final, context.details or "", deps.region, situation=situation)
        final = final.paged_if(page_incident(deps, table, final, text,
                                             window=PageWindow.cluster(PageSource.AGENT, cluster)))
        nothing = not result.pods and not result.force_deleted if restart else not result.job_ids
        if nothing:
            # Nothing deleted or requeued, nothing restarted: no recovery to prove, and this page is the incident's
            # one page (a Slurm requeue Slurm refused, as an EKS restart the agent refused).
            IncidentStore(table).end_recovery_of(context.incident, context.attempt or 0)
    elif final.outcome is Outcome.REJECTED:  # the job is not one Medic may requeue: a request beyond its reach
        text = slurm_job_page(final, context.details or "", deps.region, situation="refused")
        final = final.paged_if(page_incident(deps, table, final, text,
                                             claim=f"agent:{cluster}:refused:{operator_hour(deps.now())}",
                                             window=PageWindow.cluster(PageSource.AGENT, cluster)))
    elif final.outcome is Outcome.EXECUTED:
        # Done: the job's next failure is a new incident that may page again.
        PageStore(table).close_incident(final.about.incident)
        _remember_running(result, context, cluster, deps)
    return emit(final)


def _remember_running(result: AgentResult, context: CommandContext, cluster: str, deps: Deps) -> None:
    """A requeue by name (or by id, checked against watched names) tells which Slurm job ran under a watched name:
    the next requeue by that name prefers it while it still runs under it (agent: RequeueJob.last_seen_id)."""
    if context.kind != "requeue_job" or not result.jobs:
        return
    target = context.target or ""
    allowed = ({target.removeprefix("name:").split("@")[0]} if target.startswith("name:") else
               set(target.split("@", 1)[1].split(",")) if "@" in target else set())
    watched = set(deps.config.watched_names(cluster)) & allowed
    for job in result.jobs:
        job_id, name = job.get("id", ""), job.get("name", "")
        if name in watched and matches(SQUEUE_JOB_ID, job_id):
            JobStore(deps.table.for_mode(context.mode)).saw_running(cluster, name, job_id, deps.now())


def _completed(result: AgentResult, context: CommandContext, cluster: str, stream_event_id: str, deps: Deps) -> dict:
    """A requeue by name that found no job pending or running, the newest of that name COMPLETED (slurmctld's memory
    or sacct): the job finished, there is nothing to requeue. `ignored`, no page; the restart is given back and a
    proof-of-recovery watch on the incident ends (a finished job never steps again)."""
    _give_back_restart(context, deps)
    IncidentStore(deps.table).end_recovery(context.incident or "")
    PageStore(deps.table).close_incident(context.incident or "")
    job = context.job
    about = About(incident=context.incident, trigger=context.trigger or Trigger.RECONCILE,
                  event_id=context.event_id or stream_event_id, mode=context.mode, cluster=cluster, job=job)
    said = quoted_agent(result.message) if result.message else "no output"
    return emit(about.record(fault=Fault.COMPLETED, action=Action.NONE, outcome=Outcome.IGNORED,
                             attempt=context.attempt or 0,
                             reason=short(f"{job} completed: no job of that name is pending or running in Slurm, "
                                          f"and the newest ended COMPLETED; nothing to requeue (the agent on "
                                          f"{cluster}, command {result.command_id}: {said}).", 500)))


def _give_back_restart(context: CommandContext, deps: Deps) -> None:
    """A requeue that did not happen gives its restart back to the job's budget (best effort)."""
    incident = context.incident or ""
    if not incident.startswith("job:"):
        return
    try:
        JobStore(deps.table).refund_job_restarts([incident.removeprefix("job:")])
    except (ClientError, BotoCoreError):
        logger.warning("restart refund failed", extra={"incident": incident})


def _rejected(cluster: str, command_id: str, stream_event_id: str, why: str, said: str, deps: Deps) -> dict | None:
    """A result Medic did not ask for: recorded once and paged once, under an incident of its own."""
    if not AgentStore(deps.table).claim_rejected_result(CommandRef(cluster, command_id), deps.now()):
        return None
    reason = f"Rejected a result written by the agent on {cluster} for command {command_id}: {why}."
    if said:
        reason += f" The agent said: {quoted_agent(said)}"
    about = About(incident=f"command:{cluster}:{command_id}", trigger=Trigger.RECONCILE, event_id=stream_event_id,
                  mode=deps.mode.current(cluster), cluster=cluster)
    record = about.record(fault=Fault.INVALID, action=Action.NONE, outcome=Outcome.REJECTED,
                          needs_human=True,  # the controller does not behave as Medic's agent: a human looks
                          reason=short(reason, 500))
    # A page in every mode: this is not an action Medic takes but a sign the cluster's controller is not
    # behaving as Medic's agent does. One page per cluster (until it expires, 7 days), not per forged id: a
    # compromised controller cannot flood the on-call with pages; every rejection is still recorded.
    record = record.paged_if(page_incident(deps, deps.table, record, forged_result_page(record, deps.region),
                                           claim=rejected_page_claim(cluster),
                                           window=PageWindow.cluster(PageSource.AGENT_REJECTED, cluster)))
    return emit(record)


def _final_record(result: AgentResult, context: CommandContext, cluster: str, stream_event_id: str) -> Record:
    job = context.job
    said = quoted_agent(result.message) if result.message else "no output"
    restart = context.kind == "restart_job"
    if result.status == "executed":
        outcome = Outcome.EXECUTED
        reason = f"The agent on {cluster} {_what_ran(result, job, restart)} (command {result.command_id}): {said}"
    elif result.status == "refused" and result.refusal == NOT_WATCHED:
        # A job by id that is not one of the jobs Medic watches: a request beyond Medic's reach; nothing changed, and
        # a refusal cannot be a way to make Medic act, so the agent's word is enough for `rejected`.
        outcome = Outcome.REJECTED
        reason = (f"The agent on {cluster} refused the requeue of {job}: not a job Medic watches "
                  f"(command {result.command_id}): {said}")
    else:
        outcome = Outcome.FAILED
        did = "refused" if result.status == "refused" else "could not run"
        reason = (f"The agent on {cluster} {did} the {'restart' if restart else 'requeue'} of {job} "
                  f"(command {result.command_id}): {said}")
    about = About(incident=context.incident, trigger=context.trigger or Trigger.RECONCILE,
                  event_id=context.event_id or stream_event_id, mode=context.mode, cluster=cluster, job=job)
    action = Action.NONE if outcome is Outcome.REJECTED else context.action or Action.REQUEUE_JOB
    return about.record(fault=context.fault or Fault.UNKNOWN, action=action,
                        outcome=outcome, reason=short(reason, 500), attempt=context.attempt or 0)


def _what_ran(result: AgentResult, job: str | None, restart: bool) -> str:
    """What an executed command did, in Medic's words (the agent's lists are shown only when well-formed)."""
    if restart:  # EKS: Kubernetes pod names (DNS-1123 subdomains), a bounded count
        pods = [name for name in result.pods if len(name) <= 253 and matches(K8S_OBJECT_NAME, name)]
        forced = [name for name in result.force_deleted if len(name) <= 253 and matches(K8S_OBJECT_NAME, name)]
        deleted = f"deleted {len(pods)} pod(s) of {job} for its controller to recreate" if pods else \
            f"restarted {job}"
        shown_pods = f" ({', '.join(pods[:8])}{', ...' if len(pods) > 8 else ''})" if pods else ""
        force = f"; force-deleted {len(forced)} stuck Terminating on a NotReady node" if forced else ""
        return f"{deleted}{shown_pods}{force}"
    ids = ", ".join([job_id for job_id in result.job_ids if matches(SQUEUE_JOB_ID, job_id)][:20])
    return f"requeued Slurm job {ids}" if ids else f"requeued {job}"
