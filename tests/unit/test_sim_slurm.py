"""Specification: the replay's fake Slurm answers as slurmctld does (SchedMD slurm, src/slurmctld/job_mgr.c; the
answers checked against slurm-wlm 22.05.8 in tests/agent/test_real_slurm.py): a batch job with the requeue flag is
requeued by slurmctld itself when its node goes down and held for cred_expire + 1 s, then started at a scheduling
pass on nodes that can take it; a job without the flag ends NODE_FAIL and `scontrol requeue` refuses it; finished
jobs leave slurmctld's memory MinJobAge after they ended, and only the accounting (sacct) still knows them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from sim.slurm import JOB_STATES_FORMAT, FakeSlurm, SlurmWorld

CLUSTER = "c1"
NODE, SPARE, OTHER = "i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2", "i-0aaaaaaaaaaaaaaa3"
DOWN_AT = datetime(2026, 11, 20, 8, 15, 5, tzinfo=UTC)


class Cluster:
    """A SlurmWorld with one cluster whose compute nodes' HyperPod status the test sets, and a fake Slurm."""

    def __init__(self, nodes: dict[str, str]) -> None:
        self.status = dict(nodes)
        self.world = SlurmWorld(client=None)  # type: ignore[arg-type] - no agent runs here
        self.world.node_names = lambda cluster: {node: f"ip-10-1-0-{n}" for n, node in enumerate(self.status, 20)}
        self.world.compute_nodes = lambda cluster: dict(self.status)
        self.runs: list[dict] = []
        self.fake = FakeSlurm(self.world.cluster(CLUSTER), self.runs)

    @property
    def model(self):
        return self.world.cluster(CLUSTER)

    def job(self, job_id: str = "4211"):
        return self.model.jobs.get(job_id)

    def run(self, at: datetime, *argv: str) -> tuple[int, str]:
        with time_machine.travel(at, tick=False):
            done = self.fake([f"/bin/{argv[0]}", *argv[1:]])
        return done.returncode, (done.stdout + done.stderr).strip()

    def at(self, when: datetime) -> None:
        self.world.catch_up(when)


@pytest.fixture
def cluster() -> Cluster:
    world = Cluster({NODE: "Running", SPARE: "Running"})
    with time_machine.travel(DOWN_AT - timedelta(minutes=10), tick=False):
        world.world.put_job(CLUSTER, "4211", "llama3-70b", nodes=[NODE])
        world.at(DOWN_AT - timedelta(minutes=10))
    return world


def states(cluster: Cluster, at: datetime, job_ids: str = "4211") -> tuple[int, str]:
    return cluster.run(at, "squeue", "--noheader", "--states=all", JOB_STATES_FORMAT, "-j", job_ids)


class TestANodeGoingDownUnderAJob:
    def test_a_batch_job_with_the_requeue_flag_is_requeued_by_slurmctld_and_held(self, cluster):
        # When its node goes down (the repair)
        cluster.status[NODE] = "Pending"
        cluster.world.node_repaired(CLUSTER, NODE, NODE, "replace", DOWN_AT)
        # Then it is pending again, restart count 1, held until cred_expire (120 s) + 1 s later
        job = cluster.job()
        assert (job.state, job.requeues, job.begin_at) == ("PENDING", 1, DOWN_AT + timedelta(seconds=121))
        assert states(cluster, DOWN_AT + timedelta(seconds=5)) == (0, "4211|PENDING|1|1|1")
        # And a requeue of it now is refused as pending, in Slurm's words
        assert cluster.run(DOWN_AT + timedelta(seconds=6), "scontrol", "requeue", "4211") == (
            1, "Job is pending execution for job 4211")
        # And it starts at the first scheduling pass (sched_interval 60 s, on whole minutes) after its BeginTime,
        # on the free node (its own is in repair)
        cluster.at(datetime(2026, 11, 20, 8, 17, 59, tzinfo=UTC))
        assert cluster.job().state == "PENDING"
        cluster.at(datetime(2026, 11, 20, 8, 18, 0, tzinfo=UTC))
        assert (cluster.job().state, cluster.job().nodes, cluster.job().started_at) == (
            "RUNNING", [SPARE], datetime(2026, 11, 20, 8, 18, tzinfo=UTC))

    def test_with_no_node_free_the_requeued_job_waits_for_its_node_back_in_service(self):
        cluster = Cluster({NODE: "Running"})
        with time_machine.travel(DOWN_AT - timedelta(minutes=10), tick=False):
            cluster.world.put_job(CLUSTER, "4211", "llama3-70b", nodes=[NODE])
        cluster.model.drained.add("ip-10-1-0-20")  # Medic drained it before the repair
        cluster.status[NODE] = "Pending"
        cluster.world.node_repaired(CLUSTER, NODE, NODE, "replace", DOWN_AT)
        cluster.at(DOWN_AT + timedelta(minutes=20))
        assert cluster.job().state == "PENDING"
        # back in HyperPod, still drained in Slurm: no new work lands on it
        cluster.status[NODE] = "Running"
        cluster.at(DOWN_AT + timedelta(minutes=30))
        assert cluster.job().state == "PENDING"
        # resumed: the next pass starts it
        cluster.model.drained.discard("ip-10-1-0-20")
        cluster.at(DOWN_AT + timedelta(minutes=31))
        assert (cluster.job().state, cluster.job().nodes) == ("RUNNING", [NODE])

    def test_a_job_without_the_requeue_flag_ends_node_fail_and_no_requeue_is_accepted(self, cluster):
        cluster.job().requeue = False
        cluster.world.node_repaired(CLUSTER, NODE, NODE, "replace", DOWN_AT)
        assert (cluster.job().state, cluster.job().ended_at) == ("NODE_FAIL", DOWN_AT)
        assert states(cluster, DOWN_AT + timedelta(seconds=5)) == (0, "4211|NODE_FAIL|0|1|0")
        assert cluster.run(DOWN_AT + timedelta(seconds=6), "scontrol", "requeue", "4211") == (
            1, "Requested operation is presently disabled for job 4211")

    def test_a_job_auto_resume_holds_waits_for_its_node(self, cluster):
        cluster.job().auto_resume = True
        cluster.world.node_repaired(CLUSTER, NODE, "i-0bbbbbbbbbbbbbbb1", "replace", DOWN_AT)
        cluster.at(DOWN_AT + timedelta(minutes=10))
        assert (cluster.job().state, cluster.job().requeues, cluster.job().nodes) == (
            "PENDING", 0, ["i-0bbbbbbbbbbbbbbb1"])
        with time_machine.travel(DOWN_AT + timedelta(minutes=30), tick=False):
            cluster.world.node_back(CLUSTER, "i-0bbbbbbbbbbbbbbb1")
        assert cluster.job().state == "RUNNING"


class TestScontrolRequeue:
    def test_a_running_job_is_requeued_and_held(self, cluster):
        at = DOWN_AT
        assert cluster.run(at, "scontrol", "requeue", "4211") == (0, "")
        assert (cluster.job().state, cluster.job().requeues, cluster.job().begin_at) == (
            "PENDING", 1, at + timedelta(seconds=121))

    def test_a_running_job_without_the_flag_is_refused_whatever_its_state(self, cluster):
        cluster.job().requeue = False
        assert cluster.run(DOWN_AT, "scontrol", "requeue", "4211") == (
            1, "Requested operation is presently disabled for job 4211")
        assert cluster.job().state == "RUNNING"

    def test_a_completed_job_is_requeued_as_slurm_does(self, cluster):
        # job_mgr.c _job_requeue_op: "we support requeue of done/exit/exiting jobs"
        with time_machine.travel(DOWN_AT, tick=False):
            cluster.world.put_job(CLUSTER, "4300", "eval", state="COMPLETED")
        assert cluster.run(DOWN_AT + timedelta(seconds=10), "scontrol", "requeue", "4300") == (0, "")
        assert cluster.job("4300").state == "PENDING"

    def test_an_unknown_job(self, cluster):
        assert cluster.run(DOWN_AT, "scontrol", "requeue", "999") == (1, "Invalid job id specified for job 999")


class TestMinJobAge:
    def test_a_finished_job_is_forgotten_minjobage_after_it_ended_and_only_sacct_remembers(self, cluster):
        with time_machine.travel(DOWN_AT, tick=False):
            cluster.world.put_job(CLUSTER, "4211", "llama3-70b", state="COMPLETED")
        named = ("squeue", "--noheader", "--states=all", "--format=%i|%T", "--name=llama3-70b")
        sacct = ("sacct", "--noheader", "--parsable2", "--allocations", "--format=JobIDRaw,State",
                 "--name=llama3-70b", "--starttime=now-2days")
        # the default squeue lists pending and running jobs only
        assert cluster.run(DOWN_AT + timedelta(seconds=1), "squeue", "--noheader", "--format=%i",
                           "--name=llama3-70b") == (0, "")
        assert cluster.run(DOWN_AT + timedelta(seconds=299), *named) == (0, "4211|COMPLETED")
        assert cluster.run(DOWN_AT + timedelta(seconds=300), *named) == (0, "")
        assert states(cluster, DOWN_AT + timedelta(seconds=301)) == (
            1, "slurm_load_jobs error: Invalid job id specified")
        assert cluster.run(DOWN_AT + timedelta(seconds=302), *sacct) == (1, "Slurm accounting storage is disabled")
        cluster.world.set_accounting(CLUSTER, True)
        assert cluster.run(DOWN_AT + timedelta(seconds=303), *sacct) == (0, "4211|COMPLETED")
