"""A real (tiny) training job for the end-to-end test: 2 ranks of torch.distributed on gloo, launched by srun.

Each step every rank computes its gradients on its own batch and all-reduces them (rank 0 waits in the all-reduce for
rank 1, as a real data-parallel job does). Rank 0 checkpoints every ``--checkpoint-every`` steps (written then renamed:
a requeue mid-write leaves the previous one whole), and on start every rank loads the latest checkpoint. Rank 0 is
instrumented with medic_probe in EMF mode: one CloudWatch Embedded Metric Format line on stdout per period.

The hang: when the flag file exists, rank 1 takes it (renames it, so the requeued run does not hang again) and sleeps;
rank 0 blocks in the next all-reduce, and its probe keeps publishing Heartbeat 0. The job's log says, in its own words,
each step trained, each checkpoint saved, and where a run resumed from: the test's ground truth.

Run with the system Python that has torch (Debian's python3-torch) and medic_probe on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from medic_probe import Probe

CHECKPOINT = re.compile(r"^step-(\d+)\.pt$")


def log(message: str) -> None:
    print(f"[rank {os.environ.get('SLURM_PROCID', '0')}] {message}", flush=True)


def latest_checkpoint(directory: Path) -> tuple[int, Path] | None:
    found = [(int(match.group(1)), path) for path in directory.glob("step-*.pt")
             if (match := CHECKPOINT.match(path.name))]
    return max(found) if found else None


def save(directory: Path, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    partial = directory / f".step-{step}.pt.partial"
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, partial)
    os.replace(partial, directory / f"step-{step}.pt")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job", required=True, help="the job's name (the probe's Job dimension)")
    parser.add_argument("--cluster", default=None)
    parser.add_argument("--checkpoint-dir", type=Path, required=True)
    parser.add_argument("--checkpoint-every", type=int, default=50)
    parser.add_argument("--hang-flag", type=Path, required=True)
    parser.add_argument("--max-steps", type=int, default=100_000)
    parser.add_argument("--step-seconds", type=float, default=0.05, help="pace: wall seconds per step at least")
    parser.add_argument("--probe-period", type=float, default=60.0, help="the probe's period, wall seconds")
    args = parser.parse_args()

    rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}", rank=rank,
                            world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    start = 0
    latest = latest_checkpoint(args.checkpoint_dir)
    if latest is not None:
        state = torch.load(latest[1])
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        log(f"resumed from checkpoint step={start} (restart {os.environ.get('SLURM_RESTART_COUNT', '0')})")
    else:
        log("no checkpoint: starting from step 0")

    probe = Probe(args.job, cluster=args.cluster, rank=rank, emf=True, period_seconds=args.probe_period) \
        if rank == 0 else None
    generator = torch.Generator().manual_seed(1000 + rank)
    step = start
    while step < args.max_steps:
        began = time.monotonic()
        if rank == 1 and args.hang_flag.exists():
            try:
                os.replace(args.hang_flag, args.hang_flag.with_name(args.hang_flag.name + ".taken"))
            except FileNotFoundError:
                pass
            else:
                log(f"hang: sleeping before the all-reduce of step {step + 1}")
                while True:
                    time.sleep(3600)
        inputs = torch.randn(32, 16, generator=generator)
        target = inputs.sum(dim=1, keepdim=True)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), target)
        loss.backward()
        for parameter in model.parameters():
            dist.all_reduce(parameter.grad)
            parameter.grad /= world
        optimizer.step()
        step += 1
        if rank == 0:
            log(f"step {step} loss={loss.item():.4f}")
            # the loss tensor itself: the probe holds it (detached) and reads it in its own thread, never here
            probe.step(step, loss=loss, tokens_per_sec=32 / max(time.monotonic() - began, 1e-6))
            if step % args.checkpoint_every == 0:
                save(args.checkpoint_dir, step, model, optimizer)
                probe.checkpoint(step)
                log(f"checkpoint step={step}")
        spare = args.step_seconds - (time.monotonic() - began)
        if spare > 0:
            time.sleep(spare)
    if probe is not None:
        probe.close()
    log(f"done at step {step}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
