"""agent/install.sh, with fakes at its edges: a resource_config.json like HyperPod's, a python whose
`-m venv` makes a recording pip, and a recording systemctl. Nothing is installed on this machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

AGENT_DIR = Path(__file__).resolve().parents[2] / "agent"
INSTALL = AGENT_DIR / "install.sh"
CONTROLLER_IP, WORKER_IP = "10.1.0.5", "10.1.0.6"
ARGS = ["--controller-group", "controller-machine", "--cluster", "pretrain-slurm",
        "--queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/medic-agent-pretrain-slurm",
        "--table", "medic-ledger", "--region", "us-east-1"]


class Node:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls = root / "calls.log"
        self.prefix = root / "opt" / "medic-agent"
        self.env_file = root / "etc" / "medic-agent.env"
        self.unit_dir = root / "etc" / "systemd" / "system"
        (root / "etc").mkdir()
        self.resource_config = root / "resource_config.json"
        self.resource_config.write_text(json.dumps({
            "ClusterConfig": {"ClusterName": "pretrain-slurm"},
            "InstanceGroups": [
                {"Name": "controller-machine", "Instances": [{"CustomerIpAddress": CONTROLLER_IP,
                                                              "InstanceName": "controller-machine-1"}]},
                {"Name": "worker-group-1", "Instances": [{"CustomerIpAddress": WORKER_IP}]},
            ],
        }))
        bin_dir = root / "bin"
        bin_dir.mkdir()
        self._script(bin_dir / "systemctl", f'echo "systemctl $*" >> "{self.calls}"\n')
        self.python = self._script(bin_dir / "python3", f"""
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin"
    printf '#!/bin/sh\\necho "pip $*" >> "{self.calls}"\\n' > "$3/bin/pip"
    chmod +x "$3/bin/pip"
    echo "venv $3" >> "{self.calls}"
    exit 0
fi
exec "{sys.executable}" "$@"
""")
        self.path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"

    @staticmethod
    def _script(path: Path, body: str) -> Path:
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
        return path

    def install(self, *args: str, address: str = CONTROLLER_IP) -> subprocess.CompletedProcess:
        argv = ["bash", str(INSTALL), *args, "--node-address", address, "--resource-config", str(self.resource_config),
                "--prefix", str(self.prefix), "--env-file", str(self.env_file), "--unit-dir", str(self.unit_dir),
                "--python", str(self.python)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**os.environ, "PATH": self.path})

    def recorded(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def test_on_a_worker_it_does_nothing(node):
    done = node.install(*ARGS, address=WORKER_IP)
    assert done.returncode == 0, done.stderr
    assert ("instance group 'worker-group-1', not the controller group 'controller-machine': nothing to do"
            in done.stderr)
    assert node.recorded() == []
    assert not node.env_file.exists() and not node.unit_dir.exists() and not node.prefix.exists()


def test_on_the_controller_it_installs_configures_and_starts(node):
    done = node.install(*ARGS)
    assert done.returncode == 0, done.stderr
    assert node.recorded() == [
        f"venv {node.prefix}",
        f"pip install --quiet --upgrade --disable-pip-version-check --require-hashes -r {AGENT_DIR}/requirements.txt",
        f"pip install --quiet --upgrade --disable-pip-version-check --no-deps --no-build-isolation {AGENT_DIR}",
        "systemctl daemon-reload", "systemctl enable medic-agent.service", "systemctl restart medic-agent.service",
    ]
    assert node.env_file.read_text().splitlines() == [
        "# Written by medic-agent install.sh",
        "MEDIC_CLUSTER='pretrain-slurm'",
        "MEDIC_QUEUE_URL='https://sqs.us-east-1.amazonaws.com/123456789012/medic-agent-pretrain-slurm'",
        "MEDIC_TABLE='medic-ledger'",
        "MEDIC_REGION='us-east-1'",
        "AWS_REGION='us-east-1'",
    ]
    assert node.env_file.stat().st_mode & 0o777 == 0o600
    unit = (node.unit_dir / "medic-agent.service").read_text()
    assert f"ExecStart={node.prefix}/bin/medic-agent\n" in unit
    assert f"EnvironmentFile={node.env_file}\n" in unit
    assert "Restart=always\n" in unit


def test_no_start_enables_without_starting(node):
    done = node.install(*ARGS, "--no-start")
    assert done.returncode == 0, done.stderr
    assert "systemctl enable medic-agent.service" in node.recorded()
    assert "systemctl restart medic-agent.service" not in node.recorded()


def test_offline_install_from_a_wheelhouse(node, tmp_path):
    done = node.install(*ARGS, "--wheelhouse", str(tmp_path / "wheels"))
    assert done.returncode == 0, done.stderr
    offline = f"pip install --quiet --upgrade --disable-pip-version-check --no-index --find-links {tmp_path / 'wheels'}"
    assert [line for line in node.recorded() if line.startswith("pip")] == [
        f"{offline} --require-hashes -r {AGENT_DIR}/requirements.txt",
        f"{offline} --no-deps --no-build-isolation {AGENT_DIR}",
    ]


@pytest.mark.parametrize("change", [
    ("--cluster", "x'; rm -rf / #"),
    ("--cluster", "a b"),
    ("--queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/q\nMEDIC_CLUSTER=other"),
    ("--queue-url", "http://169.254.169.254/latest/meta-data"),
    ("--table", "t;reboot"),
    ("--region", "us-east-1'"),
    ("--controller-group", "$(reboot)"),
    ("--node-pattern", "ip-.*"),  # gone with fail_node: an unknown option
])
def test_hostile_or_malformed_values_are_refused_before_anything_happens(node, change):
    option, value = change
    args = list(ARGS)
    if option in args:
        args[args.index(option) + 1] = value
    else:
        args += [option, value]
    done = node.install(*args)
    assert done.returncode == 2
    assert option in done.stderr
    assert node.recorded() == [] and not node.env_file.exists()


def test_missing_required_option(node):
    done = node.install(*ARGS[2:])
    assert done.returncode == 2 and "--controller-group is required" in done.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_shellcheck_clean():
    done = subprocess.run(["shellcheck", str(INSTALL), str(AGENT_DIR.parent / ".ci" / "install-slurm.sh")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


# --- issue 12 item 8: the installer pins what it installs

REQUIREMENTS = AGENT_DIR / "requirements.txt"


def pinned() -> dict[str, tuple[str, list[str]]]:
    """requirements.txt → {name: (version, hashes)}; fails on any line that is not `name==version --hash=...`."""
    logical = REQUIREMENTS.read_text().replace("\\\n", " ")
    pins: dict[str, tuple[str, list[str]]] = {}
    for line in logical.splitlines():
        line = line.split("#", 1)[0].strip()  # comments; a `--hash=sha256:` value holds no `#`
        if not line:
            continue
        requirement, *options = line.split()
        name, separator, version = requirement.partition("==")
        assert separator and version, f"not pinned to one version: {line}"
        hashes = [option.removeprefix("--hash=sha256:") for option in options]
        assert hashes and all(len(h) == 64 and all(c in "0123456789abcdef" for c in h) for h in hashes), line
        pins[name.lower()] = (version, hashes)
    return pins


def test_every_dependency_is_pinned_to_one_version_with_its_hash():
    # Given the agent's requirements.txt / Then each line is name==version with sha256 hashes
    pins = pinned()
    # And it holds the agent's whole dependency tree, and the build backend the installer builds it with
    assert set(pins) == {"boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3",
                         "setuptools"}


def test_the_pins_satisfy_the_agents_declared_requirements():
    from packaging.requirements import Requirement
    from packaging.version import Version

    declared = tomllib.loads((AGENT_DIR / "pyproject.toml").read_text())
    pins = pinned()
    for text in [*declared["project"]["dependencies"], *declared["build-system"]["requires"]]:
        requirement = Requirement(text)
        assert Version(pins[requirement.name.lower()][0]) in requirement.specifier, text


def test_a_substituted_package_is_refused_by_its_hash(tmp_path):
    # Given a wheelhouse whose boto3 wheel is not the one pinned (same name and version, other bytes)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    version = pinned()["boto3"][0]
    (wheels / f"boto3-{version}-py3-none-any.whl").write_bytes(b"not the real wheel")
    # When pip installs the requirements from it, as install.sh does offline
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--quiet",
                           "--no-index", "--find-links", str(wheels), "--no-deps", "--require-hashes",
                           "-r", str(REQUIREMENTS)], capture_output=True, text=True, timeout=120)
    # Then pip refuses (it never installs a file whose hash is not pinned)
    assert done.returncode != 0
    assert "hash" in done.stderr.lower() or "no matching distribution" in done.stderr.lower(), done.stderr


@pytest.mark.skipif(os.environ.get("MEDIC_PYPI_TESTS") != "1", reason="installs from PyPI: set MEDIC_PYPI_TESTS=1")
def test_the_pinned_requirements_install_from_pypi(tmp_path):
    # Given a fresh virtualenv / When the pinned requirements and the agent install from PyPI, as install.sh does
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "pip"), "install", "--isolated", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--require-hashes", "-r", str(REQUIREMENTS)], check=True, timeout=600)
    subprocess.run([*pip, "--no-deps", "--no-build-isolation", str(AGENT_DIR)], check=True, timeout=600)
    # Then every hash matched PyPI's files and the agent runs
    done = subprocess.run([str(venv / "bin" / "medic-agent"), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--cluster" in done.stdout


def test_head_nodes_in_several_instance_groups_each_install(node):
    # Given head nodes in two instance groups (controller-machine and, say, controller-backup)
    config = json.loads(node.resource_config.read_text())
    config["InstanceGroups"].append({"Name": "controller-backup", "Instances": [{"CustomerIpAddress": "10.1.0.7"}]})
    node.resource_config.write_text(json.dumps(config))
    groups = [*ARGS, "--controller-group", "controller-backup"]
    # Then the node in the second group installs, with its SlurmctldHost name, and a worker still does nothing
    done = node.install(*groups, "--host", "ip-10-1-0-7", address="10.1.0.7")
    assert done.returncode == 0, done.stderr
    assert "systemctl restart medic-agent.service" in node.recorded()
    assert node.env_file.read_text().splitlines()[-1] == "MEDIC_HOST='ip-10-1-0-7'"
    worker = node.install(*groups, address=WORKER_IP)
    assert worker.returncode == 0 and "nothing to do" in worker.stderr


def test_a_hostile_host_is_refused(node):
    done = node.install(*ARGS, "--host", "x'; reboot #")
    assert done.returncode == 2 and "--host must be a hostname" in done.stderr
