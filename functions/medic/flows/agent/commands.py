"""Commands for the on-cluster Slurm agent: validated here, and again by the agent before it runs them.

No pydantic model lives here: the operators' requests are in requests.py, the agent's result item in
agent_result.py, so a flow that only builds or sweeps commands (the reconciler's) does not build them at import.

The patterns are the agent's own (agent/medic_agent/commands.py), used the same way: full match,
ASCII only. `$` alone would accept a trailing newline and `\\d` Unicode digits; neither may reach
a command line. tests/unit/test_slurm.py checks both sides agree.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from re import Pattern
from typing import Any

from medic.config_core import K8S_OBJECT_NAME_PATTERN
from medic.core.agent_command import AgentCommand, command_id_for
from medic.core.models import SLURM_NODE_NAME, Outcome
from medic.core.pages import PageText, console_link
from medic.core.text import quoted, shown

JOB_ID = re.compile(r"[0-9]{1,10}", re.ASCII)
JOB_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}", re.ASCII)
COMMAND_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}", re.ASCII)
K8S_OBJECT_NAME = re.compile(K8S_OBJECT_NAME_PATTERN.strip("^$"), re.ASCII)  # what an EKS agent may report
SQUEUE_JOB_ID = re.compile(r"[0-9]{1,10}(?:_[0-9]{1,10})?", re.ASCII)  # what the agent may report as requeued
HEARTBEAT_STALE_AFTER = timedelta(minutes=5)
# Heartbeats are timed by DynamoDB (the stream record's ApproximateCreationDateTime), not by the agent: only the
# skew between DynamoDB's and Lambda's clocks (both AWS's) is tolerated, never an agent's clock running ahead.
CLOCK_TOLERANCE = timedelta(minutes=1)
# An issued command without a result after this long is closed as failed by the reconciler's sweep.
COMMAND_DEADLINE = timedelta(minutes=10)
# What the agent writes as a command's result status.
RESULT_STATUSES = ("executed", "failed", "refused")
# The Slurm agent's refusal code for a job by id that squeue does not name one of the command's job_names (Medic's
# watched jobs): Medic records it `rejected` (agent/medic_agent/actions.py).
NOT_WATCHED = "not_watched"


class InvalidCommand(ValueError):
    """A value that must never reach the agent (or a command line)."""


def matches(pattern: Pattern[str], value: Any) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def valid_job_id(value: Any) -> bool:
    return matches(JOB_ID, value)


def valid_job_name(value: Any) -> bool:
    return matches(JOB_NAME, value)


def canonical_job_id(job_id: str) -> str:
    """A valid job id as Slurm means it: `04211` and `4211` are the same job, so they key the same budget,
    incident, request and command. InvalidCommand unless it is 1-10 ASCII digits."""
    if not valid_job_id(job_id):
        raise InvalidCommand(f"job_id must be 1-10 ASCII digits: {shown(job_id)}")
    return str(int(job_id))


# The agent's own items: `agent#<cluster>#command#<id>` (its claim and result of one command). Cluster names
# cannot contain `#` (CLUSTER_NAME_PATTERN), so the cluster in the key is exact: IAM lets only that cluster's
# agent write under it (dynamodb:LeadingKeys), which is what makes the key, and nothing in the item, the
# proof of who wrote it.
AGENT_COMMAND_PK = re.compile(r"agent#([a-zA-Z0-9](?:-*[a-zA-Z0-9]){0,62})#command#([A-Za-z0-9][A-Za-z0-9-]{0,63})",
                              re.ASCII)


def agent_command_pk(cluster: str, command_id: str) -> str:
    return f"agent#{cluster}#command#{command_id}"


def parse_agent_command_pk(pk: Any) -> tuple[str, str] | None:
    """`agent#<cluster>#command#<id>` → (cluster, command id); None for any other key."""
    found = AGENT_COMMAND_PK.fullmatch(pk) if isinstance(pk, str) else None
    return (found.group(1), found.group(2)) if found else None


def validate_requeue_target(*, job_id: str | None, job_name: str | None) -> None:
    """InvalidCommand unless exactly one of a valid job id or a valid job name is given."""
    if (job_id is None) == (job_name is None):
        raise InvalidCommand("requeue_job needs exactly one of job_id or job_name")
    if job_id is not None and not valid_job_id(job_id):
        raise InvalidCommand(f"job_id must be 1-10 ASCII digits: {shown(job_id)}")
    if job_name is not None and not valid_job_name(job_name):
        raise InvalidCommand(f"job_name must match {JOB_NAME.pattern}: {shown(job_name)}")


def requeue_command(cluster: str, incident: str, now: datetime, *, job_id: str | None = None,
                    job_name: str | None = None, job_names: tuple[str, ...] = (), last_seen_id: str | None = None,
                    request_id: str | None = None) -> AgentCommand:
    """`scontrol requeue <job_id>` (only when squeue names the job one of ``job_names``, when given), or of the one job
    running under job_name (``last_seen_id`` when it still runs under it, else the only one running); InvalidCommand
    unless exactly one of job_id and job_name is valid. The job id is canonical (`04211` → `4211`)."""
    validate_requeue_target(job_id=job_id, job_name=job_name)
    job_id = None if job_id is None else canonical_job_id(job_id)
    if job_names and (job_id is None or not all(valid_job_name(name) for name in job_names)):
        raise InvalidCommand(f"job_names go with a job id, each matching {JOB_NAME.pattern}: {shown(job_names)}")
    if last_seen_id is not None and (job_name is None or not matches(SQUEUE_JOB_ID, last_seen_id)):
        raise InvalidCommand(f"last_seen_id goes with a job name, and is a job id: {shown(last_seen_id)}")
    return AgentCommand(command_id=command_id_for(cluster, incident, request_id), cluster=cluster,
                        kind="requeue_job", incident=incident, issued_at=now, job_id=job_id, job_name=job_name,
                        job_names=tuple(sorted(set(job_names))), last_seen_id=last_seen_id)


# The commands around a node action (issue 16): the agent's drain_node, resume_node and job_states; list_node_jobs
# around a repair HyperPod makes by itself (issue 32).
NODE_KINDS = ("drain_node", "resume_node", "list_node_jobs", "job_states")
# A node in a repair loop taken out of service after its next repair, and returned by an operator (issue 32,
# quarantine_repeat_offenders): Slurm's agent drains it with Medic's quarantine reason / resumes it only when drained
# with that reason; EKS's agent cordons it (spec.unschedulable) / uncordons it only when Medic cordoned it.
HOLD_KINDS = ("quarantine_node", "release_node")


def hold_command(cluster: str, kind: str, incident: str, now: datetime, request_id: str, node: str,
                 orchestrator: str) -> AgentCommand:
    """quarantine_node / release_node of one node: a Slurm node name, or a Kubernetes node name on EKS;
    InvalidCommand for anything the agent would refuse."""
    if kind not in HOLD_KINDS:
        raise InvalidCommand(f"not a quarantine command: {shown(kind)}")
    if orchestrator == "slurm" and not matches(SLURM_NODE_NAME, node):
        raise InvalidCommand(f"node must be one Slurm node name like ip-10-1-2-3: {shown(node)}")
    if orchestrator == "eks" and (len(node) > 253 or not matches(K8S_OBJECT_NAME, node)):
        raise InvalidCommand(f"node must be one Kubernetes node name (a DNS-1123 subdomain): {shown(node)}")
    command_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic:{cluster}:{incident}:{kind}:{request_id}"))
    return AgentCommand(command_id=command_id, cluster=cluster, kind=kind, incident=incident, issued_at=now, node=node)
JOB_ID_LIST = re.compile(r"[0-9]{1,10}(?:,[0-9]{1,10}){0,49}", re.ASCII)  # the agent's, for job_states


def node_command(cluster: str, kind: str, incident: str, now: datetime, request_id: str, *, node: str | None = None,
                 job_ids: list[str] | None = None) -> AgentCommand:
    """drain_node / resume_node of one Slurm node, or job_states of a few jobs; InvalidCommand for anything the
    agent would refuse. The id derives from the request, as requeue_command's."""
    if kind not in NODE_KINDS:
        raise InvalidCommand(f"not a node command: {shown(kind)}")
    listed = None
    if kind == "job_states":
        listed = ",".join(job_ids or [])
        if not matches(JOB_ID_LIST, listed):
            raise InvalidCommand(f"job_states needs 1-50 plain job ids: {shown(listed)}")
    elif not matches(SLURM_NODE_NAME, node):
        raise InvalidCommand(f"node must be one Slurm node name like ip-10-1-2-3: {shown(node)}")
    command_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic:{cluster}:{incident}:{kind}:{request_id}"))
    return AgentCommand(command_id=command_id, cluster=cluster, kind=kind, incident=incident, issued_at=now,
                        node=node if kind != "job_states" else None, job_ids=listed)


# Where a job the repair hit can be, as squeue's %T says (SchedMD slurm, squeue(1) JOB STATE CODES):
# back: pending or running again (HyperPod auto-resume, or slurmctld's own requeue of a batch job with the requeue
# flag when its node went down); hit: ended by the node's failure or repair; anything else ended for its own
# reasons (completed, cancelled, timed out, out of memory, preempted) and is left alone.
JOB_BACK = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED",
                      "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"})
JOB_HIT = frozenset({"NODE_FAIL", "FAILED", "BOOT_FAIL"})
SLURM_FLAG = re.compile(r"[01]", re.ASCII)  # squeue -O Requeue / BatchFlag
RESTART_COUNT = re.compile(r"[0-9]{1,5}", re.ASCII)  # squeue -O RestartCnt (restart_cnt is 16 bits)


def job_after_repair(state: str | None, requeue: str | None = None, batch: str | None = None) -> str:
    """What Medic does about one job the repair hit, from what Slurm says of it (state None: Slurm no longer lists
    it; requeue/batch: its flags `1`/`0` as the agent's job_states reports them, None when not reported):
    "back" (left alone), "requeue", "not_requeueable" (a human resubmits it), "ended" (left alone) or "unknown"
    (a human looks).

    slurmctld (job_mgr.c `kill_running_job_by_node_name`, 22.05 to today) requeues by itself a batch job with the
    requeue flag whose node goes down, and ends any other one NODE_FAIL; `_job_requeue_op` then refuses to requeue a
    job without the flag ("Requested operation is presently disabled", ESLURM_DISABLED) or one that is not a batch
    job ("Only batch jobs are accepted or processed"), whatever its state. So a job Slurm ended is requeued only
    when both flags say it can be; without the flags (an agent that does not report them), a NODE_FAIL job is one
    Slurm would not requeue, and a FAILED one is tried (Slurm answers if it may not)."""
    if state is None:
        return "unknown"
    if state in JOB_BACK:
        return "back"
    if state not in JOB_HIT:
        return "ended"
    if matches(SLURM_FLAG, requeue) and matches(SLURM_FLAG, batch):
        return "requeue" if requeue == batch == "1" else "not_requeueable"
    return "not_requeueable" if state == "NODE_FAIL" else "requeue"


def why_not_requeueable(requeue: str | None, batch: str | None) -> str:
    """Why Slurm will not requeue a job, from its flags (job_mgr.c _job_requeue_op checks the requeue flag first)."""
    if batch == "0" and requeue == "1":
        return "it is not a batch job (started with srun or salloc, not sbatch), and Slurm requeues batch jobs only"
    return "it was submitted with --no-requeue, or under JobRequeue=0 without --requeue"


# What slurmctld answers `scontrol requeue` for a job it will never requeue (slurm_errno.c: ESLURM_DISABLED,
# ESLURM_BATCH_ONLY; `_job_requeue_op`), as the agent's result quotes it.
NOT_REQUEUEABLE_ANSWERS = ("Requested operation is presently disabled", "Only batch jobs are accepted or processed")


def jobs_unknown_page(record: Mapping[str, Any], node_name: str | None, region: str) -> PageText:
    """The one page for a node action whose jobs Medic could not list (agent down, drain failed): a human checks
    what ran on the node."""
    node = node_name or "(its Slurm name unknown)"
    subject = f"[Medic] {record['cluster']} node {record['node_id']}: jobs on it need a look"
    lines = [
        f"Cluster:        {record['cluster']}",
        f"Node:           {record['node_id']} (Slurm node {node})",
        "",
        f"What Medic did: {record['action']}: {record['outcome']}",
        f"Why:            {record['reason']}",
        "",
        f"What to do:     Medic could not list the jobs that ran on the node, so it will not requeue them: check "
        f"them (sacct --nodelist={node} --starttime=now-1day) and requeue each from its checkpoint by hand "
        "(scontrol requeue <id>) if it still needs it; resume the node in Slurm once it is back "
        f"(scontrol update NodeName={node} State=RESUME) if it was drained.",
        f"Console:        {console_link(region, record['cluster'])}",
        f"Incident:       {record['incident']} (event {record['event_id']}, mode {record['mode']})",
    ]
    return PageText(subject[:100], lines)


def not_requeueable_page(record: Mapping[str, Any], job_name: str, state: str, why: str,
                         node_name: str | None, region: str) -> PageText:
    """The one page for a job a node repair ended that Slurm will not requeue: a human resubmits it. The job's name
    is what the agent listed (squeue's word): shown quoted."""
    node = node_name or "(its Slurm name unknown)"
    subject = f"[Medic] {record['cluster']} job {record['job']}: Slurm cannot requeue it, resubmit it"
    lines = [
        f"Cluster:        {record['cluster']}",
        f"Slurm job:      {record['job']} (named {quoted(job_name, 128, ascii_only=True)}), {state}",
        f"Node:           {node}",
        "",
        f"What Medic did: nothing: {record['outcome']} (a requeue cannot succeed, so no restart was spent)",
        f"Why:            {record['reason']}",
        "",
        f"What to do:     Slurm will not requeue job {record['job']}: {why}. Resubmit it with sbatch (the same "
        "script resumes from its last checkpoint). Submitted with --requeue (Slurm's default under JobRequeue=1), "
        "Slurm requeues a batch job by itself when its node fails.",
        f"Console:        {console_link(region, record['cluster'])}",
        f"Incident:       {record['incident']} (event {record['event_id']}, mode {record['mode']})",
    ]
    return PageText(subject[:100], lines)


def heartbeat_is_fresh(seen_at: datetime | None, now: datetime) -> bool:
    """``seen_at``: when DynamoDB wrote the agent's last heartbeat (Medic's clock, never the agent's)."""
    return seen_at is not None and -CLOCK_TOLERANCE <= now - seen_at <= HEARTBEAT_STALE_AFTER


AGENT_HEARTBEAT_PK = re.compile(r"agent#([a-zA-Z0-9](?:-*[a-zA-Z0-9]){0,62})", re.ASCII)


def parse_agent_heartbeat_pk(pk: Any) -> str | None:
    """`agent#<cluster>` (the key of an agent's heartbeat) → the cluster; None for any other key."""
    found = AGENT_HEARTBEAT_PK.fullmatch(pk) if isinstance(pk, str) else None
    return found.group(1) if found else None


SLURM_NEXT_STEP = {
    "agent_down": "Check medic-agent on the controller node (systemctl status medic-agent; "
                  "journalctl -u medic-agent), then requeue the job by hand if it still needs it.",
    "gave_up": "The job keeps failing: find out why before requeueing it by hand (scontrol requeue <id>).",
    "failed": "Check the job in Slurm (squeue, sacct) and requeue it by hand if it still needs it.",
    "no_result": "The agent did not report: check medic-agent on the controller node (systemctl status "
                 "medic-agent; journalctl -u medic-agent) and the job in Slurm (squeue, sacct); requeue it by hand "
                 "if it still needs it.",
    "budget": "More operator requests reached Medic for this cluster this hour than max_operator_requests_per_hour "
              "allows: find who sends them (CloudTrail, PutEvents with source medic.operator); requeue by hand if a "
              "job still needs it. Later requests this hour are recorded, not paged.",
    "too_soon": "The job stalled again soon after its last restart (or its recovery was not real): read its logs and "
                "the probe's metrics before requeueing it by hand.",
    "refused": "The agent refused: Medic requeues only the jobs it watches on this cluster (jobs: in medic.yaml). "
               "Requeue any other job by hand, and find who asked if nobody meant to. Further refusals on this "
               "cluster this hour are recorded, not paged.",
    "not_requeueable": "Slurm will not requeue this job: it was submitted with --no-requeue (or is not a batch "
                       "job). Cancel it if it still runs (scancel <id>) and resubmit it with sbatch (it resumes from "
                       "its last checkpoint), with --requeue so that Slurm and Medic can requeue it next time.",
}

EKS_NEXT_STEP = {
    "agent_down": "Check the Medic agent on the cluster (kubectl -n medic-agent get pods; kubectl -n medic-agent "
                  "logs deploy/medic-agent), then restart the job by hand if it still needs it (delete its pods: "
                  "its controller recreates them from the spec).",
    "gave_up": "The job keeps failing: find out why (kubectl describe, the pods' logs) before restarting it by "
               "hand.",
    "failed": "Check the job and its pods (kubectl get pods -l <the job's label>; kubectl describe) and restart it "
              "by hand if it still needs it.",
    "no_result": "The agent did not report: check the Medic agent (kubectl -n medic-agent logs deploy/medic-agent) "
                 "and the job's pods; restart it by hand if it still needs it.",
    "budget": SLURM_NEXT_STEP["budget"].replace("requeue by hand", "restart by hand"),
    "refused": SLURM_NEXT_STEP["refused"].replace("requeues", "restarts").replace("Requeue", "Restart"),
    "too_soon": "The job stalled again soon after its last restart (or its recovery was not real): read its pods' logs "
                "and the probe's metrics before restarting it by hand.",
    # the agent refused: deleting the pods would have ended the job (agent/medic_agent/eks/policy.py)
    "job_finished": "The job has finished (its Succeeded/Complete or Failed condition): Medic restarts no finished "
                    "job, and left its pods (they hold its logs). Read them (kubectl logs, kubectl describe) and, if "
                    "it must run again, create it again from its spec.",
    "restart_policy_never": "Nothing was deleted and the job still needs a restart: do it by hand (delete the "
                            "PyTorchJob and create it again from its spec). So that Medic can restart it next time, "
                            "set restartPolicy: OnFailure in each replica spec (agent/README.md, which jobs Medic "
                            "can restart).",
    "restart_policy_exit_code": "Nothing was deleted: restart the job by hand if it needs it. Under restartPolicy "
                                "ExitCode the operator recreates a deleted pod only on exit codes 128-255: if the "
                                "job's launcher exits that way on SIGTERM (it lets the signal end it: 143), set "
                                "launcher_exits_128_or_more_on_sigterm: true on the job in medic.yaml and render and "
                                "apply the agent's manifest again; otherwise use restartPolicy: OnFailure.",
    "backoff_limit": "Nothing was deleted: the Job has no retries left for a restart (each deleted pod counts against "
                     "its backoffLimit). Find out why it failed before (kubectl describe job), then create it again "
                     "with a backoffLimit sized for Medic's max_job_restarts times its parallelism.",
}
# The EKS agent's refusal codes (agent/medic_agent/eks/policy.py) with a "what to do" above.
EKS_REFUSALS = ("job_finished", "restart_policy_never", "restart_policy_exit_code", "backoff_limit")
# A job on an EKS cluster: its incident (Medic's own value) says so (flows/agent/eks.py eks_job_incident).
EKS_INCIDENT_PREFIX = "job:eks:"


def slurm_job_page(record: Mapping[str, Any], details: str, region: str, situation: str = "failed") -> PageText:
    """The page for a job Medic could not (or would not) requeue through a Slurm agent (or restart through an
    EKS agent)."""
    eks = str(record.get("incident", "")).startswith(EKS_INCIDENT_PREFIX)
    verb, steps = ("restart", EKS_NEXT_STEP) if eks else ("requeue", SLURM_NEXT_STEP)
    outcome = Outcome(record["outcome"])
    what = {Outcome.FAILED: f"{verb} FAILED", Outcome.SUPPRESSED: f"{verb} held back",
            Outcome.REJECTED: f"{verb} refused"}.get(outcome, outcome.value)
    subject = f"[Medic] {record['cluster']} job {record['job']}: {what}"
    lines = [
        f"Cluster:        {record['cluster']}",
        f"{'Kubernetes job:' if eks else 'Slurm job:     '} {record['job']}",
        # The sender's words, quoted on one line: never where the page says what to do.
        f"Requested:      {quoted(details)}",
        *([f"Requester:      {_requester(record['requester'])}"] if record.get("requester") else []),
        "",
        f"What Medic did: {record['action']}: {record['outcome']} (attempt {record['attempt']})",
        f"Why:            {record['reason']}",
        "",
        f"What to do:     {steps.get(situation, steps['failed'])}",
        f"Console:        {console_link(region, record['cluster'])}",
        f"Incident:       {record['incident']} (event {record['event_id']}, mode {record['mode']})",
    ]
    return PageText(subject, lines)


def forged_result_page(record: Mapping[str, Any], region: str) -> PageText:
    """The page for an agent result Medic did not ask for (rejected): the controller is the suspect."""
    cluster = record["cluster"]
    subject = f"[Medic] {cluster}: agent result rejected"
    lines = [
        f"Cluster:        {cluster}",
        "",
        "What Medic did: rejected the result (nothing was recorded against any job or incident)",
        f"Why:            {record['reason']}",
        "",
        "What to do:     Medic's agent writes results only for commands Medic sent it. Treat the cluster's "
        "controller node as suspect: check the agent's journal (journalctl -u medic-agent) and CloudTrail for "
        "DynamoDB writes by the controller's instance role.",
        f"Console:        {console_link(region, cluster)}",
        f"Incident:       {record['incident']} (event {record['event_id']}, mode {record['mode']})",
    ]
    return PageText(subject, lines)


def _requester(requester: dict) -> str:
    claimed = f", says it is {quoted(requester['claimed_by'], 128)}" if requester.get("claimed_by") else ""
    # the event's own fields: EventBridge fills them for PutEvents, but a redriven or directly invoked event says
    # anything: quoted like the rest of the sender's words
    return (f"an event from account {quoted(requester['account'], 64)} (source {quoted(requester['source'], 256)}"
            f"{claimed}; unverified)")


QUOTED_LIMIT = 200  # an agent's free text in a reason: one line, quoted, at most this long


def quoted_agent(text: str) -> str:
    """An agent's words inside Medic's sentence: one line, bounded, in quotes (never read as Medic's)."""
    return quoted(text, QUOTED_LIMIT, ascii_only=True)
