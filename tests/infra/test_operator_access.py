"""Specification: ready-made IAM policies for who runs the medic CLI (issue 29, item 12), as stack outputs: read-only
(status, history, report, explain) changes nothing; operator adds pause/resume/mode, operator requests and
backtest, each on the stack's own resources only."""

from __future__ import annotations

import json

from tests.infra.conftest import one


def statements(raw: dict, name: str) -> list[dict]:
    return one(raw, "AWS::IAM::ManagedPolicy", f"OperatorAccess{name}")["Properties"]["PolicyDocument"]["Statement"]


def actions(statement: dict) -> list[str]:
    return statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]


def test_both_policies_are_stack_outputs(raw):
    for output, policy in (("OperatorReadOnlyPolicyArn", "OperatorAccessReadOnly"),
                           ("OperatorPolicyArn", "OperatorAccessOperator")):
        assert raw["Outputs"][output]["Value"]["Ref"].startswith(policy)


def test_the_read_only_policy_reads_and_changes_nothing(raw):
    granted = {action for statement in statements(raw, "ReadOnly") for action in actions(statement)}
    assert granted == {"cloudformation:DescribeStacks", "ssm:GetParameter", "dynamodb:Scan", "dynamodb:Query",
                       "dynamodb:GetItem", "kms:Decrypt", "logs:FilterLogEvents", "lambda:GetFunctionConfiguration",
                       "cloudwatch:ListMetrics", "cloudwatch:GetMetricData", "sagemaker:DescribeCluster",
                       # medic explain's reads (issue 34)
                       "sagemaker:DescribeClusterNode", "sagemaker:DescribeTrainingJob", "s3:ListBucket",
                       "batch:DescribeJobs", "bedrock:GetModelCustomizationJob"}
    # every statement but CloudWatch's and Batch's DescribeJobs names its resources (they take none)
    assert {a for s in statements(raw, "ReadOnly") if s["Resource"] == "*" for a in actions(s)} == {
        "cloudwatch:GetMetricData", "cloudwatch:ListMetrics", "batch:DescribeJobs"}
    kms = next(s for s in statements(raw, "ReadOnly") if actions(s) == ["kms:Decrypt"])
    assert "dynamodb." in json.dumps(kms["Condition"])  # the key only through DynamoDB, to read the ledger


def test_the_read_only_policy_lets_explain_read_exactly_the_configured_nodes_jobs_and_checkpoints(raw):
    # Given medic.yaml: clusters k3v9q2w8x1za and p7r2m4x9c1qa, training_jobs ft- (bucket ml-artifacts-...),
    # batch_jobs pt-llama- (bucket ml-checkpoints-...), bedrock_jobs cpt-llama-
    by_action = {action: statement for statement in statements(raw, "ReadOnly") for action in actions(statement)}

    def resources(action: str) -> str:
        return json.dumps(by_action[action]["Resource"])

    # Then each read explain makes is on exactly those: the clusters' nodes, jobs under the prefix, the buckets
    nodes = by_action["sagemaker:DescribeClusterNode"]["Resource"]
    assert len(nodes) == 2
    assert "cluster/k3v9q2w8x1za" in json.dumps(nodes) and "cluster/p7r2m4x9c1qa" in json.dumps(nodes)
    assert resources("sagemaker:DescribeTrainingJob").count("training-job/ft-*") == 1
    assert "training-job/*" not in resources("sagemaker:DescribeTrainingJob")
    buckets = by_action["s3:ListBucket"]["Resource"]
    assert len(buckets) == 2 and ":s3:::ml-artifacts-123456789012" in json.dumps(buckets)
    assert ":s3:::ml-checkpoints-123456789012" in json.dumps(buckets)
    # Bedrock names customization jobs by ids: this account's only
    assert resources("bedrock:GetModelCustomizationJob").endswith(':model-customization-job/*"]]}')
    assert ":AWS::AccountId" in resources("bedrock:GetModelCustomizationJob").replace('{"Ref": "', ":")
    # And nothing explain does not call: no object read, no tags, no job or node action
    assert not {a for a in by_action if a.startswith(("s3:Get", "sagemaker:List", "bedrock:List", "bedrock:Create",
                                                        "batch:Submit"))}


def test_the_operator_policy_adds_pause_requests_and_backtest_on_medics_resources_only(raw):
    operator = statements(raw, "Operator")
    by_action = {action: statement for statement in operator for action in actions(statement)}
    # pause/resume/mode: the mode parameter, and the change recorded under the stack's own ledger key only
    assert "ModeParameter" in json.dumps(by_action["ssm:PutParameter"]["Resource"])
    assert json.dumps(by_action["dynamodb:PutItem"]["Condition"]) == json.dumps({"ForAllValues:StringEquals": {
        "dynamodb:LeadingKeys": [{"Fn::Join": ["", ["modechange#", {"Ref": "AWS::StackName"}]]}]}})
    # requests: Medic's own kind of event on the default bus, nothing else
    assert by_action["events:PutEvents"]["Condition"] == {"StringEquals": {
        "events:source": "medic.operator", "events:detail-type": "Medic Requeue Job"}}
    assert "event-bus/default" in json.dumps(by_action["events:PutEvents"]["Resource"])
    # backtest: the archive, replays named as medic backtest names them, the read-back queue
    assert "replay/medic-backtest-*" in json.dumps(by_action["events:DescribeReplay"]["Resource"])
    assert "EventArchive" in json.dumps(by_action["events:DescribeArchive"]["Resource"])
    assert "EventArchiveReadbackQueue" in json.dumps(by_action["sqs:ReceiveMessage"]["Resource"])
    # and everything the read-only policy allows; no delete, no node or job action
    granted = set(by_action)
    read_only = {action for statement in statements(raw, "ReadOnly") for action in actions(statement)}
    assert read_only <= granted
    assert not [a for a in granted if a.split(":")[1].startswith(("Delete", "Batch", "Create", "Update"))
                and a != "sqs:DeleteMessage"]
