"""Training metrics in the emulated CloudWatch, as the training probe (probe/medic_probe) publishes them.

``{"sim": {"probe": {...}}}`` drives the real ``Probe`` class: one instance per job (and cluster, node,
namespace) for the whole replay, as one long-running training process; each directive records its
steps through ``Probe.step`` and publishes with ``Probe.flush`` at the replay clock, so PutMetricData
carries exactly what the probe would send (Heartbeat, Step, NonFiniteLoss, Loss and TokensPerSecond
statistic sets, TokensPerSecondBaseline, LastCheckpointStep, the per-node TokensPerSecond). ``"close"`` ends that
process through the probe's own lifecycle: ``"clean"`` is the script's ``probe.close()`` with no exception in flight
(the final flush carries the completion marker, ``Completed``), ``"exception"`` a ``with Probe(...)`` block left by
an exception (the final flush, no marker), ``"killed"`` a process killed (SIGKILL, the NCCL watchdog's abort, Slurm's
requeue): nothing more, not even its stall checks. ``"hang": true`` (or its settings) runs the probe's hang detection:
its steps are spread evenly over the time since its last directive, and its background thread's stall check
(``Probe.watch``) runs every ``HANG_CHECK_SECONDS`` of the replay clock while the process lives (``watch``);
``"pause"`` opens a marked pause (``Probe.pause``) after the directive's steps, ``"pause": false`` ends it at the
process's previous directive (the directive's steps come after it).
``{"sim": {"metric": {...}}}`` puts one datapoint of any metric. Both publish through the harness's own
CloudWatch client: they are the training job's calls, not Medic's (not counted, never faulted).
"""

from __future__ import annotations

import atexit
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sim.synth import ROOT

PROBE_NAMESPACE = "Medic/Training"
PROBE_NODE = "ip-10-1-0-11"  # rank 0's node, unless the directive names one
MAX_STEPS = 1_000_000  # per directive: the probe aggregates them in memory, one call each
CLOSES = ("clean", "exception", "killed")  # how a `probe` directive's "close" ends the training process
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "+inf": math.inf, "-inf": -math.inf,
               "infinity": math.inf, "-infinity": -math.inf}


def import_probe() -> Any:
    """The probe package, from probe/ (a training script installs it; it is not in this venv)."""
    path = str(ROOT / "probe")
    if path not in sys.path:
        sys.path.insert(0, path)
    import medic_probe.probe

    return medic_probe.probe


@dataclass
class ProbeSpec:
    job: str
    steps: int = 0
    step: int | None = None
    loss: float | None = None
    tokens_per_sec: float | None = None
    checkpoint: int | None = None
    cluster: str | None = None
    node: str = PROBE_NODE
    namespace: str = PROBE_NAMESPACE
    new_process: bool = False  # the job was restarted: a fresh probe (no last step, checkpoint or baseline)
    close: str | None = None  # the process ends: "clean" (close(), the completion marker), "exception" or "killed"
    hang: dict | None = None  # the probe's hang detection on, with these settings (None: off, as before issue 31)
    pause: str | bool | None = None  # a reason: a marked pause begins after the steps; False: it ends
    # The run's identity, as the probe reads it from its environment (issue 33): the Slurm job the process runs in
    # (SLURM_JOB_ID, digits), or on EKS its pod's `namespace/name` (the downward API's POD_NAMESPACE, POD_NAME)
    slurm_job_id: str | None = None
    pod: str | None = None

    @classmethod
    def parse(cls, value: Any) -> ProbeSpec:
        if not isinstance(value, dict):
            raise ValueError("expected {\"job\": ..., \"steps\": <steps since the last publish>, "
                             "\"step\": <last step>, \"loss\": ..., \"tokens_per_sec\": ..., \"checkpoint\": <step>, "
                             "\"close\": \"clean\" | \"exception\"}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        job = value.get("job")
        if not isinstance(job, str) or not job.strip():
            raise ValueError(f"'job' must be the job's name (got {job!r})")
        steps = value.get("steps", 0)
        if not _is_int(steps) or not 0 <= steps <= MAX_STEPS:
            raise ValueError(f"'steps' must be a whole number from 0 to {MAX_STEPS} (got {steps!r})")
        step, checkpoint = value.get("step"), value.get("checkpoint")
        for name, number in (("step", step), ("checkpoint", checkpoint)):
            if number is not None and (not _is_int(number) or number < 0):
                raise ValueError(f"'{name}' must be a step number (got {number!r})")
        if step is not None and steps == 0:
            raise ValueError("'step' is the last of the 'steps' trained since the last publish: give 'steps' >= 1")
        spec = cls(job=job, steps=steps, step=step, checkpoint=checkpoint,
                   loss=_number(value.get("loss"), "loss", non_finite=True),
                   tokens_per_sec=_number(value.get("tokens_per_sec"), "tokens_per_sec", non_finite=False))
        if not isinstance(value.get("new_process", False), bool):
            raise ValueError(f"'new_process' must be true or false (got {value['new_process']!r})")
        spec.new_process = value.get("new_process", False)
        if value.get("close") not in (None, *CLOSES):
            raise ValueError(f"'close' must be one of {', '.join(CLOSES)} (got {value['close']!r})")
        spec.close = value.get("close")
        spec.hang = _hang_settings(value.get("hang"))
        pause = value.get("pause")
        if pause is not None and pause is not False and not (isinstance(pause, str) and pause.strip()):
            raise ValueError(f"'pause' must be the pause's reason (\"checkpoint\"), or false to end it (got {pause!r})")
        spec.pause = pause
        job_id = value.get("slurm_job_id")
        if job_id is not None and not ((_is_int(job_id) and job_id > 0) or (isinstance(job_id, str) and
                                                                             job_id.isdigit())):
            raise ValueError(f"'slurm_job_id' must be Slurm's job id, digits (got {job_id!r})")
        spec.slurm_job_id = None if job_id is None else str(job_id)
        pod = value.get("pod")
        if pod is not None and not (isinstance(pod, str) and len(pod.split("/")) == 2 and all(pod.split("/"))):
            raise ValueError(f"'pod' must be the pod's namespace/name (got {pod!r})")
        if pod is not None and job_id is not None:
            raise ValueError("'slurm_job_id' (Slurm) and 'pod' (EKS) name a run on different orchestrators: give one")
        spec.pod = pod
        for name in ("cluster", "node", "namespace"):
            if name in value:
                text = value[name]
                if not isinstance(text, str) or not text.strip():
                    raise ValueError(f"'{name}' must be a non-empty string (got {text!r})")
                setattr(spec, name, text)
        return spec


HANG_SETTINGS = {"floor_seconds": "hang_floor_seconds", "factor": "hang_factor", "warmup_steps": "hang_warmup_steps"}


def _hang_settings(value: Any) -> dict | None:
    """``"hang"``: true (the probe's defaults) or {floor_seconds, factor, warmup_steps}; the Probe keyword arguments."""
    if value is None or value is False:
        return None
    if value is True:
        return {}
    if not isinstance(value, dict) or set(value) - set(HANG_SETTINGS):
        raise ValueError(f"'hang' must be true or an object of {', '.join(HANG_SETTINGS)} (got {value!r})")
    return {HANG_SETTINGS[key]: number for key, number in value.items()}


def module_pause_limit() -> float:
    """The probe's default limit of a marked pause (``Probe.pause``)."""
    return import_probe().DEFAULT_PAUSE_LIMIT_SECONDS


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any, name: str, non_finite: bool) -> float | None:
    if value is None:
        return None
    if isinstance(value, str) and non_finite and value.strip().lower() in _NON_FINITE:
        return _NON_FINITE[value.strip().lower()]
    if isinstance(value, int | float) and not isinstance(value, bool) and (non_finite or math.isfinite(value)):
        return float(value)
    allowed = "a number, or \"nan\" / \"inf\" / \"-inf\"" if non_finite else "a finite number"
    raise ValueError(f"'{name}' must be {allowed} (got {value!r})")


class _ReplayClock:
    """The probes' step clock: the replay's time, in seconds (set before each step and each check)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Metrics:
    def __init__(self, client: Callable[[str], Any]) -> None:
        self.client = client
        self.probes: dict[tuple[str, str, str | None, str], Any] = {}
        self.published: list[dict] = []  # every datapoint put, in order (what CloudWatch now holds)
        self.clock = _ReplayClock()
        self._last_seen: dict[int, float] = {}  # probe id -> the replay time of its last directive

    @property
    def watching(self) -> bool:
        """A live probe runs its stall checks (hang detection on, not closed or killed)."""
        return any(probe.hang_detection and probe._active for probe in self.probes.values())

    def watch(self, at: datetime) -> list[dict]:
        """The stall check of every live probe with hang detection (``Probe.watch``), as its background thread runs it
        every ``HANG_CHECK_SECONDS``: the replay's cloudwatch ticks call it at that cadence while one lives."""
        before = len(self.published)
        self.clock.now = at.timestamp()
        for probe in self.probes.values():
            if probe.hang_detection and probe._active:
                probe.watch()
        return self.published[before:]

    def close(self) -> None:
        for probe in self.probes.values():
            atexit.unregister(probe._close_at_exit)
            probe._active = False  # nothing left to publish, and nowhere to publish it once moto stops
        self.probes.clear()

    def probe(self, value: Any) -> list[dict]:
        """Train ``steps`` steps through the job's probe and publish them now, as its background thread would."""
        spec = ProbeSpec.parse(value)
        key = (spec.namespace, spec.job, spec.cluster, spec.node)
        probe = self.probes.get(key)
        if probe is not None and spec.new_process:
            atexit.unregister(probe._close_at_exit)
            probe._active = False
            probe = None
        now = datetime.now(UTC).timestamp()  # the replay's clock (time-machine)
        if probe is not None and probe._closed:
            raise ValueError(f"the training process of {spec.job!r} was closed: a later run is a new process "
                             "(give \"new_process\": true)")
        if probe is None:
            module = import_probe()
            # The pod of rank 0 is the PyTorchJob's master replica: its MASTER_ADDR, as the training-operator sets
            # it (v1.9 pkg/controller.v1/pytorch/master.go: replicaName(job, Master, 0)), is its own name, from which
            # the probe takes its owner (medic_probe.probe.owner_from_master_addr)
            owner = module.owner_from_master_addr(spec.pod.split("/")[1]) if spec.pod else None
            probe = module.Probe(spec.job, cluster=spec.cluster, node=spec.node, namespace=spec.namespace,
                                 rank=0, client=_Recording(self.client("cloudwatch"), self.published),
                                 start=False, hang_detection=spec.hang is not None, clock=self.clock,
                                 slurm_job_id=spec.slurm_job_id, pod=spec.pod, owner=owner or "unknown",
                                 **(spec.hang or {}))
            self.probes[key] = probe
        elif spec.hang is not None and not probe.hang_detection:
            raise ValueError(f"the training process of {spec.job!r} runs without hang detection: \"hang\" is set when "
                             "its probe is made (its first directive, or \"new_process\": true)")
        last = probe._last_step
        first = (spec.step - spec.steps + 1) if spec.step is not None else (last + 1 if last is not None else 1)
        # The steps spread evenly since the process's last directive (a new process: over the minute before): the
        # probe's step intervals are what its hang detection learns from.
        since = self._last_seen.get(id(probe), now - 60.0)
        if spec.pause is False and probe._pauses:  # the pause ended when the steps began: at the last directive
            self.clock.now = since
            probe._pause_exit()
        for index, number in enumerate(range(first, first + spec.steps)):
            self.clock.now = since + (now - since) * (index + 1) / spec.steps
            probe.step(number, loss=spec.loss, tokens_per_sec=spec.tokens_per_sec)
        self.clock.now = now
        self._last_seen[id(probe)] = now
        if spec.checkpoint is not None:
            probe.checkpoint(spec.checkpoint)
        if spec.pause is not None and spec.pause is not False:  # a pause begins after the steps
            probe._pause_enter(spec.pause, module_pause_limit())
        before, failures = len(self.published), probe.publish_failures
        if spec.close == "killed":  # the process is gone: nothing more from it, not even a stall check
            atexit.unregister(probe._close_at_exit)
            probe._active = False
            probe._closed = True
            return []
        if spec.close == "clean":
            probe.close()  # the script's own close() at the end of training: no exception in flight
        elif spec.close == "exception":
            error = RuntimeError("the training script raised (emulated)")
            probe.__exit__(RuntimeError, error, None)  # a `with Probe(...)` block left by the exception
        else:
            probe.flush()
        if probe.publish_failures != failures:
            raise ValueError("the probe's PutMetricData failed (its warning is on stderr)")
        return self.published[before:]

    def ingest_emf(self, document: Any, at: datetime) -> list[dict]:
        """One EMF line of the probe (``Probe(emf=True)``), as CloudWatch Logs extracts it into metrics ("Embedded
        metric format specification", CloudWatch User Guide: ``_aws.CloudWatchMetrics`` directives, each metric of a
        directive once per dimension set, dimension values from the document's root members, a value or an array),
        stored at ``at`` (the caller's clock: a live session maps the line's ``_aws.Timestamp`` onto the emulated
        clock). Put through the harness's CloudWatch client, as the probe's own PutMetricData would be: the
        handlers' GetMetricData and the alarms' evaluation read them alike. ValueError names what is wrong."""
        if not isinstance(document, dict) or not isinstance(document.get("_aws"), dict):
            raise ValueError("an EMF document is a JSON object with an `_aws` member")
        directives = document["_aws"].get("CloudWatchMetrics")
        if not isinstance(directives, list) or not directives:
            raise ValueError("`_aws.CloudWatchMetrics` must be a non-empty list of directives")
        data: list[tuple[str, dict]] = []
        for directive in directives:
            namespace = directive.get("Namespace") if isinstance(directive, dict) else None
            if not isinstance(namespace, str) or not namespace:
                raise ValueError(f"an EMF directive needs a Namespace (got {directive!r})")
            for dimension_set in directive.get("Dimensions") or [[]]:
                missing = [name for name in dimension_set if not isinstance(document.get(name), str)]
                if missing:
                    raise ValueError(f"dimension(s) {', '.join(missing)} have no string value in the document")
                dimensions = [{"Name": name, "Value": document[name]} for name in dimension_set]
                for metric in directive.get("Metrics") or []:
                    name = metric.get("Name") if isinstance(metric, dict) else None
                    raw = document.get(name) if isinstance(name, str) else None
                    for value in raw if isinstance(raw, list) else [raw]:
                        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                            datum = {"MetricName": name, "Dimensions": dimensions, "Timestamp": at,
                                     "Value": float(value)}
                            if isinstance(metric.get("Unit"), str):
                                datum["Unit"] = metric["Unit"]
                            data.append((namespace, datum))
        before = len(self.published)
        recording = _Recording(self.client("cloudwatch"), self.published)
        try:
            for namespace, datum in data:
                recording.put_metric_data(Namespace=namespace, MetricData=[datum])
        except (ClientError, BotoCoreError) as error:
            raise ValueError(f"CloudWatch refused the EMF line's metrics: {error}") from None
        return self.published[before:]

    def put(self, value: Any, now: datetime) -> dict:
        """One datapoint: ``{name, value | statistics, job, dimensions, unit, namespace, timestamp}``."""
        if not isinstance(value, dict):
            raise ValueError("expected {\"name\": ..., \"value\": ..., \"job\": ..., \"dimensions\": {...}}")
        known = {"name", "value", "statistics", "job", "dimensions", "unit", "namespace", "timestamp"}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        name = value.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"'name' must be a metric name (got {name!r})")
        dimensions = {} if value.get("job") is None else {"Job": value["job"]}
        extra = value.get("dimensions", {})
        if not isinstance(extra, dict):
            raise ValueError("'dimensions' must map dimension names to values")
        dimensions.update(extra)
        datum: dict[str, Any] = {"MetricName": name, "Dimensions": [{"Name": str(k), "Value": str(v)}
                                                                    for k, v in dimensions.items()]}
        if ("value" in value) == ("statistics" in value):
            raise ValueError("give one of 'value' or 'statistics' ({SampleCount, Sum, Minimum, Maximum})")
        if "value" in value:
            datum["Value"] = _number(value["value"], "value", non_finite=False)
        else:
            stats = value["statistics"]
            if not isinstance(stats, dict) or set(stats) != {"SampleCount", "Sum", "Minimum", "Maximum"}:
                raise ValueError("'statistics' must be {SampleCount, Sum, Minimum, Maximum}")
            datum["StatisticValues"] = {key: _number(number, key, non_finite=False) for key, number in stats.items()}
        if "unit" in value:
            datum["Unit"] = value["unit"]
        stamp = value.get("timestamp")
        if stamp is not None:
            parsed = _parse(stamp)
            if parsed is None:
                raise ValueError(f"'timestamp' must be an ISO 8601 time (got {stamp!r})")
            datum["Timestamp"] = parsed
        else:
            datum["Timestamp"] = now
        namespace = value.get("namespace", PROBE_NAMESPACE)
        try:
            _Recording(self.client("cloudwatch"), self.published).put_metric_data(
                Namespace=namespace, MetricData=[datum])
        except (ClientError, BotoCoreError) as error:
            raise ValueError(f"CloudWatch refused the datapoint: {error}") from None
        return self.published[-1]


class _Recording:
    """The probe's CloudWatch client: the harness's own, keeping a copy of each datapoint put."""

    def __init__(self, client: Any, published: list[dict]) -> None:
        self._client = client
        self._published = published

    def put_metric_data(self, Namespace: str, MetricData: list[dict]) -> dict:  # noqa: N803 - boto3's names
        response = self._client.put_metric_data(Namespace=Namespace, MetricData=MetricData)
        for datum in MetricData:
            self._published.append({"namespace": Namespace, **datum})
        return response


def _parse(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
