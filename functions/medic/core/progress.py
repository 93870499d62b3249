"""Training progress as the probe reports it, and a restart's proof-of-recovery watch: read by the metrics
adapter, kept by the ledger, judged by the stall and recovery flows."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

# How far before a stall window the heartbeat is read back to tell "stopped" from "never started": a day of
# one-minute datapoints (1,440 per metric: one GetMetricData page holds up to 100,800), well inside the 15 days
# CloudWatch keeps one-minute data.
PROBE_HISTORY_HOURS = 24


PROBE_HISTORY = timedelta(hours=PROBE_HISTORY_HOURS)


class RecoveryWatch(NamedTuple):
    incident: str
    job: str
    cluster: str
    restarted_at: datetime  # since when training progress counts as resumed (the window's start)
    deadline: datetime  # no progress by then: no_progress, one page
    attempt: int
    # The stall's timeline so far (None: not known): the last heartbeat before it, and the work since the last
    # checkpoint then, which the restart redoes.
    fault_at: datetime | None = None
    last_step: float | None = None
    checkpoint_step: float | None = None
    steps_per_minute: float | None = None
    # A job hit by a node repair (issue 27): the node incident whose repair owns the job until the node is back (or
    # Slurm starts the job again); meanwhile no stall restart, and the window has not started (`deadline` is only a
    # backstop: the repair's window plus the job's). None: the window runs.
    held_by: str | None = None
    acted_at: datetime | None = None  # Medic's restart (its timeline), when it is not the window's start
    # The node repair that hit the job (issue 29): its incident, kept after the hold ends, makes the job's incident
    # line a `node_repair` one, with the node's fault and its moments (fault_at above: the node's fault time unless
    # the job's own last heartbeat came first); None: a stall of the job's own.
    repair: str | None = None
    repair_fault: str | None = None
    detected_at: datetime | None = None  # when Medic received the node's fault

    @property
    def held(self) -> bool:
        return self.held_by is not None


class Progress(NamedTuple):
    steps: float  # Heartbeat Sum in the window read (since the restart, or the stall window)
    last_step: float | None  # Step Maximum in the window read
    # Heartbeat Sum in the lookback before the window (None: not read). Zero with no steps in the window: the
    # probe has never reported for the job in that time, so there is nothing running to requeue.
    steps_before: float | None = None
    # Read with the history too (None: not read, or nothing reported): the step training resumed from in the
    # window (the step before the probe's `FirstStep`, the first step its process reported; from a probe without it,
    # the first step reported less the steps counted with it), and the highest checkpoint step the probe reported
    # before the window (the last checkpoint before the fault).
    first_step: float | None = None
    checkpoint_before: float | None = None
    # The incident's timeline, read with the history too: the minute of the first step in the window (training
    # resumed), the minute of the last heartbeat before it (the fault), the last step before it, and the job's
    # step rate over its last active minutes before it.
    first_step_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    last_step_before: float | None = None
    steps_per_minute_before: float | None = None
    # Read with the history: steps no probe session vouches for (none counted above): reported in minutes without
    # exactly one probe session (written by something other than one probe: forged, back-dated, two processes, a
    # probe too old to send sessions), and, for a proof of recovery, since the restart from a session seen before it
    # (the stalled process's own).
    unsessioned_steps: float = 0.0
    stale_session_steps: float = 0.0
    # The probe's completion marker, read with the history too: the minute of its latest `Completed` (a clean
    # close()), and the minute of its latest Heartbeat datapoint of any value (a process reporting, stepping or not).
    completed_at: datetime | None = None
    last_report_at: datetime | None = None
    # The minute of the probe's latest `Paused` (a flush during a marked pause), read with the history too.
    paused_at: datetime | None = None

    @property
    def in_pause(self) -> datetime | None:
        """The minute of the probe's latest report when that report says a marked pause was on (None otherwise)."""
        if self.paused_at is None or (self.last_report_at is not None and self.last_report_at > self.paused_at):
            return None
        return self.paused_at

    @property
    def finished_at(self) -> datetime | None:
        """When the job finished, if its latest run did: the minute of the probe's completion marker, with no report
        after it. A later run under the same Job name reports after it (its first flush), and its stalls are its own:
        an old marker never hides them. A new run in the very minute the last one finished reads as finished until its
        next report, a minute later."""
        if self.completed_at is None or (self.last_report_at is not None and self.last_report_at > self.completed_at):
            return None
        return self.completed_at

    @property
    def latest_step(self) -> float | None:
        """The highest step the probe reported in all that was read (the window, else the history before it)."""
        return self.last_step if self.last_step is not None else self.last_step_before

    @property
    def resumed_behind(self) -> bool:
        """Training resumed below the last checkpoint before the fault: it started over, or from an older one."""
        return (self.first_step is not None and self.checkpoint_before is not None
                and self.first_step < self.checkpoint_before)


class RunReport(NamedTuple):
    """One run a cluster's probe reported (its `Run` metric, issue 33): who it is and when it last stepped, as one
    GetMetricData over the cluster's runs reads it (adapters.metrics.TrainingMetrics.runs)."""

    job: str  # the probe's Job dimension
    cluster: str
    slurm_job_id: str | None = None  # Slurm: the job the probe runs in (digits, as the probe checked)
    pod: str | None = None  # EKS: the pod's namespace/name
    owner: str | None = None  # EKS: its owning training job, Kind/name ("unknown" when the probe could not tell)
    first_report_at: datetime | None = None  # the first and last minutes with a `Run` report (one-minute buckets)
    last_report_at: datetime | None = None
    # the last minute with steps (Heartbeat Sum > 0 under Job, Cluster) since this run's first report; None: none yet
    last_step_at: datetime | None = None
    last_step: float | None = None  # the probe's latest Step (under Job, Cluster) since its first report
    # the probe's own hang verdict (`Stalled`, issue 31) in its latest minute with one, after the run's last step:
    # a live process whose steps stopped for longer than its step intervals explain
    hung: bool = False

    @property
    def key(self) -> str:
        """The run's identity on its cluster: its Slurm job id, or its pod."""
        return self.slurm_job_id or self.pod or self.job
