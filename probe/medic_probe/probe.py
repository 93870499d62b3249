"""The probe: aggregate in memory on the training thread, publish from a daemon thread once per period.

Hot path (`Probe.step`): a few type checks, one monotonic clock read, one uncontended lock, a handful of float
updates. No formatting, no I/O, nothing that can raise into the training loop, and never a read of a tensor's value
(a loss given as a tensor is held, detached, and read in the background thread: reading it would synchronize the GPU).

Background thread: resolves credentials lazily (a probe without credentials turns itself off), then
once per period swaps the period's aggregates out under the lock and publishes them with one
PutMetricData call (or one EMF JSON line on stdout). Between flushes it checks every `HANG_CHECK_SECONDS` whether
steps have stopped for longer than this job's own step intervals explain (`Stalled`), and says so at once.
Failures are counted and logged, never raised.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import operator
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

log = logging.getLogger("medic_probe")

DEFAULT_NAMESPACE = "Medic/Training"

# CloudWatch rejects NaN and +-Infinity, and any value outside +-2^360; magnitudes under 2^-360 are
# rejected too (we publish those as 0). A loss outside that range counts as non-finite.
CW_LIMIT = 2.0**360
CW_TINY = 2.0**-360
_LIMIT = CW_LIMIT  # module global read by step(): one dict lookup
_MAX_DIMENSION_VALUE = 1024

# Metric names (the contract with Medic's alarms).
HEARTBEAT = "Heartbeat"
STEP = "Step"
LOSS = "Loss"
TOKENS_PER_SECOND = "TokensPerSecond"
LAST_CHECKPOINT_STEP = "LastCheckpointStep"
NON_FINITE_LOSS = "NonFiniteLoss"
# The job's recent throughput level: an exponential moving average of the per-period means over
# about BASELINE_MINUTES. Medic's slowdown alarm compares TokensPerSecond against it.
TOKENS_PER_SECOND_BASELINE = "TokensPerSecondBaseline"
BASELINE_MINUTES = 30
# This process's probe session: a random number drawn when the probe starts, published with every flush of the
# job's metrics. Medic counts a minute's heartbeat only when exactly one session published in it, and proves a
# recovery only with steps from a session that started after its restart: a heartbeat without it (written by anyone
# allowed PutMetricData), or the stalled process's old one, never counts.
SESSION = "Session"
_SESSION_BITS = 31  # 1 .. 2**31: exact in a double, far below CloudWatch's 2**360
# The completion marker: 1, published once by rank 0 when the probe is closed cleanly (close() with no exception in
# flight, or a `with` block left without one). A finished job stops publishing Heartbeat, so its stall alarm (missing
# data = breaching) fires; Medic reads this marker back and stands down instead of restarting a finished job.
COMPLETED = "Completed"
# The first step this process reported (its session's first): Medic's proof of recovery reads where a restarted job
# resumed from it (the step before it), exact at any publish period.
FIRST_STEP = "FirstStep"
# The probe's own verdict, at high resolution (StorageResolution 1): 1 while no step has come for longer than
# max(hang_floor_seconds, hang_factor x the recent p99 step interval), 0 otherwise. Published at every check while
# stalled, and with every flush (0 or 1): Medic's hang alarm (period 10 s, missing data keeps its state) fires within
# seconds of the verdict, and goes OK when a process steps again.
STALLED = "Stalled"
# 1 in a flush whose period overlapped a marked pause (`with probe.pause("checkpoint"):`): Medic's stall alarm
# (no Heartbeat for stall_minutes) fires on a long pause too, and this tells it the job said it would be busy.
PAUSED = "Paused"
# The run's identity (issue 33): 1 with every flush of rank 0, under [Job, Cluster, SlurmJobId] when the process runs
# in a Slurm job (SLURM_JOB_ID: Slurm's own environment, digits), and under [Job, Cluster, Pod, Owner] on Kubernetes
# (the pod's namespace/name from the downward API, its owning training job). A cluster's watch rules find the runs to
# watch with it (ListMetrics on Run), and Medic requeues exactly that Slurm job, or restarts that owner. One metric per
# run (a requeued Slurm job keeps its id): the dimensions are the run's, never a step's or a time's.
RUN = "Run"
# A run's identity, from the environment: Slurm sets SLURM_JOB_ID in every job step's environment (sbatch(1),
# "OUTPUT ENVIRONMENT VARIABLES"). Kubernetes exposes a pod's own namespace and name only through the downward API
# (the pod spec maps metadata.namespace / metadata.name to env vars; docs/training.md shows the lines): POD_NAMESPACE,
# POD_NAME. The owner: MEDIC_OWNER (`Kind/name`, e.g. from the downward API's
# metadata.labels['training.kubeflow.org/job-name']), else a PyTorchJob's name from MASTER_ADDR: the Kubeflow
# training-operator (v1.9, pkg/controller.v1/pytorch/master.go and envvar.go replicaName) sets MASTER_ADDR to
# `<job>-master-0` in every replica of a PyTorchJob with a Master; it sets no variable naming the job itself.
SLURM_JOB_ID_ENV = "SLURM_JOB_ID"
POD_ENV = ("POD_NAMESPACE", "POD_NAME")
OWNER_ENV = "MEDIC_OWNER"
_MASTER_SUFFIX = "-master-0"

# Hang detection defaults (documented in probe/README.md): a job is stalled once no step came for
# max(floor, factor x the p99 of its last INTERVALS step intervals), judged only after WARMUP_STEPS intervals of the
# process (the first steps, model compilation and the data loader's start, are slow and irregular).
DEFAULT_HANG_FLOOR_SECONDS = 60.0
DEFAULT_HANG_FACTOR = 3.0
DEFAULT_HANG_WARMUP_STEPS = 20
DEFAULT_PAUSE_LIMIT_SECONDS = 3600.0  # a marked pause longer than this is judged as a stall (a hung save)
HANG_CHECK_SECONDS = 10.0  # how often the background thread checks: the hang alarm's period (CloudWatch: 10 or 30)
_INTERVALS = 1024  # step intervals kept (a ring): the recent distribution
_RING_MASK = _INTERVALS - 1
_MAX_HELD = 4096  # tensor values held per period and argument (read at the flush); more are counted, not read
# PutMetricData StorageResolution 1: one-second resolution (CloudWatch User Guide, "High-resolution metrics")
_HIGH_RESOLUTION = 1

_UNITS = {
    HEARTBEAT: "Count",
    STEP: "None",
    LOSS: "None",
    TOKENS_PER_SECOND: "Count/Second",
    LAST_CHECKPOINT_STEP: "None",
    NON_FINITE_LOSS: "Count",
    TOKENS_PER_SECOND_BASELINE: "Count/Second",
    SESSION: "None",
    COMPLETED: "Count",
    FIRST_STEP: "None",
    STALLED: "None",
    PAUSED: "None",
    RUN: "Count",
}

_NOT_NUMBERS = (str, bytes, bytearray, bool)


def _to_float(value: Any) -> float | None:
    """The slow path for a loss or a throughput that is not a plain float: numpy scalars, ints, 0-d tensors.

    Strings are refused even when they parse, and so are bools: a caller passing them has a bug.
    """
    if isinstance(value, _NOT_NUMBERS):
        return None
    try:
        return float(value)
    except Exception:
        return None


def _is_tensor(value: Any) -> bool:
    """A tensor-like value (torch, or anything with ``detach``): held as it is, never read on the training thread.
    Duck typing: the probe never imports torch."""
    return hasattr(value, "detach") and not isinstance(value, _NOT_NUMBERS)


def _read(value: Any) -> float | None:
    """A held value's float, in the background thread (a tensor's read synchronizes its device here, not in step())."""
    try:
        return float(value)
    except Exception:
        return None


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def _period_for_minutes(period: float) -> float | None:
    """The period if every one-minute bucket (what Medic's alarms and reads use) gets the same number of flushes: a
    whole number of flushes per minute, or a whole number of minutes per flush (then the minutes between flushes have
    no datapoint, and the stall alarm counts them as breaching: keep stall_minutes above it). Else None: 45 s or 90 s
    would leave the minutes uneven (some with two flushes, or none, in an irregular pattern)."""
    if not 0 < period < math.inf:
        return None
    ratio = 60 / period if period <= 60 else period / 60
    return period if abs(ratio - round(ratio)) < 1e-9 else None


def _to_step(value: Any) -> int | None:
    """A step number from an int-like (numpy ints, integral floats); None if it is not one."""
    if isinstance(value, _NOT_NUMBERS) or value is None:
        return None
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    try:
        return operator.index(value)
    except Exception:
        return None


def _clean_exit(error: BaseException | None) -> bool:
    """No exception in flight, or ``sys.exit()`` with status 0: the training script ended as it meant to."""
    return error is None or (isinstance(error, SystemExit) and error.code in (None, 0))


def _env_rank() -> int:
    for name in ("RANK", "SLURM_PROCID"):
        raw = os.environ.get(name, "").strip()
        if raw.isdigit():
            return int(raw)
    return 0


def _env_node() -> str:
    for name in ("SLURMD_NODENAME", "SM_CURRENT_HOST"):
        raw = os.environ.get(name, "").strip()
        if raw:
            return raw
    try:
        return socket.gethostname().split(".")[0] or "unknown"
    except Exception:
        return "unknown"


def _env_slurm_job_id() -> str | None:
    raw = os.environ.get(SLURM_JOB_ID_ENV, "").strip()
    return raw if raw.isdigit() else None


def _env_pod() -> str | None:
    namespace, name = (os.environ.get(key, "").strip() for key in POD_ENV)
    return f"{namespace}/{name}" if namespace and name else None


def _env_owner() -> str | None:
    owner = os.environ.get(OWNER_ENV, "").strip()
    if owner:
        return owner
    return owner_from_master_addr(os.environ.get("MASTER_ADDR", "").strip())


def owner_from_master_addr(master: str) -> str | None:
    """A PyTorchJob's `Kind/name` from the MASTER_ADDR its training-operator sets (`<job>-master-0`); else None."""
    if master.endswith(_MASTER_SUFFIX) and len(master) > len(_MASTER_SUFFIX):
        return f"PyTorchJob/{master[:-len(_MASTER_SUFFIX)]}"
    return None


def _dimension_value(value: Any, what: str) -> str:
    """CloudWatch dimension values: 1 to 1024 ASCII characters, not all whitespace."""
    text = str(value).encode("ascii", "replace").decode("ascii").strip()[:_MAX_DIMENSION_VALUE]
    if not text:
        raise ValueError(f"medic_probe: {what} must be a non-empty string, got {value!r}")
    return text


def _cw_value(value: float) -> float | None:
    """A value CloudWatch accepts, or None when there is none (non-finite, or beyond +-2^360)."""
    if not -CW_LIMIT < value < CW_LIMIT:
        return None
    if -CW_TINY < value < CW_TINY:
        return 0.0
    return value


class _Period:
    """What one period aggregated. Plain attributes; step() writes them under the probe's lock."""

    __slots__ = ("steps", "loss_n", "loss_sum", "loss_min", "loss_max", "non_finite",
                 "tps_n", "tps_sum", "tps_min", "tps_max", "checkpointed", "losses", "throughputs", "paused")

    def __init__(self) -> None:
        self.steps = 0
        self.loss_n = 0
        self.loss_sum = 0.0
        self.loss_min = math.inf
        self.loss_max = -math.inf
        self.non_finite = 0
        self.tps_n = 0
        self.tps_sum = 0.0
        self.tps_min = math.inf
        self.tps_max = -math.inf
        self.checkpointed = False
        self.losses: list = []  # tensors (detached), read at the flush
        self.throughputs: list = []
        self.paused = False  # a marked pause overlapped the period

    def add_loss(self, loss: float) -> None:
        # One chained comparison: False for NaN, +-inf and anything CloudWatch would refuse.
        if -_LIMIT < loss < _LIMIT:
            self.loss_n += 1
            self.loss_sum += loss
            if loss < self.loss_min:
                self.loss_min = loss
            if loss > self.loss_max:
                self.loss_max = loss
        else:
            self.non_finite += 1

    def add_throughput(self, tps: float) -> bool:
        if not 0.0 <= tps < _LIMIT:
            return False
        self.tps_n += 1
        self.tps_sum += tps
        if tps < self.tps_min:
            self.tps_min = tps
        if tps > self.tps_max:
            self.tps_max = tps
        return True

    def read_held(self) -> int:
        """The held tensors' values into the aggregates (the background thread, at the flush); the bad ones."""
        bad = 0
        for held in self.losses:
            value = _read(held)
            if value is None:
                bad += 1
            else:
                self.add_loss(value)
        for held in self.throughputs:
            value = _read(held)
            if value is None or not self.add_throughput(value):
                bad += 1
        self.losses, self.throughputs = [], []
        return bad


class Probe:
    """Publishes a training job's progress to CloudWatch (namespace `Medic/Training` by default).

    >>> probe = Probe(job="llama3-70b")                      # doctest: +SKIP
    >>> probe.step(step, loss=loss, tokens_per_sec=tps)      # every step: cheap, never raises, never syncs a GPU
    >>> with probe.pause("checkpoint"):                      # a known pause is not a hang
    ...     save_checkpoint(step)
    >>> probe.checkpoint(step)                               # after a checkpoint is saved

    Only rank 0 publishes unless `all_ranks=True` (then the other ranks publish only their node's
    throughput). Without credentials, or without boto3 (unless `emf=True`), the probe does nothing.
    """

    def __init__(self, job: str, *, cluster: str | None = None, node: str | None = None,
                 namespace: str = DEFAULT_NAMESPACE, period_seconds: float = 60.0, rank: int | None = None,
                 all_ranks: bool = False, client: Any = None, emf: bool = False, region: str | None = None,
                 start: bool = True, hang_detection: bool = True,
                 hang_floor_seconds: float = DEFAULT_HANG_FLOOR_SECONDS, hang_factor: float = DEFAULT_HANG_FACTOR,
                 hang_warmup_steps: int = DEFAULT_HANG_WARMUP_STEPS,
                 clock: Callable[[], float] | None = None, slurm_job_id: str | int | None = None,
                 pod: str | None = None, owner: str | None = None) -> None:
        """`start=False` keeps the background thread from starting: the caller calls `flush()` (and `watch()`)
        itself (tests, the emulator). `clock`: the seconds clock step times are taken from (default
        ``time.monotonic``; the emulator passes its own)."""
        self.job = _dimension_value(job, "job")
        self.cluster = None if cluster is None else _dimension_value(cluster, "cluster")
        self.node = _dimension_value(node if node is not None else _env_node(), "node")
        self.namespace = _dimension_value(namespace, "namespace")
        # The run's identity (RUN): given, else from the environment; a Slurm job id is digits or nothing
        job_id = _env_slurm_job_id() if slurm_job_id is None else str(slurm_job_id).strip()
        if job_id is not None and not job_id.isdigit():
            raise ValueError(f"medic_probe: slurm_job_id must be Slurm's job id (digits), got {slurm_job_id!r}")
        self.slurm_job_id = job_id
        pod = _env_pod() if pod is None else pod
        self.pod = None if pod is None else _dimension_value(pod, "pod")
        owner = _env_owner() if owner is None else owner
        self.owner = None if owner is None or self.pod is None else _dimension_value(owner, "owner")
        try:
            period = float(period_seconds)
        except (TypeError, ValueError):
            period = math.nan
        if not 0 < period < math.inf:
            raise ValueError(f"medic_probe: period_seconds must be a positive number, got {period_seconds!r}")
        if _period_for_minutes(period) is None:
            raise ValueError(f"medic_probe: period_seconds {period_seconds!r} does not fit CloudWatch's one-minute "
                             "buckets: give a period that divides 60 (60, 30, 20, 15, 12, 10, 6, 5, ...) or a whole "
                             "number of minutes, so that every minute gets the same number of flushes")
        self.period_seconds = period
        floor, factor = float(hang_floor_seconds), float(hang_factor)
        if not (0 < floor < math.inf):
            raise ValueError(f"medic_probe: hang_floor_seconds must be a positive number, got {hang_floor_seconds!r}")
        if not (1 <= factor < math.inf):
            raise ValueError(f"medic_probe: hang_factor must be a number of at least 1, got {hang_factor!r}")
        if isinstance(hang_warmup_steps, bool) or not isinstance(hang_warmup_steps, int) or not \
                1 <= hang_warmup_steps <= _INTERVALS:
            raise ValueError(f"medic_probe: hang_warmup_steps must be a whole number from 1 to {_INTERVALS}, got "
                             f"{hang_warmup_steps!r}")
        self.hang_detection = bool(hang_detection)
        self.hang_floor_seconds = floor
        self.hang_factor = factor
        self.hang_warmup_steps = hang_warmup_steps
        self.rank = _env_rank() if rank is None else int(rank)
        self.all_ranks = bool(all_ranks)
        self.emf = bool(emf)
        self.region = region
        # Rank 0 publishes the job's metrics; other ranks (with all_ranks) only their node's throughput.
        self.publishes_job_metrics = self.rank == 0

        self.publish_failures = 0
        """PutMetricData calls (or EMF writes) that failed; the period's data is dropped, not retried."""
        self.published = 0
        """Successful publishes."""
        self.bad_inputs = 0
        """Arguments step()/checkpoint() ignored: None as a step, strings, bools, objects that are not numbers."""
        self.session = secrets.randbits(_SESSION_BITS) + 1
        """This process's probe session (published as `Session`): new for every process, so for every restart."""
        self.completed = False
        """True once a clean close() published the completion marker (`Completed`)."""
        self.stalled = False
        """The probe's last verdict (published as `Stalled`): no step for longer than its step intervals explain."""

        self._client = client
        self._disabled_reason: str | None = None
        self._lock = threading.Lock()          # guards the aggregates; held for a few float updates
        self._flush_lock = threading.Lock()    # one flush at a time (thread, flush(), close())
        self._period = _Period()
        self._last_step: int | None = None
        self._last_checkpoint: int | None = None
        self._first_step: int | None = None    # the first step this process reported (FirstStep)
        self._started = False                  # anything recorded yet: before that nothing is published
        self._clock = clock or time.monotonic
        self._last_step_at: float | None = None  # clock of the latest step (or of the latest pause's end)
        self._intervals = [0.0] * _INTERVALS     # a ring of the latest step intervals
        self._interval_count = 0               # intervals recorded by this process (the ring holds the latest)
        self._skip_interval = False            # the next interval spans a pause: not a step interval
        self._pauses = 0                       # marked pauses open (nested)
        self._paused_at: float | None = None   # clock when the outermost open pause began
        self._pause_limit = DEFAULT_PAUSE_LIMIT_SECONDS
        self._pause_reason = ""
        self._tps_baseline: float | None = None  # updated by flushes only (step() never touches it)
        self._stop = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        # The hot-path switch: False on ranks that do not publish, after close(), and once disabled.
        self._active = self.all_ranks or self.rank == 0
        if self._active:
            atexit.register(self._close_at_exit)
            if start:
                self._thread = threading.Thread(target=self._run, name="medic-probe", daemon=True)
                self._thread.start()

    # -- hot path -------------------------------------------------------------------------------------

    def step(self, step: Any, loss: Any = None, tokens_per_sec: Any = None) -> None:
        """Record one training step. Cheap (well under 10 us), never raises, never blocks on I/O."""
        if not self._active:
            return
        try:
            bad = 0
            if type(step) is not int:
                step = _to_step(step)
                if step is None:
                    bad += 1
            held_loss = held_tps = None
            if loss is not None and type(loss) is not float:
                if _is_tensor(loss):  # held (detached: no graph kept alive), read at the flush
                    held_loss, loss = loss.detach(), None
                else:
                    loss = _to_float(loss)
                    if loss is None:
                        bad += 1
            if tokens_per_sec is not None and type(tokens_per_sec) is not float:
                if _is_tensor(tokens_per_sec):
                    held_tps, tokens_per_sec = tokens_per_sec.detach(), None
                else:
                    tokens_per_sec = _to_float(tokens_per_sec)
                    if tokens_per_sec is None:
                        bad += 1
            now = self._clock()
            with self._lock:
                p = self._period
                p.steps += 1
                if step is not None:
                    self._last_step = step
                    if self._first_step is None:
                        self._first_step = step
                last = self._last_step_at
                if last is not None and not self._skip_interval:
                    count = self._interval_count
                    self._intervals[count & _RING_MASK] = now - last
                    self._interval_count = count + 1
                else:
                    self._skip_interval = False
                self._last_step_at = now
                # (inlined _Period.add_loss / add_throughput: a method call costs as much as the rest)
                if loss is not None:
                    # One chained comparison: False for NaN, +-inf and anything CloudWatch would refuse.
                    if -_LIMIT < loss < _LIMIT:
                        p.loss_n += 1
                        p.loss_sum += loss
                        if loss < p.loss_min:
                            p.loss_min = loss
                        if loss > p.loss_max:
                            p.loss_max = loss
                    else:
                        p.non_finite += 1
                elif held_loss is not None and len(p.losses) < _MAX_HELD:
                    p.losses.append(held_loss)
                if tokens_per_sec is not None:
                    if 0.0 <= tokens_per_sec < _LIMIT:
                        p.tps_n += 1
                        p.tps_sum += tokens_per_sec
                        if tokens_per_sec < p.tps_min:
                            p.tps_min = tokens_per_sec
                        if tokens_per_sec > p.tps_max:
                            p.tps_max = tokens_per_sec
                    else:
                        bad += 1
                elif held_tps is not None and len(p.throughputs) < _MAX_HELD:
                    p.throughputs.append(held_tps)
                if bad:
                    self.bad_inputs += bad
                self._started = True
        except Exception:  # the training loop comes first
            self.bad_inputs += 1

    def checkpoint(self, step: Any) -> None:
        """Record that a checkpoint of `step` was saved (published as LastCheckpointStep). Never raises."""
        if not self._active:
            return
        try:
            value = step if type(step) is int else _to_step(step)
            with self._lock:
                if value is None:
                    self.bad_inputs += 1
                    return
                self._last_checkpoint = value
                self._period.checkpointed = True
                self._started = True
        except Exception:
            self.bad_inputs += 1

    @contextmanager
    def pause(self, reason: str = "pause", limit_seconds: float = DEFAULT_PAUSE_LIMIT_SECONDS) -> Iterator[None]:
        """A known pause without steps (a checkpoint save, an evaluation): not judged as a hang while it lasts, up to
        ``limit_seconds`` (then it is: a save that hangs is a hang), and flushes during it say `Paused` so that Medic's
        stall alarm stands down too. The interval across the pause is not a step interval. Never raises."""
        entered = self._pause_enter(reason, limit_seconds)
        try:
            yield
        finally:
            if entered:
                self._pause_exit()

    def _pause_enter(self, reason: str, limit_seconds: float) -> bool:
        if not self._active:
            return False
        try:
            limit = float(limit_seconds)
            now = self._clock()
            with self._lock:
                if self._pauses == 0:
                    self._paused_at = now
                    self._pause_limit = limit if limit > 0 else 0.0
                    self._pause_reason = str(reason)[:64]
                self._pauses += 1
                self._period.paused = True
            return True
        except Exception:
            self.bad_inputs += 1
            return False

    def _pause_exit(self) -> None:
        try:
            now = self._clock()
            with self._lock:
                self._pauses = max(0, self._pauses - 1)
                self._period.paused = True
                if self._pauses == 0:
                    self._paused_at = None
                    if self._last_step_at is not None:  # silence is counted from the pause's end
                        self._last_step_at = now
                    self._skip_interval = True
        except Exception:
            self.bad_inputs += 1

    # -- state ----------------------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """False on ranks that do not publish, once closed, and once the probe found it cannot publish."""
        return self._active

    @property
    def disabled_reason(self) -> str | None:
        return self._disabled_reason

    # -- hang detection -------------------------------------------------------------------------------

    def _verdict(self, now: float) -> bool:
        """Stalled: no step for longer than max(floor, factor x p99 of the recent step intervals), after the warm-up;
        a marked pause only once it outlasts its limit. In the background thread (step() only records the times)."""
        if not self.hang_detection or not self.publishes_job_metrics:
            return False
        with self._lock:
            last, count, paused_at = self._last_step_at, self._interval_count, self._paused_at
            if paused_at is not None:
                return now - paused_at > self._pause_limit
            if last is None or count < self.hang_warmup_steps or now - last <= self.hang_floor_seconds:
                return False
            intervals = self._intervals[:min(count, _INTERVALS)]
        return now - last > max(self.hang_floor_seconds, self.hang_factor * _p99(intervals))

    def watch(self) -> bool:
        """Check now whether steps have stopped, and say so at once: `Stalled` 1 at every check while stalled, and 0
        at the first check after steps came again. The background thread calls it every `HANG_CHECK_SECONDS`;
        returns the verdict. Never raises."""
        if not self._active or not self._started:
            return False
        try:
            stalled = self._verdict(self._clock())
            was, self.stalled = self.stalled, stalled
            if not (stalled or was):
                return False
            if not self._flush_lock.acquire(timeout=HANG_CHECK_SECONDS):
                return stalled
            try:
                if self._ensure_sink():
                    now = time.time()
                    if self.emf:
                        self._write_emf(None, None, None, now, stalled=stalled)
                    else:
                        self._put(self._metric_data(None, None, None, now, stalled=stalled))
            finally:
                self._flush_lock.release()
            return stalled
        except Exception:
            self.publish_failures += 1
            log.exception("medic_probe: the stall check failed")
            return False

    # -- publishing -----------------------------------------------------------------------------------

    def flush(self) -> bool:
        """Publish what was aggregated since the last flush, now, in the calling thread.

        The background thread calls this once per period; tests and close() call it directly.
        Returns True if something was published. Never raises.
        """
        return self._flush(final=False)

    def _flush(self, final: bool, timeout: float = -1, completed: bool = False) -> bool:
        if not self._active:
            return False
        if not self._flush_lock.acquire(timeout=timeout):
            log.warning("medic_probe: a publish is still running; skipping the final flush")
            return False
        try:
            return self._flush_locked(final, completed)
        except Exception:  # a bug here must not kill the thread or the caller
            self.publish_failures += 1
            log.exception("medic_probe: flush failed")
            return False
        finally:
            self._flush_lock.release()

    def _flush_locked(self, final: bool, completed: bool) -> bool:
        if not self._ensure_sink():
            return False
        with self._lock:
            period, self._period = self._period, _Period()
            last_step, last_checkpoint, started = self._last_step, self._last_checkpoint, self._started
            first_step, paused = self._first_step, period.paused or self._paused_at is not None
            if self._paused_at is not None:
                self._period.paused = True  # the pause goes on into the next period
        bad = period.read_held()  # the held tensors' values: here, in the background thread, never in step()
        if bad:
            self.bad_inputs += bad
        completing = completed and self.publishes_job_metrics  # the marker is a job metric: rank 0's
        # The verdict goes with every flush (the hang alarm keeps its state on missing data: a new process's first
        # flush turns it OK); a clean close is no stall.
        self.stalled = stalled = False if completing else self._verdict(self._clock())
        # Nothing recorded yet (model still loading): publish nothing, not zeros. close() right after a flush: nothing
        # new to say. A clean close still says it finished (even before any step: a restart with nothing left to do).
        progress: _Period | None = period
        if not started or (final and period.steps == 0 and not period.checkpointed):
            progress = None
        if progress is None and not completing:
            return False
        if progress is not None:
            self._update_baseline(progress)
        now = time.time()
        state = {"first_step": first_step, "stalled": stalled if started else None, "paused": paused}
        if self.emf:
            published = self._write_emf(progress, last_step, last_checkpoint, now, completing, **state)
        else:
            published = self._put(self._metric_data(progress, last_step, last_checkpoint, now, completing, **state))
        if published and completing:
            self.completed = True
        return published

    def _put(self, data: list) -> bool:
        if not data:
            return False
        try:
            self._client.put_metric_data(Namespace=self.namespace, MetricData=data)
        except Exception as exc:
            self.publish_failures += 1
            log.warning("medic_probe: PutMetricData failed (%d so far), dropped %d metrics: %s",
                        self.publish_failures, len(data), exc)
            return False
        self.published += 1
        return True

    def _update_baseline(self, period: _Period) -> None:
        """Move the throughput baseline toward this period's mean (a new process starts at its first value)."""
        if not period.tps_n:
            return
        mean = period.tps_sum / period.tps_n
        if not math.isfinite(mean):
            return
        if self._tps_baseline is None:
            self._tps_baseline = mean
        else:
            weight = min(1.0, self.period_seconds / (BASELINE_MINUTES * 60))
            self._tps_baseline += weight * (mean - self._tps_baseline)

    def _ensure_sink(self) -> bool:
        """Somewhere to publish: stdout (EMF), the injected client, or a client made from the environment.

        Resolving credentials can take seconds (instance metadata), so it happens here, in the
        background thread's first flush, never in step(). No credentials, no region or no boto3:
        the probe turns itself off for good.
        """
        if self.emf or self._client is not None:
            return True
        try:
            import boto3
            from botocore.config import Config
            from botocore.exceptions import NoRegionError
        except ImportError:
            self._disable("boto3 is not installed (pip install 'medic-probe[aws]', or use emf=True)")
            return False
        session = boto3.session.Session(region_name=self.region)
        try:
            credentials = session.get_credentials()
        except Exception as exc:
            credentials = None
            log.debug("medic_probe: credential resolution failed: %s", exc)
        if credentials is None:
            self._disable("no AWS credentials found")
            return False
        config = Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 3, "mode": "standard"})
        try:
            self._client = session.client("cloudwatch", config=config)
        except NoRegionError:
            self._disable("no AWS region configured (pass region= or set AWS_REGION)")
            return False
        except Exception as exc:
            self.publish_failures += 1
            log.warning("medic_probe: cannot create the CloudWatch client, will retry: %s", exc)
            return False
        return True

    def _disable(self, reason: str) -> None:
        self._disabled_reason = reason
        self._active = False
        log.warning("medic_probe: %s; the probe for job %s does nothing", reason, self.job)

    def _job_dimensions(self) -> list:
        dims = [[("Job", self.job)]]
        if self.cluster is not None:
            dims.append([("Job", self.job), ("Cluster", self.cluster)])
        return dims

    def _run_dimensions(self) -> list:
        """The run's identity (RUN), published under the cluster only: a cluster's watch rules sweep its runs."""
        if self.cluster is None:
            return []
        if self.slurm_job_id is not None:
            return [[("Job", self.job), ("Cluster", self.cluster), ("SlurmJobId", self.slurm_job_id)]]
        if self.pod is not None:
            return [[("Job", self.job), ("Cluster", self.cluster), ("Pod", self.pod),
                     ("Owner", self.owner or "unknown")]]
        return []

    def _node_dimensions(self) -> list:
        return [("Job", self.job), ("Node", self.node)]

    def _metric_data(self, p: _Period | None, last_step: int | None, last_checkpoint: int | None,
                     now: float, completed: bool = False, *, first_step: int | None = None,
                     stalled: bool | None = None, paused: bool = False) -> list:
        """PutMetricData entries: the period's progress (none when ``p`` is None), the completion marker when
        ``completed``, and the stall verdict when ``stalled`` is not None (alone: a check's publish). Loss and
        TokensPerSecond go as statistic sets: Average is the period's mean, Minimum/Maximum keep a dip or a spike
        visible."""
        timestamp = datetime.fromtimestamp(now, tz=timezone.utc)
        data: list = []

        def add(name: str, dims: list, value: float | None = None, stats: dict | None = None) -> None:
            entry: dict = {"MetricName": name, "Dimensions": [{"Name": k, "Value": v} for k, v in dims],
                           "Timestamp": timestamp, "Unit": _UNITS[name]}
            if stats is not None:
                entry["StatisticValues"] = stats
            else:
                entry["Value"] = value
            if name == STALLED:
                entry["StorageResolution"] = _HIGH_RESOLUTION
            data.append(entry)

        def scalar(name: str, dims_list: list, value: float | None) -> None:
            safe = None if value is None else _cw_value(float(value))
            if safe is not None:
                for dims in dims_list:
                    add(name, dims, value=safe)

        if stalled is not None and self.publishes_job_metrics and self.hang_detection:
            scalar(STALLED, self._job_dimensions(), 1 if stalled else 0)

        def statistic(name: str, dims_list: list, n: int, total: float, low: float, high: float) -> None:
            if n <= 0:
                return
            values = [_cw_value(total), _cw_value(low), _cw_value(high)]
            if None in values:  # the sum overflowed CloudWatch's range: the mean alone still fits
                scalar(name, dims_list, total / n)
                return
            stats = {"SampleCount": float(n), "Sum": values[0], "Minimum": values[1], "Maximum": values[2]}
            for dims in dims_list:
                add(name, dims, stats=stats)

        if completed:  # with the session of the process that finished: Medic trusts a marker only with one
            scalar(COMPLETED, self._job_dimensions(), 1)
            scalar(SESSION, self._job_dimensions(), self.session)
        if p is None:
            return data
        if self.publishes_job_metrics:
            job = self._job_dimensions()
            scalar(HEARTBEAT, job, p.steps)
            if not completed:  # (sent with the marker already)
                scalar(SESSION, job, self.session)
            scalar(STEP, job, last_step)
            scalar(NON_FINITE_LOSS, job, p.non_finite)
            statistic(LOSS, job, p.loss_n, p.loss_sum, p.loss_min, p.loss_max)
            statistic(TOKENS_PER_SECOND, job, p.tps_n, p.tps_sum, p.tps_min, p.tps_max)
            if p.tps_n:
                scalar(TOKENS_PER_SECOND_BASELINE, job, self._tps_baseline)
            scalar(LAST_CHECKPOINT_STEP, job, last_checkpoint)
            scalar(FIRST_STEP, job, first_step)
            if paused:
                scalar(PAUSED, job, 1)
            scalar(RUN, self._run_dimensions(), 1)
        statistic(TOKENS_PER_SECOND, [self._node_dimensions()], p.tps_n, p.tps_sum, p.tps_min, p.tps_max)
        return data

    def _emf_document(self, p: _Period | None, last_step: int | None, last_checkpoint: int | None,
                      now: float, completed: bool = False, *, first_step: int | None = None,
                      stalled: bool | None = None, paused: bool = False) -> dict | None:
        """One CloudWatch Embedded Metric Format document (the period's progress unless ``p`` is None, the completion
        marker when ``completed``, the stall verdict unless ``stalled`` is None). EMF has no statistic sets: means
        are sent."""
        values: dict = {}
        job_metrics: list = []
        node_metrics: list = []

        def put(name: str, value: float | None, into: list) -> None:
            safe = None if value is None else _cw_value(float(value))
            if safe is not None:
                values[name] = safe
                # EMF's metric definition takes StorageResolution 1 (high resolution) or 60 ("Embedded metric format
                # specification", CloudWatch User Guide)
                into.append({"Name": name, "Unit": _UNITS[name],
                             **({"StorageResolution": _HIGH_RESOLUTION} if name == STALLED else {})})

        if stalled is not None and self.publishes_job_metrics and self.hang_detection:
            put(STALLED, 1 if stalled else 0, job_metrics)

        if completed:
            put(COMPLETED, 1, job_metrics)
            put(SESSION, self.session, job_metrics)
        tps = p.tps_sum / p.tps_n if p is not None and p.tps_n else None
        if p is not None and self.publishes_job_metrics:
            put(HEARTBEAT, p.steps, job_metrics)
            if not completed:
                put(SESSION, self.session, job_metrics)
            put(STEP, last_step, job_metrics)
            put(NON_FINITE_LOSS, p.non_finite, job_metrics)
            put(LOSS, p.loss_sum / p.loss_n if p.loss_n else None, job_metrics)
            put(TOKENS_PER_SECOND, tps, job_metrics)
            put(TOKENS_PER_SECOND_BASELINE, self._tps_baseline if tps is not None else None, job_metrics)
            put(LAST_CHECKPOINT_STEP, last_checkpoint, job_metrics)
            put(FIRST_STEP, first_step, job_metrics)
            if paused:
                put(PAUSED, 1, job_metrics)
        if p is not None:
            put(TOKENS_PER_SECOND, tps, node_metrics)  # the same root value, also under [Job, Node]
        run_metrics: list = []
        run_dimensions = self._run_dimensions() if p is not None and self.publishes_job_metrics else []
        if run_dimensions:
            put(RUN, 1, run_metrics)
        directives = []
        if job_metrics:
            directives.append({"Namespace": self.namespace,
                               "Dimensions": [[k for k, _ in dims] for dims in self._job_dimensions()],
                               "Metrics": job_metrics})
        if node_metrics:
            directives.append({"Namespace": self.namespace, "Dimensions": [["Job", "Node"]],
                               "Metrics": node_metrics})
        if run_metrics:
            directives.append({"Namespace": self.namespace,
                               "Dimensions": [[k for k, _ in dims] for dims in run_dimensions],
                               "Metrics": run_metrics})
        if not directives:
            return None
        doc: dict = {"_aws": {"Timestamp": int(now * 1000), "CloudWatchMetrics": directives},
                     "Job": self.job, "Node": self.node, "Rank": self.rank}
        if self.cluster is not None:
            doc["Cluster"] = self.cluster
        for dims in run_dimensions:
            doc.update(dict(dims))
        doc.update(values)
        return doc

    def _write_emf(self, p: _Period | None, last_step: int | None, last_checkpoint: int | None, now: float,
                   completed: bool = False, **state: Any) -> bool:
        doc = self._emf_document(p, last_step, last_checkpoint, now, completed, **state)
        if doc is None:
            return False
        try:
            line = json.dumps(doc, allow_nan=False, separators=(",", ":"))
            out = sys.stdout
            out.write(line + "\n")
            out.flush()
        except Exception as exc:
            self.publish_failures += 1
            log.warning("medic_probe: writing the EMF line failed (%d so far): %s", self.publish_failures, exc)
            return False
        self.published += 1
        return True

    # -- background thread and lifecycle ----------------------------------------------------------------

    def _delay(self) -> float:
        """Seconds to the next flush. Flushes land mid-period on the wall clock (hh:mm:30 for 60 s), so
        each one-minute CloudWatch bucket gets exactly one datapoint and an alarm on Heartbeat never
        sees an empty minute from jitter alone."""
        period = self.period_seconds
        delay = period - ((time.time() - period / 2) % period)
        if delay < period / 4:  # woke a hair early: that boundary is done, take the next one
            delay += period
        return delay

    def _run(self) -> None:
        try:
            with self._flush_lock:
                self._ensure_sink()  # decide early whether there is anything to do
        except Exception:
            log.exception("medic_probe: setup failed")
        flush_at = time.time() + self._delay()
        while self._active:
            wait = flush_at - time.time()
            if self.hang_detection and self.publishes_job_metrics:
                wait = min(wait, HANG_CHECK_SECONDS)
            if self._stop.wait(max(0.0, wait)):
                break
            if time.time() >= flush_at - 0.001:
                self.flush()
                flush_at = time.time() + self._delay()
            else:
                self.watch()

    def close(self, timeout: float = 5.0, *, completed: bool | None = None) -> None:
        """Stop the thread and publish what is left. Idempotent; never raises.

        A clean close also publishes the completion marker (`Completed` = 1, once): by default when no exception
        is in flight, so a close() in an ``except`` or ``finally`` block while an exception propagates publishes
        none (``sys.exit(0)`` counts as clean). ``completed=False`` never publishes it (a script stopping early on
        a signal it handled, to be restarted); ``completed=True`` always does. At interpreter exit (atexit) the
        probe closes without it: an interpreter also runs atexit after an unhandled exception or ``sys.exit(1)``.
        """
        self._close(_clean_exit(sys.exc_info()[1]) if completed is None else bool(completed), timeout)

    def _close_at_exit(self) -> None:
        """atexit's close: what is left is published, never the completion marker (see close())."""
        self._close(False, 5.0)

    def _close(self, completed: bool, timeout: float) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._stop.set()
            thread = self._thread
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout)
            self._flush(final=True, timeout=timeout, completed=completed)
        except Exception:
            log.exception("medic_probe: close failed")
        finally:
            self._active = False
            try:
                atexit.unregister(self._close_at_exit)
            except Exception:  # interpreter shutting down
                log.debug("medic_probe: atexit.unregister failed", exc_info=True)

    def __enter__(self) -> Probe:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        """Leaving the block closes the probe; cleanly (with the completion marker) only without an exception."""
        self._close(_clean_exit(exc), 5.0)

    def __repr__(self) -> str:
        return (f"Probe(job={self.job!r}, cluster={self.cluster!r}, node={self.node!r}, rank={self.rank}, "
                f"enabled={self._active}, published={self.published}, publish_failures={self.publish_failures})")
