"""What one `probe.step()` costs the training loop.

Times a loop calling `probe.step(i, loss=..., tokens_per_sec=...)` (rank 0, a client that does
nothing, no background flush during the run) against an empty loop over the same values, in the same
process; the difference divided by the calls is the cost per step. Median of several repeats. Also
times a non-zero rank (the gated no-op), and the same loop with the loss and throughput given as tensors: stand-ins
with a `detach()` as cheap as the probe can make it (no torch here), so the number is the probe's own cost of holding
a tensor, without torch's `detach()` (a view, ~1 µs) or any device read (there is none: each stand-in counts its
reads, and the run fails if step() read one). It reports; it is not a test: it never exits non-zero.

    python bench/probe_overhead.py            # prints one markdown table row
    from bench.probe_overhead import run      # run() -> dict, for `make bench`
"""

from __future__ import annotations

import gc
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

PROBE_DIR = Path(__file__).resolve().parents[1] / "probe"
if str(PROBE_DIR) not in sys.path:
    sys.path.insert(0, str(PROBE_DIR))

TARGET_NS = 10_000  # the budget: 10 us per step

HEADER = ("| benchmark | per call (floats) | per call (tensors) | rank != 0 | empty loop | calls x repeats "
          "| Python |\n|---|---|---|---|---|---|---|")


class _NullClient:
    def put_metric_data(self, **kwargs: Any) -> dict:
        return {}


class _StandInTensor:
    """A 0-d tensor as the probe sees one (duck typing: `detach`); every read of its value is counted."""

    reads = 0

    __slots__ = ("value",)

    def __init__(self, value: float) -> None:
        self.value = value

    def detach(self) -> _StandInTensor:
        return self

    def __float__(self) -> float:
        _StandInTensor.reads += 1
        return self.value


def _empty_loop(n: int, losses: list[float]) -> int:
    started = time.perf_counter_ns()
    for i in range(n):
        loss = losses[i & 1023]
        _ = loss
    return time.perf_counter_ns() - started


def _probe_loop(probe: Any, n: int, losses: list[float]) -> int:
    step = probe.step
    started = time.perf_counter_ns()
    for i in range(n):
        loss = losses[i & 1023]
        step(i, loss=loss, tokens_per_sec=loss)
    return time.perf_counter_ns() - started


def run(calls: int = 200_000, repeats: int = 7) -> dict:
    """Nanoseconds per `step()` call above an empty loop (median of `repeats`), with floats and with stand-in
    tensors, and the raw medians."""
    from medic_probe import Probe

    losses = [2.0 + (i % 97) / 97 for i in range(1024)]
    tensors = [_StandInTensor(value) for value in losses]
    publisher = Probe(job="bench", node="bench", rank=0, client=_NullClient(), period_seconds=3600, start=False)
    gated = Probe(job="bench", node="bench", rank=1, client=_NullClient(), start=False)
    # 4,096 tensors a period are held (probe._MAX_HELD): a flush every 4,096 steps keeps every one held, as a
    # 60-second period does up to 68 steps a second
    tensor_calls = min(calls, 4096)
    empty, published, skipped, held, empty_held = [], [], [], [], []
    _StandInTensor.reads = 0
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _probe_loop(publisher, calls // 10, losses)  # warm up
        for _ in range(repeats):
            empty.append(_empty_loop(calls, losses))
            published.append(_probe_loop(publisher, calls, losses))
            skipped.append(_probe_loop(gated, calls, losses))
            publisher.flush()  # a period ends now and then; the next repeat starts from fresh aggregates
            for _ in range(max(1, calls // tensor_calls)):
                empty_held.append(_empty_loop(tensor_calls, tensors))
                reads = _StandInTensor.reads
                held.append(_probe_loop(publisher, tensor_calls, tensors))
                if _StandInTensor.reads != reads:
                    raise RuntimeError(f"step() read a tensor {_StandInTensor.reads - reads} times")
                publisher.flush()  # (reads them: in the flush, as the background thread does)
    finally:
        if gc_was_enabled:
            gc.enable()
        publisher.close()
        gated.close()
    empty_ns = statistics.median(empty) / calls
    step_ns = statistics.median(published) / calls - empty_ns
    gated_ns = statistics.median(skipped) / calls - empty_ns
    tensor_ns = statistics.median(held) / tensor_calls - statistics.median(empty_held) / tensor_calls
    return {
        "benchmark": "probe_overhead",
        "step_ns": round(step_ns, 1),
        "tensor_step_ns": round(tensor_ns, 1),
        "tensor_reads_in_step": 0,
        "rank_gated_ns": round(gated_ns, 1),
        "empty_loop_ns": round(empty_ns, 1),
        "calls": calls,
        "repeats": repeats,
        "target_ns": TARGET_NS,
        "within_target": step_ns < TARGET_NS and tensor_ns < TARGET_NS,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
    }


def row(result: dict) -> str:
    return (f"| probe.step() | {result['step_ns'] / 1000:.2f} us | {result['tensor_step_ns'] / 1000:.2f} us "
            f"| {result['rank_gated_ns'] / 1000:.2f} us "
            f"| {result['empty_loop_ns'] / 1000:.3f} us | {result['calls']} x {result['repeats']} "
            f"| {result['implementation']} {result['python']} |")


def main() -> int:
    try:
        print(row(run()))
    except Exception as exc:  # a report, not a gate
        print(f"| probe.step() | error: {type(exc).__name__}: {exc} | | | | | {platform.python_version()} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
