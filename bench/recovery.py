"""Recovery time per failure class: fault -> training resumed, with Medic (replayed) and without it.

    python -m bench.recovery                          # every class, the table
    python -m bench.recovery --replace-s 3600         # any latency below, in seconds (``--<name>``)

**With Medic** is measured, not summed: each class is a replay through ``sim`` (the synthesized stack, the real
handlers, the emulated alarms, the real Slurm agent), with the clock set from the latencies below: the node
event is delivered ``hma_detect_s + eventbridge_delivery_s`` after the fault, the emulated reboot and
replacement last ``reboot_s`` and ``replace_s`` (``sim.hyperpod.REPAIR``, set for the run). The Slurm job is the
emulator's (``sim/slurm.py``, which follows slurmctld's source): a batch job with Slurm's default requeue flag on
every compute node of the cluster (no spare node: a requeued job waits for its own), requeued by slurmctld itself
when Medic's repair takes its node down or by Medic's ``scontrol requeue``, held ``slurm_cred_expire_s`` + 1 s
and started at the next scheduling pass (``slurm_sched_interval_s``) on nodes back in service; the training process
(the emulator has none) follows it: hung while its job still runs on the faulty node, silent while the job waits,
its first step ``job_start_s`` after Slurm starts the job again. A training job Medic recreated runs
``sagemaker_start_s`` after the ``CreateTrainingJob``. Detect, act, repaired and resumed are then read off the
replay's records (their timestamps), the emulated HyperPod (when a repair finished) and the emulated Slurm job.

**Without Medic** has nothing to replay: it is the documented path of HyperPod, Slurm or SageMaker with the same
latencies (HyperPod's automatic node recovery with Slurm's own requeue of a job whose node goes down, the baseline
for node faults; Slurm auto-resume where it applies; SageMaker's own ``RetryStrategy``, which retries
``InternalServerError`` only; an operator where nothing else acts).

Every latency carries its source; ``kind`` says whether AWS (or PyTorch) documents the number or it is an
assumption, stated with its reasoning. Change one with ``--<name> <seconds>`` and the with-Medic column is
replayed again with it (``tests/bench/test_recovery.py`` checks that it moves).
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

from bench.common import ROOT, cli

# The bench's own Medic config: the demo's (`sim/scenarios/demo.medic.yaml`), with the stall alarm at 5 minutes so
# that Medic requeues a hung job before PyTorch's NCCL watchdog (10 minutes, below) kills it: with the demo's 10
# minutes the alarm fires ~13 minutes after the last step, the job has already failed and `squeue` no longer lists
# it, so there is nothing to requeue. `stall_minutes` below `nccl_timeout_s` is the setting this bench recommends.
CONFIG = ROOT / "bench" / "recovery.medic.yaml"
CLUSTER, JOB, SLURM_ID = "pretrain-slurm", "llama3-70b", 4211
TRAINING_JOB = "ft-mistral-7b-0042"
BEDROCK_JOB = "cpt-llama-0003"  # bench/recovery.medic.yaml's bedrock_jobs prefix cpt-
FAULT_AT = datetime(2026, 11, 21, 3, 0, 0, tzinfo=UTC)  # the last training step before the fault
WARMUP = timedelta(minutes=10)  # the replay starts here before the fault: the alarms' first evaluation sets state
HORIZON = timedelta(hours=4)  # a replay stops here whatever happened
AFTER_RESUME = timedelta(minutes=8)  # time left after the first step for Medic's proof-of-recovery check
STEPS_PER_MINUTE, LAST_STEP, CHECKPOINT_STEP = 40, 1240, 1200
# A retryable reason SageMaker's RetryStrategy does not retry (it covers InternalServerError only): a collective
# failure, which Medic's default rules call `collective_timeout` (retryable).
NCCL_FAILURE = ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"torch.distributed."
                "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there was a "
                "network error, NCCL version 2.21.5\nncclRemoteError: Connection reset by peer\"")


@dataclass(frozen=True)
class Latency:
    seconds: float
    kind: str  # documented | assumption
    what: str
    source: str


# Each latency: what it is, its number, and where the number comes from (or why it is assumed).
LATENCIES: dict[str, Latency] = {
    "hma_detect_s": Latency(
        60, "assumption", "HyperPod's health-monitoring agent: the fault to the node marked unhealthy",
        "AWS says HMA \"continuously monitors the health status of each GPU-based or Trainium-based instance\" and "
        "gives no detection time (docs.aws.amazon.com/sagemaker/latest/dg/"
        "sagemaker-hyperpod-eks-resiliency-health-monitoring-agent.html). Assumed: one minute (XID errors reach the "
        "kernel log at once; DCGM policy checks poll). The same in both columns: HyperPod's own recovery starts "
        "from the same detection."),
    "eventbridge_delivery_s": Latency(
        5, "assumption", "the node-health or training-job event from the service to Medic's Lambda",
        "AWS: EventBridge delivers events \"in near-real-time\" (aws.amazon.com/eventbridge/faqs/) and documents no "
        "number; AWS service events are \"best effort\" or \"durable\" (docs.aws.amazon.com/eventbridge/latest/"
        "userguide/eb-service-event-delivery-level.html). Assumed: 5 s, Lambda's start included."),
    "reboot_s": Latency(
        600, "assumption", "a HyperPod node reboot: BatchRebootClusterNodes to the node Running again",
        "AWS documents no duration for a reboot (API reference: BatchRebootClusterNodes). Assumed: 10 minutes "
        "for a p5 (firmware POST of 8 GPUs and EFA, the AMI's boot, HyperPod's health checks): sim's default."),
    "replace_s": Latency(
        1800, "assumption", "a HyperPod node replacement: BatchReplaceClusterNodes to the new node Running",
        "AWS documents no duration (API reference: BatchReplaceClusterNodes \"terminates the specified instances "
        "and provisions new replacement instances\"). Assumed: 30 minutes (a new instance, the lifecycle scripts, "
        "joining Slurm): sim's default."),
    "capacity_failure_s": Latency(
        300, "assumption", "a replacement to HyperPod's cluster event that it failed for capacity",
        "AWS documents the event (\"We currently do not have sufficient capacity to launch new ml.p5.48xlarge "
        "instances\", tests/fixtures/events/hyperpod-cluster-event-error.json) but not when it comes. Assumed: 5 "
        "minutes (EC2 refuses a launch at once; HyperPod retries before it reports)."),
    "slurm_cred_expire_s": Latency(
        120, "documented", "Slurm's hold on a requeued job: requeued to eligible to start again (less 1 s)",
        "slurm.conf(5), AuthInfo cred_expire: \"This also controls how long a requeued job must wait before starting "
        "again. The default value is 120 seconds\"; SchedMD src/slurmctld/job_mgr.c batch_requeue_fini: "
        "`begin_time = now + cred_lifetime + 1` (22.05; today `now + _requeue_delay() + 1`, SchedulerParameters "
        "requeue_delay defaulting to cred_expire). Measured on slurm-wlm 22.05.8 (tests/agent/test_real_slurm.py): "
        "EligibleTime 121 s after the requeue."),
    "slurm_sched_interval_s": Latency(
        60, "documented", "Slurm's main scheduling loop: an eligible pending job is started at its next pass",
        "slurm.conf(5), SchedulerParameters sched_interval: \"How frequently, in seconds, the main scheduling loop "
        "will execute and test all pending jobs. The default value is 60 seconds.\" The emulator runs it on whole "
        "minutes (its phase is not documented). Measured on slurm-wlm 22.05.8 here: node down to the requeued job "
        "running again 175 s (121 s held, then 54 s to the pass)."),
    "job_start_s": Latency(
        300, "assumption", "a Slurm training job: start to its first step (environment, NCCL init, checkpoint load)",
        "Workload-specific; assumed 5 minutes for a 70B model's sharded checkpoint. The same in both columns."),
    "sagemaker_start_s": Latency(
        480, "assumption", "a SageMaker training job: CreateTrainingJob to its first step",
        "SageMaker documents the stages (Starting, Downloading, Training: DescribeTrainingJob's SecondaryStatus) "
        "but no durations. Assumed: 8 minutes (instances, image pull, data download, checkpoint load). The same "
        "in both columns."),
    "batch_start_s": Latency(
        600, "assumption", "an AWS Batch multi-node job: SubmitJob to its first step",
        "AWS Batch documents the states (SUBMITTED, PENDING, RUNNABLE, STARTING, RUNNING: \"Job states\", AWS Batch "
        "user guide) but no durations; a multi-node job waits for all its nodes. Assumed: 10 minutes (instances "
        "from the compute environment, image pull, checkpoint load). The same in both columns."),
    "bedrock_trained_s": Latency(
        21600, "assumption", "a Bedrock customization job's training before it failed: what a restart repeats",
        "Workload-specific: a Bedrock job does not resume from a checkpoint (CreateModelCustomizationJob has no "
        "checkpoint input: botocore's bedrock model), so its new job starts over and repeats this much training, "
        "with Medic or without. Assumed: 6 hours of continued pre-training. The same in both columns."),
    "nccl_timeout_s": Latency(
        600, "documented", "PyTorch's NCCL watchdog: a collective hung this long aborts the process",
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp: `kProcessGroupNCCLDefaultTimeout = "
        "std::chrono::milliseconds(10 * 60 * 1000)` (github.com/pytorch/pytorch), `init_process_group`'s "
        "default for NCCL (\"10 minutes for NCCL\")."),
    "auto_resume_checks_s": Latency(
        120, "assumption", "HyperPod Slurm auto-resume: the job step failed to it restarted (no node to replace)",
        "AWS: with `srun --auto-resume=1`, \"if a job fails due to a hardware failure or any transient issues "
        "in-between training, SageMaker HyperPod auto-resume starts the node replacement workflow and restarts the "
        "job after the faulty nodes are replaced\", running hardware checks whenever a job fails "
        "(docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-resiliency-slurm-auto-resume.html); no "
        "duration given. Assumed: 2 minutes of checks."),
    "operator_paged_s": Latency(
        900, "assumption", "a paged on-call engineer: the page to their fix under way",
        "An assumption (acknowledge, read the page, act), not a measurement: 15 minutes."),
    "operator_unpaged_s": Latency(
        3600, "assumption", "nobody paged: the failure to someone noticing and acting",
        "An assumption, not a measurement: one hour (the next look at a dashboard or the job's output; at night, "
        "the next morning)."),
}


def latencies(**overrides: float) -> dict[str, float]:
    unknown = set(overrides) - set(LATENCIES)
    if unknown:
        raise ValueError(f"unknown latency: {', '.join(sorted(unknown))} (known: {', '.join(LATENCIES)})")
    return {name: float(overrides.get(name, entry.seconds)) for name, entry in LATENCIES.items()}


# the replay ---------------------------------------------------------------------------------------------------------


@dataclass
class Moments:
    """When each thing happened in a replay (None: it did not)."""

    fault_at: datetime
    detected_at: datetime | None = None  # Medic's first record of the incident
    acted_at: datetime | None = None  # Medic's action: the node call, the requeue queued, the clone created
    repaired_at: datetime | None = None  # node Running again, job requeued, clone InProgress
    resumed_at: datetime | None = None  # the training job's first step after the restart
    paged_at: datetime | None = None  # Medic's first page
    pages: int = 0
    paged: list[tuple[datetime, str]] = field(default_factory=list)  # (when, the paged record's fault)
    records: list[tuple[str, str, str, str]] = field(default_factory=list)  # (time, action, outcome, fault)
    incidents: list[dict] = field(default_factory=list)  # Medic's own incident lines

    def seconds(self) -> dict[str, float | None]:
        def since(moment: datetime | None) -> float | None:
            return None if moment is None else round((moment - self.fault_at).total_seconds(), 1)

        return {"detect_s": since(self.detected_at), "act_s": since(self.acted_at),
                "repaired_s": since(self.repaired_at), "resumed_s": since(self.resumed_at),
                "paged_s": since(self.paged_at)}


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _line(directive: dict) -> str:
    return json.dumps({"sim": directive})


def _advance(when: datetime) -> str:
    return _line({"advance": when.strftime("%Y-%m-%dT%H:%M:%SZ")})


def _probe(**published: Any) -> str:
    return _line({"probe": {"job": JOB, **published}})


def _node_event(at: datetime, fault: str) -> str:
    from sim.scenarios.generate import NODE, event

    return json.dumps(event(NODE, at, fault))


def _capacity_event(at: datetime, instance_id: str, logical_id: str) -> str:
    """HyperPod's cluster event for a replacement that found no capacity (the shape of AWS's sample)."""
    sample = json.loads((ROOT / "tests" / "fixtures" / "events" / "hyperpod-cluster-event-error.json").read_text())
    sample = copy.deepcopy(sample)
    sample["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-bench/capacity/{at.isoformat()}"))
    sample["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    details = sample["detail"]["EventDetails"]
    details["EventId"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-bench/capacity-event/{at.isoformat()}"))
    details["InstanceId"] = instance_id
    details["EventTime"] = int(at.timestamp() * 1000)
    details["EventDetails"]["EventMetadata"]["Instance"]["NodeLogicalId"] = logical_id
    return json.dumps(sample)


# The cluster's compute nodes besides the one that fails: the job runs on all of them, so a requeued job has no
# spare node and waits for its own to be back in service (a large training job takes the whole cluster).
OTHER_WORKERS = 7


class TrainingProcess:
    """The training process of the emulated Slurm job (sim/slurm.py has the job, not the process): stepping, hung
    (a live process with no progress: its probe still publishes), or gone while Slurm has the job waiting; after
    Slurm starts the job again, its first step comes ``job_start_s`` later."""

    def __init__(self) -> None:
        self.state = "running"
        self.restarted_at: datetime | None = None  # when Slurm started the job again
        self.resumed_at: datetime | None = None

    def after_fault(self) -> None:
        self.state = "hung"  # a hung collective, or a GPU fault: no progress until the job is killed or requeued

    def follow(self, job: Any) -> datetime | None:
        """Follow Slurm's job; returns when Slurm started it again (once)."""
        if job is None or job.state != "RUNNING":
            if self.state != "running":
                self.state = "gone"  # Slurm killed it (requeued, or its node went down): the process is gone
            return None
        if job.started_at is not None and self.restarted_at is None and self.state == "gone":
            self.restarted_at = job.started_at
            return job.started_at
        return None

    def killed(self, job: Any) -> bool:
        """Slurm killed the hung process (its job requeued, or its node down): once, when it happens."""
        if self.state == "hung" and (job is None or job.state != "RUNNING"):
            self.state = "gone"
            return True
        return False

    def minute(self) -> list[str]:
        """What the probe publishes at a whole minute: progress while running, a live process with no progress
        while hung (its background thread still publishes, and judges it stalled: the hang alarm), nothing once
        the process is gone."""
        if self.state == "running":
            return [_probe(steps=STEPS_PER_MINUTE, loss=1.87, tokens_per_sec=41000.0)]
        if self.state == "hung":
            return [_probe(steps=0)]
        return []


def _world_capture() -> tuple[dict, Any]:
    """World.__enter__ wrapped: the driver reads the emulated HyperPod (a repair finished, a replacement's id)."""
    from sim.world import World

    box: dict = {}
    original = World.__enter__

    def enter(self: Any) -> Any:
        box["world"] = self
        return original(self)

    return box, mock.patch.object(World, "__enter__", enter)


@contextlib.contextmanager
def _repair_durations(lat: dict[str, float]) -> Iterator[None]:
    """The emulated repairs last what the latencies say (sim's `REPAIR` knob), and the emulated slurmctld holds and
    schedules as they say (sim.slurm's CRED_EXPIRE and SCHED_INTERVAL), for this replay only."""
    from sim import hyperpod, slurm

    durations = {"reboot": (hyperpod.REPAIR["reboot"][0], timedelta(seconds=lat["reboot_s"])),
                 "replace": (hyperpod.REPAIR["replace"][0], timedelta(seconds=lat["replace_s"]))}
    with mock.patch.dict(hyperpod.REPAIR, durations), \
            mock.patch.object(slurm, "CRED_EXPIRE", timedelta(seconds=lat["slurm_cred_expire_s"])), \
            mock.patch.object(slurm, "SCHED_INTERVAL", timedelta(seconds=lat["slurm_sched_interval_s"])):
        yield


def _observe(lines: list[dict], seen: int, moments: Moments) -> int:
    """Fold the replay's new output lines into the moments; returns how many lines are read."""
    for line in lines[seen:]:
        if line["kind"] == "record":
            at = _at(line["timestamp"])
            moments.records.append((line["timestamp"], line["action"], line["outcome"], line["fault"]))
            if line["fault"] == "recovered" or line["outcome"] in ("ignored", "duplicate", "rejected"):
                continue
            moments.detected_at = moments.detected_at or at
            if line["action"] != "none" and line["outcome"] in ("executed", "deferred") and moments.acted_at is None:
                moments.acted_at = at
        elif line["kind"] == "page":
            moments.pages += 1
            stamp = (line.get("record") or {}).get("timestamp") or (moments.records[-1][0] if moments.records
                                                                      else None)
            if stamp:
                moments.paged_at = moments.paged_at or _at(stamp)
                moments.paged.append((_at(stamp), str((line.get("record") or {}).get("fault") or "?")))
        elif line["kind"] == "incident":
            moments.incidents.append(line)
    return len(lines)


def _slurm_driver(klass: str, lat: dict[str, float], box: dict, out: list[dict], moments: Moments) -> Iterator[str]:
    """The replay's input, decided as it goes: the cluster and the job before the fault, the fault, the node event,
    then minute by minute the training process's behaviour given what the emulated Slurm did with its job (requeued
    by slurmctld when its node went down, or by Medic; started again) and the emulated node (its repair)."""
    process = TrainingProcess()
    start = FAULT_AT - WARMUP
    yield _advance(start)
    yield _line({"cluster": {"name": CLUSTER, "groups": {"controller": 1, "workers": OTHER_WORKERS}}})
    workers = [node_id for node_id, node in box["world"].hyperpod.backend.clusters[CLUSTER].nodes.items()
               if node.instance_group_name == "workers"]
    from sim.scenarios.generate import NODE

    yield _line({"slurm_job": {"cluster": CLUSTER, "id": SLURM_ID, "name": JOB, "nodes": [*workers, NODE]}})
    yield _line({"agent": {"cluster": CLUSTER, "heartbeat": True}})
    yield _probe(steps=STEPS_PER_MINUTE, step=LAST_STEP - 10 * STEPS_PER_MINUTE, loss=1.87, tokens_per_sec=41000.0,
                 checkpoint=CHECKPOINT_STEP, hang=True)
    now = start
    node_fault = {"gpu_fatal": "NvidiaErrorTerminate", "gpu_reboot": "NvidiaErrorReboot",
                  "capacity": "NvidiaErrorTerminate"}.get(klass)
    pending: list[tuple[datetime, str]] = []  # (when, what) the driver still has to do
    if node_fault:
        pending.append((FAULT_AT + timedelta(seconds=lat["hma_detect_s"] + lat["eventbridge_delivery_s"]), "node"))
    node_down = node_fault is not None
    seen, capacity_sent = 0, False
    while now < FAULT_AT + HORIZON:
        tick = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
        due = min([tick, *(when for when, _ in pending)])
        world = box.get("world")
        repairs = dict(world.hyperpod.repairs) if world is not None else {}
        yield _advance(due)
        now = due
        finished = [repair for key, repair in repairs.items() if key not in box["world"].hyperpod.repairs]
        if node_down and finished and moments.repaired_at is None:
            moments.repaired_at = min(repair.until for repair in finished)
            node_down = False
        if process.killed(box["world"].slurm.cluster(CLUSTER).jobs.get(str(SLURM_ID))):
            yield _probe(close="killed")  # the hung process's probe stops with it: no flush, no more stall checks
        flushed = False  # the probe publishes once a minute: a first flush on the minute is that minute's
        for when, what in [item for item in pending if item[0] <= now]:
            pending.remove((when, what))
            if what == "node":
                yield _node_event(when, node_fault)
            elif what == "capacity":
                yield _capacity_event(when, *_replacement(box["world"]))
            elif what == "start":
                process.state = "running"
                process.resumed_at = moments.resumed_at = when
                flushed = True
                yield _probe(steps=STEPS_PER_MINUTE // 2, step=CHECKPOINT_STEP + STEPS_PER_MINUTE // 2,
                             loss=1.9, tokens_per_sec=40500.0, new_process=True, hang=True)
        if now == FAULT_AT and process.state == "running":
            yield from process.minute()  # the last step before the fault
            process.after_fault()
        elif now == tick and now != FAULT_AT and not flushed:
            yield from process.minute()
        seen = _observe(out, seen, moments)
        if klass == "capacity" and moments.acted_at and not capacity_sent:
            capacity_sent = True
            pending.append((moments.acted_at + timedelta(seconds=lat["capacity_failure_s"]), "capacity"))
        if not node_fault and moments.repaired_at is None:
            requeued = next((_at(r[0]) for r in moments.records if r[1] == "requeue_job" and r[2] == "executed"),
                            None)
            moments.repaired_at = requeued  # a hang: "repaired" is Medic's requeue done
        restarted = process.follow(box["world"].slurm.cluster(CLUSTER).jobs.get(str(SLURM_ID)))
        if restarted is not None:
            pending.append((max(restarted + timedelta(seconds=lat["job_start_s"]), now + timedelta(seconds=1)),
                            "start"))
        if klass == "capacity" and moments.paged_at is not None and now >= moments.paged_at + timedelta(minutes=5):
            return  # Medic has paged: what follows is a human and EC2 capacity, not the replay
        if process.resumed_at is not None and now >= process.resumed_at + AFTER_RESUME:
            return


def _replacement(world: Any) -> tuple[str, str]:
    """The replacement's new instance id and its NodeLogicalId, from the emulated HyperPod."""
    from sim.hyperpod import logical_id

    for action in reversed(world.hyperpod.actions):
        for old, new in action.get("replacements", {}).items():
            settings = world.hyperpod.settings.get(CLUSTER)
            logical = (settings.logical_ids.get(new) if settings else None) or logical_id(CLUSTER, old)
            return new, logical
    raise RuntimeError("no replacement to fail: Medic did not replace the node")


def _job_driver(lat: dict[str, float], out: list[dict], moments: Moments) -> Iterator[str]:
    """A SageMaker training job fails with a retryable reason; Medic's clone runs ``sagemaker_start_s`` later."""
    from sim.scenarios.generate import CHECKPOINT, training_failed

    delivered = FAULT_AT + timedelta(seconds=lat["eventbridge_delivery_s"])
    failed = training_failed(TRAINING_JOB, delivered, NCCL_FAILURE)
    failed["detail"]["TrainingEndTime"] = failed["detail"]["LastModifiedTime"] = str(int(FAULT_AT.timestamp() * 1000))
    yield from _restarted(CHECKPOINT, failed, lat["sagemaker_start_s"], out, moments)


def _batch_driver(lat: dict[str, float], out: list[dict], moments: Moments) -> Iterator[str]:
    """An AWS Batch multi-node job fails on a terminated host (FAILED: Batch's own retries spent, the same with or
    without Medic); Medic's clone runs ``batch_start_s`` after its SubmitJob: its RUNNING event (Batch publishes
    each state change) gives Medic's incident line its resume."""
    from sim.batch import submitted_job_id
    from sim.scenarios.generate import BATCH_CHECKPOINT, BATCH_JOB, batch_failed, batch_running

    # the event says when Batch failed the job (its time, Medic's incident line's fault_at); it arrives later
    failed = batch_failed(BATCH_JOB, "9b2f6c1e-4a7d-4e3b-8c5f-0d1e2a3b4c5d", FAULT_AT)
    clone = f"{BATCH_JOB}-r1"
    yield from _restarted(BATCH_CHECKPOINT, failed, lat["batch_start_s"], out, moments,
                          delivered=FAULT_AT + timedelta(seconds=lat["eventbridge_delivery_s"]),
                          running=lambda at: batch_running(clone, submitted_job_id(clone), at))


def _bedrock_driver(lat: dict[str, float], out: list[dict], moments: Moments) -> Iterator[str]:
    """A Bedrock customization job fails with a service error after ``bedrock_trained_s`` of training; Medic
    creates it again (from scratch: `allow_restart_from_scratch`). A job is InProgress from its creation (the API's
    first status): its InProgress event, delivered ``eventbridge_delivery_s`` later, gives Medic's incident line its
    resume; the new job then repeats the failed one's training."""
    from sim.scenarios.generate import bedrock_failed, bedrock_job, bedrock_running

    delivered = FAULT_AT + timedelta(seconds=lat["eventbridge_delivery_s"])
    yield _advance(FAULT_AT - timedelta(minutes=1))
    yield _line({"bedrock_job": bedrock_job(BEDROCK_JOB, FAULT_AT - timedelta(seconds=lat["bedrock_trained_s"]))})
    yield _advance(delivered)
    yield json.dumps(bedrock_failed(BEDROCK_JOB, FAULT_AT))
    seen = _observe(out, 0, moments)
    created = next((_at(r[0]) for r in moments.records if r[1] == "restart_job" and r[2] == "executed"), None)
    if created is not None:
        moments.repaired_at = created  # CreateModelCustomizationJob returned: the new job InProgress
        yield _advance(created + timedelta(seconds=lat["eventbridge_delivery_s"]))
        yield json.dumps(bedrock_running(f"{BEDROCK_JOB}-r1", created))
    yield _advance(FAULT_AT + timedelta(minutes=30))
    _observe(out, seen, moments)
    moments.resumed_at = _resumed_in_line(moments, "bedrock_job")


def _resumed_in_line(moments: Moments, kind: str) -> datetime | None:
    """The resume Medic's own incident line of ``kind`` says (None: no line, or no resume in it)."""
    line = next((line for line in moments.incidents if line.get("incident_kind") == kind), None)
    return _at(line["resumed_at"]) if line and line.get("resumed_at") else None


def _restarted(checkpoint: str, failed: dict, start_s: float, out: list[dict], moments: Moments,
               delivered: datetime | None = None, running: Any = None) -> Iterator[str]:
    """A managed job's failure with its checkpoint in S3, delivered to Medic at ``delivered`` (else at its time):
    repaired when Medic's restart call returned (the clone started), resumed ``start_s`` after it; ``running(at)``:
    the clone's own event then, where the service has one."""
    yield _advance(FAULT_AT - timedelta(minutes=1))
    yield _line({"s3_put": checkpoint})
    if delivered is not None:
        yield _advance(delivered)
    yield json.dumps(failed)
    seen = _observe(out, 0, moments)
    started = next((_at(r[0]) for r in moments.records if r[1] == "restart_job" and r[2] == "executed"), None)
    if started is not None:
        moments.repaired_at = started
        moments.resumed_at = started + timedelta(seconds=start_s)
        yield _advance(moments.resumed_at)
        if running is not None:
            yield json.dumps(running(moments.resumed_at))
    else:
        yield _advance(FAULT_AT + timedelta(minutes=30))
    _observe(out, seen, moments)


def replay_class(klass: str, lat: dict[str, float], *, template: dict | None = None,
                 config_path: Path = CONFIG) -> dict:
    """Replay one failure class with Medic; the moments it produced, in seconds from the fault."""
    from sim.replay import run

    moments = Moments(fault_at=FAULT_AT)
    out: list[dict] = []
    if klass == "capacity":  # no capacity: the emulated replacement never completes within the replay
        lat = {**lat, "replace_s": 10 * 86400.0}
    box, capture = _world_capture()
    if klass == "job_retryable":
        lines = _job_driver(lat, out, moments)
    elif klass == "batch_host_terminated":
        lines = _batch_driver(lat, out, moments)
    elif klass == "bedrock_service_error":
        lines = _bedrock_driver(lat, out, moments)
    else:
        lines = _slurm_driver(klass, lat, box, out, moments)
    with capture, _repair_durations(lat):
        result = run(lines, config_path, template=template, out=out.append)
    _observe(out, len(out), moments)
    repeats = {"repeats_s": lat["bedrock_trained_s"]} if klass == "bedrock_service_error" else {}
    return {**moments.seconds(), **repeats, "pages": moments.pages, "errors": result.errors[:3],
            "paged": [{"at_s": round((at - FAULT_AT).total_seconds(), 1), "fault": fault}
                      for at, fault in moments.paged],
            "records": [list(record) for record in moments.records],
            "incidents": [{key: line.get(key) for key in ("incident_kind", "time_to_detect_s", "time_to_act_s",
                                                          "time_to_resume_s", "total_s", "resolved_at",
                                                          "resumed_at")}
                          for line in moments.incidents],
            "node_actions": [{key: action[key] for key in ("action", "successful")}
                             for action in result.node_actions]}


# without Medic: the documented path, from the same latencies --------------------------------------------------------


def slurm_starts(lat: dict[str, float], *, eligible_at: float, node_back_at: float = 0.0) -> float:
    """When Slurm starts a pending job (seconds from the fault): at the first pass of its main scheduling loop
    (every ``slurm_sched_interval_s``, on whole intervals from the fault, as the replay runs it) once the job is
    eligible and its node is back in service."""
    ready = max(eligible_at, node_back_at)
    interval = lat["slurm_sched_interval_s"]
    return math.ceil(ready / interval) * interval


def requeue_hold(lat: dict[str, float]) -> float:
    """A requeued job's BeginTime, after the requeue (job_mgr.c batch_requeue_fini: cred_expire + 1 s)."""
    return lat["slurm_cred_expire_s"] + 1


def without_medic(klass: str, lat: dict[str, float]) -> dict:
    """HyperPod's, Slurm's or SageMaker's own path, component by component (seconds from the fault; None: never)."""
    from sim.hyperpod import GOING_DOWN

    detect = lat["hma_detect_s"]
    if klass in ("gpu_fatal", "gpu_reboot"):
        repair = lat["replace_s"] if klass == "gpu_fatal" else lat["reboot_s"]
        # HyperPod takes the node down as the replay's does (sim.hyperpod.GOING_DOWN after its action); slurmctld
        # requeues the job then, and starts it once held and the node is back (HyperPod returns it to service)
        down = detect + GOING_DOWN.total_seconds()
        restarted = slurm_starts(lat, eligible_at=down + requeue_hold(lat), node_back_at=detect + repair)
        operator = max(detect, lat["operator_unpaged_s"]) + repair  # the node repaired by hand, the job requeued
        return {"path": f"NodeRecovery Automatic: HyperPod {'replaces' if klass == 'gpu_fatal' else 'reboots'} the "
                        "node itself; Slurm requeues the job by itself when the node goes down (JobRequeue=1, its "
                        "default) and starts it once it is eligible and the node is back",
                "detect_s": detect, "act_s": detect, "repaired_s": detect + repair,
                "resumed_s": restarted + lat["job_start_s"],
                "alternatives": [
                    ("with `srun --auto-resume=1`, HyperPod restarts the job once the node is back",
                     detect + repair + lat["job_start_s"]),
                    # Medic acts on clusters whose NodeRecovery is None: there HyperPod only labels the node, nothing
                    # takes it down, and the hung job dies at the NCCL watchdog (FAILED: Slurm requeues no exit code)
                    ("with NodeRecovery None (the clusters Medic acts on), an operator repairs the node and requeues "
                     "the job", slurm_starts(lat, eligible_at=operator + requeue_hold(lat)) + lat["job_start_s"])]}
    if klass == "hang":
        killed = lat["nccl_timeout_s"]
        return {"path": "the NCCL watchdog aborts the job after its timeout; `srun --auto-resume=1` checks the nodes "
                        "and restarts it",
                "detect_s": killed, "act_s": killed, "repaired_s": killed + lat["auto_resume_checks_s"],
                "resumed_s": killed + lat["auto_resume_checks_s"] + lat["job_start_s"],
                "alternatives": [("without auto-resume, the job ends FAILED (Slurm requeues no exit code) and an "
                                  "operator resubmits it",
                                  slurm_starts(lat, eligible_at=killed + lat["operator_unpaged_s"])
                                  + lat["job_start_s"])]}
    if klass == "job_retryable":
        human = lat["operator_unpaged_s"]
        return {"path": "SageMaker retries only `InternalServerError` (RetryStrategy); an operator notices the "
                        "failed job and starts it again from its checkpoint",
                "detect_s": human, "act_s": human, "repaired_s": human, "resumed_s": human + lat["sagemaker_start_s"],
                "alternatives": []}
    if klass == "batch_host_terminated":
        human = lat["operator_unpaged_s"]
        return {"path": "FAILED is final: Batch's own retry strategy is spent; an operator notices the failed job "
                        "and submits it again", "detect_s": human, "act_s": human, "repaired_s": human,
                "resumed_s": human + lat["batch_start_s"], "alternatives": []}
    if klass == "bedrock_service_error":
        human = lat["operator_unpaged_s"]
        return {"path": "Bedrock retries no failed customization job (CreateModelCustomizationJob has no retry "
                        "setting); an operator notices the failed job and creates it again, from scratch",
                "detect_s": human, "act_s": human, "repaired_s": human, "resumed_s": human,
                "repeats_s": lat["bedrock_trained_s"], "alternatives": []}
    if klass == "capacity":
        failed = detect + lat["capacity_failure_s"]
        return {"path": "HyperPod's automatic replacement fails for capacity and nobody is paged; an operator "
                        "finds the node still failed",
                "detect_s": detect, "act_s": detect, "repaired_s": None, "resumed_s": None,
                "human_s": failed + lat["operator_unpaged_s"], "alternatives": []}
    raise ValueError(f"unknown class {klass!r}")


CLASSES = {
    "gpu_fatal": "GPU fatal (`NvidiaErrorTerminate`: replace)",
    "gpu_reboot": "GPU reboot-class (`NvidiaErrorReboot`: reboot)",
    "hang": "Hang (a collective stuck; the process alive)",
    "job_retryable": "Training job crash, retryable reason (an NCCL error)",
    "batch_host_terminated": "AWS Batch multi-node job, its host terminated (after Batch's own retries)",
    "bedrock_service_error": "Bedrock customization job, a service error (a restart starts over: "
                             "`allow_restart_from_scratch`)",
    "capacity": "Replacement failed for capacity",
}


def run(classes: str | None = None, template: dict | None = None, config_path: Path = CONFIG,
        **overrides: float) -> dict:
    lat = latencies(**overrides)
    chosen = [name.strip() for name in classes.split(",")] if classes else list(CLASSES)
    out: dict = {"latencies": {name: {"seconds": lat[name], "kind": entry.kind, "what": entry.what,
                                      "source": entry.source} for name, entry in LATENCIES.items()},
                 "config": str(config_path.relative_to(ROOT)) if config_path.is_relative_to(ROOT) else str(config_path),
                 "classes": {}}
    for klass in chosen:
        with_medic = replay_class(klass, lat, template=template, config_path=config_path)
        if klass == "capacity" and with_medic["paged_s"] is not None:
            with_medic["human_s"] = with_medic["paged_s"] + lat["operator_paged_s"]
        out["classes"][klass] = {"label": CLASSES[klass], "with_medic": with_medic,
                                 "without_medic": without_medic(klass, lat)}
    return out


# the table ------------------------------------------------------------------------------------------------------------


def _min(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds / 60:.1f}"


def _components(entry: dict) -> str:
    return " · ".join(_min(entry.get(key)) for key in ("detect_s", "act_s", "repaired_s"))


def _total(entry: dict) -> str:
    if entry.get("resumed_s") is not None and entry.get("repeats_s"):
        return (f"**{_min(entry['resumed_s'])} min** to a running job, which starts over: "
                f"{entry['repeats_s'] / 3600:g} h of training repeat")
    if entry.get("resumed_s") is not None:
        return f"**{_min(entry['resumed_s'])} min**"
    if entry.get("human_s") is not None:
        return f"a human acts at {_min(entry['human_s'])} min; resumes when capacity returns"
    return "not resumed"


def table(result: dict) -> str:
    lines = ["| Failure class | With Medic: detect · act · repaired (min) | With Medic: fault → resumed | "
             "Without Medic: detect · act · repaired (min) | Without Medic: fault → resumed | "
             "Without Medic: the path |",
             "|---|---|---|---|---|---|"]
    for entry in result["classes"].values():
        medic, own = entry["with_medic"], entry["without_medic"]
        pages = f" ({medic['pages']} page{'s' if medic['pages'] != 1 else ''})" if medic.get("pages") else ""
        path = own["path"]
        for what, seconds in own.get("alternatives", []):
            path += f"; {what}: {_min(seconds)} min"
        lines.append(f"| {entry['label']} | {_components(medic)} | {_total(medic)}{pages} | {_components(own)} | "
                     f"{_total(own)} | {path} |")
    return "\n".join(lines)


# Where the without-Medic paths come from.
PATH_SOURCES = (
    "HyperPod's automatic node recovery and Slurm auto-resume: \"If set to `Automatic`, SageMaker HyperPod reboots "
    "or replaces faulty nodes automatically ... By default, the clusters are set up with Automatic node recovery\"; "
    "with `None`, \"the health monitoring agent will label the instances when a fault is detected, but it will not "
    "automatically initiate any repair\"; auto-resume (`srun --auto-resume=1`) \"restarts the job after the faulty "
    "nodes are replaced\" "
    "(docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-resiliency-slurm-auto-resume.html).",
    "SageMaker's own retry: `RetryStrategy` is \"the retry strategy to use when a training job fails due to an "
    "`InternalServerError`\" (docs.aws.amazon.com/sagemaker/latest/APIReference/API_RetryStrategy.html): another "
    "retryable reason (here an NCCL error) is not retried; a job that failed with `InternalServerError` and set a "
    "`RetryStrategy` needs no Medic.",
)


def sources(result: dict) -> list[str]:
    return [f"`{name}` = {entry['seconds']:g} s ({entry['kind']}): {entry['what']}. {entry['source']}"
            for name, entry in result["latencies"].items()]


def notes(result: dict) -> list[str]:
    """What the table says, class by class, from the numbers (never a fixed text about them)."""
    out: list[str] = []
    classes, lat = result["classes"], {name: entry["seconds"] for name, entry in result["latencies"].items()}
    for klass, entry in classes.items():
        medic, own = entry["with_medic"], entry["without_medic"]
        if medic.get("errors") and klass != "job_retryable":
            out.append(f"**{entry['label']}: the replay reported errors**: {medic['errors'][0]}")
        for page in medic.get("paged", []):
            why = PAGE_REASONS.get(page["fault"], "")
            out.append(f"{entry['label']}: Medic paged at {_min(page['at_s'])} min (`{page['fault']}`){why}.")
        stall = next((line for line in medic.get("incidents", []) if line.get("incident_kind") == "stall"), None)
        if stall and stall.get("time_to_resume_s") is not None and medic.get("resumed_s") is not None:
            said, restarted = stall["time_to_resume_s"], medic["resumed_s"]
            if abs(said - restarted) <= 60:
                out.append(f"{entry['label']}: Medic's own incident line agrees: `time_to_resume_s` {said:g} s (from "
                           f"the probe's last heartbeat, on one-minute metrics) for the {restarted:g} s above.")
            else:
                out.append(f"{entry['label']}: **Medic's own incident line disagrees**: `time_to_resume_s` {said:g} s "
                           f"where the job's first step came at {restarted:g} s. Medic takes the first minute with a "
                           "`Step` datapoint after its requeue as the first step; here that is the hung process's last "
                           "flush (Heartbeat 0, its old step), published after the requeue was queued and before the "
                           "agent's `scontrol requeue` killed the job. The verdict (resumed, on later steps) is right; "
                           "the timeline's resume moment is early: it should be the first minute with Heartbeat > 0. "
                           "(In the replay the probe flushes on the minute, as the alarm evaluates, so the flush "
                           "always falls in that window; in AWS the window is the agent's few seconds to pick the "
                           "command up.)")
        managed = next((line for line in medic.get("incidents", [])
                         if line.get("incident_kind") in ("batch_job", "bedrock_job")), None)
        if managed is not None and medic.get("resumed_s") is not None:
            said = managed.get("time_to_resume_s")
            out.append(f"{entry['label']}: Medic's own incident line (`{managed['incident_kind']}`, written when the "
                       f"clone's state change said it runs) says `time_to_resume_s` "
                       f"{'null' if said is None else format(said, 'g')} s for the {medic['resumed_s']:g} s above"
                       f"{'' if said is not None and abs(said - medic['resumed_s']) <= 60 else ': **they disagree**'}.")
        if medic.get("repeats_s"):
            out.append(f"{entry['label']}: a Bedrock job does not resume from a checkpoint: the new job starts over "
                       f"and repeats the failed one's {medic['repeats_s'] / 3600:g} h of training "
                       "(`bedrock_trained_s`) and its cost, with Medic or without; what Medic saves is the time "
                       "until someone creates it again. Medic does so only on entries with "
                       "`allow_restart_from_scratch: true` (elsewhere it pages); its record and page say what the "
                       "restart repeats.")
        if medic.get("resumed_s") is not None and own.get("resumed_s") is not None:
            gain = own["resumed_s"] - medic["resumed_s"]
            verdict = (f"Medic is {_min(gain)} min faster" if gain >= 30 else
                       f"Medic is {_min(-gain)} min slower" if gain <= -30 else "the same within a minute")
            extra = "".join(f". {what[0].upper()}{what[1:]}: {_min(seconds)} min "
                            f"({_than_medic(seconds - medic['resumed_s'])})"
                            for what, seconds in own.get("alternatives", []))
            out.append(f"{entry['label']}: {_min(medic['resumed_s'])} min with Medic, {_min(own['resumed_s'])} min "
                       f"without ({own['path'].split(';')[0]}): {verdict}{extra}.")
    if "gpu_fatal" in classes and "gpu_reboot" in classes:
        out.append("For node faults the baseline is Slurm's own requeue: with NodeRecovery `Automatic` HyperPod "
                   "repairs the node on the same detection, and slurmctld requeues a batch job whose node goes down "
                   "by itself (its requeue flag: `JobRequeue=1`, Slurm's default), holds it `cred_expire` + 1 s and "
                   "starts it once its node is back: no auto-resume, no Medic needed. Medic matters where that path "
                   "is off: a cluster with NodeRecovery `None` (HyperPod only labels the node; the alternatives in "
                   "the path column), where Medic repairs the node and Slurm again requeues the job itself; a job "
                   "Slurm will not requeue (`--no-requeue`), where Medic pages to resubmit it; and hangs, which no "
                   "node fault reveals.")
        out.append("Medic drained the node before the repair, so Medic resumes it: at the agent's first heartbeat "
                   "(every minute) after HyperPod reports it `Running` (HyperPod sends no event when a node is back, "
                   "save as a cluster event on clusters with continuous provisioning), not at the reconciler's next "
                   "sweep (up to 5 minutes later, as before issue 31). What Medic still loses against Slurm's own "
                   "path: its call comes after the node event's delivery and the agent's drain, so the node is back "
                   "seconds past a whole minute, and the resume comes at the next heartbeat, just after that "
                   "minute's scheduling pass: the job starts at the pass after.")
    out.append("The alarms are not latency inputs: `sim/alarms.py` evaluates the template's alarms as CloudWatch "
               "documents it. A hang is the probe's own verdict (`probe/medic_probe`, run by the replay): no step "
               "for more than max(60 s, 3 x the job's p99 step interval), checked every 10 s and published at high "
               "resolution (`Stalled`); the hang alarm (10-second period, evaluated every 10 s) fires on it, about "
               "80 s after the last step. The stall alarm (one-minute periods, `EvaluationPeriods` = "
               "`DatapointsToAlarm` = `stall_minutes`, missing data breaching) remains for a process that died (it "
               "publishes nothing) or stalls before the probe judges. CloudWatch's ingestion delay is not modelled "
               "(sim/README.md, *Alarms*): it would add seconds to Medic's detection of a hang or a crash.")
    out.append(f"Medic's stall alarm fires `stall_minutes` (here {_job_setting('stall_minutes')}, "
               f"`{result['config']}`) after the last step plus CloudWatch's evaluation, the hang alarm about 80 s "
               "after it: a hang is requeued long before the NCCL watchdog's "
               f"{lat['nccl_timeout_s'] / 60:g} minutes; keep `stall_minutes` below them too, for the hangs the probe "
               "does not judge (its first steps, or a probe older than the hang detection).")
    return out


def _than_medic(difference: float) -> str:
    if abs(difference) < 30:
        return "the same as with Medic, within a minute"
    return f"{_min(abs(difference))} min {'more' if difference > 0 else 'less'} than with Medic"


def _job_setting(name: str) -> Any:
    import yaml

    return yaml.safe_load(CONFIG.read_text())["jobs"][0][name]


PAGE_REASONS = {
    "no_progress": f" — the requeued job had not stepped within `recovery_minutes` ({_job_setting('recovery_minutes')}"
                   ") because its node was still being repaired: a page with nothing to do",
    "stalled": " — the stall alarm's incident: its requeue of a job Slurm had already requeued itself (pending, "
               "held or waiting for its node: `Job is pending execution`) failed and paged, or its all-clear after "
               "that page",
    "capacity_shortfall": " — HyperPod's replacement found no capacity: the page names the node and the failure",
}


def render(result: dict) -> str:
    return "\n".join([table(result), "", *(f"- {line}" for line in notes(result)), "",
                      "Latencies (seconds; `documented` or `assumption`, with the source):", "",
                      *(f"- {line}" for line in sources(result)), "", "The paths without Medic:", "",
                      *(f"- {line}" for line in PATH_SOURCES)])


def block(result: dict) -> str:
    """The recovery section of docs/benchmarks.md (between its own markers): the table, what it says, every
    latency's source."""
    return "\n".join([
        "Fault → training resumed, per failure class (minutes from the fault). **With Medic** is a replay through "
        "`sim` with the latencies below (the node event's delivery, the emulated reboot and replacement, the "
        "alarms, the emulated slurmctld's requeue and scheduling, the Slurm agent, the job's restart), read off the "
        "records; **without Medic** is the documented path of HyperPod, Slurm (its own requeue of a job whose node "
        "goes down: the baseline for node faults), SageMaker, AWS Batch or Bedrock with the same latencies. For a "
        "Bedrock job, resumed is the new job running: it starts over, and the training it repeats is said beside it. "
        "Detect · act · repaired: Medic's first record, its action, the node `Running` again (or the job requeued, "
        "the clone created).", "",
        render(result), "",
        "Reproduce: `python -m bench.recovery` (about a minute), or `--<latency> <seconds>` to replay with another "
        "number, e.g. `python -m bench.recovery --replace-s 3600`; `make bench` rewrites this section."])


if __name__ == "__main__":
    import sys

    def _run(**kwargs: Any) -> dict:
        return run(**kwargs)

    sys.exit(cli(_run, render))
