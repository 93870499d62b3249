"""``medic status``: per configured cluster, which of the preconditions a deployer must know hold, from
DescribeCluster (answers validated against botocore's model by the Stubber), and what it cannot tell."""

from __future__ import annotations

import json
from datetime import datetime

import boto3
import pytest
from botocore.stub import Stubber

from tests.cli.conftest import CLUSTER, REGION, Deployed

ACCOUNT = "123456789012"
EKS = "finetune-eks"


def described(name: str, cluster_id: str, **fields) -> dict:
    """A DescribeCluster response as AWS shapes it (required: ClusterArn, ClusterStatus, InstanceGroups)."""
    return {"ClusterArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/{cluster_id}", "ClusterName": name,
            "ClusterStatus": "InService", "CreationTime": datetime(2025, 3, 4, 10, 0),
            "InstanceGroups": [{"InstanceGroupName": "workers", "InstanceType": "ml.p5.48xlarge", "CurrentCount": 4,
                                "TargetCount": 4, "CurrentImageReleaseVersion": "2025.02.14",
                                "SoftwareUpdateStatus": "Succeeded"}],
            **fields}


SLURM_CONTINUOUS_AUTOMATIC = described(CLUSTER, "k3v9q2w8x1za", NodeProvisioningMode="Continuous",
                                       NodeRecovery="Automatic", Orchestrator={"Slurm": {}})
EKS_ON_DEMAND = described(EKS, "p7r2m4x9c1qa", NodeRecovery="Automatic", Orchestrator={
    "Eks": {"ClusterArn": f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/hp-eks"}})


def status(deployed: Deployed, *answers: dict | str, json_output: bool = True):
    """Run ``medic status --config ...`` with DescribeCluster answering, in config order, each answer (a response,
    or an error code)."""
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    stubber = Stubber(sagemaker)
    for name, answer in zip((CLUSTER, EKS), answers, strict=True):
        if isinstance(answer, str):
            stubber.add_client_error("describe_cluster", service_error_code=answer,
                                     service_message=f"Cluster {name} not found", expected_params={"ClusterName": name})
        else:
            stubber.add_response("describe_cluster", answer, {"ClusterName": name})
    context = deployed.new_context()
    context._clients["sagemaker"] = sagemaker
    with stubber:
        result = deployed.cli("status", "--config", str(deployed.config_file), *(["--json"] if json_output else []),
                              context=context)
        stubber.assert_no_pending_responses()
    assert result.code == 0, result.err
    return result


def checks(result, cluster: str) -> dict[str, tuple[str, str]]:
    (found,) = [c for c in json.loads(result.out)["preconditions"] if c["cluster"] == cluster]
    return {c["check"]: (c["state"], c["detail"]) for c in found["checks"]}


def test_given_a_continuous_cluster_when_status_then_cluster_events_hold(deployed):
    result = status(deployed, SLURM_CONTINUOUS_AUTOMATIC, EKS_ON_DEMAND)
    assert checks(result, CLUSTER)["cluster events"][0] == "ok"
    assert checks(result, CLUSTER)["orchestrator"] == ("ok", "Slurm, as configured")


def test_given_the_configured_ids_when_status_then_each_matches_describeclusters_arn(deployed):
    result = status(deployed, SLURM_CONTINUOUS_AUTOMATIC, EKS_ON_DEMAND)
    assert checks(result, CLUSTER)["cluster id"] == ("ok", "k3v9q2w8x1za, as configured")


def test_given_a_mistyped_cluster_id_when_status_then_it_says_no_and_names_the_id_to_set(deployed):
    # Given DescribeCluster's ClusterArn for pretrain-slurm ends in another id than the config's k3v9q2w8x1za
    recreated = described(CLUSTER, "q8w4e6r2t0yz", NodeProvisioningMode="Continuous", NodeRecovery="None",
                          Orchestrator={"Slurm": {}})
    state, detail = checks(status(deployed, recreated, EKS_ON_DEMAND), CLUSTER)["cluster id"]
    # Then status says NO, with the id the config must say
    assert state == "NO"
    assert "the cluster's id is q8w4e6r2t0yz" in detail and "set clusters[].id to q8w4e6r2t0yz" in detail


def test_given_a_cluster_not_in_continuous_provisioning_then_status_says_it_gets_no_cluster_events(deployed):
    # HyperPod sends "SageMaker HyperPod Cluster Event" only with NodeProvisioningMode=Continuous
    state, detail = checks(status(deployed, SLURM_CONTINUOUS_AUTOMATIC, EKS_ON_DEMAND), EKS)["cluster events"]
    assert state == "NO" and "NodeProvisioningMode not set" in detail and "no cluster events" in detail


def test_given_hyperpod_recovers_nodes_but_the_config_says_none_then_status_shows_the_disagreement(deployed):
    # The config's pretrain-slurm says node_recovery: none (the default); DescribeCluster says Automatic
    state, detail = checks(status(deployed, SLURM_CONTINUOUS_AUTOMATIC, EKS_ON_DEMAND), CLUSTER)["node recovery"]
    assert state == "NO"
    assert "HyperPod Automatic, config none: they disagree" in detail
    assert "set clusters[].node_recovery to automatic" in detail


def test_given_recovery_settings_that_agree_then_node_recovery_holds(deployed):
    result = status(deployed, SLURM_CONTINUOUS_AUTOMATIC, EKS_ON_DEMAND)
    assert checks(result, EKS)["node recovery"] == ("ok", "HyperPod Automatic, config automatic")


def test_whether_the_batch_node_apis_work_is_reported_as_unknown_with_what_describecluster_does_say(deployed):
    state, detail = checks(status(deployed, SLURM_CONTINUOUS_AUTOMATIC, EKS_ON_DEMAND), CLUSTER)["Batch node APIs"]
    assert state == "unknown"
    assert "platform image 2025.02.14" in detail and "last software update Succeeded" in detail
    assert "UpdateClusterSoftware" in detail


def test_given_an_eks_cluster_without_container_insights_then_status_says_its_alarm_has_nothing_to_watch(deployed):
    # The EKS cluster's name comes from DescribeCluster's Orchestrator.Eks.ClusterArn (not set in the config)
    state, detail = checks(status(deployed, SLURM_CONTINUOUS_AUTOMATIC, EKS_ON_DEMAND), EKS)["Container Insights"]
    assert state == "NO" and "ClusterName=hp-eks" in detail


def test_given_container_insights_publishes_then_it_holds(deployed):
    boto3.client("cloudwatch", region_name=REGION).put_metric_data(Namespace="ContainerInsights", MetricData=[{
        "MetricName": "cluster_failed_node_count", "Value": 0,
        "Dimensions": [{"Name": "ClusterName", "Value": "hp-eks"}]}])
    assert checks(status(deployed, SLURM_CONTINUOUS_AUTOMATIC, EKS_ON_DEMAND), EKS)["Container Insights"][0] == "ok"


def test_slurm_clusters_get_no_container_insights_check(deployed):
    assert "Container Insights" not in checks(status(deployed, SLURM_CONTINUOUS_AUTOMATIC, EKS_ON_DEMAND), CLUSTER)


def test_given_a_configured_orchestrator_that_is_wrong_then_status_says_so(deployed):
    slurm_described_as_eks = described(CLUSTER, "k3v9q2w8x1za", Orchestrator={
        "Eks": {"ClusterArn": f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/other"}})
    state, detail = checks(status(deployed, slurm_described_as_eks, EKS_ON_DEMAND), CLUSTER)["orchestrator"]
    assert state == "NO" and "the cluster is Eks, the config says slurm" in detail


@pytest.mark.parametrize("code", ["ResourceNotFound", "AccessDeniedException"])
def test_given_a_cluster_describecluster_cannot_read_then_status_says_why_and_shows_the_rest(deployed, code):
    result = status(deployed, code, EKS_ON_DEMAND)
    (state, detail), = checks(result, CLUSTER).values()
    assert state == "NO" and code in detail
    assert checks(result, EKS)["node recovery"][0] == "ok"


def test_the_text_status_lists_each_clusters_preconditions(deployed):
    out = status(deployed, SLURM_CONTINUOUS_AUTOMATIC, EKS_ON_DEMAND, json_output=False).out
    section = out.split("Cluster preconditions")[1]
    assert f"  {CLUSTER}  (arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/k3v9q2w8x1za, InService, created 2025-03-04" \
        in section
    assert "    NO       node recovery       HyperPod Automatic, config none: they disagree" in section
    assert "    unknown  Batch node APIs" in section


def test_without_a_config_status_asks_for_one(deployed):
    out = deployed.cli("status").out
    assert "no config: pass --config medic.yaml to check the configured clusters" in out
