"""What Medic watches (issue 33): per cluster, the jobs[] entries and the runs its watch rules cover now (the probe's
`Run` reports of the past three hours), each with its last step and its restart budget."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from medic.adapters.metrics import TrainingMetrics
from medic.config import WATCH_RETENTION, MedicConfig
from medic.core.text import quoted
from medic.ledger.jobs import JobStore


@dataclass(frozen=True)
class Watched:
    cluster: str
    job: str
    by: str  # "entry" (jobs[]), or "rule <job_prefix>"
    run: str  # the run's identity (Slurm job id, pod), "-" for an entry
    state: str  # stepping, stalled, superseded, gone; "-" for an entry (its alarms judge it)
    last_step: str
    last_step_at: datetime | None
    restarts: int
    max_restarts: int

    def as_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "job": self.job, "watched_by": self.by, "run": self.run, "state": self.state,
                "last_step": self.last_step, "last_step_at": self.last_step_at.isoformat() if self.last_step_at
                else None, "restarts": self.restarts, "max_restarts": self.max_restarts}


def read(cloudwatch: Any, table: Any, config: MedicConfig, now: datetime) -> list[Watched]:
    """Every watched job and run of the config's clusters: one ListMetrics and one GetMetricData per cluster with watch
    rules, one GetMetricData per jobs[] entry, one GetItem per budget."""
    from medic.flows.stall.policy import AlarmKind, AlarmSubject
    from medic.flows.stall.response import incident_of  # the stall flow's lineage of a run: its budget
    from medic.flows.stall.watch_policy import watched_runs

    metrics, jobs, lines = TrainingMetrics(cloudwatch), JobStore(table), []

    def spent(incident: str) -> int:
        found = jobs.restarts(incident.removeprefix("job:"))
        return found.restarts if found is not None else 0

    for cluster in config.clusters:
        limit = config.guardrails_for(cluster).max_job_restarts
        for job in (job for job in config.jobs if job.cluster == cluster.name):
            progress = metrics.progress(job.name, now - WATCH_RETENTION, now)
            incident = incident_of(AlarmSubject(f"medic-stall-{job.name}", AlarmKind.STALL, cluster, job))
            lines.append(Watched(cluster.name, job.name, "entry", "-", "-", _step(progress.last_step), None,
                                 spent(incident), limit))
        if not cluster.watch:
            continue
        for run in watched_runs(config, cluster, metrics.runs(cluster.name, now, WATCH_RETENTION), now):
            lines.append(Watched(cluster.name, run.report.job, f"rule {run.rule.job_prefix}",
                                 quoted(run.report.key, 80), run.state.value, _step(run.report.last_step),
                                 run.report.last_step_at, spent(incident_of(run.subject)), limit))
    return lines


def _step(step: float | None) -> str:
    return f"{step:.0f}" if step is not None else "-"
