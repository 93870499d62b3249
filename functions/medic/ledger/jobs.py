"""Training-job memory: which job failures were handled, and each job lineage's restart budget."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from medic.config import DEDUPE_DAYS
from medic.ledger.table import Key, Table, expires, readable

# Longer than a handler's 60 s timeout: an unfinished claim older than this belongs to a dead run.
JOB_CLAIM_STALE = timedelta(seconds=90)


@dataclass(frozen=True)
class LineageRestarts:
    """A job lineage's restart budget spent so far."""

    lineage: str
    restarts: int
    last_restart_at: datetime


class JobStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def failure_key(self, job_name: str) -> Key:
        return self.table.key(f"jobfail#{job_name}", "claim")

    def _restarts_key(self, lineage: str) -> Key:
        return self.table.key(f"lineage#{lineage}", "restarts")

    def claim_job_failure(self, job_name: str, now: datetime) -> bool:
        """True for the first delivery of a job's failure: each failed job is handled once.

        A claim whose run died before finishing (no ``done_at``) goes stale after
        JOB_CLAIM_STALE, so Lambda's retry of that event handles it; the restart's name is
        deterministic, so a clone the dead run already started is found, not doubled.
        """
        return self.table.put_if(
            {**self.failure_key(job_name), "claimed_at": {"S": now.isoformat()},
             "expires_at": expires(now, days=DEDUPE_DAYS)},  # as long as the event can come back (medic.config)
            "attribute_not_exists(pk) OR (attribute_not_exists(done_at) AND claimed_at < :stale)",
            {":stale": {"S": (now - JOB_CLAIM_STALE).isoformat()}},
        )

    def job_failure_claimed(self, job_name: str) -> bool:
        """Whether the job's failure was claimed (being or already handled)."""
        return self.table.exists(self.failure_key(job_name))

    def finish_job_failure(self, job_name: str, now: datetime) -> None:
        self.table.update(self.failure_key(job_name), "SET done_at = :now", {":now": {"S": now.isoformat()}})

    def release_job_failure(self, job_name: str) -> None:
        """The run failed with an error: let the retry of the same event handle it."""
        self.table.delete(self.failure_key(job_name))

    def claim_job_restart(self, lineage: str, max_restarts: int, now: datetime) -> int | None:
        """Count one more restart of a job lineage; None when the budget is spent. Atomic under races."""
        attributes = self.table.update_if(
            self._restarts_key(lineage), "ADD restarts :one SET last_restart_at = :now, expires_at = :exp",
            "attribute_not_exists(restarts) OR restarts < :max",
            {":one": {"N": "1"}, ":max": {"N": str(max_restarts)}, ":now": {"S": now.isoformat()},
             ":exp": expires(now)},
            returns="UPDATED_NEW")
        return None if attributes is None else int(attributes["restarts"]["N"])

    def refund_job_restart(self, lineage: str) -> None:
        """Give back a restart whose command never reached the agent (never below zero)."""
        self.table.update_if(self._restarts_key(lineage), "ADD restarts :minus", "restarts > :zero",
                             {":minus": {"N": "-1"}, ":zero": {"N": "0"}})

    def claim_job_restarts(self, lineages: Sequence[str], max_restarts: int, now: datetime) -> int | None:
        """One restart of a job counted in every budget it belongs to (its id's and its name's): the highest
        count, or None when any budget is spent (the others given back). An AWS error gives back what was
        counted (best effort) and propagates."""
        counted: list[str] = []
        highest = 0
        try:
            for lineage in lineages:
                restarts = self.claim_job_restart(lineage, max_restarts, now)
                if restarts is None:
                    self.refund_job_restarts(counted)
                    return None
                counted.append(lineage)
                highest = max(highest, restarts)
        except Exception:
            self.refund_job_restarts(counted)
            raise
        return highest

    def refund_job_restarts(self, lineages: Sequence[str]) -> None:
        for lineage in lineages:
            self.refund_job_restart(lineage)

    def lineages_among(self, items: Iterable[dict]) -> list[LineageRestarts]:
        """Every job lineage's restarts, among a scan of the whole table (Table.scan); unreadable ones left out."""
        found = []
        for lineage, _, item in self.table.among(items, "lineage#", "restarts"):
            restarts = readable(_lineage_restarts, lineage, item)
            if restarts is not None:
                found.append(restarts)
        return found


def _lineage_restarts(lineage: str, item: dict) -> LineageRestarts:
    return LineageRestarts(lineage, int(item["restarts"]["N"]), datetime.fromisoformat(item["last_restart_at"]["S"]))
