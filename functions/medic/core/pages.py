"""Pages in general: the text a human reads, the console link, and whether a decision pages."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from medic.core.models import Action, Outcome


@dataclass(frozen=True)
class PageText:
    subject: str
    body: str


def console_link(region: str, cluster: str) -> str:
    return (f"https://{region}.console.aws.amazon.com/sagemaker/home?region={region}"
            f"#/cluster-management/{cluster}")


class Page(StrEnum):
    NONE = "none"
    INCIDENT = "incident"  # at most one page per incident
    STORM = "storm"  # one summary page per cluster per guardrail window


def what_medic_did(record: dict) -> str:
    action, outcome = record["action"], record["outcome"]
    if action == Action.NONE.value:
        return "nothing (no automatic action for this fault)"
    if action == Action.RESTART_JOB.value and outcome == Outcome.SUPPRESSED.value:
        return "did not restart the job"
    return {
        Outcome.FAILED.value: f"tried {action}; the call failed",
        Outcome.SUPPRESSED.value: f"did not {action} (held back)",
        Outcome.DEFERRED.value: f"did not {action}",
    }.get(outcome, f"{action}: {outcome}")
