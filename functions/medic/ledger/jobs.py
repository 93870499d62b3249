"""Training-job memory: which job failures were handled, each job lineage's restart budget, and each training job
Medic created (its lineage and attempt: Medic's word, never the job's tags, which its owner controls)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from medic.config_core import DEDUPE_DAYS
from medic.ledger.table import Key, Table, expires, readable

# Longer than a handler's 60 s timeout: an unfinished claim older than this belongs to a dead run.
JOB_CLAIM_STALE = timedelta(seconds=90)
# How long Medic remembers a training job it created: longer than the job can live. SageMaker stops a job after
# MaxRuntimeInSeconds ("The maximum value is 28 days"; "at most 30 days in total", botocore's StoppingCondition)
# and one pending for capacity after MaxPendingTimeInSeconds (at most 2419200 s, 28 days), but a job waiting for
# its training plan's start does not count that wait: kept half a year.
RESTART_DAYS = 180
# SageMaker's clock (a job's CreationTime) against Lambda's (Medic's decision): both AWS's, NTP-synchronized; a
# second of it is the CreationTime's own rounding.
CLOCK_TOLERANCE = timedelta(seconds=60)


CLONE_PARTITION = "jobclone#watch"  # one partition: the restarts whose timeline waits for the clone to train
# a Batch or Bedrock clone seen running before its restart's watch was written (the service's event raced the
# restart's own handling): the watch, once written, is concluded with this time
CLONE_RAN_PARTITION = "jobclone#ran"


class CloneWatch(NamedTuple):
    """A restart whose incident line waits for its clone to train (flows/jobs/timeline): the failure's timeline so
    far, and until when Medic waits."""

    clone: str
    incident: str
    job: str  # the lineage's root
    fault: str
    fault_at: datetime | None
    detected_at: datetime
    acted_at: datetime  # CreateTrainingJob returned: the clone InProgress
    deadline: datetime
    job_started_at: datetime | None = None
    # the incident line's kind: training_job (the recovery check reads the clone), or batch_job / bedrock_job
    # (the clone's own state change event ends the watch: flows/jobs/managed.clone_running)
    kind: str = "training_job"


class LineageRestarts(NamedTuple):
    """A job lineage's restart budget spent so far."""

    lineage: str
    restarts: int
    last_restart_at: datetime


class MedicRestart(NamedTuple):
    """A training job Medic created (or tried to): the restart ``attempt`` of lineage ``root``, started for the
    failure of ``restarted_from`` (the failed job created at ``restarted_from_created``: a name alone may be another
    job's later); ``intended_at``: when Medic decided, before its CreateTrainingJob call."""

    name: str
    root: str
    attempt: int
    restarted_from: str
    intended_at: datetime
    restarted_from_created: datetime | None = None
    # The job id the service gave the restart (AWS Batch: SubmitJob's jobId), once its call returned; None before.
    # Batch takes two jobs of one name, so only this says an earlier run's submission went through.
    submitted_id: str | None = None

    def restarts(self, failed_job: str, failed_created: datetime | None) -> bool:
        """Whether this restart is of the failure of that job (its name and CreationTime)."""
        return (self.restarted_from, _moment(self.restarted_from_created)) == (failed_job, _moment(failed_created))

    def made(self, creation_time: datetime | None) -> bool:
        """Whether the job of this name created at ``creation_time`` (DescribeTrainingJob's CreationTime) is this
        restart: created while a run of Medic's could have been calling CreateTrainingJob for it (from its decision
        until its claim goes stale: every run ends before). A name alone does not say: another principal may have
        created the job first, or after Medic's call failed, and a name is reusable once its job is deleted
        (DeleteTrainingJob: "After deleting the job, you can reuse its name")."""
        if creation_time is None:
            return False
        return (self.intended_at - CLOCK_TOLERANCE <= creation_time
                <= self.intended_at + JOB_CLAIM_STALE + CLOCK_TOLERANCE)


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

    def claim_job_restart(self, lineage: str, max_restarts: int, now: datetime,
                          min_interval: timedelta | None = None) -> int | None:
        """Count one more restart of a job lineage; None when the budget is spent, or (``min_interval``) when the
        lineage's last restart is more recent than that. Atomic under races."""
        condition, values = "attribute_not_exists(restarts) OR restarts < :max", {}
        if min_interval is not None:
            condition = ("attribute_not_exists(restarts) OR (restarts < :max AND (attribute_not_exists(last_restart_at)"
                         " OR last_restart_at <= :cutoff))")
            values = {":cutoff": {"S": (now - min_interval).isoformat()}}
        attributes = self.table.update_if(
            self._restarts_key(lineage), "ADD restarts :one SET last_restart_at = :now, expires_at = :exp", condition,
            {":one": {"N": "1"}, ":max": {"N": str(max_restarts)}, ":now": {"S": now.isoformat()},
             ":exp": expires(now), **values},
            returns="UPDATED_NEW")
        return None if attributes is None else int(attributes["restarts"]["N"])

    def restarts(self, lineage: str) -> LineageRestarts | None:
        """A lineage's restarts so far (None: none counted, or expired)."""
        item = self.table.get(self._restarts_key(lineage))
        return readable(_lineage_restarts, lineage, item) if item else None

    def refund_job_restart(self, lineage: str) -> None:
        """Give back a restart whose command never reached the agent (never below zero)."""
        self.table.update_if(self._restarts_key(lineage), "ADD restarts :minus", "restarts > :zero",
                             {":minus": {"N": "-1"}, ":zero": {"N": "0"}})

    def claim_job_restarts(self, lineages: Sequence[str], max_restarts: int, now: datetime,
                           min_interval: timedelta | None = None) -> int | None:
        """One restart of a job counted in every budget it belongs to (its id's and its name's): the highest
        count, or None when any budget is spent, or restarted within ``min_interval`` (the others given back). An
        AWS error gives back what was counted (best effort) and propagates."""
        counted: list[str] = []
        highest = 0
        try:
            for lineage in lineages:
                restarts = self.claim_job_restart(lineage, max_restarts, now, min_interval)
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

    def running_key(self, cluster: str, name: str) -> Key:
        return self.table.key(f"slurmjob#{cluster}#{name}", "running")

    def saw_running(self, cluster: str, name: str, job_id: str, now: datetime) -> None:
        """Slurm job ``job_id`` ran under the (watched) name ``name`` (the agent found it so when it requeued it): a
        requeue by that name prefers it while it still runs under the name."""
        self.table.put({**self.running_key(cluster, name), "job_id": {"S": job_id}, "seen_at": {"S": now.isoformat()},
                        "expires_at": expires(now)})

    def last_running(self, cluster: str, name: str) -> str | None:
        """The Slurm job Medic last saw running under the name (None: none seen in the last 7 days)."""
        item = self.table.get(self.running_key(cluster, name))
        return item["job_id"]["S"] if item and "job_id" in item else None

    def restart_key(self, job_name: str) -> Key:
        return self.table.key(f"jobrestart#{job_name}", "lineage")

    def intend_restart(self, restart: MedicRestart) -> MedicRestart | None:
        """Note, before calling CreateTrainingJob, that Medic is creating ``restart`` for the failure of
        ``restarted_from``: the stored note (a retry of the same failure keeps the first decision's time), or None
        when Medic noted that name for another failure."""
        attributes = self.table.update_if(
            self.restart_key(restart.name),
            "SET intended_at = if_not_exists(intended_at, :at), lineage_root = :root, attempt = :attempt, "
            "restarted_from = :from, restarted_from_created = :created, expires_at = :exp",
            "attribute_not_exists(pk) OR (restarted_from = :from AND restarted_from_created = :created)",
            {":at": {"S": restart.intended_at.isoformat()}, ":root": {"S": restart.root},
             ":attempt": {"N": str(restart.attempt)}, ":from": {"S": restart.restarted_from},
             ":created": {"S": _moment(restart.restarted_from_created)},
             ":exp": expires(restart.intended_at, RESTART_DAYS)},
            returns="ALL_NEW")
        return None if attributes is None else _medic_restart(restart.name, attributes)

    def note_submitted(self, job_name: str, job_id: str) -> None:
        """The restart noted under ``job_name`` was submitted and is job ``job_id``."""
        self.table.update(self.restart_key(job_name), "SET submitted_id = :id", {":id": {"S": job_id}})

    def restart(self, job_name: str) -> MedicRestart | None:
        """What Medic noted about creating a training job of this name (None: Medic never tried to)."""
        item = self.table.get(self.restart_key(job_name))
        return readable(_medic_restart, job_name, item) if item else None

    def watch_clone(self, watch: CloneWatch) -> None:
        item = {**self.table.key(CLONE_PARTITION, watch.clone), "incident": {"S": watch.incident},
                "job": {"S": watch.job}, "fault": {"S": watch.fault},
                "detected_at": {"S": watch.detected_at.isoformat()}, "acted_at": {"S": watch.acted_at.isoformat()},
                "deadline": {"S": watch.deadline.isoformat()}, "kind": {"S": watch.kind},
                "expires_at": expires(watch.deadline, DEDUPE_DAYS)}
        for name in ("fault_at", "job_started_at"):
            if (moment := getattr(watch, name)) is not None:
                item[name] = {"S": moment.isoformat()}
        self.table.put(item)

    def clone_watches(self) -> list[CloneWatch]:
        """Every restart whose clone has not been seen training yet (unreadable items left out)."""
        watches = (readable(_clone_watch, item) for item in self.table.partition(CLONE_PARTITION))
        return [watch for watch in watches if watch is not None]

    def note_clone_ran(self, clone: str, running_at: datetime) -> None:
        """The clone ran before its watch existed (kept as long as a watch would wait)."""
        self.table.put({**self.table.key(CLONE_RAN_PARTITION, clone), "running_at": {"S": running_at.isoformat()},
                        "expires_at": expires(running_at, DEDUPE_DAYS)})

    def clone_ran(self, clone: str) -> datetime | None:
        item = self.table.get(self.table.key(CLONE_RAN_PARTITION, clone))
        return readable(lambda: datetime.fromisoformat(item["running_at"]["S"])) if item else None

    def clone_watch(self, clone: str) -> CloneWatch | None:
        """The restart whose clone this is, while its line waits (None: not watched, or unreadable)."""
        item = self.table.get(self.table.key(CLONE_PARTITION, clone))
        return readable(_clone_watch, item) if item is not None else None

    def end_clone_watch(self, clone: str) -> bool:
        """True once: the run that ends the watch writes the incident line."""
        return self.table.delete_if(self.table.key(CLONE_PARTITION, clone))

    def lineages_among(self, items: Iterable[dict]) -> list[LineageRestarts]:
        """Every job lineage's restarts, among a scan of the whole table (Table.scan); unreadable ones left out."""
        found = []
        for lineage, _, item in self.table.among(items, "lineage#", "restarts"):
            restarts = readable(_lineage_restarts, lineage, item)
            if restarts is not None:
                found.append(restarts)
        return found


def _moment(moment: datetime | None) -> str:
    """A job's CreationTime as the ledger keeps it (UTC, ISO 8601); "" when not known."""
    return moment.astimezone(UTC).isoformat() if moment else ""


def _medic_restart(name: str, item: dict) -> MedicRestart:
    created = item.get("restarted_from_created", {}).get("S")
    return MedicRestart(name=name, root=item["lineage_root"]["S"], attempt=int(item["attempt"]["N"]),
                        restarted_from=item["restarted_from"]["S"],
                        intended_at=datetime.fromisoformat(item["intended_at"]["S"]),
                        restarted_from_created=datetime.fromisoformat(created) if created else None,
                        submitted_id=item.get("submitted_id", {}).get("S"))


def _lineage_restarts(lineage: str, item: dict) -> LineageRestarts:
    return LineageRestarts(lineage, int(item["restarts"]["N"]), datetime.fromisoformat(item["last_restart_at"]["S"]))


def _clone_watch(item: dict) -> CloneWatch:
    def moment(name: str) -> datetime | None:
        return datetime.fromisoformat(item[name]["S"]) if name in item else None

    return CloneWatch(clone=item["sk"]["S"], incident=item["incident"]["S"], job=item["job"]["S"],
                      fault=item["fault"]["S"], fault_at=moment("fault_at"),
                      detected_at=datetime.fromisoformat(item["detected_at"]["S"]),
                      acted_at=datetime.fromisoformat(item["acted_at"]["S"]),
                      deadline=datetime.fromisoformat(item["deadline"]["S"]), job_started_at=moment("job_started_at"),
                      kind=item.get("kind", {}).get("S", "training_job"))
