"""``medic explain EVENT.json``: Medic's decision for the event now, from the live ledger and node, acting on
nothing. SageMaker is botocore's Stubber (moto lacks DescribeClusterNode): any call not expected here,
a mutating one included, fails the test."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from medic.ledger.jobs import JobStore, MedicRestart
from medic.ledger.pages import PageStore
from tests.cli.conftest import CLUSTER, NOW, REGION, Deployed, ago
from tests.helpers import hma_reason, load_event, node_event

NODE = "i-0d4e5f60718293a4b"
JOB = "ft-mistral-7b-0042"
CHECKPOINTS = "s3://ml-artifacts-123456789012/ft/checkpoints/ft-mistral-7b/"
JOB_CREATED = datetime(2026, 11, 21, tzinfo=UTC)


class Explainer:
    """Runs ``medic explain`` with the SageMaker calls it is expected to make, and nothing else."""

    def __init__(self, deployed: Deployed) -> None:
        self.deployed = deployed
        self.expected: list[tuple[str, dict, dict]] = []

    def node(self, group: str = "workers", status: str = "Running", node: str = NODE) -> None:
        self.expected.append(("describe_cluster_node", {"NodeDetails": {
            "InstanceGroupName": group, "InstanceId": node, "InstanceStatus": {"Status": status, "Message": ""}}},
            {"ClusterName": CLUSTER, "NodeId": node}))

    def cluster_size(self, nodes: int) -> None:
        self.expected.append(("describe_cluster", {
            "ClusterArn": f"arn:aws:sagemaker:{REGION}:123456789012:cluster/k3v9q2w8x1za",
            "ClusterName": CLUSTER, "ClusterStatus": "InService",
            "InstanceGroups": [{"InstanceGroupName": "workers", "CurrentCount": nodes}]}, {"ClusterName": CLUSTER}))

    def job(self, checkpoint: str | None = CHECKPOINTS, name: str = JOB, created: datetime = JOB_CREATED) -> None:
        arn = f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{name}"
        description: dict[str, Any] = {
            "TrainingJobName": name, "TrainingJobArn": arn, "ModelArtifacts": {"S3ModelArtifacts": ""},
            "TrainingJobStatus": "Failed", "SecondaryStatus": "Failed", "StoppingCondition": {},
            "CreationTime": created}
        if checkpoint:
            description["CheckpointConfig"] = {"S3Uri": checkpoint}
        self.expected.append(("describe_training_job", description, {"TrainingJobName": name}))

    def run(self, event: dict, *options: str) -> tuple[int, str, str]:
        path = self.deployed.tmp_path / "event.json"
        path.write_text(json.dumps(event))
        before = self.deployed.items()
        ssm_version = self.deployed.ssm.get_parameter(Name="/medic/Medic/mode")["Parameter"]["Version"]
        context = self.deployed.new_context()
        stubber = Stubber(context.client("sagemaker"))
        for operation, response, params in self.expected:
            stubber.add_response(operation, response, params)
        with stubber:
            result = self.deployed.cli("explain", str(path), "--config", str(self.deployed.config_file), *options,
                                       context=context)
            stubber.assert_no_pending_responses()
        # explain acts on nothing: the ledger and the mode are exactly as before
        assert self.deployed.items() == before
        assert self.deployed.ssm.get_parameter(Name="/medic/Medic/mode")["Parameter"]["Version"] == ssm_version
        return result.code, result.out, result.err


@pytest.fixture
def explainer(deployed: Deployed) -> Explainer:
    return Explainer(deployed)


def unhealthy(fault_type: str = "NvidiaErrorTerminate", **changes: Any) -> dict:
    return node_event(load_event("hyperpod-node-health-unhealthy"), reason=hma_reason(fault_type), **changes)


def decision(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("Decision:"))


def test_given_a_gpu_fault_on_a_healthy_cluster_when_explained_then_replace_and_the_call_it_would_make(
        explainer: Explainer):
    # Given a worker node, no earlier action, a cluster of 16 nodes
    explainer.node(group="workers", status="Running")
    explainer.cluster_size(16)

    # When the operator asks what Medic would do with this event
    code, out, err = explainer.run(unhealthy("NvidiaErrorTerminate"))

    # Then: replace it, because of the fault; the call it would make; and the ledger and mode are untouched
    assert code == 0, err
    assert decision(out) == "Decision:  replace_node -> executed (attempt 1)"
    assert "Why:       Fault gpu_fatal calls for replace." in out
    assert f"call BatchReplaceClusterNodes(ClusterName={CLUSTER}, NodeIds=[{NODE}])" in out
    assert "group workers, status Running (DescribeClusterNode)" in out
    assert "16 node(s) (DescribeCluster)" in out
    assert "no earlier action on this node" in out
    assert "Nothing was changed" in out


def test_given_the_node_was_replaced_ten_minutes_ago_when_the_event_comes_again_then_duplicate(
        explainer: Explainer):
    explainer.deployed.node_state(NODE, action="replace_node", at=ago(minutes=10))
    explainer.node(status="Pending")

    code, out, _ = explainer.run(unhealthy("NvidiaErrorTerminate"))

    assert decision(out) == "Decision:  replace_node -> duplicate (attempt 1)"
    assert "Already handled: replace_node for gpu_fatal" in out
    assert "page nobody" in out


def test_given_a_node_rebooted_this_morning_when_it_fails_again_then_the_explanation_is_escalation_to_replace(
        explainer: Explainer):
    explainer.deployed.node_state(NODE, action="reboot_node", fault="gpu_reboot", at=ago(hours=5))
    explainer.node()
    explainer.cluster_size(16)

    code, out, _ = explainer.run(unhealthy("NvidiaErrorReboot"))

    assert decision(out) == "Decision:  replace_node -> executed (attempt 2)"
    assert "and failed again: escalating to replace" in out
    assert "last reboot" in out


def test_given_the_clusters_hourly_budget_is_spent_when_explained_then_suppressed_with_one_storm_page(
        explainer: Explainer):
    for minutes, node in zip((50, 40, 30, 20), ("i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2", "i-0aaaaaaaaaaaaaaa3",
                                                "i-0aaaaaaaaaaaaaaa4"), strict=True):
        explainer.deployed.node_state(node, action="replace_node", at=ago(minutes=minutes))
    explainer.node()
    explainer.cluster_size(16)  # DescribeCluster's NodeRecovery decides defer vs act

    code, out, _ = explainer.run(unhealthy("NvidiaErrorTerminate"), "--json")

    result = json.loads(out)
    assert (result["record"]["outcome"], result["page"]) == ("suppressed", "storm")
    assert result["record"]["reason"] == "Cluster budget spent: 4 node actions in the last hour (max 4)."
    assert result["facts"]["cluster"].startswith("4 node action(s) in the last hour (max 4)")


def test_given_a_controller_node_when_explained_then_suppressed_and_a_human_is_paged(explainer: Explainer):
    explainer.node(group="controller")
    explainer.cluster_size(16)

    code, out, _ = explainer.run(unhealthy("NvidiaErrorTerminate"))

    assert decision(out) == "Decision:  replace_node -> suppressed (attempt 1)"
    assert "Instance group controller is protected" in out
    assert f"page once for incident node:{CLUSTER}:{NODE}" in out


def test_given_medic_paused_and_the_incident_already_paged_when_explained_then_suppressed_without_a_second_page(
        explainer: Explainer):
    explainer.deployed.set_mode("paused")
    PageStore(explainer.deployed.ledger()).claim_page(f"node:{CLUSTER}:{NODE}", ago(minutes=5))
    explainer.node()
    explainer.cluster_size(16)

    code, out, _ = explainer.run(unhealthy("NvidiaErrorTerminate"))

    assert decision(out) == "Decision:  replace_node -> suppressed (attempt 1)"
    assert "Medic is paused; would replace" in out
    assert "paused from /medic/Medic/mode" in out
    assert f"page nobody: incident node:{CLUSTER}:{NODE} already paged" in out


def test_given_dry_run_when_explained_then_dry_run_and_no_call(explainer: Explainer):
    explainer.deployed.set_mode("dry_run")
    explainer.node()
    explainer.cluster_size(16)

    code, out, _ = explainer.run(unhealthy("NvidiaErrorTerminate"))

    assert decision(out) == "Decision:  replace_node -> dry_run (attempt 1)"
    assert "call nothing (dry run)" in out and "BatchReplaceClusterNodes" not in out


def test_given_a_cluster_medic_does_not_manage_when_explained_then_ignored_without_looking_the_node_up(
        explainer: Explainer):
    code, out, _ = explainer.run(unhealthy("NvidiaErrorTerminate", cluster="someone-elses"))

    assert decision(out) == "Decision:  none -> ignored"
    assert "Cluster someone-elses is not managed by Medic." in out


def test_given_a_node_health_event_with_a_bad_instance_id_when_explained_then_rejected_naming_the_field(
        explainer: Explainer):
    code, out, _ = explainer.run(unhealthy(instance_id="i-$(reboot)"))

    assert code == 0
    assert decision(out) == "Decision:  none -> rejected"
    assert "detail.InstanceId" in out


def test_given_an_alarm_event_when_explained_then_it_says_which_events_explain_supports(explainer: Explainer):
    code, _, err = explainer.run(load_event("cloudwatch-alarm-state-change"))

    assert code == 1
    assert "explain supports node health events" in err and "training job state changes" in err


def test_given_a_retryable_training_job_failure_with_a_checkpoint_when_explained_then_restart_from_it(
        explainer: Explainer):
    # Given the failed job has a checkpoint stored under its CheckpointConfig
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="ml-artifacts-123456789012", CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.put_object(Bucket="ml-artifacts-123456789012", Key="ft/checkpoints/ft-mistral-7b/checkpoint-100.pt", Body=b"")
    explainer.job(checkpoint=CHECKPOINTS)

    # When
    code, out, err = explainer.run(copy.deepcopy(load_event("training-job-failed")))

    # Then
    assert code == 0, err
    assert decision(out) == "Decision:  restart_job -> executed (attempt 1)"
    assert "Retryable failure (internal_error); restart 1 of 3 from the checkpoint." in out
    assert f"call CreateTrainingJob {JOB}-r1" in out
    assert f"present ({CHECKPOINTS})" in out


def test_given_a_training_job_failure_already_handled_when_explained_then_duplicate(explainer: Explainer):
    JobStore(explainer.deployed.ledger()).claim_job_failure(JOB, NOW)

    code, out, _ = explainer.run(copy.deepcopy(load_event("training-job-failed")))

    assert decision(out) == "Decision:  none -> duplicate (attempt 1)"
    assert f"This failure of {JOB} was already handled." in out


def test_given_a_failure_of_medics_own_restart_when_explained_then_the_lineage_is_medics_note_of_it(
        explainer: Explainer):
    # Given Medic created ft-...-r1 as the first restart of the job (its note in the ledger, just before the job's
    # CreationTime) and r1 has failed
    JobStore(explainer.deployed.ledger()).intend_restart(MedicRestart(
        name=f"{JOB}-r1", root=JOB, attempt=1, restarted_from=JOB, intended_at=JOB_CREATED - timedelta(seconds=1)))
    explainer.job(name=f"{JOB}-r1", checkpoint=None)
    event = copy.deepcopy(load_event("training-job-failed"))
    event["detail"]["TrainingJobName"] = f"{JOB}-r1"
    event["detail"]["TrainingJobArn"] = f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{JOB}-r1"

    code, out, err = explainer.run(event)

    # Then the explanation reads the lineage from the ledger: restart 2 of the job (and no tags are asked for)
    assert code == 0, err
    assert f"{JOB}, 1 restart(s) before this job" in out
    assert decision(out) == "Decision:  restart_job -> suppressed (attempt 2)"


def test_given_an_unreadable_event_file_when_explained_then_an_error(deployed: Deployed, tmp_path: Path):
    (tmp_path / "bad.json").write_text("{not json")

    result = deployed.cli("explain", str(tmp_path / "bad.json"))

    assert result.code == 1 and "is not JSON" in result.err


def test_given_the_cluster_paused_by_an_operator_when_explained_then_suppressed_because_paused(
        explainer: Explainer):
    # Given medic pause --cluster for the event's cluster
    assert explainer.deployed.cli("pause", "--cluster", CLUSTER, "--for", "2h", "--reason", "IB upgrade",
                                  "--config", str(explainer.deployed.config_file)).code == 0
    explainer.node()
    explainer.cluster_size(16)

    code, out, _ = explainer.run(unhealthy("NvidiaErrorTerminate"), "--json")

    # Then the decision is the paused one the handler would make, and the facts say who paused it
    result = json.loads(out)
    assert (result["record"]["mode"], result["record"]["outcome"], result["record"]["why"]) == (
        "paused", "suppressed", "paused")
    assert "IB upgrade" in result["facts"]["paused"]
