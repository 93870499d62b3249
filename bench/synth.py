"""Synth: how long synthesizing the stack takes in-process, for 1 and for 20 configured clusters.

What ``sim.synth.synthesize`` does (the CDK app in this interpreter, jsii's Node process behind it,
cdk-nag's checks included), without sim's template cache. Loading the CDK (``import aws_cdk`` and the
stack module, which starts jsii) and the process's first synth (one-off loading) are timed apart.
The sizes alternate (1, 20, 1, 20, ...) so background load hits both alike; medians. The 20-cluster
config alternates Slurm and EKS clusters. The npm CLI (``cdk synth``) adds its own Node start and the
app's Python start on top of this.
"""

from __future__ import annotations

import sys
import time

from bench.common import cli, config, config_file, median


def run(sizes: tuple[int, ...] = (1, 20), repeats: int = 3, budget_s: float = 240.0) -> dict:
    from sim.synth import import_paths, synthesize

    import_paths()
    started = time.perf_counter()
    import aws_cdk  # noqa: F401 - timed: the CDK library and jsii's Node process

    from infra.stack import MedicStack  # noqa: F401
    load_s = time.perf_counter() - started
    with config_file(config(1)) as path:  # the first synth of a process pays one-off loading: untimed
        started = time.perf_counter()
        synthesize(path)
        first_s = time.perf_counter() - started
    samples: dict[int, list[float]] = {size: [] for size in sizes}
    resources: dict[int, int] = {}
    deadline = time.perf_counter() + budget_s
    for repeat in range(repeats):
        if repeat and time.perf_counter() > deadline:
            break  # a loaded machine: fewer repeats rather than a timeout
        for size in sizes:
            with config_file(config(size, eks_every=2 if size > 1 else 0)) as path:
                started = time.perf_counter()
                template = synthesize(path)
                samples[size].append(time.perf_counter() - started)
                resources[size] = len(template.get("Resources", {}))
    result = {
        "benchmark": "synth",
        "load_s": round(load_s, 2),
        "first_synth_s": round(first_s, 2),
        "repeats": len(samples[sizes[0]]),
        "sizes": {str(size): {"median_s": round(median(samples[size]), 2),
                              "min_s": round(min(samples[size]), 2),
                              "resources": resources[size]} for size in sizes},
    }
    if len(sizes) >= 2:
        low, high = sizes[0], sizes[-1]
        delta = median(samples[high]) - median(samples[low])
        result["per_extra_cluster_ms"] = round(delta * 1000 / (high - low), 1)
    return result


def render(result: dict) -> str:
    parts = [f"{size} cluster(s): {entry['median_s']} s ({entry['resources']} resources)"
             for size, entry in result["sizes"].items()]
    return f"CDK load {result['load_s']} s; " + "; ".join(parts)


if __name__ == "__main__":
    sys.exit(cli(run, render))
