"""Restarts of training jobs waiting out a capacity backoff (issue 32): a job that failed because SageMaker had no
capacity is restarted when its backoff is over, by the reconciler (flows/jobs/backoff.py).

One partition, `jobbackoff#due` / `<failed job name>`: `due_at`, and what the restart's record and incident line need
(`incident`, `failure_reason`, `fault_at`, `detected_at`, `job_started_at`). Written when the failure is handled;
deleted, conditionally (one run restarts), when due. TTL 16 days past the due time.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from medic.config_core import DEDUPE_DAYS
from medic.ledger.table import Table, expires, readable

PARTITION = "jobbackoff#due"


class DueRestart(NamedTuple):
    job: str  # the failed job (restarted as its lineage's next name)
    incident: str
    failure_reason: str
    due_at: datetime
    detected_at: datetime
    fault_at: datetime | None = None
    job_started_at: datetime | None = None


class BackoffStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def wait(self, due: DueRestart) -> None:
        item = {**self.table.key(PARTITION, due.job), "incident": {"S": due.incident},
                "failure_reason": {"S": due.failure_reason[:4000]}, "due_at": {"S": due.due_at.isoformat()},
                "detected_at": {"S": due.detected_at.isoformat()}, "expires_at": expires(due.due_at, DEDUPE_DAYS)}
        for name in ("fault_at", "job_started_at"):
            if (moment := getattr(due, name)) is not None:
                item[name] = {"S": moment.isoformat()}
        self.table.put(item)

    def waiting(self) -> list[DueRestart]:
        found = (readable(_due, item) for item in self.table.partition(PARTITION))
        return [due for due in found if due is not None]

    def take(self, job: str) -> bool:
        """True once: the run that takes the restart makes it."""
        return self.table.delete_if(self.table.key(PARTITION, job))


def _due(item: dict) -> DueRestart:
    def moment(name: str) -> datetime | None:
        return datetime.fromisoformat(item[name]["S"]) if name in item else None

    return DueRestart(job=item["sk"]["S"], incident=item["incident"]["S"], failure_reason=item["failure_reason"]["S"],
                      due_at=datetime.fromisoformat(item["due_at"]["S"]),
                      detected_at=datetime.fromisoformat(item["detected_at"]["S"]), fault_at=moment("fault_at"),
                      job_started_at=moment("job_started_at"))
