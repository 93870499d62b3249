"""Specification: Medic never spends a restart on a requeue that cannot succeed, and a job that completed is not a
failure (issue 27, items 3 and 6), against emulated AWS and the real agent (its Slurm scripted).

- A stall requeue by name that finds the job COMPLETED (slurmctld's memory or sacct): `ignored`, no page, the restart
  given back, the proof-of-recovery watch ended.
- A requeue Slurm refuses as a job it never requeues (`--no-requeue`: "Requested operation is presently disabled";
  no batch job): `failed`, one page saying to resubmit it, the restart given back.
- After a node repair, a job Slurm ended NODE_FAIL without its requeue flag: no requeue at all, one page naming it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import boto3
import pytest

from medic.adapters.metrics import TrainingMetrics
from medic.flows.node.sweep import reconcile
from medic.flows.recovery.check import check_recoveries
from medic.flows.stall.response import respond_to_alarm
from medic.handlers import agent_results
from medic.ledger.incidents import IncidentStore
from tests.functional.conftest import CLUSTER, REGION
from tests.functional.slurm_world import SlurmWorld
from tests.functional.test_agent_results import deliver, requeue
from tests.functional.test_alarm_handler import ALARM_AT, INCIDENT, JOB, alarm, medic, probe_reports  # noqa: F401
from tests.functional.test_node_repair import NAME, NODE, SCHEDULE
from tests.functional.test_node_repair import replace as replace_node

LINEAGE = f"lineage#slurm:{CLUSTER}:{JOB}"


@pytest.fixture
def slurm(medic, tmp_path, monkeypatch) -> SlurmWorld:  # noqa: F811 - medic: the watched job's config
    """The watched job trained until 02:50 and went silent; a live agent; the results function on these deps."""
    medic.at(ALARM_AT)
    medic.deps.metrics = TrainingMetrics(boto3.client("cloudwatch", region_name=REGION))
    trained_until = datetime.fromisoformat(ALARM_AT) - timedelta(minutes=20)
    probe_reports("Heartbeat", 20, trained_until)
    probe_reports("Step", 1180, trained_until)
    world = SlurmWorld(medic, tmp_path)
    monkeypatch.setattr(agent_results, "dependencies", lambda: medic.deps)
    world.heartbeat()
    return world


def restarts(slurm, lineage: str = LINEAGE) -> int:
    item = slurm.item(lineage, "restarts")
    return int(item["restarts"]["N"]) if item else 0


def stall_requeue(slurm) -> dict:
    """The stall alarm of the watched job fires; Medic queues a requeue by name (one restart spent, a watch)."""
    slurm.heartbeat()
    record = respond_to_alarm(alarm(), slurm.medic.deps)
    assert (record["action"], record["outcome"]) == ("requeue_job", "deferred")
    assert restarts(slurm) == 1 and len(IncidentStore(slurm.medic.deps.table).recoveries()) == 1
    slurm.stream_event()  # (Medic's own writes so far)
    return record


def test_a_stalled_job_that_completed_is_ignored_its_restart_given_back_and_its_watch_ended(slurm):
    # Given the stall alarm's requeue of llama3-70b, and Slurm with no such job pending or running: slurmctld forgot
    # it, its accounting says 4211 COMPLETED
    deferred = stall_requeue(slurm)
    slurm.slurm.answers["squeue --noheader --format=%i"] = (0, "", "")
    slurm.slurm.answers["squeue --noheader --states=all"] = (0, "", "")
    slurm.slurm.answers["sacct --noheader"] = (0, "4180|NODE_FAIL\n4211|COMPLETED\n", "")
    slurm.run_agent()
    assert [argv[0] for argv in slurm.slurm.argvs] == ["squeue", "squeue", "sacct"]
    # When the agent's result arrives
    response, [record] = deliver(slurm, slurm.stream_event())
    # Then the job completed: ignored on the same incident, no page
    assert response == {"batchItemFailures": []}
    assert (record["incident"], record["fault"], record["action"], record["outcome"], record["paged"]) == (
        INCIDENT, "completed", "none", "ignored", False)
    assert record["event_id"] == deferred["event_id"]
    assert f"{JOB} completed" in record["reason"] and "4211 COMPLETED" in record["reason"]
    assert slurm.medic.pages() == []
    # And the restart is given back, and no proof of recovery is awaited (a finished job never steps again)
    assert restarts(slurm) == 0
    assert IncidentStore(slurm.medic.deps.table).recoveries() == []
    slurm.medic.clock[0] += timedelta(minutes=30)
    assert check_recoveries({"id": "later"}, slurm.medic.deps) == []
    assert slurm.medic.pages() == []


def test_a_stalled_job_slurm_cannot_account_for_still_pages(slurm):
    # Given nothing pending or running, slurmctld forgot it and the cluster keeps no accounting
    stall_requeue(slurm)
    slurm.slurm.answers["squeue --noheader --format=%i"] = (0, "", "")
    slurm.slurm.answers["squeue --noheader --states=all"] = (0, "", "")
    slurm.slurm.answers["sacct --noheader"] = (1, "", "Slurm accounting storage is disabled")
    slurm.run_agent()
    _, [record] = deliver(slurm, slurm.stream_event())
    # Then Medic cannot tell a completion from a failure: failed, one page (as before), the restart spent
    assert (record["outcome"], record["paged"]) == ("failed", True)
    assert "accounting storage is disabled" in record["reason"]
    assert len(slurm.medic.pages()) == 1 and restarts(slurm) == 1


def test_a_stalled_job_whose_newest_run_failed_is_not_a_completion(slurm):
    stall_requeue(slurm)
    slurm.slurm.answers["squeue --noheader --format=%i"] = (0, "", "")
    slurm.slurm.answers["squeue --noheader --states=all"] = (0, "4100|COMPLETED\n4211|FAILED\n", "")
    slurm.run_agent()
    _, [record] = deliver(slurm, slurm.stream_event())
    assert (record["outcome"], record["paged"]) == ("failed", True)


def test_a_requeue_slurm_refuses_for_a_no_requeue_job_pages_to_resubmit_and_spends_no_restart(slurm):
    # Given an operator's requeue of job 4211, which was submitted with --no-requeue
    requeue(slurm)
    assert restarts(slurm, f"lineage#slurm:{CLUSTER}:4211") == 1
    slurm.slurm.answers["scontrol requeue"] = (1, "", "Requested operation is presently disabled for job 4211\n")
    slurm.run_agent()
    # When the result arrives
    _, [record] = deliver(slurm, slurm.stream_event())
    # Then it failed in Slurm's words, the page says why and to resubmit it, and the restart is given back
    assert (record["outcome"], record["paged"]) == ("failed", True)
    assert "presently disabled" in record["reason"]
    [page] = slurm.medic.pages()
    assert "--no-requeue" in page["Message"] and "resubmit it with sbatch" in page["Message"]
    assert restarts(slurm, f"lineage#slurm:{CLUSTER}:4211") == 0


def test_after_a_repair_a_no_requeue_job_is_paged_once_and_never_requeued(slurm, unhealthy_event):
    # Given the node replaced, its drain listing job 4211
    replace_node(slurm, unhealthy_event)
    slurm.slurm.answers["squeue --noheader"] = (0, "4211|llama3-70b\n", "")
    slurm.run_agent()
    deliver(slurm, slurm.stream_event())
    # When the reconciler's sweep (the node still in repair) asks, and Slurm says NODE_FAIL without the requeue flag
    slurm.medic.clock[0] += timedelta(minutes=5)
    stub = slurm.medic.hyperpod
    stub.stubber.add_response("list_cluster_nodes", {"ClusterNodeSummaries": [{
        "InstanceGroupName": "gpu-workers", "InstanceId": NODE, "NodeLogicalId": "node-7f3a",
        "InstanceType": "ml.p5.48xlarge", "LaunchTime": slurm.medic.clock[0],
        "InstanceStatus": {"Status": "Pending"}}]}, {"ClusterName": CLUSTER, "IncludeNodeLogicalIds": True})
    stub.size(16)
    reconcile({**SCHEDULE, "time": slurm.medic.clock[0].isoformat()}, slurm.medic.deps)
    [asked] = [c for c in slurm.queued() if c["kind"] == "job_states"]
    slurm.slurm.answers["squeue --noheader"] = (0, "4211|NODE_FAIL|0|1|0\n", "")
    slurm.run_agent()
    _, records = deliver(slurm, slurm.stream_event())
    # Then one record names the job, says Slurm cannot requeue it, and pages once; nothing is queued to requeue it
    [job] = [r for r in records if r.get("job") == "4211"]
    assert (job["trigger"], job["fault"], job["action"], job["outcome"], job["paged"]) == (
        "node_repair", "job_not_requeueable", "none", "deferred", True)
    assert "--no-requeue" in job["reason"] and NAME in job["reason"]
    [page] = slurm.medic.pages()
    assert "Slurm cannot requeue it, resubmit it" in page["Subject"]
    assert '4211 (named "llama3-70b"), NODE_FAIL' in page["Message"]
    assert [c for c in slurm.queued() if c["kind"] == "requeue_job"] == []
    assert restarts(slurm, f"lineage#slurm:{CLUSTER}:llama3-70b") == 0
    assert asked["job_ids"] == "4211"
