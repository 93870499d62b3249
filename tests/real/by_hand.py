"""The real chain by hand, at any clock factor (1: real time), with Slurm's own defaults, printing its timeline.

    .venv/bin/python -m tests.real.by_hand --factor 1      # about 15 minutes: the requeue hold is Slurm's 2-3 minutes

The same chain as `make test-real`'s first case (tests/real/test_real_chain.py), without its assertions: a real
training job hangs, the stall alarm fires, the real agent (its own process) requeues it on a real Slurm, the job resumes
from its checkpoint, and Medic says so. Needs root, Slurm (.ci/install-slurm.sh) and torch (.ci/install-torch.sh).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from sim.live import LiveSession, ScaledClock
from tests.agent.local_slurm import LocalSlurm
from tests.real.harness import CONFIG, JOB, RealChain, torch_missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--factor", type=float, default=1.0, help="Medic's clock, times the wall clock (default 1)")
    parser.add_argument("--quick-requeue", action="store_true",
                        help="the test's cred_expire=5 and sched_interval=1 instead of Slurm's defaults")
    args = parser.parse_args(argv)
    why = torch_missing()
    if why:
        print(f"by_hand: {why}", file=sys.stderr)
        return 2
    settings = {"MinJobAge": "300"}
    if args.quick_requeue:
        settings.update({"AuthInfo": "cred_expire=5", "SchedulerParameters": "sched_interval=1"})
    slurm = LocalSlurm(settings=settings).start()
    chain = RealChain(slurm, slurm.root / "jobs" / "by-hand")
    minute = 60 / args.factor
    try:
        job_id = chain.submit(requeue=True, probe_period=minute)
        chain.wait_for_first_metrics(timeout=120 + 2 * minute)
        with LiveSession(CONFIG, ScaledClock(args.factor), handler_output=open(  # noqa: SIM115 - kept to the end
                Path(tempfile.gettempdir()) / "medic-by-hand-handlers.log", "w")) as live:
            chain.live = live
            chain.note(f"Medic's emulated AWS up at {live.now:%H:%M:%S}, endpoint {live.endpoint}")
            chain.start_agent()
            chain.pump(lambda: chain.ingested >= 4 and chain.truth().checkpoint is not None, timeout=8 * minute,
                       what="training for four minutes with a checkpoint", every=0.5)
            chain.hang()
            chain.pump(lambda: any(record["fault"] in ("recovered", "no_progress", "resumed_behind")
                                   for record in chain.records(job=JOB)),
                       timeout=40 * minute, what="a recovery concluded", every=0.5)
            truth = chain.truth()
            chain.note(f"job's log: hang before step {truth.hang_step}, last step {truth.last_step}, last checkpoint "
                       f"{truth.checkpoint} (lost {truth.lost_steps}); resumed from {truth.resumed_from}; Slurm "
                       f"Restarts={slurm.job(job_id).get('Restarts')}")
            chain.note(f"agent's Slurm calls: {chain.agent_calls()}")
            shown = slurm.job(job_id)
            chain.note("Slurm: " + ", ".join(f"{key}={shown.get(key)}" for key in (
                "JobState", "Restarts", "SubmitTime", "EligibleTime", "StartTime")))
            print("\n".join(f"{at:8.1f}s {what}" for at, what in chain.timeline))
            return 0
    except AssertionError as error:
        print(error, file=sys.stderr)
        return 1
    finally:
        chain.stop_agent()
        slurm.stop()


if __name__ == "__main__":
    sys.exit(main())
