"""Commands into the void: an issued agent command with no result by its deadline is closed as `failed`.

Run by the reconciler's schedule (every 5 minutes; it runs in every deployment with a Slurm cluster, unlike
the proof-of-recovery schedule, which exists only when jobs are watched). Each open command
(`recovery#command/<id>`, written when Medic queued it) older than COMMAND_DEADLINE:
  withdraw it unless its agent claimed it (one transaction: it can then never run late) →
  claim its final record (`command#<cluster>#<id>/recorded`, shared with the results function: one final record,
  whichever comes first) → give the restart back to the budget when the agent never took it on →
  a `failed` record against the command's incident, one page → close it.
An agent that died within its heartbeat window, or whose clock ran ahead, ends here instead of `deferred`
forever.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.core.agent_command import CommandContext
from medic.core.models import Action, Fault, Outcome, Trigger
from medic.core.pages import PageSource, PageWindow
from medic.core.record import About
from medic.deps import Deps
from medic.flows.agent.commands import COMMAND_DEADLINE, HOLD_KINDS, NODE_KINDS, slurm_job_page
from medic.ledger.agents import AgentStore, OpenCommand
from medic.ledger.jobs import JobStore
from medic.obs import logger
from medic.outbox.pages import page_incident
from medic.outbox.records import emit


def sweep_commands(raw: Any, deps: Deps) -> list[dict]:
    """One sweep over the open commands: the records of those that expired."""
    run_id = str(raw.get("id", "schedule"))[:80] if isinstance(raw, dict) else "schedule"
    now = deps.now()
    records = []
    for command in AgentStore(deps.table).open_commands():
        if now - command.issued_at < COMMAND_DEADLINE:
            continue
        try:
            record = _expire(command, run_id, deps)
        except (ClientError, BotoCoreError) as error:  # the next sweep tries again: nothing was recorded
            logger.warning("open command not swept", extra={"command_id": command.command_id,
                                                           "error_code": error_code(error)})
            continue
        if record is not None:
            records.append(record)
    return records


def _expire(command: OpenCommand, run_id: str, deps: Deps) -> dict | None:
    store, now = AgentStore(deps.table), deps.now()
    never_claimed = store.withdraw_command(command.ref, now)
    if not store.claim_command_record(command.ref, now):  # its result was recorded after all
        store.close_command(command.command_id)
        return None
    # Medic's record of issuing it may have expired before the command did: it is closed as failed all the same.
    context = store.command_context(command.ref) or CommandContext()
    incident = context.incident or f"command:{command.cluster}:{command.command_id}"
    minutes = int(COMMAND_DEADLINE.total_seconds() // 60)
    if context.kind in NODE_KINDS:  # around a node action (issue 16): no restart was spent
        from medic.flows.agent.slurm_node import expire_node_command

        what = ("never took it on; Medic withdrew it, so it cannot run late" if never_claimed
                else "took it on but wrote no result")
        record = expire_node_command(context, command.cluster, command.command_id, run_id, minutes, what, deps)
        store.close_command(command.command_id)
        return record
    if context.kind in HOLD_KINDS:  # a quarantine or its release (issue 32)
        from medic.flows.agent.quarantine import expire_hold_command

        what = ("never took it on; Medic withdrew it, so it cannot run late" if never_claimed
                else "took it on but wrote no result")
        record = expire_hold_command(context, command.cluster, command.command_id, run_id, minutes, what, deps)
        store.close_command(command.command_id)
        return record
    if never_claimed:
        what = "never took it on; Medic withdrew it, so it cannot run late"
        lineage = incident.removeprefix("job:") if incident.startswith("job:") else ""
        if lineage:
            JobStore(deps.table).refund_job_restart(lineage)
            what += ", and gave the restart back to the job's budget"
    else:
        what = "took it on but wrote no result (it may have run: check the job in Slurm)"
    about = About(incident=incident, trigger=Trigger.RECONCILE, event_id=run_id, mode=context.mode,
                  cluster=command.cluster, job=context.job)
    record = about.record(fault=context.fault or Fault.UNKNOWN, action=Action.REQUEUE_JOB, outcome=Outcome.FAILED,
                          attempt=context.attempt or 0,
                          reason=f"No result from the agent on {command.cluster} for command {command.command_id} "
                                 f"within {minutes} minutes of queueing it: the agent {what}.")
    text = slurm_job_page({**record, "job": record["job"] or "(unknown)"}, context.details or "", deps.region,
                          situation="no_result")
    record = record.paged_if(page_incident(deps, deps.table, record, text,
                                           window=PageWindow.cluster(PageSource.AGENT, command.cluster)))
    store.close_command(command.command_id)
    return emit(record)
