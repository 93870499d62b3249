"""The reconciler's sweep of the runs watched by pattern (issue 33): every 5 minutes, for each cluster with watch
rules, one ListMetrics and one GetMetricData over its runs (TrainingMetrics.runs); a run that stalled goes to the stall
flow as a subject of its own (`respond`: the same read-back, restart budget, proof of recovery and pages as a
`jobs[]` entry's stall alarm), once per stall (its last step names the episode), and a run stepping again after one
closes it, as an alarm's OK does. No alarm per run: a run is watched from its first report, with no deploy."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.config_core import WATCH_RETENTION
from medic.core.models import Trigger
from medic.deps import Deps
from medic.flows.stall.response import StateChange, respond
from medic.flows.stall.watch_policy import RunState, WatchedRun, watched_runs
from medic.ledger.incidents import IncidentStore
from medic.obs import logger


def sweep_watched_runs(raw: Any, deps: Deps) -> list[dict]:
    """One look at every cluster's runs watched by pattern: the records written (a stall, a recovery)."""
    records: list[dict] = []
    now = deps.now()
    for cluster in deps.config.clusters:
        if not cluster.watch:
            continue
        try:
            reports = deps.metrics.runs(cluster.name, now, WATCH_RETENTION)
        except (ClientError, BotoCoreError) as error:  # the next run looks again
            logger.warning("watched runs unreadable", extra={"cluster": cluster.name, "error_code": error_code(error)})
            continue
        for run in watched_runs(deps.config, cluster, reports, now):
            try:
                record = _see_to(run, deps)
            except (ClientError, BotoCoreError) as error:
                logger.warning("watched run not handled", extra={"cluster": cluster.name, "run": run.report.key,
                                                                 "error_code": error_code(error)})
                continue
            if record is not None:
                records.append(record)
    return records


def _see_to(run: WatchedRun, deps: Deps) -> dict | None:
    subject, job = run.subject, run.subject.job
    if run.state is RunState.STALLED:
        change = StateChange("ALARM", run.episode, f"No training step from {job.name} ({run.report.key}) for "
                                                   f"{job.stall_minutes} min (watch rule {run.rule.job_prefix!r}).")
    elif run.state is RunState.STEPPING:
        table = deps.table.for_mode(deps.mode.current(subject.cluster.name))
        if IncidentStore(table).alarm_incident(subject.name) is None:
            return None
        change = StateChange("OK", run.episode, f"{job.name} ({run.report.key}) steps again.")
    else:
        return None
    event_id = f"watch:{subject.cluster.name}:{run.report.key}:{change.state}:{run.episode}"[:256]
    return respond(subject, change, event_id, deps, trigger=Trigger.RECONCILE, quiet_repeats=True)
