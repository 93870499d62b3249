"""Pages in general: the text a human reads, the console link, and whether a decision pages."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from medic.core.models import Action, Outcome
from medic.core.text import single_line


@dataclass(frozen=True)
class PageText:
    """A page: its subject and its lines. Each line is kept to one line (`single_line`): a value a builder puts
    into a line (a reason, a name, someone else's words) can never add a line of its own, such as a fake
    "What to do:" above Medic's. Untrusted words inside a line are shown `quoted` by the builder."""

    subject: str
    lines: tuple[str, ...]

    def __post_init__(self) -> None:
        if isinstance(self.lines, str):
            raise TypeError("PageText takes the page's lines, not a body: a line break inside a value must not "
                            "start a new line")
        object.__setattr__(self, "subject", single_line(self.subject))
        object.__setattr__(self, "lines", tuple(single_line(line) for line in self.lines))

    @property
    def body(self) -> str:
        return "\n".join(self.lines)


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
