"""Cold start: what importing each handler module costs a fresh interpreter, against ``import boto3``.

Each sample is a new ``python -c`` that times one ``import`` (wall and CPU) and prints it; samples of
boto3 alone and of every handler are interleaved, so background load hits them alike. The environment
is a Lambda one (``LAMBDA_TASK_ROOT``, ``AWS_LAMBDA_FUNCTION_NAME``, region) and nothing else: the
handlers need no configuration to import (their dependencies are built on the first invocation), and
the X-Ray SDK, which Powertools' Tracer loads at import, behaves as in Lambda (no sampling-rule client).

Then one ``python -X importtime`` per handler, with boto3 imported first, says where the time above
boto3 goes: self time summed by top-level package.
"""

from __future__ import annotations

import collections
import subprocess
import sys
from typing import Any

from bench.common import FUNCTIONS, ROOT, cli, median

HANDLERS = ("node_health", "training_job", "requeue_request", "agent_results", "alarm", "recovery_check")
TARGET_RATIO = 2.0  # issue 14
_TIMER = ("import time as _t; _w, _c = _t.perf_counter(), _t.process_time(); import {module}; "
          "print(_t.perf_counter() - _w, _t.process_time() - _c)")


def lambda_environment() -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(FUNCTIONS),
        "LAMBDA_TASK_ROOT": str(FUNCTIONS),
        "AWS_LAMBDA_FUNCTION_NAME": "medic-bench",
        "AWS_EXECUTION_ENV": f"AWS_Lambda_python{sys.version_info.major}.{sys.version_info.minor}",
        "AWS_REGION": "us-west-2",
        "AWS_DEFAULT_REGION": "us-west-2",
        "PYTHONDONTWRITEBYTECODE": "",  # bytecode caches as a deployed package has them
    }


def _sample(module: str) -> tuple[float, float]:
    done = subprocess.run([sys.executable, "-c", _TIMER.format(module=module)],  # noqa: S603
                          env=lambda_environment(), cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"import {module} failed: {done.stderr.strip().splitlines()[-1:]}")
    wall, cpu = done.stdout.split()
    return float(wall) * 1000, float(cpu) * 1000


def heavy_imports(module: str, minimum_ms: float = 3.0) -> dict[str, float]:
    """Self import time above boto3's, by top-level package (ms), largest first: where the gap comes from."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import boto3\nimport {module}"],  # noqa: S603
                          env=lambda_environment(), cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    lines = done.stderr.splitlines()
    start = max((i for i, line in enumerate(lines) if line.rstrip().endswith("| boto3")), default=-1)
    by_package: collections.Counter[str] = collections.Counter()
    for line in lines[start + 1:]:
        if not line.startswith("import time:"):
            continue
        parts = line[len("import time:"):].split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        by_package[parts[2].strip().split(".")[0]] += int(parts[0])
    return {name: round(us / 1000, 1) for name, us in by_package.most_common() if us / 1000 >= minimum_ms}


def handler_modules() -> tuple[str, ...]:
    """Every handler module in the Lambda asset (the issue's six first, then any added since)."""
    found = sorted(path.stem for path in (FUNCTIONS / "medic" / "handlers").glob("*.py") if path.stem != "__init__")
    return tuple(name for name in HANDLERS if name in found) + tuple(name for name in found if name not in HANDLERS)


def run(repeats: int = 5, handlers: tuple[str, ...] | None = None, breakdown: bool = True) -> dict:
    handlers = handlers or handler_modules()
    modules = ["boto3", *(f"medic.handlers.{name}" for name in handlers)]
    samples: dict[str, list[tuple[float, float]]] = {module: [] for module in modules}
    for module in modules:  # warm the OS file cache and the bytecode caches once, untimed
        _sample(module)
    for _ in range(repeats):
        for module in modules:
            samples[module].append(_sample(module))
    boto3_wall = median(wall for wall, _ in samples["boto3"])
    boto3_cpu = median(cpu for _, cpu in samples["boto3"])
    result: dict[str, Any] = {
        "benchmark": "cold_start",
        "repeats": repeats,
        "target_ratio": TARGET_RATIO,
        "boto3_ms": round(boto3_wall, 1),
        "boto3_cpu_ms": round(boto3_cpu, 1),
        "handlers": {},
    }
    for name in handlers:
        module = f"medic.handlers.{name}"
        wall = median(w for w, _ in samples[module])
        cpu = median(c for _, c in samples[module])
        entry = {
            "ms": round(wall, 1),
            "cpu_ms": round(cpu, 1),
            "ratio": round(wall / boto3_wall, 2),
            "cpu_ratio": round(cpu / boto3_cpu, 2),
            "min_ms": round(min(w for w, _ in samples[module]), 1),
        }
        entry["within_target"] = entry["ratio"] <= TARGET_RATIO
        if breakdown:
            entry["above_boto3"] = heavy_imports(module)
        result["handlers"][name] = entry
    result["max_ratio"] = max(entry["ratio"] for entry in result["handlers"].values())
    result["within_target"] = result["max_ratio"] <= TARGET_RATIO
    return result


def render(result: dict) -> str:
    lines = [f"import boto3: {result['boto3_ms']} ms (cpu {result['boto3_cpu_ms']} ms)"]
    for name, entry in result["handlers"].items():
        top = ", ".join(f"{k} {v}" for k, v in list(entry.get("above_boto3", {}).items())[:5])
        lines.append(f"{name}: {entry['ms']} ms = {entry['ratio']}x boto3 (cpu {entry['cpu_ratio']}x)  [{top}]")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(cli(run, render))
