"""A hand-written template in the shape the CDK stack synthesizes (rule → function, table, topic,
parameter, key, DLQs): harness tests run against it without a synth."""

from __future__ import annotations

from medic.config import MedicConfig
from tests.helpers import handler_role_policy

NODE_HEALTH_PATTERN = {"source": ["aws.sagemaker"], "detail-type": ["SageMaker HyperPod Cluster Node Health Event"]}


def template(config: MedicConfig) -> dict:
    return {
        "Parameters": {"BootstrapVersion": {"Type": "AWS::SSM::Parameter::Value<String>",
                                            "Default": "/cdk-bootstrap/hnb659fds/version"}},
        "Resources": {
            "KeyABC": {"Type": "AWS::KMS::Key", "Properties": {"EnableKeyRotation": True}},
            "LedgerABC": {"Type": "AWS::DynamoDB::Table", "Properties": {
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                         {"AttributeName": "sk", "AttributeType": "S"}],
                "BillingMode": "PAY_PER_REQUEST",
                "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True}}},
            "PagesABC": {"Type": "AWS::SNS::Topic", "Properties": {
                "KmsMasterKeyId": {"Fn::GetAtt": ["KeyABC", "Arn"]}}},
            "ModeABC": {"Type": "AWS::SSM::Parameter", "Properties": {
                "Name": "/medic/Medic/mode", "Type": "String", "Value": config.mode}},
            "DlqABC": {"Type": "AWS::SQS::Queue", "Properties": {
                "KmsMasterKeyId": {"Ref": "KeyABC"}, "MessageRetentionPeriod": 1209600}},
            "NodeFnRoleABC": {"Type": "AWS::IAM::Role", "Properties": {}},
            "NodeFnRolePolicyABC": handler_role_policy("NodeFnRoleABC", "LedgerABC", "PagesABC", "/medic/Medic/mode",
                                                       "DlqABC"),
            "NodeFnABC": {"Type": "AWS::Lambda::Function", "Properties": {
                "Handler": "medic.handlers.node_health.handler", "Runtime": "python3.13",
                "Role": {"Fn::GetAtt": ["NodeFnRoleABC", "Arn"]},
                "Environment": {"Variables": {
                    "MEDIC_CONFIG": config.to_env(),
                    "LEDGER_TABLE": {"Ref": "LedgerABC"},
                    "PAGE_TOPIC_ARN": {"Ref": "PagesABC"},
                    "MODE_PARAMETER": {"Ref": "ModeABC"},
                    "POWERTOOLS_SERVICE_NAME": "medic",
                    "POWERTOOLS_METRICS_NAMESPACE": "Medic",
                    "STACK": {"Fn::Join": ["-", [{"Ref": "AWS::StackName"}, {"Ref": "AWS::Region"}]]}}},
                "DeadLetterConfig": {"TargetArn": {"Fn::GetAtt": ["DlqABC", "Arn"]}}}},
            "NodeRuleABC": {"Type": "AWS::Events::Rule", "Properties": {
                "EventPattern": NODE_HEALTH_PATTERN, "State": "ENABLED",
                "Targets": [{"Arn": {"Fn::GetAtt": ["NodeFnABC", "Arn"]}, "Id": "Target0",
                             "DeadLetterConfig": {"Arn": {"Fn::GetAtt": ["DlqABC", "Arn"]}},
                             "RetryPolicy": {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}}]}},
            "NodeInvokeConfigABC": {"Type": "AWS::Lambda::EventInvokeConfig", "Properties": {
                "FunctionName": {"Ref": "NodeFnABC"}, "Qualifier": "$LATEST", "MaximumRetryAttempts": 2}},
        },
    }


RESULT_FILTER = '{"eventName":["INSERT","MODIFY"],"dynamodb":{"Keys":{"sk":{"S":["result"]}}}}'


def with_stream_mapping(stack: dict, handler: str = "tests.e2e.standin_stream.handler", max_retries: int = 2) -> dict:
    """The ledger's stream (NEW_IMAGE) → a function, filtered to ``sk = result`` items, as the stack maps it."""
    resources = stack["Resources"]
    resources["LedgerABC"]["Properties"]["StreamSpecification"] = {"StreamViewType": "NEW_IMAGE"}
    resources["StreamFnABC"] = {"Type": "AWS::Lambda::Function", "Properties": {
        "Handler": handler, "Runtime": "python3.13", "Role": {"Fn::GetAtt": ["NodeFnRoleABC", "Arn"]},
        "Environment": {"Variables": {"LEDGER_TABLE": {"Ref": "LedgerABC"}}}}}
    resources["StreamMappingABC"] = {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {
        "EventSourceArn": {"Fn::GetAtt": ["LedgerABC", "StreamArn"]},
        "FunctionName": {"Ref": "StreamFnABC"},
        "FilterCriteria": {"Filters": [{"Pattern": RESULT_FILTER}]},
        "BatchSize": 2, "MaximumRetryAttempts": max_retries, "BisectBatchOnFunctionError": True,
        "FunctionResponseTypes": ["ReportBatchItemFailures"], "StartingPosition": "TRIM_HORIZON",
        "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": ["StreamFailuresABC", "Arn"]}}}}}
    resources["StreamFailuresABC"] = {"Type": "AWS::SQS::Queue", "Properties": {
        "KmsMasterKeyId": {"Ref": "KeyABC"}, "MessageRetentionPeriod": 1209600}}
    return stack
