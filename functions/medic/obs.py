"""Observability in one place: the logger, metrics and tracer every handler uses."""

from __future__ import annotations

from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from medic.core.models import RemediationRecord
from medic.core.text import quoted
from medic.core.timeline import DURATIONS, MOMENTS

SERVICE = "medic"
NAMESPACE = "Medic"
CLUSTER_NAMESPACE = "Medic/Cluster"  # the reconciler's per-cluster gauges (dimensions Cluster, service)
INCIDENTS_NAMESPACE = "Medic/Incidents"  # one metric per incident duration (dimensions kind, cluster)
INCIDENT_MESSAGE = "incident"
REDRIVE_MESSAGE = "redrive override"  # an event redriven with an operator's override reached a handler
# Fields whose null is meaningful (not applicable; a moment that never came): kept in the log line.
RECORD_FIELDS = frozenset(RemediationRecord.model_fields) | frozenset(
    {"kind", "node_id", "jobs", *MOMENTS, *DURATIONS, "lost_steps", "lost_minutes", "job_started_at"})


class RecordFormatter(LambdaPowertoolsFormatter):
    """Powertools drops null fields; the remediation record keeps its whole schema (null = not applicable)."""

    @staticmethod
    def _strip_none_records(records: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in records.items() if value is not None or key in RECORD_FIELDS}


logger = Logger(service=SERVICE, logger_formatter=RecordFormatter())
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
# Only botocore is traced: patching everything X-Ray knows imports requests, asyncio and more at cold start.
tracer = Tracer(service=SERVICE, patch_modules=("botocore",))
_event_time: ContextVar[datetime | None] = ContextVar("event_time", default=None)
ACTED = frozenset({"executed", "dry_run"})


def note_event(event: Any) -> None:
    """Remember when the event being handled happened, to measure the time from event to action."""
    when = None
    if isinstance(event, dict) and isinstance(event.get("time"), str):
        try:
            when = datetime.fromisoformat(event["time"].replace("Z", "+00:00"))
        except ValueError:
            when = None
        if when is not None and when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
    _event_time.set(when)
    override = event.get("medic-redrive") if isinstance(event, dict) else None
    if override is not None:  # an operator's override on a redriven event (core.models.MedicEvent): on the record
        fields = override if isinstance(override, dict) else {}
        logger.warning(REDRIVE_MESSAGE, extra={
            "event_id": quoted(str(event.get("id")), 80), "event_time": quoted(str(event.get("time")), 40),
            "override_event": quoted(str(fields.get("event")), 80), "override_by": quoted(str(fields.get("by")), 128),
            "override_reason": quoted(str(fields.get("reason")), 500)})


def emit_record(record: dict) -> None:
    """One remediation log line and one EMF metric per decision, dimensioned by action and outcome."""
    logger.info("remediation", extra=record)
    with single_metric(name="Remediations", unit=MetricUnit.Count, value=1, namespace=NAMESPACE) as metric:
        metric.add_dimension(name="action", value=str(record["action"]))
        metric.add_dimension(name="outcome", value=str(record["outcome"]))
        metric.add_dimension(name="trigger", value=str(record["trigger"]))
    happened = _event_time.get()
    if happened is not None and str(record["outcome"]) in ACTED and str(record["action"]) != "none":
        seconds = max(0.0, (datetime.now(UTC) - happened).total_seconds())
        with single_metric(name="EventToActionSeconds", unit=MetricUnit.Seconds, value=seconds,
                           namespace=NAMESPACE) as metric:
            metric.add_dimension(name="action", value=str(record["action"]))
            metric.add_metadata(key="cluster", value=record.get("cluster") or "-")
            metric.add_metadata(key="incident", value=record["incident"])


def emit_incident(line: dict) -> None:
    """One ``"message": "incident"`` log line per closed incident (its timeline), and one EMF metric per duration
    that happened (namespace Medic/Incidents, dimensions kind and cluster) for the dashboard's p50/p99."""
    logger.info(INCIDENT_MESSAGE, extra=line)
    for duration in DURATIONS:
        if line.get(duration) is None:
            continue
        with single_metric(name=duration, unit=MetricUnit.Seconds, value=line[duration],
                           namespace=INCIDENTS_NAMESPACE) as metric:
            metric.add_dimension(name="kind", value=str(line["kind"]))
            metric.add_dimension(name="cluster", value=str(line.get("cluster") or "-"))
            metric.add_metadata(key="incident", value=str(line["incident"]))


def count(name: str, value: float = 1) -> None:
    """A single operational counter (pages sent, page failures, ...), flushed immediately."""
    with single_metric(name=name, unit=MetricUnit.Count, value=value, namespace=NAMESPACE):
        pass


def cluster_gauges(cluster: str, gauges: dict[str, int], unit: MetricUnit = MetricUnit.Count) -> None:
    """Medic's own per-cluster gauges from a sweep (e.g. FailedNodes, NodesInRepair): HyperPod publishes no
    node metrics for Slurm clusters, so the failed-node alarm watches these (dimensions Cluster, service)."""
    for name, value in gauges.items():
        # the service dimension explicitly: the alarm names it, whatever POWERTOOLS_SERVICE_NAME says
        with single_metric(name=name, unit=unit, value=value, namespace=CLUSTER_NAMESPACE,
                           default_dimensions={"service": SERVICE}) as metric:
            metric.add_dimension(name="Cluster", value=cluster)
