"""The real end-to-end test's fixtures: one real Slurm for the session, set up for a quick requeue, and per test a
work directory for the job (its log, checkpoints, hang flag) and the agent.

Run by `make test-real` (not by `make test`). Where torch, Slurm or root is missing it skips, saying what is missing;
under CI=true it fails instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.local_slurm import LocalSlurm, missing_binaries
from tests.real.harness import RealChain, torch_missing

# A real `scontrol requeue` holds the job cred_expire + 1 s (SchedMD slurm 22.05.8, src/slurmctld/job_mgr.c
# batch_requeue_fini: `begin_time = now + cred_lifetime + 1`, the credential's expiry window), then the first
# scheduling pass that runs starts it: the main loop's, every sched_interval (src/slurmctld/controller.c
# _slurmctld_background), or the backfill scheduler's, every bf_interval (SchedulerType's default is sched/backfill,
# src/common/read_config.h; BACKFILL_INTERVAL 30 s, src/plugins/sched/backfill/backfill.c). With Slurm's defaults
# (cred_expire 120 s, src/common/slurm_cred.c DEFAULT_EXPIRATION_WINDOW; sched_interval 60 s,
# src/slurmctld/job_scheduler.c) that is 121-151 s of wall time, then the job's own start. The test shortens them to
# Slurm's own minimums so that the chain fits CI's budget: cred_expire=5 (slurm_cred.c _slurm_cred_init: below 5 is
# "invalid"), sched_interval=1. MinJobAge stays Slurm's default (slurm.conf(5): 300 s), not the agent tests' 5 s: the
# agent asks squeue what became of a job that ended minutes ago.
QUICK_REQUEUE = {"AuthInfo": "cred_expire=5", "SchedulerParameters": "sched_interval=1", "MinJobAge": "300"}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"{reason} (CI is set: the real end-to-end test may not skip)", pytrace=False)
    pytest.skip(f"the real end-to-end test needs it: {reason}")


@pytest.fixture(scope="session")
def real_slurm() -> Iterator[LocalSlurm]:
    missing = missing_binaries()
    if missing:
        unavailable(f"Slurm is not installed (missing {', '.join(missing)}): run .ci/install-slurm.sh")
    if os.geteuid() != 0:
        unavailable("starting munged, slurmctld and slurmd needs root")
    why = torch_missing()
    if why:
        unavailable(why)
    slurm = LocalSlurm(settings=QUICK_REQUEUE).start()
    yield slurm
    slurm.stop()


@pytest.fixture
def chain(real_slurm: LocalSlurm, tmp_path: Path) -> Iterator[RealChain]:
    # Under the Slurm root (world-searchable), not pytest's tmp_path: slurmstepd writes the job's log as the job's user.
    work = real_slurm.root / "jobs" / tmp_path.name
    chain = RealChain(real_slurm, work)
    try:
        yield chain
    finally:
        chain.stop_agent()
        real_slurm.reset()
        # the chain's timeline, shown for passed tests too by `make test-real` (pytest -rP): the wall times in CI's log
        print("\n".join(f"{at:7.1f}s {what}" for at, what in chain.timeline))
