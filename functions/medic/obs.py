"""Observability in one place: the logger, metrics and tracer every handler uses."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from medic.domain.models import RemediationRecord

SERVICE = "medic"
NAMESPACE = "Medic"
RECORD_FIELDS = frozenset(RemediationRecord.model_fields)


class RecordFormatter(LambdaPowertoolsFormatter):
    """Powertools drops null fields; the remediation record keeps its whole schema (null = not applicable)."""

    @staticmethod
    def _strip_none_records(records: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in records.items() if value is not None or key in RECORD_FIELDS}


logger = Logger(service=SERVICE, logger_formatter=RecordFormatter())
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
tracer = Tracer(service=SERVICE)


def emit_record(record: dict) -> None:
    """One remediation log line and one EMF metric per decision, dimensioned by action and outcome."""
    logger.info("remediation", extra=record)
    with single_metric(name="Remediations", unit=MetricUnit.Count, value=1, namespace=NAMESPACE) as metric:
        metric.add_dimension(name="action", value=str(record["action"]))
        metric.add_dimension(name="outcome", value=str(record["outcome"]))
        metric.add_dimension(name="trigger", value=str(record["trigger"]))


def count(name: str, value: float = 1) -> None:
    """A single operational counter (pages sent, page failures, ...), flushed immediately."""
    with single_metric(name=name, unit=MetricUnit.Count, value=value, namespace=NAMESPACE):
        pass
