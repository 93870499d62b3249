"""The remediation record as a typed value: a decision's shared facts (`About`), the record (`Record`), and the
log line's fields it completes to (the schema: core.models.RemediationRecord, plus `jobs`). Emitting it is the
outbox's (outbox/records.py); flows and ports pass `Record`s, never dicts.

`About.record(...)` makes a `Record`; a `Record` reads like the line it becomes (`record["outcome"]`), so page
texts read it as a Mapping."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, NamedTuple

from medic.core.mode import Mode
from medic.core.models import (
    DEFAULT_WHY,
    NEEDS_HUMAN,
    WHY_OUTCOMES,
    Action,
    Fault,
    JobRef,
    Outcome,
    RemediationRecord,
    Requester,
    Trigger,
    Why,
)

NOT_A_NODE_ACTION = object()  # a record without the `jobs` field (only a Slurm node action's records name jobs)


JobsHit = Sequence[Mapping[str, str]] | None  # the jobs a node action hit ([]: none; None: unknown)


class About(NamedTuple):
    """What every record of one decision shares."""

    incident: str
    trigger: Trigger
    event_id: str
    mode: Mode
    cluster: str | None = None
    instance_group: str | None = None
    node_id: str | None = None
    job: str | None = None
    requester: Requester | None = None

    def but(self, **changes: Any) -> About:
        return self._replace(**changes)

    def record(self, *, fault: Fault | str, action: Action | str, outcome: Outcome | str, reason: str,
               why: Why | None = None, needs_human: bool | None = None, attempt: int = 0, paged: bool = False,
               jobs: JobsHit | object = NOT_A_NODE_ACTION) -> Record:
        """A record of this decision. ``why`` is the outcome's precise sub-reason (None: the outcome's only one;
        `deferred` and `suppressed` always name theirs); ``needs_human`` whether a human must act (None: as the
        sub-reason says, core.models.NEEDS_HUMAN)."""
        typed = Outcome(outcome)
        said = typed_why(typed, why)
        return Record(self, str(fault), Action(action), typed, reason, attempt, paged, jobs, said,
                      said in NEEDS_HUMAN if needs_human is None else needs_human)


def typed_why(outcome: Outcome, why: Why | None) -> Why:
    """The record's sub-reason: ``why`` when it is typed for ``outcome`` (core.models.WHY_OUTCOMES), the outcome's
    own when None and it has one; a ValueError for any other pair (a builder's mistake, caught by the tests)."""
    if why is None:
        if outcome not in DEFAULT_WHY:
            raise ValueError(f"a {outcome.value} record names its why (one of "
                             f"{', '.join(w.value for w, outs in WHY_OUTCOMES.items() if outcome in outs)})")
        return DEFAULT_WHY[outcome]
    if outcome not in WHY_OUTCOMES[why]:
        raise ValueError(f"why {why.value} is not typed for outcome {outcome.value}")
    return why


@dataclass(frozen=True)
class Record(Mapping[str, Any]):
    """One decision, typed; its fields are the remediation log line's (schema: RemediationRecord, `jobs`)."""

    about: About
    fault: str
    action: Action
    outcome: Outcome
    reason: str
    attempt: int = 0
    paged: bool = False
    jobs: JobsHit | object = field(default=NOT_A_NODE_ACTION)
    why: Why | None = None  # set by About.record: the outcome's sub-reason
    needs_human: bool = False

    def but(self, **changes: Any) -> Record:
        return replace(self, **changes)

    def paged_if(self, paged: bool) -> Record:
        """The record once a page went out (or did not): `paged` stays true once any page of it went out."""
        return replace(self, paged=self.paged or paged)

    @cached_property
    def fields(self) -> dict[str, Any]:
        """The log line's fields: every schema field present (null where not applicable), every text encodable."""
        about = self.about
        line = {"incident": about.incident, "trigger": about.trigger, "event_id": about.event_id,
                "cluster": about.cluster, "instance_group": about.instance_group, "node_id": about.node_id,
                "job": about.job, "fault": self.fault, "action": self.action, "outcome": self.outcome,
                "reason": self.reason, "paged": self.paged, "mode": about.mode, "attempt": self.attempt,
                "requester": about.requester, "why": self.why or DEFAULT_WHY.get(self.outcome),
                "needs_human": self.needs_human}
        if self.jobs is not NOT_A_NODE_ACTION:
            line["jobs"] = self.jobs
        return complete(line)

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)


def complete(fields: Mapping[str, Any]) -> dict:
    """The record with every schema field present (null where not applicable), every text encodable:
    a lone surrogate from an event would make the log line unwritable, and the decision unrecorded."""
    record = RemediationRecord.model_validate(dict(fields)).model_dump(mode="json")
    if "jobs" in fields:  # node actions on Slurm only: the jobs on the node ([]: none; None: unknown)
        jobs = fields["jobs"]
        record["jobs"] = None if jobs is None else [JobRef.model_validate(job).model_dump() for job in jobs]
    return {key: _encodable(value) if isinstance(value, str) else value for key, value in record.items()}


def _encodable(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")
