"""A real single-node Slurm on localhost, for the agent tests: munged, slurmctld and slurmd from Debian's packages.

Everything lives in one temporary directory (config, munge key and socket, state, spool, logs) and
uses free ports, so it neither needs nor disturbs a Slurm already configured on the machine. Every
Slurm command is pointed at it through SLURM_CONF.

The node is named in HyperPod's form (ip-a-b-c-d, with NodeAddr 127.0.0.1), so the agent's default,
strict node-name check is what the tests exercise.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("scontrol", "squeue", "sbatch", "sinfo", "scancel")
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
NODE = "ip-10-1-2-3"
CLUSTER = "medic-test"
START_TIMEOUT = 60.0


def which(program: str) -> str | None:
    return shutil.which(program, path=SEARCH_PATH)


def missing_binaries() -> list[str]:
    return [program for program in (*DAEMONS, *CLIENTS) if which(program) is None]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SlurmStartError(RuntimeError):
    pass


class LocalSlurm:
    def __init__(self, backup_hosts: tuple[str, ...] = (), settings: dict[str, str] | None = None) -> None:
        """``backup_hosts``: more SlurmctldHost lines after this machine's, at 127.0.0.2, .3, ... Nothing runs
        there but this machine's slurmctld answers on every loopback address, so `scontrol ping` prints a real
        multi-controller answer with every controller UP (and this host, the first, in charge).
        ``settings``: slurm.conf parameters set (or added) over the defaults below; ``AuthInfo`` is appended to the
        munge socket's (e.g. ``{"AuthInfo": "cred_expire=5", "SchedulerParameters": "sched_interval=1"}``)."""
        self.backup_hosts = backup_hosts
        self.settings = dict(settings or {})
        # Not under pytest's tmp_path: munged insists every directory on its socket's path is searchable by all,
        # and a Unix socket path must stay under ~100 characters.
        self.root = Path(tempfile.mkdtemp(prefix="medic-slurm-", dir="/tmp"))
        self.root.chmod(0o755)
        self.conf = self.root / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket"
        self.node = NODE
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "PATH": SEARCH_PATH}
        self.bin_dir = str(Path(which("scontrol") or "/usr/bin/scontrol").parent)
        self.processes: dict[str, subprocess.Popen] = {}

    # --- lifecycle

    def start(self) -> LocalSlurm:
        try:
            self._write_config()
            self._start("munged", [which("munged"), "--foreground", f"--socket={self.munge_socket}",
                                   f"--key-file={self.root / 'munge-key' / 'munge.key'}",
                                   f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                                   f"--log-file={self.root / 'log' / 'munged.log'}",
                                   f"--seed-file={self.root / 'munge' / 'munged.seed'}"])
            self._wait(lambda: self.munge_socket.exists(), "munged to create its socket")
            self._start("slurmctld", [which("slurmctld"), "-D", "-i"])
            self._wait(lambda: self.run("scontrol", "ping", check=False).stdout.count("UP") > 0,
                       "slurmctld to answer")
            self._start("slurmd", [which("slurmd"), "-D", "-N", self.node])
            self._wait(lambda: self.node_state() == "idle", f"node {self.node} to be idle")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            try:
                self.run("scancel", "--quiet", "--partition=debug", check=False, timeout=10)
            except subprocess.TimeoutExpired:
                # A courtesy only: the jobs end with slurmd below. scancel can outwait its timeout when the
                # machine is busy (two test workers) or it looks for a listed backup controller that never ran.
                pass
        for name in reversed(DAEMONS):
            process = self.processes.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        shutil.rmtree(self.root, ignore_errors=True)

    def _write_config(self) -> None:
        for name in ("munge", "state", "spool", "log", "jobs"):
            (self.root / name).mkdir(mode=0o755)
        key_dir = self.root / "munge-key"
        key_dir.mkdir(mode=0o700)
        key = key_dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        host = self.host = socket.gethostname().split(".")[0]
        cpus = max(os.cpu_count() or 1, 4)
        lines = [
            f"ClusterName={CLUSTER}",
            f"SlurmctldHost={host}(127.0.0.1)",
            *(f"SlurmctldHost={name}(127.0.0.{offset})" for offset, name in enumerate(self.backup_hosts, start=2)),
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self.root / 'state'}",
            f"SlurmdSpoolDir={self.root / 'spool'}",
            f"SlurmctldPidFile={self.root / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.root / 'slurmd.pid'}",
            f"SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={self.root / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "MpiDefault=none",
            "MailProg=/bin/true",
            "ReturnToService=2",
            "JobRequeue=1",
            "KillWait=1",
            "MinJobAge=5",
            "SlurmdTimeout=300",
            # The CPU count is the config's, not the machine's: the tests need a few jobs running at once.
            "SlurmdParameters=config_overrides",
            f"NodeName={self.node} NodeHostname=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]
        for key, value in self.settings.items():
            at = next((index for index, line in enumerate(lines) if line.startswith(f"{key}=")), None)
            if key == "AuthInfo" and at is not None:
                lines[at] += f",{value}"
            elif at is not None:
                lines[at] = f"{key}={value}"
            else:
                lines.insert(-2, f"{key}={value}")  # before the node and partition lines
        self.conf.write_text("\n".join([*lines, ""]))

    def _start(self, name: str, argv: list[str | None]) -> None:
        log = open(self.root / "log" / f"{name}.out", "wb")  # noqa: SIM115 - owned by the process
        self.processes[name] = subprocess.Popen([str(arg) for arg in argv], env=self.env, stdout=log,
                                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                cwd=self.root)
        log.close()

    def _wait(self, ready, what: str, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise SlurmStartError(f"{name} exited with {process.returncode} while waiting for {what}\n"
                                          + self.logs())
            try:
                if ready():
                    return
            except (subprocess.SubprocessError, OSError):
                pass
            time.sleep(0.2)
        raise SlurmStartError(f"timed out after {timeout:g}s waiting for {what}\n" + self.logs())

    def logs(self, lines: int = 30) -> str:
        out = []
        for path in sorted((self.root / "log").glob("*")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(out)

    # --- talking to it

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run([which(argv[0]) or argv[0], *argv[1:]], env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=check, cwd=self.root)

    def node_state(self) -> str:
        """The node's State from scontrol, lower case: idle, mixed, idle+fail, allocated+completing, ..."""
        line = self.run("scontrol", "--oneliner", "show", "node", self.node, check=False).stdout
        match = re.search(r"\bState=(\S+)", line)
        return match.group(1).lower() if match else ""

    def node_reason(self) -> str:
        """The node's Reason, without the `[user@time]` Slurm appends."""
        line = self.run("scontrol", "--oneliner", "show", "node", self.node).stdout
        match = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?\s*$", line)
        return match.group(1) if match else ""

    def submit(self, name: str, seconds: int = 300, hold: bool = False) -> str:
        """sbatch a batch job; ``hold``: submitted held (sbatch --hold: PENDING until released)."""
        out = self.run("sbatch", "--parsable", "--requeue", *(["--hold"] if hold else []), f"--job-name={name}",
                       "--output=/dev/null", f"--chdir={self.root / 'jobs'}", "--ntasks=1", "--cpus-per-task=1",
                       f"--wrap=sleep {seconds}").stdout
        return out.strip().split(";")[0]

    def submit_script(self, script: Path, *options: str, env: dict[str, str] | None = None) -> str:
        """sbatch a batch script with ``options`` (e.g. --requeue, --ntasks=2, --output=...), ``env`` added to the
        environment it is submitted from (sbatch exports it to the job: --export=ALL, sbatch's default)."""
        out = self.run_env({**self.env, **(env or {})}, "sbatch", "--parsable", f"--chdir={self.root / 'jobs'}",
                           *options, str(script)).stdout
        return out.strip().split(";")[0]

    def run_env(self, env: dict[str, str], *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run([which(argv[0]) or argv[0], *argv[1:]], env=env, capture_output=True, text=True,
                              timeout=timeout, check=True, cwd=self.root)

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` as a dict (JobState, Restarts, ...)."""
        line = self.run("scontrol", "--oneliner", "show", "job", job_id).stdout
        return dict(re.findall(r"(\w+)=(\S*)", line))

    def wait_for_job_state(self, job_id: str, state: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.job(job_id).get("JobState") == state:
                return
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} not {state} after {timeout:g}s: {self.job(job_id)}")

    def reset(self) -> None:
        """Between tests: no jobs, node back in service."""
        self.run("scancel", "--quiet", "--partition=debug", check=False)
        self._settle(lambda state: "completing" not in state, "jobs to finish")
        state = self.node_state()
        if any(flag in state for flag in ("fail", "drain", "down")):
            self.run("scontrol", "update", f"NodeName={self.node}", "State=RESUME", check=False)
        self._settle(lambda state: state == "idle", "the node to be idle")

    def _settle(self, node_ok, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            jobs = self.run("squeue", "--noheader", "--format=%i %T", check=False)
            state = self.node_state()
            if jobs.returncode == 0 and not jobs.stdout.strip() and node_ok(state):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"Slurm did not settle ({what}): node {state!r}, squeue {jobs.returncode} "
                                     f"{jobs.stdout!r} {jobs.stderr!r}\n"
                                     + self.run("scontrol", "--oneliner", "show", "node", check=False).stdout
                                     + self.run("sinfo", "--Node", "--format=%N %T %C", check=False).stdout
                                     + self.logs(10))
            time.sleep(0.2)
