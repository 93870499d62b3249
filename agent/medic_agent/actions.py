"""Carry out a validated command through Slurm, and say how it went."""

from __future__ import annotations

from dataclasses import dataclass, field
from re import Pattern

from medic_agent.commands import (
    MAX_JOBS_PER_NAME,
    SACCT_STATE_LINE,
    SQUEUE_STATE_LINE,
    Command,
    DrainNode,
    JobState,
    JobStates,
    RequeueJob,
    ResumeNode,
    accounted_jobs_argv,
    drain_argv,
    find_jobs_argv,
    job_states_argv,
    jobs_on_node_argv,
    named_jobs_argv,
    parse_job_ids,
    parse_job_states,
    parse_jobs_on_node,
    parse_named_jobs,
    requeue_argv,
    resume_argv,
)
from medic_agent.slurm import OUTPUT_LIMIT, Run, Slurm

EXECUTED, FAILED, REFUSED = "executed", "failed", "refused"


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


def execute(command: Command, slurm: Slurm) -> Result:
    action = command.action
    if isinstance(action, RequeueJob):
        if action.job_id is not None:
            run = slurm.run(requeue_argv(action.job_id))
            return Result(EXECUTED if run.ok else FAILED, run.describe(), (action.job_id,) if run.ok else ())
        return _requeue_by_name(action.job_name or "", slurm, action.max_jobs)
    if isinstance(action, DrainNode):
        return _drain(action.node, slurm)
    if isinstance(action, ResumeNode):
        run = slurm.run(resume_argv(action.node))
        return Result(EXECUTED if run.ok else FAILED, run.describe())
    if isinstance(action, JobStates):
        return _job_states(action.job_ids, slurm)
    raise TypeError(f"unknown action {action!r}")


def _requeue_by_name(job_name: str, slurm: Slurm, max_jobs: int = MAX_JOBS_PER_NAME) -> Result:
    found = slurm.run(find_jobs_argv(job_name))
    if not found.ok:
        return Result(FAILED, found.describe())
    job_ids, skipped = parse_job_ids(found.output)
    notes = [f"skipped squeue output {', '.join(skipped)}"] if skipped else []
    if not job_ids:
        return _nothing_to_requeue(job_name, slurm, notes)
    if len(job_ids) > max_jobs:
        return Result(FAILED, f"{len(job_ids)} jobs named {job_name!r}, more than {max_jobs}: not requeued")
    runs = [slurm.run(requeue_argv(job_id)) for job_id in job_ids]
    requeued = tuple(job_id for job_id, run in zip(job_ids, runs) if run.ok)
    status = EXECUTED if len(requeued) == len(runs) else FAILED
    return Result(status, "; ".join([run.describe() for run in runs] + notes), requeued)


def _nothing_to_requeue(job_name: str, slurm: Slurm, notes: list[str]) -> Result:
    """No job of that name is pending or running: say what became of them, so that Medic can tell a job that
    completed (nothing to requeue) from one that failed or vanished. First what slurmctld still remembers (finished
    jobs, until MinJobAge after they ended: 300 s by default), then the cluster's accounting (sacct, where slurmdbd
    keeps it). Still `failed`: nothing was requeued."""
    said = [f"no job named {job_name!r} in squeue", *notes]
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
    listed = slurm.run(jobs_on_node_argv(node))
    if not listed.ok:
        return Result(EXECUTED, f"{drained.describe()}; jobs unknown: {listed.describe()}")
    if len(listed.output) >= OUTPUT_LIMIT:  # cut short: its last line may be a truncated id or name
        return Result(EXECUTED, f"{drained.describe()}; jobs unknown: squeue's output is longer than {OUTPUT_LIMIT} "
                                "characters")
    try:
        jobs = parse_jobs_on_node(listed.output)
    except ValueError as error:
        return Result(EXECUTED, f"{drained.describe()}; jobs unknown: {error}")
    if len(jobs) > MAX_JOBS_PER_NAME:
        return Result(EXECUTED, f"{drained.describe()}; jobs unknown: {len(jobs)} listed, more than "
                                f"{MAX_JOBS_PER_NAME}")
    listing = ", ".join(f"{job_id} ({name})" for job_id, name in jobs) or "none"
    return Result(EXECUTED, f"{drained.describe()}; jobs on {node}: {listing}", jobs=tuple(jobs))


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
