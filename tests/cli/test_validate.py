"""Specification: ``medic validate CONFIG [--live]`` (issue 29, item 12). Without --live, synth's own refusals and
warnings (infra/config.py), no synth; with --live, the config's names against the account, in moto: the cluster
(DescribeCluster: name, id), protected_groups, the agent policy on the controller group's role only, the training
jobs' roles (GetRole) and buckets (HeadBucket)."""

from __future__ import annotations

import json

import boto3
import pytest
from moto.sagemaker.models import sagemaker_backends

from tests.cli.conftest import REGION, Deployed

ACCOUNT = "123456789012"  # moto's
CLUSTER_ID = "k3v9q2w8x1za"
CONFIG = f"""
notify:
  emails: [oncall@example.com]
clusters:
  - name: pretrain-slurm
    id: {CLUSTER_ID}
    orchestrator: slurm
    protected_groups: [controller, login]
training_jobs:
  - prefix: ft-mistral-
    role_arns: [arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole]
    checkpoint_buckets: [ml-artifacts-{ACCOUNT}]
jobs:
  - name: llama3-70b
    cluster: pretrain-slurm
    stall_minutes: 8
"""
TRUST = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                            "Principal": {"Service": "sagemaker.amazonaws.com"}}]})


class Account:
    """What the config names, created in moto as an operator's account would hold it."""

    def __init__(self, *, shared_role: bool = False) -> None:
        self.iam = boto3.client("iam", region_name=REGION)
        role = {name: self.iam.create_role(RoleName=name, AssumeRolePolicyDocument=TRUST)["Role"]["Arn"]
                for name in ("SageMakerTrainingRole", "pretrain-controller", "pretrain-workers")}
        boto3.client("s3", region_name=REGION).create_bucket(
            Bucket=f"ml-artifacts-{ACCOUNT}", CreateBucketConfiguration={"LocationConstraint": REGION})
        workers_role = role["pretrain-controller"] if shared_role else role["pretrain-workers"]
        groups = [("controller", role["pretrain-controller"], "Controller"), ("login", workers_role, "Login"),
                  ("workers", workers_role, "Compute")]
        boto3.client("sagemaker", region_name=REGION).create_cluster(ClusterName="pretrain-slurm", InstanceGroups=[
            {"InstanceGroupName": name, "InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "ExecutionRole": arn,
             "ThreadsPerCore": 1,
             "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/slurm/", "OnCreate": "on_create.sh"},
             "SlurmConfig": {"NodeType": node_type}} for name, arn, node_type in groups])
        # A real ClusterArn ends in the cluster's id; moto's in its name (sim/README.md says the same of the replay)
        cluster = sagemaker_backends[ACCOUNT][REGION].clusters["pretrain-slurm"]
        cluster.arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/{CLUSTER_ID}"
        # The deployed stack's agent policy (output SlurmJobRequeueAgent<cluster>AgentPolicyArn<hash>), on the
        # controller group's role, as agent/README.md says
        self.policy = self.iam.create_policy(PolicyName="MedicAgentPretrainSlurm",
                                             PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
                                                 {"Effect": "Allow", "Action": "sqs:ReceiveMessage",
                                                  "Resource": "*"}]}))["Policy"]["Arn"]
        self.iam.attach_role_policy(RoleName="pretrain-controller", PolicyArn=self.policy)
        boto3.client("cloudformation", region_name=REGION).create_stack(StackName="MedicLive", TemplateBody=json.dumps({
            "Resources": {"Mode": {"Type": "AWS::SSM::Parameter", "Properties": {
                "Name": "/medic/MedicLive/mode", "Type": "String", "Value": "act"}}},
            "Outputs": {"SlurmJobRequeueAgentpretrainslurmAgentPolicyArn5B1E2C3D": {"Value": self.policy}}}))


def validate(deployed: Deployed, text: str, *options: str):
    path = deployed.tmp_path / "candidate.yaml"
    path.write_text(text)
    return deployed.cli("validate", str(path), "--stack", "MedicLive", *options)


def test_without_live_it_refuses_what_synth_refuses(deployed):
    result = validate(deployed, CONFIG.replace("jobs:\n", "jobs:\n  - name: bert\n    cluster: pretrain-slurm\n")
                      + "notify:\n  https: []\n")
    assert result.code == 1
    assert "refused, as synth would refuse it" in result.out
    assert "duplicate key 'notify' at line 21 (first at line 2)" in result.out


def test_without_live_it_warns_as_synth_warns_and_passes(deployed):
    result = validate(deployed, CONFIG.replace("prefix: ft-mistral-", "prefix: ft-"))
    assert result.code == 0, result.out
    assert "  WARN config: training_jobs.0.prefix: 'ft-' has 2 letters and digits" in result.out
    assert result.out.rstrip().endswith("0 failed, 1 warning(s) (names not checked against the account: --live)")


@pytest.mark.usefixtures("deployed")
def test_live_on_an_account_that_matches_the_config_every_check_holds(deployed):
    Account()
    result = validate(deployed, CONFIG, "--live")
    assert result.code == 0, result.out
    assert f"checked against account {ACCOUNT}" in result.out
    assert [line.split(":")[0].strip() for line in result.out.splitlines()[1:-1]] == [
        "OK   cluster pretrain-slurm"] * 3 + ["OK   training_jobs.0.role_arns",
                                               "OK   training_jobs.0.checkpoint_buckets"]
    assert "the agent policy is attached to the controller group's role only" in result.out
    assert result.out.rstrip().endswith("0 failed, 0 warning(s)")


def test_live_names_each_name_the_account_does_not_have(deployed):
    Account()
    wrong = (CONFIG.replace(f"id: {CLUSTER_ID}", "id: aaaaaaaaaaaa")
             .replace("protected_groups: [controller, login]", "protected_groups: [controller, login-nodes]")
             .replace("role/SageMakerTrainingRole", "role/SageMakerTrainingRol")
             .replace(f"ml-artifacts-{ACCOUNT}]", f"ml-artifacts-{ACCOUNT}, ml-checkpoints-{ACCOUNT}]")
             .replace("training_jobs:\n", "  - name: pretrain-slurm-b\n    id: bbbbbbbbbbbb\n    orchestrator: slurm\n"
                                          "training_jobs:\n"))
    result = validate(deployed, wrong, "--live")
    assert result.code == 1
    out = result.out
    assert (f"FAIL cluster pretrain-slurm: id aaaaaaaaaaaa in the config, but its ClusterArn "
            f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/{CLUSTER_ID} ends in {CLUSTER_ID}: "
            f"set id: {CLUSTER_ID}") in out
    assert "FAIL cluster pretrain-slurm: protected_groups ['login-nodes'] are not instance groups of the cluster" in out
    assert "FAIL cluster pretrain-slurm-b: DescribeCluster does not find it" in out
    assert "clusters[].name must be the HyperPod cluster's exact name" in out
    assert (f"FAIL training_jobs.0.role_arns: role arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRol: GetRole does "
            "not find it") in out
    assert f"OK   training_jobs.0.checkpoint_buckets: bucket ml-artifacts-{ACCOUNT} exists" in out
    assert f"FAIL training_jobs.0.checkpoint_buckets: bucket ml-checkpoints-{ACCOUNT}: HeadBucket does not find it" \
        in out


def test_live_refuses_an_agent_policy_on_a_role_the_workers_share(deployed):
    # Given AWS's samples' layout: one execution role for every instance group, with the agent policy on it
    Account(shared_role=True)
    result = validate(deployed, CONFIG, "--live")
    # Then validate fails: every worker node would have the agent's rights
    assert result.code == 1
    assert ("FAIL cluster pretrain-slurm: the agent policy is attached to the role of group(s) ['login', 'workers'], "
            "not only the controller's: give the controller group a role of its own") in result.out


def test_live_warns_of_a_role_of_another_account(deployed):
    Account()
    result = validate(deployed, CONFIG.replace(f"iam::{ACCOUNT}:role", "iam::210987654321:role"), "--live")
    assert ("WARN config: training_jobs.0.role_arns: arn:aws:iam::210987654321:role/SageMakerTrainingRole is a role of "
            f"account 210987654321, not the deploying account {ACCOUNT}") in result.out
