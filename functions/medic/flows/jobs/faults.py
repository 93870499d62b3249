"""Classify a training job's FailureReason with the configured rules (first match wins)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from medic.core.models import Fault

if TYPE_CHECKING:  # the rules are the config's, read by the job flows (Deps.jobs_config): no config model built here
    from medic.config_training import FailureRule


class JobFailure(NamedTuple):
    fault: Fault
    label: str  # which rule matched ("internal_error", ...) or "unrecognized"


def classify_failure(reason: str, rules: list[FailureRule]) -> JobFailure:
    for rule in rules:
        if re.search(rule.match, reason, re.IGNORECASE):
            return JobFailure(Fault.JOB_RETRYABLE if rule.retryable else Fault.JOB_NOT_RETRYABLE, rule.label)
    return JobFailure(Fault.JOB_UNKNOWN, "unrecognized")
