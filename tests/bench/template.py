"""A hand-written template in the shape the stack synthesizes, with the node, training-job, Batch and Bedrock job rules
and functions: the replay benchmarks run on it in the smoke tests without a synth. With ``agent_queues`` the node
function has the Slurm clusters' agent queues (AGENT_QUEUES, as infra/components/agent_channel.py gives it), so the
node path asks whether to drain first, as in the stack; no agent ever reports there, so the call is made at once."""

from __future__ import annotations

from medic.config import MedicConfig
from tests.helpers import handler_role_policy

NODE_PATTERN = {"source": ["aws.sagemaker"], "detail-type": ["SageMaker HyperPod Cluster Node Health Event"]}
JOB_PATTERN = {"source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"],
               "detail": {"TrainingJobStatus": ["Failed"]}}
# the failures, and Medic's restarts running (infra/components/managed_job_restarts.py), coarsely
BATCH_PATTERN = {"source": ["aws.batch"], "detail-type": ["Batch Job State Change"],
                 "detail": {"status": ["FAILED", "RUNNING"]}}
BEDROCK_PATTERN = {"source": ["aws.bedrock"], "detail-type": ["Model Customization Job State Change"],
                   "detail": {"jobStatus": ["Failed", "InProgress"]}}


def _function(handler: str, config: MedicConfig, agent_queues: bool = False) -> dict:
    variables: dict = {
        "MEDIC_CONFIG": config.to_env(), "LEDGER_TABLE": {"Ref": "LedgerABC"},
        "PAGE_TOPIC_ARN": {"Ref": "PagesABC"}, "MODE_PARAMETER": {"Ref": "ModeABC"},
        "POWERTOOLS_SERVICE_NAME": "medic", "POWERTOOLS_METRICS_NAMESPACE": "Medic"}
    if agent_queues:  # one queue per Slurm cluster, the JSON the stack renders (cluster name -> queue URL)
        slurm = [cluster.name for cluster in config.clusters if cluster.orchestrator == "slurm"]
        parts: list = ["{"]
        for index, name in enumerate(slurm):
            parts += [f'{", " if index else ""}"{name}": "', {"Ref": "AgentQueueABC"}, '"']
        variables["AGENT_QUEUES"] = {"Fn::Join": ["", [*parts, "}"]]}
    return {"Type": "AWS::Lambda::Function", "Properties": {
        "Handler": handler, "Runtime": "python3.13", "Role": {"Fn::GetAtt": ["RoleABC", "Arn"]},
        "Environment": {"Variables": variables}}}


def _pass_roles(config: MedicConfig) -> dict:
    """The restarts' iam:PassRole of the configured jobs' roles, to SageMaker and Bedrock only, as
    infra/components/training_job_restarts.py and managed_job_restarts.py grant it (the replay checks it:
    sim/iam.py)."""
    statements = [{"Effect": "Allow", "Action": "iam:PassRole", "Resource": sorted({arn for spec in specs
                                                                                    for arn in spec.role_arns}),
                   "Condition": {"StringEquals": {"iam:PassedToService": service}}}
                  for service, specs in (("sagemaker.amazonaws.com", config.training_jobs),
                                         ("bedrock.amazonaws.com", config.bedrock_jobs)) if specs]
    return {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "RoleABC"}], "PolicyDocument": {
        "Version": "2012-10-17", "Statement": statements}}}


def _rule(pattern: dict, function: str) -> dict:
    return {"Type": "AWS::Events::Rule", "Properties": {
        "EventPattern": pattern, "State": "ENABLED",
        "Targets": [{"Arn": {"Fn::GetAtt": [function, "Arn"]}, "Id": "Target0"}]}}


def template(config: MedicConfig, agent_queues: bool = False) -> dict:
    return {"Resources": {
        "KeyABC": {"Type": "AWS::KMS::Key", "Properties": {}},
        "LedgerABC": {"Type": "AWS::DynamoDB::Table", "Properties": {
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                     {"AttributeName": "sk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST"}},
        "PagesABC": {"Type": "AWS::SNS::Topic", "Properties": {}},
        "ModeABC": {"Type": "AWS::SSM::Parameter", "Properties": {
            "Name": "/medic/Medic/mode", "Type": "String", "Value": config.mode}},
        "RoleABC": {"Type": "AWS::IAM::Role", "Properties": {}},
        "RolePolicyABC": handler_role_policy("RoleABC", "LedgerABC", "PagesABC", "/medic/Medic/mode"),
        "RolePassABC": _pass_roles(config),
        "AgentQueueABC": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "NodeFnABC": _function("medic.handlers.node_health.handler", config, agent_queues),
        "JobFnABC": _function("medic.handlers.training_job.handler", config),
        "NodeRuleABC": _rule(NODE_PATTERN, "NodeFnABC"),
        "JobRuleABC": _rule(JOB_PATTERN, "JobFnABC"),
        "BatchFnABC": _function("medic.handlers.managed_job.handler", config),
        "BatchRuleABC": _rule(BATCH_PATTERN, "BatchFnABC"),
        "BedrockRuleABC": _rule(BEDROCK_PATTERN, "BatchFnABC"),
    }}
