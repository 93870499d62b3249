"""Watch by pattern (issue 33): which of a cluster's runs its watch rules cover, and which of them stalled.

Pure: no I/O. The reconciler's sweep reads the cluster's runs (one ListMetrics, one GetMetricData: TrainingMetrics.runs)
and hands each stalled run to the stall flow as a subject of its own, with the same read-back, restart budget, proof of
recovery and pages as a `jobs[]` entry's stall alarm.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import ValidationError

from medic.config_core import (
    K8S_NAMESPACE_PATTERN,
    K8S_OBJECT_NAME_PATTERN,
    Cluster,
    CoreConfig,
    Job,
    KubernetesJob,
    WatchRule,
)
from medic.core.progress import RunReport
from medic.core.text import quoted
from medic.flows.stall.policy import AlarmKind, AlarmSubject, RunTarget

WATCH_SUBJECT_PREFIX = "medic-watch"  # a run's subject name: medic-watch:<cluster>:<run key> (never an alarm's)


class RunState(StrEnum):
    STEPPING = "stepping"  # a step within its stall_minutes
    # no step for stall_minutes since its last step (or its first report), or the probe's own hang verdict (Stalled)
    STALLED = "stalled"
    SUPERSEDED = "superseded"  # a later run of the same name started after its last report
    GONE = "gone"  # no report within the sweep's window (config.WATCH_RETENTION): no longer watched


@dataclass(frozen=True)
class WatchedRun:
    report: RunReport
    rule: WatchRule
    subject: AlarmSubject
    state: RunState
    since: datetime | None  # its last step, else its first report: what its stall counts from

    @property
    def episode(self) -> str:
        """The stall (or the stepping) this verdict is about: a new last step is a new episode."""
        return (self.since or self.report.first_report_at or datetime.min).isoformat()


def watched_runs(config: CoreConfig, cluster: Cluster, reports: list[RunReport], now: datetime) -> list[WatchedRun]:
    """The cluster's runs its watch rules cover (a `jobs[]` entry of the run's name wins: its alarms watch it), each
    judged. A run whose name or owner Medic cannot use is left out (the sweep logs it)."""
    runs = []
    for report in reports:
        rule = cluster.watch_rule(report.job)
        if rule is None or config.job(report.job) is not None:
            continue
        subject = run_subject(cluster, rule, report)
        if subject is None:
            continue
        runs.append(_judged(report, rule, subject, reports, now))
    return runs


def _judged(report: RunReport, rule: WatchRule, subject: AlarmSubject, reports: list[RunReport],
            now: datetime) -> WatchedRun:
    since = report.last_step_at or report.first_report_at
    later = [other for other in reports if other.job == report.job and other.key != report.key
             and other.first_report_at and report.last_report_at and other.first_report_at > report.last_report_at]
    if report.last_report_at is None:
        state = RunState.GONE
    elif later:
        state = RunState.SUPERSEDED
    elif report.hung or (since is not None and now - since >= timedelta(minutes=rule.stall_minutes)):
        state = RunState.STALLED
    else:
        state = RunState.STEPPING
    return WatchedRun(report=report, rule=rule, subject=subject, state=state, since=since)


def run_subject(cluster: Cluster, rule: WatchRule, report: RunReport) -> AlarmSubject | None:
    subject = _subject(cluster, rule, report)
    if subject is not None and report.hung:  # the probe's verdict: read back as the hang alarm's is (response.py)
        return AlarmSubject(subject.name, AlarmKind.HANG, subject.cluster, subject.job, subject.run)
    return subject


def _subject(cluster: Cluster, rule: WatchRule, report: RunReport) -> AlarmSubject | None:
    """The run as a stall subject: a job of the rule's timings, and exactly what a stall restarts. None: a name the
    config's job model refuses (Medic could not name it in a command)."""
    try:
        job = Job(name=report.job, cluster=cluster.name, stall_minutes=rule.stall_minutes,
                  recovery_minutes=rule.recovery_minutes)
    except ValidationError:
        return None
    name = f"{WATCH_SUBJECT_PREFIX}:{cluster.name}:{report.key}"
    if cluster.orchestrator == "slurm":
        if report.slurm_job_id is None or not report.slurm_job_id.isdigit():
            return None
        target = RunTarget(key=report.key, rule=rule.job_prefix, slurm_job_id=report.slurm_job_id)
        return AlarmSubject(name, AlarmKind.STALL, cluster, job, target)
    namespace, _, pod = (report.pod or "").partition("/")
    if not re.match(K8S_NAMESPACE_PATTERN, namespace) or len(pod) > 253 or not re.match(K8S_OBJECT_NAME_PATTERN, pod):
        return None  # not a pod's namespace/name: written by something other than a probe
    kubernetes, refused = _owner(namespace, report.owner)
    if kubernetes is not None and namespace not in rule.namespaces:
        refused = (f"its namespace {namespace} is not one the operator opted in for the watch rule "
                   f"{rule.job_prefix!r} (clusters[].watch[].namespaces: {', '.join(rule.namespaces) or 'none'})")
    target = RunTarget(key=report.key, rule=rule.job_prefix, kubernetes=kubernetes, refused=refused)
    return AlarmSubject(name, AlarmKind.STALL, cluster, job, target)


def _owner(namespace: str, owner: str | None) -> tuple[KubernetesJob | None, str | None]:
    """The run's owning training job, as the probe named it (`Kind/name`), or why Medic cannot restart it."""
    kind, _, name = (owner or "").partition("/")
    try:
        return KubernetesJob(namespace=namespace, kind=kind, name=name), None
    except ValidationError:
        return None, ("the probe could not say which training job owns its pod (Owner "
                      f"{quoted(owner or 'unknown', 80)}: set MEDIC_OWNER=<Kind>/<name>, Kind one of PyTorchJob, "
                      "HyperPodPyTorchJob, Job)")
