"""The reconciler's sweep of the runs watched by pattern (issue 33): every 5 minutes, for each cluster with watch
rules, one ListMetrics and one GetMetricData over its runs (TrainingMetrics.runs); a run that stalled goes to the stall
flow as a subject of its own (`respond`: the same read-back, restart budget, proof of recovery and pages as a
`jobs[]` entry's stall alarm), once per stall (its last step names the episode), and a run stepping again after one
closes it, as an alarm's OK does. No alarm per run: a run is watched from its first report, with no deploy."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.config_core import WATCH_RETENTION, Cluster
from medic.core.models import Action, Fault, Outcome, Trigger
from medic.core.pages import PageSource, PageText, PageWindow
from medic.core.record import About
from medic.core.text import quoted, short
from medic.deps import Deps
from medic.flows.stall.response import StateChange, respond
from medic.flows.stall.watch_policy import RunState, WatchedRun, watched_runs
from medic.ledger.incidents import IncidentStore
from medic.obs import logger
from medic.outbox.pages import page_incident
from medic.outbox.records import emit


def sweep_watched_runs(raw: Any, deps: Deps) -> list[dict]:
    """One look at every cluster's runs watched by pattern: the records written (a stall, a recovery)."""
    records: list[dict] = []
    now = deps.now()
    for cluster in deps.config.clusters:
        if not cluster.watch:
            continue
        try:
            reports = deps.metrics.runs(cluster.name, now, WATCH_RETENTION)
        except (ClientError, BotoCoreError) as error:  # the next run looks again; someone is told once a day
            logger.warning("watched runs unreadable", extra={"cluster": cluster.name, "error_code": error_code(error)})
            records.extend(_unreadable(cluster, error_code(error), raw, deps))
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


def _unreadable(cluster: Cluster, code: str, raw: Any, deps: Deps) -> list[dict]:
    """Medic cannot see the cluster's runs watched by pattern (their metrics unreadable after the client's retries):
    one record (`watch_unreadable`, `failed`) and one page per cluster per UTC day while it lasts, never silent."""
    now = deps.now()
    incident = f"watch:{cluster.name}:unreadable:{now:%Y-%m-%d}"
    if not IncidentStore(deps.table).claim_report(incident, now):
        return []
    run_id = str(raw.get("id", "schedule"))[:80] if isinstance(raw, dict) else "schedule"
    about = About(incident=incident, trigger=Trigger.RECONCILE, event_id=run_id, mode=deps.mode.current(),
                  cluster=cluster.name)
    rules = ", ".join(repr(rule.job_prefix) for rule in cluster.watch)
    record = about.record(fault=Fault.WATCH_UNREADABLE, action=Action.NONE, outcome=Outcome.FAILED, reason=short(
        f"Medic could not read the metrics of the runs {cluster.name} watches by pattern (CloudWatch ListMetrics/"
        f"GetMetricData answered {quoted(code, 64)} after the client's retries): until it can, a run matching watch "
        f"rules {rules} that stalls is not seen. Runs named in jobs[] keep their alarms. The reconciler looks again "
        "every 5 minutes.", 500))
    text = PageText(f"[Medic] {cluster.name}: the runs watched by pattern cannot be read", (
        f"Cluster:        {cluster.name}",
        f"What happened:  {record['reason']}",
        "What to do:     Check that the reconciler's role still has cloudwatch:ListMetrics and "
        "cloudwatch:GetMetricData (the stack grants them when a cluster has watch rules: cdk deploy) and "
        "CloudWatch's health in this region.",
        f"Incident:       {record['incident']} (mode {record['mode']})"))
    window = PageWindow.cluster(PageSource.WATCH, cluster.name)
    return [emit(record.paged_if(page_incident(deps, deps.table, record, text, window=window)))]


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
