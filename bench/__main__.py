"""``python -m bench`` (``make bench``): every benchmark in its own interpreter, the table, docs/benchmarks.md.

    python -m bench                     # all; prints the table, rewrites its block of docs/benchmarks.md
    python -m bench --only cold_start,probe --no-page
    python -m bench --quick             # tiny inputs: checks the machinery, numbers mean nothing
    python -m bench --only warm         # calls per node replacement and per suppressed storm event (~1 min)
    python -m bench --storm-events 2000 # a smaller storm than the full 10,000 events (20 clusters)
    python -m bench --only recovery     # recovery time per failure class (~1 min); rewrites its own block

The recovery model's block of docs/benchmarks.md (its own markers) is rewritten whenever it runs, `--only
recovery` included: its numbers come from the latencies and the replay, not from this machine. Results also go to
build/bench/results.json. Exit 0 unless the tool itself breaks: a missed target or a
failed benchmark is reported, in the table and the page, not raised.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bench.common import ROOT, in_subprocess, machine
from bench.report import PAGE, RECOVERY_END, RECOVERY_HEADING, RECOVERY_START, block, notes, table, update_page

PROBE_CODE = "import json; from bench.probe_overhead import run; print(json.dumps(run({args})))"
# The replay benchmarks share one config: synthesize its template once (sim caches it), outside their timing.
PREPARE_CODE = ("import json, time; from bench.common import config_file, replay_config, template_for\n"
                "t = time.perf_counter()\n"
                "with config_file(replay_config()) as path: template_for(path)\n"
                "print(json.dumps({'template_s': round(time.perf_counter() - t, 1)}))")

TOTAL_BUDGET_S = 1800  # `make bench` stays under 30 minutes: each benchmark gets at most what is left
# name -> (module, or None for the probe; timeout in seconds; quick arguments)
BENCHMARKS = {
    "probe": (None, 60, []),
    "cold_start": ("bench.cold_start", 150, ["--repeats", "1"]),
    "prepare": (None, 150, []),
    "warm": ("bench.warm", 200, ["--node-events", "6", "--job-events", "2", "--calls", "2000", "--repeats", "2",
                                 "--storm-events", "7"]),
    "recovery": ("bench.recovery", 300, []),  # replays of a few simulated hours: the same work quick or not
    "storm": ("bench.storm", 1200, ["--events", "40", "--clusters", "2"]),
    "synth": ("bench.synth", 300, ["--repeats", "1", "--budget-s", "1"]),
}


def _code(code: str, timeout: float) -> dict:
    import subprocess

    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,  # noqa: S603
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated subset of {', '.join(BENCHMARKS)}")
    parser.add_argument("--no-page", action="store_true", help=f"print only; leave {PAGE} alone")
    parser.add_argument("--quick", action="store_true", help="tiny inputs (machinery check; implies --no-page)")
    parser.add_argument("--storm-events", type=int, default=None,
                        help="the storm's size (default 10,000 events over 20 clusters)")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.only.split(",")] if args.only else list(BENCHMARKS)
    if any(name in ("warm", "storm") for name in chosen) and "prepare" not in chosen:
        chosen.insert(min(chosen.index(n) for n in chosen if n in ("warm", "storm")), "prepare")
    unknown = [name for name in chosen if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")

    results: dict = {"machine": machine()}
    started = time.perf_counter()
    for name in chosen:
        module, timeout, quick_args = BENCHMARKS[name]
        left = TOTAL_BUDGET_S - (time.perf_counter() - started)
        if left < 20:
            results[name] = {"error": f"skipped: the {TOTAL_BUDGET_S} s budget of `make bench` is spent"}
            continue
        timeout = min(timeout, left)
        if name == "synth" and not args.quick:
            quick_args = ["--budget-s", str(max(1, int(min(180, left - 150))))]  # repeats that fit; the last finishes
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        began = time.perf_counter()
        if name == "probe":
            results[name] = _code(PROBE_CODE.format(args="calls=20_000, repeats=3" if args.quick else ""), timeout)
        elif name == "prepare":
            results[name] = _code(PREPARE_CODE, timeout)
        else:
            extra = ("--events", str(args.storm_events)) if name == "storm" and args.storm_events else ()
            chosen_args = quick_args if args.quick or name == "synth" else ()
            results[name] = in_subprocess(module, timeout, (*chosen_args, *extra))
        status = f"error: {results[name]['error']}" if "error" in results[name] else "done"
        print(f"bench: {name} {status} in {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    results["total_s"] = round(time.perf_counter() - started, 1)

    out = ROOT / "build" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))

    print(table(results))
    print()
    for line in notes(results):
        print(f"- {line}")
    recovery = results.get("recovery")
    if isinstance(recovery, dict) and "error" not in recovery:
        from bench.recovery import render

        print(f"\n{render(recovery)}")
    print(f"\nbench: {results['total_s']} s in all", file=sys.stderr)
    if not (args.no_page or args.quick or args.only):
        changed = update_page(ROOT / PAGE, block(results))
        print(f"bench: {PAGE} {'updated' if changed else 'unchanged'}", file=sys.stderr)
    if isinstance(recovery, dict) and "error" not in recovery and not (args.no_page or args.quick):
        from bench.recovery import block as recovery_block

        changed = update_page(ROOT / PAGE, recovery_block(recovery), start=RECOVERY_START, end=RECOVERY_END,
                              heading=RECOVERY_HEADING)
        print(f"bench: {PAGE} recovery section {'updated' if changed else 'unchanged'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
