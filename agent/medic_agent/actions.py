"""Carry out a validated command through Slurm, and say how it went."""

from __future__ import annotations

from dataclasses import dataclass, field
from re import Pattern

from medic_agent.commands import (
    MAX_JOBS_LISTED,
    SACCT_STATE_LINE,
    SQUEUE_STATE_LINE,
    Command,
    DrainNode,
    JobState,
    JobStates,
    ListNodeJobs,
    QuarantineNode,
    ReleaseNode,
    RequeueJob,
    ResumeNode,
    accounted_jobs_argv,
    drain_argv,
    drained_by_medic,
    drained_by_someone_else,
    job_name_argv,
    job_states_argv,
    jobs_on_node_argv,
    named_jobs_argv,
    parse_job_name_lines,
    parse_job_states,
    parse_jobs_on_node,
    parse_named_jobs,
    parse_node_state,
    quarantine_argv,
    quarantined_by_medic,
    requeue_argv,
    resume_argv,
    running_jobs_argv,
    show_node_argv,
)
from medic_agent.slurm import OUTPUT_LIMIT, Run, Slurm

EXECUTED, FAILED, REFUSED = "executed", "failed", "refused"
NOT_WATCHED = "not_watched"  # the refusal code Medic records as `rejected` (functions/medic/flows/agent/commands.py)


@dataclass(frozen=True)
class Result:
    status: str  # executed | failed | refused
    message: str
    job_ids: tuple[str, ...] = field(default=())
    # drain_node: the jobs on the node after the drain, (id, name); None when they could not be listed
    jobs: tuple[tuple[str, str], ...] | None = None
    # job_states: each job Slurm still knows; None when they could not be read. requeue_job by name that found
    # nothing to requeue: what Slurm (or its accounting) says became of the jobs of that name; None: unknown
    job_states: tuple[JobState, ...] | None = None
    # resume_node: the node's state and reason as read before (None: not read), and whether it was resumed
    node_state: str | None = None
    node_reason: str | None = None
    resumed: bool | None = None
    # quarantine_node: whether the node was drained with Medic's quarantine reason (False: someone else's drain kept)
    held: bool | None = None
    # refused: why (NOT_WATCHED: a job by id that is not one of the jobs Medic watches)
    refusal: str = ""


def execute(command: Command, slurm: Slurm) -> Result:
    action = command.action
    if isinstance(action, RequeueJob):
        if action.job_id is not None and action.job_names:
            return _requeue_if_named(action.job_id, action.job_names, slurm)
        if action.job_id is not None:
            run = slurm.run(requeue_argv(action.job_id))
            return Result(EXECUTED if run.ok else FAILED, run.describe(), (action.job_id,) if run.ok else ())
        return _requeue_running(action.job_name or "", action.last_seen_id, slurm)
    if isinstance(action, DrainNode):
        return _drain(action.node, slurm)
    if isinstance(action, ResumeNode):
        return _resume(action.node, slurm)
    if isinstance(action, ListNodeJobs):
        return _list_jobs(action.node, slurm)
    if isinstance(action, QuarantineNode):
        return _quarantine(action.node, slurm)
    if isinstance(action, ReleaseNode):
        return _release(action.node, slurm)
    if isinstance(action, JobStates):
        return _job_states(action.job_ids, slurm)
    raise TypeError(f"unknown action {action!r}")


def _requeue_if_named(job_id: str, names: tuple[str, ...], slurm: Slurm) -> Result:
    """Requeue a job by id only when Slurm names it one of ``names`` (Medic's watched jobs on this cluster): an
    operator's request by id never reaches another team's job."""
    found = slurm.run(job_name_argv(job_id))
    if not found.ok:
        if FORGOTTEN_JOB in found.output:
            return Result(FAILED, f"Slurm does not know job {job_id}: not requeued")
        return Result(FAILED, found.describe())
    try:
        listed = [(listed_id, name) for listed_id, _, name in parse_job_name_lines(found.output)
                  if listed_id == job_id or listed_id.startswith(f"{job_id}_")]  # an array job: its tasks
    except ValueError as error:
        return Result(FAILED, f"job {job_id} unreadable in squeue ({error}): not requeued")
    if not listed:
        return Result(FAILED, f"squeue lists no job {job_id}: not requeued")
    name = listed[0][1]
    if any(listed_name not in names for _, listed_name in listed):
        return Result(REFUSED, f"job {job_id} is named {name!r}, not one of the jobs Medic watches on this cluster "
                               f"({', '.join(names)}): not requeued", refusal=NOT_WATCHED)
    run = slurm.run(requeue_argv(job_id))
    return Result(EXECUTED if run.ok else FAILED, f"job {job_id} is {name!r}; {run.describe()}",
                  (job_id,) if run.ok else (), jobs=((job_id, name),) if run.ok else None)


def _requeue_running(job_name: str, last_seen_id: str | None, slurm: Slurm) -> Result:
    """Requeue the one job running under a name: the one Medic last saw running under it when it still does, else
    the only running one. A held or pending job of that name is never requeued; several running ones (and none of
    them the one Medic saw) requeue none."""
    found = slurm.run(running_jobs_argv(job_name))
    if not found.ok:
        return Result(FAILED, found.describe())
    if len(found.output) >= OUTPUT_LIMIT:
        return Result(FAILED, f"squeue's output is longer than {OUTPUT_LIMIT} characters: not requeued")
    try:
        running = [job_id for job_id, name in parse_jobs_on_node(found.output) if name == job_name]
    except ValueError as error:
        return Result(FAILED, f"running jobs named {job_name!r} unreadable ({error}): not requeued")
    if last_seen_id is not None and last_seen_id in running:
        job_id, why = last_seen_id, "the job Medic last saw running under that name"
    elif len(running) == 1:
        job_id, why = running[0], "the only job running under that name"
    elif not running:  # nothing to requeue: what became of the jobs of that name (completed, or not)
        return _nothing_to_requeue(job_name, slurm, [])
    else:
        seen = f", none of them job {last_seen_id} Medic last saw running" if last_seen_id else ""
        return Result(FAILED, f"{len(running)} jobs named {job_name!r} are running ({', '.join(running[:8])}"
                              f"{', ...' if len(running) > 8 else ''}){seen}: none requeued; requeue one by job_id")
    run = slurm.run(requeue_argv(job_id))
    return Result(EXECUTED if run.ok else FAILED, f"job {job_id} ({why}); {run.describe()}",
                  (job_id,) if run.ok else (), jobs=((job_id, job_name),) if run.ok else None)


def _nothing_to_requeue(job_name: str, slurm: Slurm, notes: list[str]) -> Result:
    """No job of that name is running: say what became of the jobs of that name, so that Medic can tell a job that
    completed (nothing to requeue: none pending or running, the newest COMPLETED) from one that failed or vanished.
    First what slurmctld still remembers (finished jobs, until MinJobAge after they ended: 300 s by default), then the
    cluster's accounting (sacct, where slurmdbd keeps it). Still `failed`: nothing was requeued."""
    said = [f"no job named {job_name!r} running in squeue", *notes]  # (held or pending ones are never requeued)
    unknown = []
    for where, argv, line in (("slurmctld still lists", named_jobs_argv(job_name), SQUEUE_STATE_LINE),
                              ("sacct lists", accounted_jobs_argv(job_name), SACCT_STATE_LINE)):
        states, why = _named_jobs(slurm.run(argv), line)
        if states:
            listing = ", ".join(f"{job.job_id} {job.state}" for job in states)
            return Result(FAILED, "; ".join([*said, f"{where} {listing}"]), job_states=states)
        unknown.append(why)
    return Result(FAILED, "; ".join([*said, f"what became of it is unknown: {'; '.join(unknown)}"]))


def _named_jobs(run: Run, line: Pattern[str]) -> tuple[tuple[JobState, ...], str]:
    """The jobs a squeue/sacct run listed, or none and why."""
    if not run.ok:  # in short (the program, not its whole argv): the result's message is read in a page
        status = "did not finish" if run.returncode is None else f"exit {run.returncode}"
        return (), f"{run.argv[0]}: {status}: {run.output}" if run.output else f"{run.argv[0]}: {status}"
    if len(run.output) >= OUTPUT_LIMIT:
        return (), f"{run.argv[0]}'s output is longer than {OUTPUT_LIMIT} characters"
    try:
        states = tuple(parse_named_jobs(run.output, line))
    except ValueError as error:
        return (), f"{run.argv[0]}: {error}"
    return states, f"{run.argv[0]} lists none"


def _drain(node: str, slurm: Slurm) -> Result:
    """Drain first (from then on no new work lands on the node), then list what still runs there. A drain that
    worked is `executed` even when the list is not to be had: its `jobs` are then None (unknown), with why."""
    drained = slurm.run(drain_argv(node))
    if not drained.ok:
        return Result(FAILED, drained.describe())
    return _listed(node, slurm, f"{drained.describe()}; ")


def _list_jobs(node: str, slurm: Slurm) -> Result:
    """The jobs on the node, its Slurm state untouched: `failed` when they could not be listed."""
    listed = _listed(node, slurm, "")
    return listed if listed.jobs is not None else Result(FAILED, listed.message)


def _listed(node: str, slurm: Slurm, before: str) -> Result:
    """squeue -w: the jobs on the node (`jobs`), or None (unknown) with why; `executed` either way."""
    listed = slurm.run(jobs_on_node_argv(node))
    if not listed.ok:
        return Result(EXECUTED, f"{before}jobs unknown: {listed.describe()}")
    if len(listed.output) >= OUTPUT_LIMIT:  # cut short: its last line may be a truncated id or name
        return Result(EXECUTED, f"{before}jobs unknown: squeue's output is longer than {OUTPUT_LIMIT} characters")
    try:
        jobs = parse_jobs_on_node(listed.output)
    except ValueError as error:
        return Result(EXECUTED, f"{before}jobs unknown: {error}")
    if len(jobs) > MAX_JOBS_LISTED:
        return Result(EXECUTED, f"{before}jobs unknown: {len(jobs)} listed, more than {MAX_JOBS_LISTED}")
    listing = ", ".join(f"{job_id} ({name})" for job_id, name in jobs) or "none"
    return Result(EXECUTED, f"{before}jobs on {node}: {listing}", jobs=tuple(jobs))


def _resume(node: str, slurm: Slurm) -> Result:
    """Resume only a node still drained with Medic's own reason: one HyperPod (or a person) already returned to
    service, or one someone else drained, is left as it is (`executed`, not resumed, with what Slurm said)."""
    found = _node_state(node, slurm, "resumed")
    if isinstance(found, Result):
        return found
    state, reason, seen = found
    if not drained_by_medic(state, reason):
        return Result(EXECUTED, f"{seen}; not resumed: not drained by Medic", node_state=state, node_reason=reason,
                      resumed=False)
    run = slurm.run(resume_argv(node))
    return Result(EXECUTED if run.ok else FAILED, f"{seen}; {run.describe()}", node_state=state, node_reason=reason,
                  resumed=run.ok)


def _node_state(node: str, slurm: Slurm, what: str) -> tuple[str, str, str] | Result:
    """The node's (state, reason, what was seen), or the failed Result when it cannot be read (never act on a guess)."""
    read = slurm.run(show_node_argv(node))
    if not read.ok:
        return Result(FAILED, f"{read.describe()}; not {what}: its state could not be read")
    try:
        state, reason = parse_node_state(read.output, node)
    except ValueError as error:
        return Result(FAILED, f"not {what}: {error}")
    return state, reason, f"{' '.join(read.argv)}: State={state} Reason={reason or '(none)'}"


def _quarantine(node: str, slurm: Slurm) -> Result:
    """Drain the node with Medic's quarantine reason, over Medic's own drain or none; a drain someone else set (their
    reason) is left as it is (`executed`, not held: releasing it is theirs)."""
    read = _node_state(node, slurm, "quarantined")
    if isinstance(read, Result):
        return read
    state, reason, seen = read
    if drained_by_someone_else(state, reason):
        return Result(EXECUTED, f"{seen}; not quarantined: drained by someone else, left as it is", node_state=state,
                      node_reason=reason, held=False)
    run = slurm.run(quarantine_argv(node))
    return Result(EXECUTED if run.ok else FAILED, f"{seen}; {run.describe()}", node_state=state, node_reason=reason,
                  held=run.ok)


def _release(node: str, slurm: Slurm) -> Result:
    """Resume the node only while it is drained with Medic's quarantine reason; anything else is left as it is."""
    read = _node_state(node, slurm, "released")
    if isinstance(read, Result):
        return read
    state, reason, seen = read
    if not quarantined_by_medic(state, reason):
        return Result(EXECUTED, f"{seen}; not resumed: not quarantined by Medic", node_state=state,
                      node_reason=reason, resumed=False)
    run = slurm.run(resume_argv(node))
    return Result(EXECUTED if run.ok else FAILED, f"{seen}; {run.describe()}", node_state=state, node_reason=reason,
                  resumed=run.ok)


# squeue -j with one id slurmctld no longer remembers (it ended more than MinJobAge ago): exit 1 and this message
# (slurm-wlm 22.05: "slurm_load_jobs error: Invalid job id specified"); checked in tests/agent/test_real_slurm.py.
FORGOTTEN_JOB = "Invalid job id specified"


def _job_states(job_ids: str, slurm: Slurm) -> Result:
    """The state of each job Slurm still knows; a job it does not list has left slurmctld's memory."""
    listed = slurm.run(job_states_argv(job_ids))
    if not listed.ok:
        if FORGOTTEN_JOB in listed.output:
            return Result(EXECUTED, f"{listed.describe()}; Slurm no longer knows these jobs", job_states=())
        return Result(FAILED, listed.describe())
    if len(listed.output) >= OUTPUT_LIMIT:
        return Result(FAILED, f"squeue's output is longer than {OUTPUT_LIMIT} characters")
    try:
        states = parse_job_states(listed.output)
    except ValueError as error:
        return Result(FAILED, str(error))
    shown = ", ".join(f"{job.job_id} {job.state}" for job in states) or "none listed"
    return Result(EXECUTED, f"job states: {shown}", job_states=tuple(states))
