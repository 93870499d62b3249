"""The real chain: a real training job on a real Slurm, the real agent as its own process, Medic on emulated AWS.

``RealChain`` joins the parts: it submits tests/real/train.py with sbatch, feeds the job's EMF lines to the live
session (sim/live.py) as CloudWatch Logs would, runs the agent (``python -m medic_agent``) against the session's
endpoint and the real Slurm, and reads the job's own log for the ground truth.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sim.live import LiveSession
from tests.agent.local_slurm import LocalSlurm, free_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TRAIN_SCRIPT = HERE / "train.py"
BATCH_SCRIPT = HERE / "train.sbatch"
CONFIG = HERE / "medic.real.yaml"
CLUSTER = "pretrain-slurm"  # the cluster's name in medic.real.yaml (the real slurmctld's ClusterName is its own)
JOB = "tiny-gloo"
TORCH_PYTHON = os.environ.get("MEDIC_TORCH_PYTHON", "/usr/bin/python3")  # the interpreter with Debian's python3-torch

STEP = re.compile(r"^\[rank 0\] step (\d+) ")
CHECKPOINT = re.compile(r"^\[rank 0\] checkpoint step=(\d+)$")
RESUMED = re.compile(r"^\[rank 0\] resumed from checkpoint step=(\d+) \(restart (\d+)\)$")
RESTART = re.compile(r"^batch: job \d+ restart (\d+) ")
HANG = re.compile(r"^\[rank 1\] hang: sleeping before the all-reduce of step (\d+)$")


def torch_missing() -> str | None:
    """Why the training job cannot run here (None: it can)."""
    try:
        done = subprocess.run([TORCH_PYTHON, "-c", "import torch, torch.distributed as d; "
                               "assert d.is_gloo_available(); print(torch.__version__)"],
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{TORCH_PYTHON} cannot run: {error}"
    if done.returncode != 0:
        return f"{TORCH_PYTHON} has no torch with gloo (apt-get install python3-torch: run .ci/install-torch.sh)"
    return None


@dataclass
class Truth:
    """What the job's own log says about its run before the restart and the run after it."""

    hang_step: int | None = None  # the step rank 1 never all-reduced
    last_step: int | None = None  # rank 0's last step trained before the restart
    checkpoint: int | None = None  # its last checkpoint before the restart
    resumed_from: list[tuple[int, int]] = field(default_factory=list)  # (checkpoint step, restart count) per resume

    @property
    def lost_steps(self) -> int | None:
        if self.last_step is None or self.checkpoint is None:
            return None
        return self.last_step - self.checkpoint


class RealChain:
    def __init__(self, slurm: LocalSlurm, work: Path) -> None:
        self.slurm = slurm
        self.work = work
        self.log = work / "train.log"
        self.flag = work / "hang"
        self.checkpoints = work / "checkpoints"
        self.spy_log = work / "agent-slurm-calls.log"
        self.agent_out = work / "agent.log"
        self.live: LiveSession | None = None
        self.job_id = ""
        self.agent: subprocess.Popen | None = None
        self._offset = 0
        self._partial = b""
        self.ingested = 0  # EMF lines fed to the session
        self.timeline: list[tuple[float, str]] = []  # (wall seconds since start, what happened)
        self._started = time.monotonic()

    def note(self, what: str) -> None:
        self.timeline.append((round(time.monotonic() - self._started, 1), what))

    # the job
    def submit(self, requeue: bool = True, probe_period: float = 2.0, checkpoint_every: int = 50) -> str:
        """sbatch the training job: 2 tasks, its output appended across restarts (sbatch --open-mode=append: by default
        slurmstepd truncates the output file at every start, a requeued one included: src/slurmd/slurmstepd/io.c
        io_get_file_flags, O_TRUNC unless JobFileAppend or --open-mode=append)."""
        self.work.mkdir(parents=True, exist_ok=True)
        arguments = (f"--job {JOB} --cluster {CLUSTER} --checkpoint-dir {self.checkpoints} "
                     f"--checkpoint-every {checkpoint_every} --hang-flag {self.flag} --probe-period {probe_period:g}")
        self.job_id = self.slurm.submit_script(
            BATCH_SCRIPT, "--requeue" if requeue else "--no-requeue", f"--job-name={JOB}", "--ntasks=2",
            "--cpus-per-task=1", "--open-mode=append", f"--output={self.log}",
            env={"TRAIN_PYTHON": TORCH_PYTHON, "TRAIN_SCRIPT": str(TRAIN_SCRIPT), "PROBE_PATH": str(ROOT / "probe"),
                 "MASTER_PORT_BASE": str(free_port()), "TRAIN_ARGS": arguments})
        self.note(f"sbatch {'--requeue' if requeue else '--no-requeue'}: job {self.job_id}")
        return self.job_id

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines() if self.log.exists() else []

    def wait_for_first_metrics(self, timeout: float) -> None:
        """Until the job's probe has written its first EMF line (torch loaded, the ranks met, a step trained)."""
        deadline = time.monotonic() + timeout
        while not any('"_aws"' in line for line in self.lines()):
            if time.monotonic() > deadline:
                raise AssertionError(f"the job wrote no metrics in {timeout:g}s: {self.slurm.job(self.job_id)}\n"
                                     + "\n".join(self.lines()[-20:]) + "\n" + self.slurm.logs(10))
            time.sleep(0.2)
        self.note("the probe's first EMF line")

    def hang(self) -> None:
        self.flag.touch()
        self.note("hang injected (flag file)")

    def truth(self) -> Truth:
        truth, restarted = Truth(), False
        for line in self.lines():
            if (match := RESTART.match(line)) and int(match.group(1)) > 0:
                restarted = True
            elif (match := HANG.match(line)) and not restarted:
                truth.hang_step = int(match.group(1))
            elif (match := STEP.match(line)) and not restarted:
                truth.last_step = int(match.group(1))
            elif (match := CHECKPOINT.match(line)) and not restarted:
                truth.checkpoint = int(match.group(1))
            elif match := RESUMED.match(line):
                truth.resumed_from.append((int(match.group(1)), int(match.group(2))))
        return truth

    # the session
    def feed_metrics(self) -> int:
        """The job's new EMF lines to the session, as CloudWatch Logs ingests a log stream."""
        if not self.log.exists():
            return 0
        with self.log.open("rb") as file:
            file.seek(self._offset)
            chunk = file.read()
        self._offset += len(chunk)
        *complete, self._partial = (self._partial + chunk).split(b"\n")
        fed = 0
        for raw in complete:
            line = raw.decode(errors="replace")
            if line.startswith('{"_aws"'):
                self.live.ingest_emf(line)
                fed += 1
            elif RESTART.match(line) or RESUMED.match(line) or HANG.match(line) or line.startswith("slurmstepd"):
                self.note(f"job: {line.strip()[:120]}")
        self.ingested += fed
        return fed

    def pump(self, until: Callable[[], bool], timeout: float, what: str, every: float = 0.2) -> None:
        """Metrics in, time on, until ``until()`` (checked after each tick) or ``timeout`` wall seconds. What Medic
        says meanwhile (alarms, records, pages, the in-process agent's Slurm commands) goes on the timeline."""
        deadline = time.monotonic() + timeout
        while True:
            self.feed_metrics()
            seen = len(self.live.result.lines)
            self.live.tick()
            for line in self.live.result.lines[seen:]:
                self._note_line(line)
            self._agent_alive()
            if until():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"not {what} after {timeout:g}s of wall time (emulated clock "
                                     f"{self.live.now:%H:%M:%S})\n" + self.report())
            time.sleep(every)

    def _note_line(self, line: dict) -> None:
        at = line.get("timestamp", "")[11:19]
        if line["kind"] == "alarm":
            self.note(f"[{at}] alarm {line['alarm']} -> {line['to']}")
        elif line["kind"] == "record" and line.get("job") == JOB:
            extra = f" (lost_steps {line['lost_steps']})" if "lost_steps" in line else ""
            self.note(f"[{at}] record {line['fault']} {line['action']} {line['outcome']}{extra}")
        elif line["kind"] == "incident" and line.get("job") == JOB:
            self.note(f"[{self.live.now:%H:%M:%S}] incident {line.get('incident_kind')} lost_steps "
                      f"{line.get('lost_steps')}")
        elif line["kind"] == "page":
            self.note(f"[{self.live.now:%H:%M:%S}] page: {line.get('subject', '')}")
        elif line["kind"] == "slurm_command":
            self.note(f"[{self.live.now:%H:%M:%S}] session agent ran: {' '.join(line['argv'])}")

    # the agent, as its own process
    def start_agent(self) -> None:
        """``python -m medic_agent`` against the session's endpoint and the real Slurm (through a spy that logs each
        argv, then runs the real program). It heartbeats every emulated minute (60/factor wall seconds)."""
        spy = self.work / "bin"
        spy.mkdir(parents=True, exist_ok=True)
        for program in ("scontrol", "squeue", "sacct"):
            real = Path(self.slurm.bin_dir) / program
            script = spy / program
            script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"{program} $*\" >> '{self.spy_log}'\n"
                              f"exec '{real}' \"$@\"\n")
            script.chmod(0o755)
        env = {key: value for key, value in self.slurm.env.items() if not key.startswith("AWS_")}
        env.update({"PYTHONPATH": str(ROOT / "agent"), "AWS_ENDPOINT_URL": self.live.endpoint,
                    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                    "AWS_EC2_METADATA_DISABLED": "true", "PYTHONUNBUFFERED": "1"})
        argv = [sys.executable, "-m", "medic_agent", "--cluster", CLUSTER,
                "--queue-url", self.live.agent_queue(CLUSTER), "--table", self.live.table,
                "--region", self.live.region, "--state-file", str(self.work / "agent-state.json"),
                "--slurm-bin", str(spy), "--host", self.slurm.host,
                "--heartbeat-seconds", f"{60 / self.live.clock.factor:g}", "--wait-seconds", "1",
                # the queue's clock is the emulated one: 900 emulated seconds hold a message while it is handled
                "--visibility-timeout", "900"]
        with self.agent_out.open("wb") as out:
            self.agent = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=self.work)
        self.note(f"agent started (pid {self.agent.pid})")

    def _agent_alive(self) -> None:
        if self.agent is not None and self.agent.poll() is not None:
            raise AssertionError(f"the agent exited {self.agent.returncode}\n{self.agent_out.read_text()[-3000:]}")

    def stop_agent(self) -> None:
        if self.agent is not None and self.agent.poll() is None:
            self.agent.terminate()
            try:
                self.agent.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait(timeout=5)

    def agent_calls(self) -> list[str]:
        """What the agent process ran on Slurm, in order, its role checks (`scontrol ping`) left out."""
        calls = self.spy_log.read_text().splitlines() if self.spy_log.exists() else []
        return [call for call in calls if call != "scontrol ping"]

    # what Medic said
    def records(self, **match: str) -> list[dict]:
        return [line for line in self.live.result.records if all(line.get(k) == v for k, v in match.items())]

    def report(self) -> str:
        interesting = [{key: line.get(key) for key in ("kind", "timestamp", "fault", "action", "outcome", "alarm",
                                                       "to", "reason", "lost_steps", "argv") if key in line}
                       for line in self.live.result.lines if line["kind"] != "training_job"]
        return "\n".join(["--- Medic", *(json.dumps(line) for line in interesting[-40:]),
                          "--- errors", *self.live.result.errors[-10:],
                          "--- agent", self.agent_out.read_text()[-2000:] if self.agent_out.exists() else "",
                          "--- agent's Slurm calls", *self.agent_calls(),
                          "--- job", str(self.slurm.job(self.job_id)) if self.job_id else "",
                          *[line for line in self.lines() if '"_aws"' not in line and " step " not in line][-30:],
                          "--- timeline", *(f"{at:7.1f}s {what}" for at, what in self.timeline)])
