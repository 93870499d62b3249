"""Job requeues (Slurm) and restarts (EKS) through the cluster's agent, in two halves.

Request (handlers/requeue_request.py, or any trigger that builds a RestartRequest):
  parse → check the target and the cluster → claim the request → agent alive? → mode → spend the
  job's restart budget → remember the command (`command#<cluster>#<id>/issued`) → queue it → `deferred` record.
  A Slurm job is requeued (`requeue_job`: scontrol requeue); a watched job on an EKS cluster is restarted
  (`restart_job`: the agent deletes its pods, its controller recreates them; eks.py).
Result (results.py, from the ledger's stream): the agent writes `agent#<cluster>#command#<id>/result`
  → checked against `command#<cluster>#<id>/issued` → claim `command#<cluster>#<id>/recorded` → final `executed` or
  `failed` record against the same incident (and a page on failure).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, NamedTuple

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from medic.adapters.aws import error_code
from medic.config_core import CoreConfig, KubernetesJob
from medic.core.agent_command import CommandContext
from medic.core.mode import Mode
from medic.core.models import Action, Fault, Outcome, Requester, Trigger, Why
from medic.core.pages import PageSource, PageWindow
from medic.core.record import About
from medic.core.text import short
from medic.deps import Deps
from medic.flows.agent.commands import (
    InvalidCommand,
    heartbeat_is_fresh,
    requeue_command,
    slurm_job_page,
    validate_requeue_target,
)
from medic.flows.agent.eks import NotWatched, eks_job_incident, restart_command, watched_job
from medic.flows.agent.requests import RequeueJobDetail, RequeueJobEvent
from medic.ledger.agents import AgentStore
from medic.ledger.jobs import JobStore
from medic.ledger.requests import RequestStore, operator_hour
from medic.obs import logger
from medic.outbox.pages import page_incident
from medic.outbox.records import emit, rejected


class RestartRequest(NamedTuple):
    mode: Mode
    cluster: str
    incident: str
    trigger: Trigger
    event_id: str
    fault: str
    context: str  # what the human should know if this pages (the operator's reason, the alarm's reason, ...)
    job_name: str | None = None
    job_id: str | None = None  # canonical: RequeueJobDetail strips leading zeros (requeue_command again)
    requester: Requester | None = None  # operator requests: who sent it, as far as the event says
    # A request by id that also names the job: the name, whose restart budget is spent too.
    also_named: str | None = None
    # A request by id: the names the job must have in Slurm for the agent to requeue it (Medic's watched jobs;
    # empty: any, as for the jobs a node repair hit, which the agent itself listed)
    job_names: tuple[str, ...] = ()
    # EKS clusters: the watched job's Kubernetes object (job_name is then the job's configured name)
    kubernetes: KubernetesJob | None = None
    # A stall restart: not within this long of the job's last restart (stall_restart_interval_minutes)
    min_interval: timedelta | None = None

    @property
    def job(self) -> str:
        return self.job_id if self.job_id is not None else str(self.job_name)


def slurm_job_incident(cluster: str, job: str) -> str:
    """The incident and restart-budget lineage of a Slurm job: by its name, or by its id, canonical already
    (RequeueJobDetail: `04211` is job 4211). A job name is never rewritten: `007` may be a name."""
    return f"job:slurm:{cluster}:{job}"


# --- the request


def handle_requeue_event(raw: Any, deps: Deps) -> dict:
    """A "Medic Requeue Job" event (source medic.operator) → one remediation record."""
    mode = deps.mode.current()
    try:
        event = RequeueJobEvent.model_validate(raw, context=deps.edge())
    except ValidationError as error:
        return rejected(raw, error, mode, Trigger.OPERATOR, "requeue request")
    detail = event.detail
    mode = deps.mode.current(detail.cluster)  # an operator's pause of the cluster lowers act to paused
    requester = Requester(account=event.account, source=event.source, claimed_by=detail.requested_by)
    cluster = deps.config.cluster(detail.cluster)
    if cluster is None:
        # The rule takes every request from the account, whatever cluster it names (infra AgentChannel): one for a
        # cluster Medic does not manage is refused here, saying what the sender could have named.
        about = About(incident=slurm_job_incident(detail.cluster, detail.job), trigger=Trigger.OPERATOR,
                      event_id=event.id, mode=mode, cluster=detail.cluster, job=detail.job, requester=requester)
        return emit(about.record(fault=Fault.OPERATOR_REQUEST, action=Action.NONE, outcome=Outcome.REJECTED,
                                 reason=short(f"Refused: cluster {detail.cluster} is not managed by Medic. "
                                              f"{known_targets(deps.config)}", 500)))
    if detail.namespace is not None or cluster.orchestrator == "eks":
        return _restart_eks_job(event.id, detail, requester, mode, deps)
    incident = slurm_job_incident(detail.cluster, detail.job)
    watched = deps.config.watched_names(detail.cluster)
    if detail.job_name is not None and detail.job_name not in watched:
        about = About(incident=incident, trigger=Trigger.OPERATOR, event_id=event.id, mode=mode,
                      cluster=detail.cluster, job=detail.job, requester=requester)
        return emit(about.record(fault=Fault.OPERATOR_REQUEST, action=Action.NONE, outcome=Outcome.REJECTED,
                                 reason=short(f"Refused: {detail.job_name} is not a job Medic watches on "
                                              f"{detail.cluster} ({', '.join(watched) or 'none'}: jobs in medic.yaml); "
                                              "Medic requeues only watched jobs.", 500)))
    if not watched:
        about = About(incident=incident, trigger=Trigger.OPERATOR, event_id=event.id, mode=mode,
                      cluster=detail.cluster, job=detail.job, requester=requester)
        return emit(about.record(fault=Fault.OPERATOR_REQUEST, action=Action.NONE, outcome=Outcome.REJECTED,
                                 reason=f"Refused: Medic watches no job on {detail.cluster} (jobs in medic.yaml); "
                                        "it requeues only watched jobs."))
    by_id_and_name = detail.job_id is not None and detail.job_name is not None
    return restart_through_agent(RestartRequest(
        mode=mode, cluster=detail.cluster, incident=incident,
        trigger=Trigger.OPERATOR, event_id=event.id, fault=Fault.OPERATOR_REQUEST.value,
        context=detail.reason, job_name=None if by_id_and_name else detail.job_name, job_id=detail.job_id,
        also_named=detail.job_name if by_id_and_name else None, requester=requester,
        # by id: the agent checks with squeue that the job is one Medic watches (the one named, else any watched)
        job_names=((detail.job_name,) if detail.job_name else watched) if detail.job_id is not None else (),
    ), deps)


def known_targets(config: CoreConfig) -> str:
    """What an operator request may name, for a refusal: each cluster Medic manages and the jobs it watches there."""
    clusters = [f"{cluster.name} ({cluster.orchestrator}; watched jobs: "
                f"{', '.join(config.watched_names(cluster.name)) or 'none'})" for cluster in config.clusters]
    return f"Medic's clusters (medic.yaml): {'; '.join(clusters) or 'none'}."


def _restart_eks_job(event_id: str, detail: RequeueJobDetail, requester: Requester, mode: Mode, deps: Deps) -> dict:
    """An operator request for a job on an EKS cluster: only a job Medic watches there (its namespace defaults
    to `default`, as in the config); the same guardrails and budget as its stall alarm (one incident)."""
    namespace = detail.namespace or "default"
    cluster = deps.config.cluster(detail.cluster)
    try:
        if cluster is None or cluster.orchestrator != "eks" or detail.job_id is not None:
            raise NotWatched(f"cluster {detail.cluster} "
                             + ("is not managed by Medic" if cluster is None else
                                f"is orchestrated by {cluster.orchestrator}" if cluster.orchestrator != "eks" else
                                "is an EKS cluster: name the job by namespace and job_name, not job_id"))
        job = watched_job(deps.config, detail.cluster, namespace, str(detail.job_name))
    except NotWatched as error:
        about = About(incident=f"job:eks:{detail.cluster}:{namespace}/{detail.job}", trigger=Trigger.OPERATOR,
                      event_id=event_id, mode=mode, cluster=detail.cluster, job=detail.job, requester=requester)
        return emit(about.record(fault=Fault.OPERATOR_REQUEST, action=Action.NONE, outcome=Outcome.REJECTED,
                                 reason=short(f"Refused: {error}.", 500)))
    target = job.kubernetes_object()
    return restart_through_agent(RestartRequest(
        mode=mode, cluster=detail.cluster, incident=eks_job_incident(detail.cluster, target),
        trigger=Trigger.OPERATOR, event_id=event_id, fault=Fault.OPERATOR_REQUEST.value, context=detail.reason,
        job_name=job.name, requester=requester, kubernetes=target), deps)


def restart_through_agent(request: RestartRequest, deps: Deps) -> dict:
    """Requeue a Slurm job, or restart a watched job on an EKS cluster (request.kubernetes), through the agent."""
    table = deps.table.for_mode(request.mode)
    eks = request.kubernetes is not None
    verb, acting = ("restart", Action.RESTART_JOB) if eks else ("requeue", Action.REQUEUE_JOB)
    about = About(incident=request.incident, trigger=request.trigger, event_id=request.event_id, mode=request.mode,
                  cluster=request.cluster, job=request.job, requester=request.requester)
    now = deps.now()

    def finish(outcome: Outcome, reason: str, page: str | None = None, attempt: int = 0,
               claim: str | None = None, why: Why | None = None) -> dict:
        action = Action.NONE if outcome is Outcome.REJECTED else acting
        record = about.record(fault=request.fault, action=action, outcome=outcome, reason=reason, why=why,
                              attempt=attempt)
        if page:
            text = slurm_job_page(record, request.context, deps.region, situation=page)
            record = record.paged_if(page_incident(deps, table, record, text, claim=claim,
                                                   window=PageWindow.cluster(PageSource.AGENT, request.cluster)))
        return emit(record)

    try:  # checked whoever the caller is: nothing unvalidated reaches the ledger or the queue (a Kubernetes
        # object is typed: KubernetesJob checked its names)
        if not eks:
            validate_requeue_target(job_id=request.job_id, job_name=request.job_name)
    except InvalidCommand as error:
        return finish(Outcome.REJECTED, f"Refused: {error}.")
    orchestrator = "eks" if eks else "slurm"
    cluster = deps.config.cluster(request.cluster)
    if cluster is None or cluster.orchestrator != orchestrator:
        what = "is not managed by Medic" if cluster is None else f"is orchestrated by {cluster.orchestrator}"
        return finish(Outcome.REJECTED, f"Refused: cluster {request.cluster} {what}; Medic {verb}s these jobs only "
                                        f"on its configured {'EKS' if eks else 'Slurm'} clusters.")
    if not RequestStore(table).claim_request(str(request.trigger), request.event_id, now):
        return finish(Outcome.DUPLICATE, f"Request {request.event_id} was already handled.")
    if not deps.agents.has_queue(cluster.name):
        return finish(Outcome.FAILED, f"Medic has no agent queue for cluster {cluster.name} (AGENT_QUEUES); "
                                      "nothing was queued.", page="failed")
    max_restarts = deps.config.guardrails_for(cluster).max_job_restarts

    try:
        heartbeat = AgentStore(deps.table).agent_heartbeat(cluster.name)
    except (ClientError, BotoCoreError) as error:
        return finish(Outcome.FAILED, f"Could not read the agent's heartbeat ({error_code(error)}); nothing was "
                                      "queued.", page="failed")
    if not heartbeat_is_fresh(heartbeat, now):
        seen = heartbeat.strftime("%Y-%m-%d %H:%M UTC") if heartbeat else "never"
        return finish(Outcome.FAILED, f"The Medic agent on {cluster.name} is not reporting (last heartbeat: "
                                      f"{seen}); nothing was queued.", page="agent_down")
    what = f"{request.job} ({request.kubernetes.target})" if request.kubernetes else request.job
    if request.mode is Mode.PAUSED:
        return finish(Outcome.SUPPRESSED, f"Medic is paused; would {verb} {what} through the agent.",
                      page="failed", why=Why.PAUSED)
    if request.mode is Mode.DRY_RUN:
        return finish(Outcome.DRY_RUN, f"Dry run: would {verb} {what} through the agent.")

    if request.trigger is Trigger.OPERATOR:  # each cluster's budget of operator requests per clock hour
        per_hour = deps.config.guardrails_for(cluster).max_operator_requests_per_hour
        try:
            within = RequestStore(table).spend_operator_request(cluster.name, now, per_hour)
        except (ClientError, BotoCoreError) as error:
            return finish(Outcome.FAILED, f"Could not count the cluster's operator requests ({error_code(error)}); "
                                          "nothing was queued.", page="failed")
        if not within:
            return finish(Outcome.SUPPRESSED, f"Held back: {cluster.name} has had {per_hour} operator requests this "
                                              f"hour (max_operator_requests_per_hour); would {verb} {what}.",
                          page="budget", claim=f"operator:{cluster.name}:budget:{operator_hour(now)}",
                          why=Why.RATE_LIMIT)

    named = [slurm_job_incident(cluster.name, request.also_named)] if request.also_named else []
    lineages = [incident.removeprefix("job:") for incident in (request.incident, *named)]
    jobs = JobStore(table)
    try:
        restarts = jobs.claim_job_restarts(lineages, max_restarts, now, request.min_interval)
        spent = None if restarts is not None else [jobs.restarts(lineage) for lineage in lineages]
    except (ClientError, BotoCoreError) as error:
        return finish(Outcome.FAILED, f"Could not count the job's restarts ({error_code(error)}); nothing was "
                                      "queued.", page="failed")
    if restarts is None:
        if spent and all(found is None or found.restarts < max_restarts for found in spent) and request.min_interval:
            last = max(found.last_restart_at for found in spent if found is not None)
            minutes = int(request.min_interval.total_seconds() // 60)
            return finish(Outcome.SUPPRESSED, f"Held back: {request.job} was restarted at {last:%H:%M} UTC, less than "
                                              f"{minutes} min ago (stall_restart_interval_minutes); a stall that comes "
                                              "back this soon needs a human.", page="too_soon", why=Why.RATE_LIMIT)
        of = f"{request.job}, or of jobs named {request.also_named}" if request.also_named else request.job
        return finish(Outcome.SUPPRESSED, f"Giving up: restart budget spent ({max_restarts} {verb}s of {of}).",
                      page="gave_up", attempt=max_restarts + 1, why=Why.BUDGET_SPENT)
    last_seen = None
    if request.job_name is not None and request.kubernetes is None:  # a Slurm requeue by name: which job runs it
        try:
            last_seen = jobs.last_running(cluster.name, request.job_name)
        except (ClientError, BotoCoreError):
            logger.warning("last running job unreadable", extra={"job": request.job_name})
    try:
        request_id = f"{request.trigger}:{request.event_id}"
        command = (restart_command(cluster.name, request.incident, now, request.kubernetes, request_id=request_id)
                   if request.kubernetes is not None else
                   requeue_command(cluster.name, request.incident, now, job_id=request.job_id,
                                   job_name=request.job_name, job_names=request.job_names, last_seen_id=last_seen,
                                   request_id=request_id))
        AgentStore(table).record_command(command.command_id, CommandContext(
            cluster=request.cluster, kind=command.kind, target=command.target, incident=request.incident,
            trigger=request.trigger, event_id=request.event_id, mode=request.mode, fault=request.fault,
            action=acting, job=request.job, attempt=restarts, details=request.context[:1000]), now)
        deps.agents.send(command)
    except InvalidCommand as error:  # unreachable after the checks above; kept as the last line of defence
        return finish(Outcome.REJECTED, f"Refused to queue: {error}.", attempt=restarts)
    except (ClientError, BotoCoreError) as error:
        # Nothing reached the agent: give the restart back to the budget (best effort).
        try:
            JobStore(table).refund_job_restarts(lineages)
        except (ClientError, BotoCoreError):
            logger.warning("restart refund failed", extra={"lineages": lineages})
        return finish(Outcome.FAILED, f"Could not queue the {verb} ({error_code(error)}): {short(str(error))}",
                      page="failed", attempt=restarts)
    return finish(Outcome.DEFERRED, f"{verb.capitalize()} of {what} (attempt {restarts} of {max_restarts}) queued "
                                    f"for the agent as command {command.command_id}; its result is recorded "
                                    "when the agent reports.", attempt=restarts, why=Why.QUEUED_FOR_AGENT)
