"""End to end with real parts: a real training job hangs on a real Slurm, and Medic brings it back.

Only AWS is emulated (sim/live.py: the stack's real handlers on moto, its synthesized alarms evaluated on the probe's
real metrics, Medic's clock 30x the wall clock). The job is tests/real/train.py: 2 ranks of torch.distributed on gloo,
submitted with sbatch to a local slurmctld/slurmd, checkpointing and resuming from its latest checkpoint, instrumented
with medic_probe (EMF lines, once per emulated minute: issue 31's resume-step misjudgement needs more than one publish a
minute, which this test never does). The agent is `python -m medic_agent`, its own process, on the real Slurm.
"""

from __future__ import annotations

import re

from sim.live import LiveSession, ScaledClock
from tests.real.harness import CLUSTER, CONFIG, JOB, RealChain

FACTOR = 30  # Medic's clock runs 30x the wall clock: a minute of alarms and schedules every 2 s
PROBE_PERIOD = 60 / FACTOR  # the probe publishes once per emulated minute
STALL_ALARM = f"medic-stall-{JOB}"


def stall_alarms(chain: RealChain, to: str) -> list[dict]:
    return [line for line in chain.live.result.alarms if line["alarm"] == STALL_ALARM and line["to"] == to]


def concluded(chain: RealChain) -> bool:
    return any(record["fault"] in ("recovered", "no_progress", "resumed_behind") for record in chain.records(job=JOB))


def test_a_real_hang_is_requeued_by_the_real_agent_and_resumes_from_its_checkpoint(chain: RealChain):
    # Given the real job, submitted with sbatch --requeue, training and publishing its metrics
    job_id = chain.submit(requeue=True, probe_period=PROBE_PERIOD)
    chain.wait_for_first_metrics(timeout=120)
    with LiveSession(CONFIG, ScaledClock(FACTOR)) as live:
        chain.live = live
        chain.note(f"Medic's emulated AWS up, endpoint {live.endpoint}")
        chain.start_agent()
        chain.pump(lambda: chain.ingested >= 4 and chain.truth().checkpoint is not None, timeout=60,
                   what="training for four emulated minutes with a checkpoint")
        # When rank 1 hangs (rank 0 waits in the all-reduce, its probe reports Heartbeat 0)
        chain.hang()
        chain.pump(lambda: concluded(chain), timeout=180, what="a recovery concluded")
        chain.note("Medic concluded: " + ", ".join(r["fault"] for r in chain.records(job=JOB)))
        report = chain.report()

        # Then the stall alarm went to ALARM exactly once
        assert len(stall_alarms(chain, "ALARM")) == 1, report
        # And Medic queued the requeue (deferred), then recorded the agent's result (executed)
        requeues = [record["outcome"] for record in chain.records(job=JOB, action="requeue_job")]
        assert requeues == ["deferred", "executed"], report
        # And the agent process asked squeue for the running job of that name, then requeued it, nothing else
        assert chain.agent_calls() == [f"squeue --noheader --states=RUNNING --format=%i|%j --name={JOB}",
                                       f"scontrol requeue {job_id}"], report
        # And Slurm itself counts one restart
        assert chain.slurm.job(job_id)["Restarts"] == "1", report
        # And the job's own log says it resumed from its last checkpoint before the hang
        truth = chain.truth()
        assert truth.hang_step is not None and truth.checkpoint is not None, report
        assert truth.resumed_from == [(truth.checkpoint, 1)], report
        # And Medic recorded the recovery, with the steps lost as the job itself counts them
        recovered = chain.records(job=JOB, fault="recovered")
        assert len(recovered) == 1, report
        incidents = [line for line in live.result.incidents if line.get("job") == JOB
                     and line.get("incident_kind") == "stall"]
        assert len(incidents) == 1, report
        assert incidents[0]["lost_steps"] == truth.lost_steps, report
        # And no page, no resumed_behind, no no_progress
        assert live.result.pages == [], report
        assert not chain.records(job=JOB, fault="resumed_behind"), report
        assert not chain.records(job=JOB, fault="no_progress"), report
        assert live.result.errors == [], report


def test_a_job_that_cannot_be_requeued_is_paged_once_by_name_and_never_requeued(chain: RealChain):
    # Given the same job submitted with sbatch --no-requeue, and this time the session's own agent on the real Slurm
    job_id = chain.submit(requeue=False, probe_period=PROBE_PERIOD)
    chain.wait_for_first_metrics(timeout=120)
    with LiveSession(CONFIG, ScaledClock(FACTOR)) as live:
        chain.live = live
        chain.note(f"Medic's emulated AWS up, endpoint {live.endpoint}")
        live.use_real_slurm(CLUSTER, chain.slurm.bin_dir, chain.slurm.env, chain.slurm.host)
        live.feed(f'{{"sim": {{"agent": {{"cluster": "{CLUSTER}", "heartbeat": true}}}}}}')
        chain.pump(lambda: chain.ingested >= 3, timeout=60, what="training for three emulated minutes")
        # When its node fails under it (Slurm marks it DOWN and ends the job: it may not be requeued)
        chain.slurm.run("scontrol", "update", f"NodeName={chain.slurm.node}", "State=DOWN",
                        "Reason=medic-test node failure")
        chain.note("node DOWN")
        chain.slurm.wait_for_job_state(job_id, "NODE_FAIL", timeout=30)
        chain.pump(lambda: bool(live.result.pages), timeout=120, what="paged")
        # (a few more emulated minutes: nothing more happens)
        settle_until = live.now.timestamp() + 5 * 60
        chain.pump(lambda: live.now.timestamp() >= settle_until, timeout=30, what="five more emulated minutes")
        report = chain.report()

        # Then the on-call was paged exactly once, and the page names the job
        assert len(live.result.pages) == 1, report
        page = live.result.pages[0]
        assert JOB in page["subject"] + page["message"], report
        assert re.search(rf"\b{job_id}\b", page["message"]), report
        # And the agent looked for it but never asked Slurm to requeue it
        argvs = [" ".join(run["argv"]) for run in live.result.slurm_commands]
        assert argvs and argvs[0] == f"squeue --noheader --states=RUNNING --format=%i|%j --name={JOB}", report
        assert not any(argv.startswith("scontrol requeue") for argv in argvs), report
        assert chain.slurm.job(job_id)["Restarts"] == "0", report
        assert [record["outcome"] for record in chain.records(job=JOB, action="requeue_job")] == \
            ["deferred", "failed"], report
