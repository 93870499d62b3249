"""What the benchmarks share: paths, the machine, medians, configs and events, and the JSON CLI."""

from __future__ import annotations

import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ROOT / "functions"
for _path in (ROOT, FUNCTIONS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

ACCOUNT = "123456789012"
REGION = "us-west-2"
# Guardrails wide open: every node event in a latency run takes the remediation path to the end.
OPEN_GUARDRAILS = {"max_node_actions_per_hour": 1000, "max_fraction_in_repair": 1.0, "node_cooldown_minutes": 60,
                   "max_job_restarts": 3}


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def percentile(values: Iterable[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def machine() -> dict:
    """Where the numbers come from: CPU, cores, memory, OS, Python and the library versions."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except (OSError, ValueError):
        pass
    versions = {}
    for package in ("boto3", "botocore", "aws-lambda-powertools", "pydantic", "moto", "aws-cdk-lib"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory_gib,
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "load_average": _load_average(),
        "commit": _git("rev-parse", "--short", "HEAD"),
        "versions": versions,
    }


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,  # noqa: S603, S607
                              timeout=10, check=True).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


# configs
def cluster_spec(index: int, orchestrator: str = "slurm") -> dict:
    """A configured cluster: name ``bench-c<nn>``, id of 12 lowercase letters and digits."""
    spec = {"name": f"bench-c{index:02d}", "id": f"bench{index:07d}", "orchestrator": orchestrator,
            "node_recovery": "none", "protected_groups": ["controller", "login"]}
    if orchestrator == "eks":
        spec.update(node_recovery="automatic", protected_groups=[])
    return spec


def config(clusters: int, *, guardrails: dict | None = None, eks_every: int = 0) -> dict:
    """A Medic config with ``clusters`` clusters (every ``eks_every``-th one EKS) and the ``ft-`` prefix."""
    return {
        "mode": "act",
        "notify": {"emails": ["oncall@example.com"]},
        "guardrails": dict(guardrails or {"max_node_actions_per_hour": 4, "max_fraction_in_repair": 0.25,
                                          "node_cooldown_minutes": 60, "max_job_restarts": 3}),
        "clusters": [cluster_spec(i, "eks" if eks_every and i % eks_every == eks_every - 1 else "slurm")
                     for i in range(clusters)],
        "training_jobs": [{"prefix": "ft-", "max_restarts": 3,
                       "role_arns": ["arn:aws:iam::123456789012:role/SageMakerTrainingRole"],
                       "checkpoint_buckets": ["ml-artifacts-123456789012"]}],
    }


WARM_CLUSTERS = 1  # bench-c00: guardrails wide open (latency runs); the config must fit the functions' environment
STORM_CLUSTERS = 20  # bench-c01..c20: default guardrails (the storm)


def replay_config() -> dict:
    """One config for every replay benchmark, so one synthesized template (sim caches it) serves them all."""
    data = config(WARM_CLUSTERS + STORM_CLUSTERS)
    overrides = {key: value for key, value in OPEN_GUARDRAILS.items() if key != "max_job_restarts"}
    for spec in data["clusters"][:WARM_CLUSTERS]:
        spec["guardrails"] = dict(overrides)
    return data


@contextmanager
def config_file(data: dict, name: str = "medic.yaml") -> Iterator[Path]:
    """The config written to a temporary file (the replay's template cache is keyed by its content)."""
    with tempfile.TemporaryDirectory(prefix="medic-bench-") as directory:
        path = Path(directory) / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        yield path


# events, shaped as sim/scenarios/generate.py shapes them
def node_event(index: int, cluster: dict, at: datetime, fault: str = "NvidiaErrorTerminate") -> dict:
    from sim.scenarios.generate import event, node_id

    result = event(node_id(index), at, fault)
    arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/{cluster['id']}"
    result["detail"]["ClusterName"] = cluster["name"]
    result["detail"]["ClusterArn"] = arn
    result["resources"] = [arn]
    return result


def job_event(index: int, at: datetime) -> dict:
    from sim.scenarios.generate import training_failed

    return training_failed(f"ft-bench-{index:04d}", at)


def checkpoint_directive() -> dict:
    from sim.scenarios.generate import CHECKPOINT

    return {"sim": {"s3_put": CHECKPOINT}}


def start_time() -> datetime:
    from sim.scenarios.generate import T0

    return copy.copy(T0)


def storm_lines(events: int, clusters: list[dict], spacing: timedelta) -> list[str]:
    """``events`` node failures (NvidiaErrorTerminate), one new node each, round-robin over the clusters."""
    t0 = start_time()
    return [json.dumps(node_event(i, clusters[i % len(clusters)], t0 + spacing * i)) for i in range(events)]


def template_for(path: Path) -> dict:
    """The synthesized template for the config (sim's cache: a synth only when config or stack changed)."""
    from sim.synth import stack_template

    return stack_template(path)


# the per-module CLI: ``python -m bench.<module> [--json] [--<parameter> <number>]...``
def cli(run: Callable[..., dict], render: Callable[[dict], str], argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    args = [arg for arg in args if arg != "--json"]
    kwargs: dict[str, Any] = {}
    while args:
        flag = args.pop(0)
        if not flag.startswith("--") or not args:
            print(f"usage: [--json] [--<parameter> <number>]... (got {flag!r})", file=sys.stderr)
            return 2
        value = args.pop(0)
        kwargs[flag[2:].replace("-", "_")] = float(value) if "." in value else int(value)
    try:
        result = run(**kwargs)
    except Exception as error:  # noqa: BLE001 - a benchmark reports; it never fails the build
        result = {"error": f"{type(error).__name__}: {error}"}
    if as_json:
        print(json.dumps(result, default=str))
    else:
        print(render(result) if "error" not in result else f"error: {result['error']}")
    return 0


def in_subprocess(module: str, timeout: float, args: Iterable[str] = ()) -> dict:
    """Run ``python -m <module> --json`` in a fresh interpreter; its last stdout line is the result."""
    command = [sys.executable, "-m", module, "--json", *args]
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout,  # noqa: S603
                              check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {done.returncode}: {' | '.join(tail)}"}
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as error:
        return {"error": f"unreadable result: {error}"}


def fmt_ms(value: float | None, digits: int = 1) -> str:
    if value is None or value != value:  # NaN
        return "n/a"
    return f"{value:.{digits}f} ms"


def deep_get(data: dict, *keys: str, default: Any = None) -> Any:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return default
        data = data[key]
    return data
