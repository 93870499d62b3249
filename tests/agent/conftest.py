"""Agent tests. The agent package lives in agent/ (it is installed on clusters on its own): put it on the path.

Fixtures for the tests against a real Slurm: one single-node Slurm for the session (started here,
stopped at the end), one emulated AWS (moto's server, so the agent runs as its own process), and
per test a fresh queue, ledger table, state file and a spying Slurm bin directory.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

AGENT_DIR = Path(__file__).resolve().parents[2] / "agent"
if str(AGENT_DIR) not in sys.path:
    sys.path.insert(0, str(AGENT_DIR))

from tests.agent.fakes import create_ledger, issue, queue_depth, result_of, send  # noqa: E402
from tests.agent.local_slurm import LocalSlurm, missing_binaries  # noqa: E402

REGION = "us-east-1"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> None:
    """In CI the real-Slurm tests must run: a missing prerequisite fails them. Elsewhere it skips them."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set, so the agent's real-Slurm tests may not skip)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def local_slurm() -> Iterator[LocalSlurm]:
    missing = missing_binaries()
    if missing:
        unavailable(f"Slurm is not installed (missing {', '.join(missing)}): run .ci/install-slurm.sh")
    if os.geteuid() != 0:
        unavailable("starting munged, slurmctld and slurmd for the agent tests needs root")
    slurm = LocalSlurm().start()
    yield slurm
    slurm.stop()


@pytest.fixture(scope="session")
def local_slurm_two_heads() -> Iterator[LocalSlurm]:
    """A second Slurm whose slurm.conf lists two head nodes: this machine, then ip-10-1-0-11."""
    missing = missing_binaries()
    if missing:
        unavailable(f"Slurm is not installed (missing {', '.join(missing)}): run .ci/install-slurm.sh")
    if os.geteuid() != 0:
        unavailable("starting munged, slurmctld and slurmd for the agent tests needs root")
    slurm = LocalSlurm(backup_hosts=("ip-10-1-0-11",)).start()
    yield slurm
    slurm.stop()


@pytest.fixture
def two_heads(local_slurm_two_heads: LocalSlurm, moto_endpoint: str, tmp_path: Path) -> Iterator[Cluster]:
    yield Cluster(local_slurm_two_heads, moto_endpoint, tmp_path)
    local_slurm_two_heads.reset()


@pytest.fixture
def slurm(local_slurm: LocalSlurm) -> Iterator[LocalSlurm]:
    yield local_slurm
    local_slurm.reset()


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@dataclass
class AgentRun:
    returncode: int
    lines: list[dict]
    stderr: str

    def messages(self) -> list[str]:
        return [line.get("message", "") for line in self.lines]


class Cluster:
    """What a test sees: the real Slurm, the emulated queue and ledger, and the agent as a process."""

    name = "medic-test"

    def __init__(self, slurm: LocalSlurm, endpoint: str, tmp_path: Path) -> None:
        import boto3

        self.slurm = slurm
        self.endpoint = endpoint
        self.tmp_path = tmp_path
        session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
        self.sqs = session.client("sqs", endpoint_url=endpoint)
        self.dynamodb = session.client("dynamodb", endpoint_url=endpoint)
        suffix = uuid.uuid4().hex[:8]
        self.queue_url = self.sqs.create_queue(QueueName=f"medic-agent-{suffix}")["QueueUrl"]
        self.table = create_ledger(self.dynamodb, f"medic-ledger-{suffix}")
        self.state_file = tmp_path / "state" / "state.json"
        self.spy_log = tmp_path / "slurm-calls.log"
        self.spy_bin = self._spy_bin_dir(tmp_path / "bin")

    def _spy_bin_dir(self, directory: Path) -> Path:
        """scontrol, squeue and sacct that log their argv to spy_log, then exec the real ones."""
        directory.mkdir()
        for program in ("scontrol", "squeue", "sacct"):
            real = Path(self.slurm.bin_dir) / program
            script = directory / program
            script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"{program} $*\" >> '{self.spy_log}'\n"
                              f"exec '{real}' \"$@\"\n")
            script.chmod(0o755)
        return directory

    def command(self, kind: str = "requeue_job", **fields) -> dict:
        return {"command_id": str(uuid.uuid4()), "cluster": self.name, "kind": kind, "incident": "job:test",
                "issued_at": "2026-12-02T18:00:00+00:00", **fields}

    def send(self, body: dict | str, issued: bool = True) -> None:
        """On the queue, with Medic's record of issuing it in the ledger (as Medic queues) unless ``issued`` is
        False or it is not a command at all."""
        if issued and isinstance(body, dict) and {"command_id", "cluster", "kind", "incident"} <= set(body):
            issue(self.dynamodb, self.table, body)
        send(self.sqs, self.queue_url, body)

    def env(self) -> dict[str, str]:
        env = {key: value for key, value in self.slurm.env.items() if not key.startswith("AWS_")}
        return {**env, "PYTHONPATH": str(AGENT_DIR), "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_EC2_METADATA_DISABLED": "true", "PYTHONUNBUFFERED": "1"}

    def agent_argv(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "medic_agent", "--cluster", self.name, "--queue-url", self.queue_url,
                "--table", self.table, "--region", REGION, "--state-file", str(self.state_file),
                "--slurm-bin", str(self.spy_bin), *extra]

    def run_agent(self, *extra: str) -> AgentRun:
        """One receive cycle of the real agent, as its own process (a new process each time: a restart)."""
        done = subprocess.run(self.agent_argv("--once", "--wait-seconds", "1", *extra), env=self.env(),
                              capture_output=True, text=True, timeout=60)
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert done.returncode == 0, f"agent exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        return AgentRun(done.returncode, lines, done.stderr)

    def slurm_calls(self, pings: bool = False) -> list[str]:
        """What the agent ran, in order; the role checks (`scontrol ping`) only with ``pings``."""
        calls = self.spy_log.read_text().splitlines() if self.spy_log.exists() else []
        return [call for call in calls if pings or call != "scontrol ping"]

    def result(self, body: dict) -> dict | None:
        return result_of(self.dynamodb, self.table, self.name, body["command_id"])

    def queue_depth(self) -> int:
        return queue_depth(self.sqs, self.queue_url)


@pytest.fixture
def cluster(slurm: LocalSlurm, moto_endpoint: str, tmp_path: Path) -> Cluster:
    return Cluster(slurm, moto_endpoint, tmp_path)
