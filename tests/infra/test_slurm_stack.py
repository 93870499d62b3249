"""Specification: every cluster gets an agent queue and a managed policy (Slurm: for the controller's instance
role; EKS: on a role only EKS Pod Identity may give the agent's ServiceAccount), the operator requeue rule and
the agent-results stream."""

from __future__ import annotations

import json

import pytest

from tests.infra.conftest import one, resources
from tests.infra.test_node_remediation_stack import matches


def requeue_event(cluster: str = "pretrain-slurm", account: str = "123456789012") -> dict:
    return {"version": "0", "id": "5d3c7e0a-1111-2222-3333-444455556666", "detail-type": "Medic Requeue Job",
            "source": "medic.operator", "account": account, "time": "2026-11-20T08:14:05Z",
            "region": "us-west-2", "resources": [],
            "detail": {"cluster": cluster, "job_name": "llama3-70b", "reason": "stalled at step 1200"}}


def test_each_cluster_has_an_encrypted_agent_queue_with_a_dead_letter_queue(raw):
    for cluster in ("pretrainslurm", "finetuneeks"):
        queue = one(raw, "AWS::SQS::Queue", f"SlurmJobRequeueAgent{cluster}Queue")["Properties"]
        assert queue["KmsMasterKeyId"]["Fn::GetAtt"][0].startswith("EncryptionKey")
        assert queue["RedrivePolicy"]["maxReceiveCount"] == 5


def test_the_agent_policy_is_scoped_to_its_queue_and_its_ledger_items(raw):
    policy = one(raw, "AWS::IAM::ManagedPolicy", "SlurmJobRequeueAgentpretrainslurm")
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    queue = next(s for s in statements if "sqs:ReceiveMessage" in s["Action"])
    assert queue["Resource"]["Fn::GetAtt"][0].startswith("SlurmJobRequeueAgentpretrainslurmQueue")
    ledger = next(s for s in statements if s["Action"] == "dynamodb:PutItem")
    # only its own cluster's keys: never Medic's `command#<id>` items, never another cluster's
    assert ledger["Condition"] == {"ForAllValues:StringLike": {
        "dynamodb:LeadingKeys": ["agent#pretrain-slurm", "agent#pretrain-slurm#command#*"]}}
    assert "sqs:SendMessage" not in json.dumps(statements)


def test_the_stack_outputs_the_queue_url_and_policy_for_the_install_script(raw):
    outputs = json.dumps(raw["Outputs"])
    assert "SlurmJobRequeueAgentpretrainslurmQueueUrl" in outputs
    assert "SlurmJobRequeueAgentpretrainslurmAgentPolicyArn" in outputs


def test_the_requeue_rule_takes_every_operator_request_from_the_account_whatever_cluster_it_names(raw):
    rule = one(raw, "AWS::Events::Rule", "SlurmJobRequeueRequeueRule")["Properties"]
    assert matches(rule["EventPattern"], requeue_event())
    assert matches(rule["EventPattern"], requeue_event(cluster="finetune-eks"))
    # a cluster Medic does not manage reaches the handler, which records it `rejected` (issue 29, item 4)
    assert matches(rule["EventPattern"], requeue_event(cluster="elsewhere"))
    assert not matches(rule["EventPattern"], requeue_event(account="999999999999"))
    assert "DeadLetterConfig" in rule["Targets"][0]
    # `medic release` of a quarantined node (issue 32) is the same function's, and nothing else from the source
    assert matches(rule["EventPattern"], {**requeue_event(), "detail-type": "Medic Release Node"})
    assert not matches(rule["EventPattern"], {**requeue_event(), "detail-type": "Medic Something Else"})


def test_medic_history_finds_the_operator_requests_and_agent_results_log_groups(raw):
    # medic history reads every stack output ending in LogGroup: a rejected request is a record it must show
    for output, group in (("OperatorRequestsLogGroup", "SlurmJobRequeueRequeueHandlerLogs"),
                          ("AgentResultsLogGroup", "SlurmJobRequeueAgentResultsHandlerLogs")):
        assert raw["Outputs"][output]["Value"]["Ref"].startswith(group)


def test_the_requeue_function_knows_the_queues_and_may_only_send_to_them(raw):
    function = one(raw, "AWS::Lambda::Function", "SlurmJobRequeueRequeueHandler")["Properties"]
    assert function["Handler"] == "medic.handlers.requeue_request.handler"
    assert "pretrain-slurm" in json.dumps(function["Environment"]["Variables"]["AGENT_QUEUES"])
    policy = one(raw, "AWS::IAM::Policy", "SlurmJobRequeueRequeueHandlerRole")["Properties"]["PolicyDocument"]
    send = next(s for s in policy["Statement"] if s["Action"] == "sqs:SendMessage")
    queues = send["Resource"] if isinstance(send["Resource"], list) else [send["Resource"]]
    names = sorted(queue["Fn::GetAtt"][0] for queue in queues)
    # the agent queues, and the function's own dead-letter queue (async invoke failures)
    assert [name[:38] for name in names] == ["SlurmJobRequeueAgentfinetuneeksQueueD5",
                                             "SlurmJobRequeueAgentpretrainslurmQueue",
                                             "SlurmJobRequeueRequeueHandlerDeadLette"]


def test_agent_results_reach_their_function_from_the_ledger_stream_without_blocking_it(raw):
    (mapping,) = resources(raw, "AWS::Lambda::EventSourceMapping").values()
    properties = mapping["Properties"]
    assert properties["EventSourceArn"]["Fn::GetAtt"][1] == "StreamArn"
    assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert properties["BisectBatchOnFunctionError"] is True
    assert "OnFailure" in properties["DestinationConfig"]
    (pattern,) = [json.loads(f["Pattern"]) for f in properties["FilterCriteria"]["Filters"]]
    # every item an agent writes (its results and heartbeats are recorded; each gets a bounded expiry), nothing of
    # Medic's, never a deletion
    assert pattern == {"eventName": ["INSERT", "MODIFY"], "dynamodb": {"Keys": {"pk": {"S": [{"prefix": "agent#"}]}}}}


def test_the_agent_may_only_check_its_own_clusters_command_items_never_write_them(raw):
    # The claim's transaction: a ConditionCheck on Medic's `command#<cluster>#<id>/issued`, a Put of its own claim.
    # Only its own cluster's commands (issue 28 item 12): a check on another cluster's would tell whether it exists.
    policy = one(raw, "AWS::IAM::ManagedPolicy", "SlurmJobRequeueAgentpretrainslurm")
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    ledger = [s for s in statements if any(action.startswith("dynamodb:") for action in _actions(s))]
    assert sorted((tuple(_actions(s)), json.dumps(s["Condition"])) for s in ledger) == [
        (("dynamodb:ConditionCheckItem",), json.dumps({"ForAllValues:StringLike": {
            "dynamodb:LeadingKeys": ["command#pretrain-slurm#*"]}})),
        (("dynamodb:PutItem",), json.dumps({"ForAllValues:StringLike": {
            "dynamodb:LeadingKeys": ["agent#pretrain-slurm", "agent#pretrain-slurm#command#*"]}})),
    ]


def _actions(statement: dict) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def _roles_sending_to(raw: dict, queue_prefix: str) -> set[str]:
    """The roles whose identity policies allow sqs:SendMessage on the queue."""
    roles = set()
    for policy in resources(raw, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            targets = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            if "sqs:SendMessage" in _actions(statement) and any(
                    isinstance(t, dict) and t.get("Fn::GetAtt", [""])[0].startswith(queue_prefix) for t in targets):
                roles |= {role["Ref"] for role in policy["Properties"]["Roles"]}
    return roles


def test_the_agent_queue_accepts_send_message_only_from_medics_roles(raw):
    # Given the agent queue's resource policy
    (queue_policy,) = [p for p in resources(raw, "AWS::SQS::QueuePolicy").values()
                       if p["Properties"]["Queues"][0]["Ref"].startswith("SlurmJobRequeueAgentpretrainslurmQueue")]
    statements = queue_policy["Properties"]["PolicyDocument"]["Statement"]
    # Then every principal but Medic's senders is denied SendMessage (an explicit Deny: no grant elsewhere in the
    # account can let anyone else queue a command), and TLS is still required
    [only_medic] = [s for s in statements if s.get("Sid") == "OnlyMedicSends"]
    assert (only_medic["Effect"], only_medic["Principal"], only_medic["Action"]) == ("Deny", {"AWS": "*"},
                                                                                       "sqs:SendMessage")
    allowed = only_medic["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
    assert sorted(arn["Fn::GetAtt"][1] for arn in allowed) == ["Arn"] * 5
    allowed_roles = {arn["Fn::GetAtt"][0] for arn in allowed}
    # And those are exactly the roles granted SendMessage on it: the requeue function and the alarm handler; around
    # a node action (issue 16) the node path and the reconciler (drain, resume, job states) and the results function
    # (it requeues the jobs a repair hit)
    assert allowed_roles == _roles_sending_to(raw, "SlurmJobRequeueAgentpretrainslurmQueue")
    assert sorted(role[:20] for role in allowed_roles) == [
        "AlarmResponseHandler", "NodeRemediationHandl", "ReconcilerHandlerRol", "SlurmJobRequeueAgent",
        "SlurmJobRequeueReque"]
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
               for s in statements)


def test_an_eks_agent_gets_its_policy_through_a_role_only_pod_identity_gives_its_service_account(raw):
    # Given the default config's EKS cluster (no eks_cluster_name: the operator creates the association)
    role = one(raw, "AWS::IAM::Role", "SlurmJobRequeueAgentfinetuneeksAgentRole")["Properties"]
    statements = role["AssumeRolePolicyDocument"]["Statement"]
    # Then only EKS Pod Identity assumes it, for the agent's namespace and ServiceAccount, in this account
    assume = next(s for s in statements if s["Action"] == "sts:AssumeRole")
    assert assume["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert assume["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-namespace"] == "medic-agent"
    assert assume["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == "medic-agent"
    assert {"sts:TagSession"} == {s["Action"] for s in statements} - {"sts:AssumeRole"}
    # and its only permissions are the agent policy (its queue, its ledger items)
    (attached,) = role["ManagedPolicyArns"]
    assert attached["Ref"].startswith("SlurmJobRequeueAgentfinetuneeksAgentPolicy")
    assert "SlurmJobRequeueAgentfinetuneeksAgentRoleArn" in json.dumps(raw["Outputs"])
    # no association without the EKS cluster's name
    assert not resources(raw, "AWS::EKS::PodIdentityAssociation")


@pytest.fixture(scope="module")
def eks_raw(tmp_path_factory) -> dict:
    """The stack for a config naming the EKS cluster behind the HyperPod cluster (bert-xl is watched there)."""
    from tests.infra.conftest import ROOT, synthesize

    tmp_path = tmp_path_factory.mktemp("eks")
    config = tmp_path / "medic.yaml"
    config.write_text((ROOT / "medic.yaml").read_text().replace(
        "    orchestrator: eks\n", "    orchestrator: eks\n    eks_cluster_name: finetune\n"))
    _, path = synthesize(config, tmp_path / "cdk.out")
    return json.loads(path.read_text())


def test_with_the_eks_cluster_named_the_stack_associates_the_role_with_the_agents_service_account(eks_raw):
    raw = eks_raw
    # Then one Pod Identity association ties the agent's ServiceAccount to the agent role
    (association,) = resources(raw, "AWS::EKS::PodIdentityAssociation").values()
    assert {key: association["Properties"][key] for key in ("ClusterName", "Namespace", "ServiceAccount")} == {
        "ClusterName": "finetune", "Namespace": "medic-agent", "ServiceAccount": "medic-agent"}
    role = one(raw, "AWS::IAM::Role", "SlurmJobRequeueAgentfinetuneeksAgentRole")["Properties"]
    assume = next(s for s in role["AssumeRolePolicyDocument"]["Statement"] if s["Action"] == "sts:AssumeRole")
    assert assume["Condition"]["StringEquals"]["aws:RequestTag/eks-cluster-name"] == "finetune"


ISSUER = "https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"


@pytest.fixture(scope="module")
def irsa_raw(tmp_path_factory) -> dict:
    """The stack for a config giving the EKS cluster's OIDC issuer (the agent gets credentials through IRSA)."""
    from tests.infra.conftest import ROOT, synthesize

    tmp_path = tmp_path_factory.mktemp("irsa")
    config = tmp_path / "medic.yaml"
    config.write_text((ROOT / "medic.yaml").read_text().replace(
        "    orchestrator: eks\n", f"    orchestrator: eks\n    eks_oidc_issuer: {ISSUER}\n"))
    _, path = synthesize(config, tmp_path / "cdk.out")
    return json.loads(path.read_text())


def test_with_the_oidc_issuer_the_agent_role_also_trusts_irsa_for_the_agents_service_account_only(irsa_raw):
    role = one(irsa_raw, "AWS::IAM::Role", "SlurmJobRequeueAgentfinetuneeksAgentRole")["Properties"]
    statements = role["AssumeRolePolicyDocument"]["Statement"]
    # Then besides Pod Identity's two statements, one for the cluster's IAM OIDC provider in this account ...
    [web] = [s for s in statements if s["Action"] == "sts:AssumeRoleWithWebIdentity"]
    provider = "oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
    assert web["Principal"]["Federated"]["Fn::Join"][1] == [
        "arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, f":oidc-provider/{provider}"]
    # ... for the token of the agent's ServiceAccount only, with STS as its audience (EKS: the `sub` and `aud`)
    assert web["Condition"] == {"StringEquals": {f"{provider}:sub": "system:serviceaccount:medic-agent:medic-agent",
                                                 f"{provider}:aud": "sts.amazonaws.com"}}
    assert {s["Action"] for s in statements} == {"sts:AssumeRole", "sts:TagSession", "sts:AssumeRoleWithWebIdentity"}


def test_without_the_oidc_issuer_nothing_but_pod_identity_assumes_the_agent_role(raw):
    role = one(raw, "AWS::IAM::Role", "SlurmJobRequeueAgentfinetuneeksAgentRole")["Properties"]
    assert "sts:AssumeRoleWithWebIdentity" not in json.dumps(role["AssumeRolePolicyDocument"])


def test_the_pod_identity_association_keeps_its_session_tags(eks_raw):
    # The role's conditions read the session tags EKS Pod Identity adds: an association without them gets nothing
    (association,) = resources(eks_raw, "AWS::EKS::PodIdentityAssociation").values()
    assert association["Properties"].get("DisableSessionTags", False) is False


def test_the_results_function_may_call_node_actions_only_on_the_slurm_clusters(raw):
    # The node call that waited for the agent's drain is made from the drain's result (issue 27): reboot, replace,
    # and DescribeClusterNode to re-check a refused node, on the Slurm clusters (whose agents drain) and nothing else
    policy = one(raw, "AWS::IAM::Policy", "SlurmJobRequeueAgentResultsHandlerRole")["Properties"]["PolicyDocument"]
    [statement] = [s for s in policy["Statement"] if "sagemaker:BatchReplaceClusterNodes" in s["Action"]]
    assert sorted(statement["Action"]) == ["sagemaker:BatchRebootClusterNodes", "sagemaker:BatchReplaceClusterNodes",
                                           "sagemaker:DescribeClusterNode"]
    resource = statement["Resource"]
    [arn] = [json.dumps(arn) for arn in (resource if isinstance(resource, list) else [resource])]
    assert ":cluster/k3v9q2w8x1za" in arn  # pretrain-slurm; not finetune-eks (p7r2m4x9c1qa)
