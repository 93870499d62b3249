"""Carry out a validated command through Slurm, and say how it went."""

from __future__ import annotations

from dataclasses import dataclass, field

from medic_agent.commands import (
    MAX_JOBS_PER_NAME,
    Command,
    RequeueJob,
    find_jobs_argv,
    parse_job_ids,
    requeue_argv,
)
from medic_agent.slurm import Slurm

EXECUTED, FAILED, REFUSED = "executed", "failed", "refused"


@dataclass(frozen=True)
class Result:
    status: str  # executed | failed | refused
    message: str
    job_ids: tuple[str, ...] = field(default=())


def execute(command: Command, slurm: Slurm) -> Result:
    action = command.action
    if isinstance(action, RequeueJob):
        if action.job_id is not None:
            run = slurm.run(requeue_argv(action.job_id))
            return Result(EXECUTED if run.ok else FAILED, run.describe(), (action.job_id,) if run.ok else ())
        return _requeue_by_name(action.job_name or "", slurm, action.max_jobs)
    raise TypeError(f"unknown action {action!r}")


def _requeue_by_name(job_name: str, slurm: Slurm, max_jobs: int = MAX_JOBS_PER_NAME) -> Result:
    found = slurm.run(find_jobs_argv(job_name))
    if not found.ok:
        return Result(FAILED, found.describe())
    job_ids, skipped = parse_job_ids(found.output)
    notes = [f"skipped squeue output {', '.join(skipped)}"] if skipped else []
    if not job_ids:
        return Result(FAILED, "; ".join([f"no job named {job_name!r} in squeue", *notes]))
    if len(job_ids) > max_jobs:
        return Result(FAILED, f"{len(job_ids)} jobs named {job_name!r}, more than {max_jobs}: not requeued")
    runs = [slurm.run(requeue_argv(job_id)) for job_id in job_ids]
    requeued = tuple(job_id for job_id, run in zip(job_ids, runs) if run.ok)
    status = EXECUTED if len(requeued) == len(runs) else FAILED
    return Result(status, "; ".join([run.describe() for run in runs] + notes), requeued)
