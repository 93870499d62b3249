"""Specification: the replay checks each function's calls against its role's identity-based policies (sim/iam.py,
sim/policy.py) with the request context AWS builds: dynamodb:LeadingKeys holds the partition key of every item a
request touches, ForAllValues holds only when every one of them matches (and for none), what the emulator does not
model fails loudly. Medic's own ledger grants (infra/components/shared.py) are the policy under test."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from infra.components.shared import LEDGER_ACTIONS, LEDGER_DELETED_PREFIXES, LEDGER_NAMESPACES
from sim.cfn import Physical, SimError, Template
from sim.iam import AccessDenied, Authorization, Permissions, dynamodb_authorizations
from sim.policy import Request, decide
from tests.infra.test_least_privilege import ledger_deleted_prefixes

REGION, ACCOUNT = "us-west-2", "123456789012"
TABLE = "medic-ledger"
TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{TABLE}"


def ledger_grants(prefixes=LEDGER_DELETED_PREFIXES) -> list[dict]:
    """The statements Shared.grant_ledger_paging_mode gives every function, on the ledger table."""
    return [{"Effect": "Allow", "Action": LEDGER_ACTIONS, "Resource": {"Fn::GetAtt": ["Ledger", "Arn"]}},
            {"Effect": "Allow", "Action": "dynamodb:DeleteItem", "Resource": {"Fn::GetAtt": ["Ledger", "Arn"]},
             "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [
                 f"{namespace}{prefix}*" for namespace in LEDGER_NAMESPACES for prefix in prefixes]}}}]


def template(statements: list[dict]) -> Template:
    t = Template({"Resources": {
        "Ledger": {"Type": "AWS::DynamoDB::Table", "Properties": {
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]}},
        "FnRole": {"Type": "AWS::IAM::Role", "Properties": {}},
        "FnRolePolicy": {"Type": "AWS::IAM::Policy", "Properties": {
            "Roles": [{"Ref": "FnRole"}], "PolicyDocument": {"Version": "2012-10-17", "Statement": statements}}},
        "Fn": {"Type": "AWS::Lambda::Function", "Properties": {"Role": {"Fn::GetAtt": ["FnRole", "Arn"]}}},
    }}, REGION, ACCOUNT)
    t.physical["Ledger"] = Physical(TABLE, {"Arn": TABLE_ARN})
    return t


def key(pk: str) -> dict:
    return {"pk": {"S": pk}, "sk": {"S": "state"}}


def allowed(statements: list[dict], operation: str, params: dict) -> list[tuple[bool, str]]:
    permissions = Permissions(template(statements))
    return [permissions.check("FnRole", authorization)
            for authorization in permissions.authorizations("dynamodb", operation, params)]


@pytest.mark.parametrize("namespace", LEDGER_NAMESPACES)
@pytest.mark.parametrize("prefix", sorted(ledger_deleted_prefixes()))
def test_every_key_family_a_store_deletes_may_be_deleted_under_mains_policy(prefix, namespace):
    # Given the ledger grants as infra/ writes them, when a store deletes an item of a family it deletes (read from
    # the stores' code, as tests/infra/test_least_privilege.py does), then IAM allows it
    ((ok, why),) = allowed(ledger_grants(), "DeleteItem", {"TableName": TABLE, "Key": key(f"{namespace}{prefix}x#1")})
    assert ok, why


def test_a_key_family_dropped_from_the_delete_condition_is_denied():
    # Given the delete condition without jobclone# (the defect of last session: a family deleted but not granted)
    grants = ledger_grants([p for p in LEDGER_DELETED_PREFIXES if p != "jobclone#"])
    # When a clone watch's item is deleted, then IAM denies it; the other families still pass
    ((ok, why),) = allowed(grants, "DeleteItem", {"TableName": TABLE, "Key": key("jobclone#train-1#r2")})
    assert not ok and why == "no statement allows it (implicit deny)"
    ((ok, _),) = allowed(grants, "DeleteItem", {"TableName": TABLE, "Key": key("incident#1")})
    assert ok


def test_restart_budgets_and_event_claims_may_not_be_deleted():
    for kept in ("lineage#job-1", "request#operator#e-1", "dry_run#lineage#job-1", "agent#pretrain"):
        ((ok, _),) = allowed(ledger_grants(), "DeleteItem", {"TableName": TABLE, "Key": key(kept)})
        assert not ok, kept


def test_a_transaction_is_authorized_item_by_item_and_one_item_outside_denies_it():
    # "Using IAM with DynamoDB transactions": each Put/Update/Delete/ConditionCheck as its underlying action
    writes = {"TransactItems": [
        {"Put": {"TableName": TABLE, "Item": {**key("node#c#i-1"), "v": {"N": "1"}}}},
        {"Delete": {"TableName": TABLE, "Key": key("incident#1")}},
        {"Delete": {"TableName": TABLE, "Key": key("lineage#job-1")}},
    ]}
    results = allowed(ledger_grants(), "TransactWriteItems", writes)
    assert [ok for ok, _ in results] == [True, True, False]
    (delete,) = [a for a in dynamodb_authorizations("TransactWriteItems", writes, Permissions(
        template([]))._table) if a.context["dynamodb:LeadingKeys"] == ("incident#1",)]
    assert delete.action == "dynamodb:DeleteItem" and delete.context["dynamodb:EnclosingOperation"] == \
        "TransactWriteItems"


def test_a_request_touching_several_partitions_is_denied_when_one_is_outside_the_condition():
    # Given a batch write granted only on incident#/alarm# partitions (ForAllValues over dynamodb:LeadingKeys)
    grant = [{"Effect": "Allow", "Action": "dynamodb:BatchWriteItem", "Resource": TABLE_ARN,
              "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["incident#*", "alarm#*"]}}}]
    inside = [{"DeleteRequest": {"Key": key("incident#1")}}, {"PutRequest": {"Item": key("alarm#a")}}]
    outside = [*inside, {"DeleteRequest": {"Key": key("lineage#job-1")}}]
    # When every key is inside, it is allowed; when one of three is outside, the whole request is denied
    assert allowed(grant, "BatchWriteItem", {"RequestItems": {TABLE: inside}})[0][0]
    assert not allowed(grant, "BatchWriteItem", {"RequestItems": {TABLE: outside}})[0][0]
    # and a BatchGetItem's keys likewise: all of them are the request's LeadingKeys
    (batch,) = dynamodb_authorizations("BatchGetItem", {"RequestItems": {TABLE: {"Keys": [
        key("incident#1"), key("node#c#i-1")]}}}, Permissions(template([]))._table)
    assert batch.context["dynamodb:LeadingKeys"] == ("incident#1", "node#c#i-1")


def test_a_query_touches_the_partition_of_its_key_condition():
    params = {"TableName": TABLE, "KeyConditionExpression": "#p = :pk AND begins_with(sk, :s)",
              "ExpressionAttributeNames": {"#p": "pk"},
              "ExpressionAttributeValues": {":pk": {"S": "lineage#job-1"}, ":s": {"S": "r"}}}
    (query,) = dynamodb_authorizations("Query", params, Permissions(template([]))._table)
    assert query.action == "dynamodb:Query" and query.context["dynamodb:LeadingKeys"] == ("lineage#job-1",)


def test_forallvalues_holds_for_an_absent_key_and_foranyvalue_does_not():
    # IAM User Guide, "Multivalued context key examples": ForAllValues "also returns true if there are no context
    # keys in the request" (a Scan has no leading keys)
    condition = {"dynamodb:LeadingKeys": ["incident#*"]}
    scan = Request(None, "dynamodb:Scan", TABLE_ARN, {}, frozenset({"dynamodb:leadingkeys"}))
    for operator, expected in (("ForAllValues:StringLike", True), ("ForAnyValue:StringLike", False)):
        policy = {"Statement": [{"Effect": "Allow", "Action": "dynamodb:Scan", "Resource": TABLE_ARN,
                                 "Condition": {operator: condition}}]}
        assert decide([policy], scan)[0] is expected, operator


def test_what_the_emulator_does_not_model_fails_loudly():
    get = {"TableName": TABLE, "Key": key("incident#1")}
    unmodelled_key = [{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": TABLE_ARN,
                       "Condition": {"ForAllValues:StringEquals": {"dynamodb:Attributes": ["pk", "sk"]}}}]
    with pytest.raises(SimError, match="'dynamodb:Attributes'.*not modelled"):
        allowed(unmodelled_key, "GetItem", get)
    negated_set = [{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": TABLE_ARN,
                    "Condition": {"ForAllValues:StringNotLike": {"dynamodb:LeadingKeys": ["lineage#*"]}}}]
    with pytest.raises(SimError, match="ForAllValues:StringNotLike"):
        allowed(negated_set, "GetItem", get)
    single_valued = [{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": TABLE_ARN,
                      "Condition": {"StringLike": {"dynamodb:LeadingKeys": ["incident#*"]}}}]
    with pytest.raises(SimError, match="needs a set operator"):
        allowed(single_valued, "GetItem", get)
    with pytest.raises(SimError, match="dynamodb:DescribeTable is not modelled"):
        allowed(ledger_grants(), "DescribeTable", {"TableName": TABLE})


def test_an_event_put_is_authorized_per_entry_on_its_source_and_detail_type():
    canary = [{"Effect": "Allow", "Action": "events:PutEvents",
               "Resource": f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default",
               "Condition": {"StringEquals": {"events:source": "medic.canary", "events:detail-type": "Canary"}}}]
    permissions = Permissions(template(canary))
    entries = [{"Source": "medic.canary", "DetailType": "Canary", "Detail": "{}"},
               {"Source": "aws.sagemaker", "DetailType": "Canary", "Detail": "{}"}]
    results = [permissions.check("FnRole", a)[0] for a in permissions.authorizations("events", "PutEvents",
                                                                                         {"Entries": entries})]
    assert results == [True, False]


@mock_aws
def test_a_denied_call_raises_access_denied_in_the_handler_and_stops_the_replay():
    # Given the check installed on the session the handlers' clients come from, and a function acting
    grants = ledger_grants([p for p in LEDGER_DELETED_PREFIXES if p != "jobclone#"])
    permissions = Permissions(template(grants))
    session = boto3.Session(region_name=REGION)
    permissions.install(session)
    client = session.client("dynamodb")
    arn = client.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST", KeySchema=[
        {"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}], AttributeDefinitions=[
        {"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
    )["TableDescription"]["TableArn"]
    permissions.template.physical["Ledger"] = Physical(TABLE, {"Arn": arn})
    with permissions.acting("medic-fn", "Fn"):
        client.delete_item(TableName=TABLE, Key=key("incident#1"))  # allowed
        # When it deletes what its role may not, then the call fails as in AWS, whatever the handler does with it
        with pytest.raises(ClientError) as denied:
            client.delete_item(TableName=TABLE, Key=key("jobclone#train-1#r2"))
    assert denied.value.response["Error"]["Code"] == "AccessDeniedException"
    assert "is not authorized to perform: dynamodb:DeleteItem" in denied.value.response["Error"]["Message"]
    client.delete_item(TableName=TABLE, Key=key("lineage#x"))  # the harness's own call: no identity, not checked
    # and the replay stops at the line, naming the function, the action and the key
    with pytest.raises(AccessDenied, match=r"line 7: permission denied: medic-fn may not dynamodb:DeleteItem .*"
                                           r"jobclone#train-1#r2"):
        permissions.raise_if_denied("line 7")
    assert permissions.checked["dynamodb:DeleteItem"] == 2


def test_a_role_passed_to_a_service_needs_passrole_to_that_service():
    # IAM User Guide, "Grant a user permissions to pass a role to an AWS service": iam:PassedToService
    role = f"arn:aws:iam::{ACCOUNT}:role/training"
    grant = [{"Effect": "Allow", "Action": "iam:PassRole", "Resource": role,
              "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}}]
    permissions = Permissions(template(grant))
    (training,) = permissions.authorizations("sagemaker", "CreateTrainingJob", {"RoleArn": role})
    (bedrock,) = permissions.authorizations("bedrock", "CreateModelCustomizationJob", {"roleArn": role})
    assert permissions.check("FnRole", training)[0] and not permissions.check("FnRole", bedrock)[0]
    assert permissions.authorizations("sagemaker", "DescribeTrainingJob", {"TrainingJobName": "j"}) is None


@mock_aws
def test_an_agents_check_of_a_pre_cluster_command_key_is_denied_by_design_another_clusters_is_a_failure():
    # Given the agent policy of cluster c1 as infra/components/agent_channel.py writes it (its claim's grants)
    agent_policy = {"Statement": [
        {"Effect": "Allow", "Action": "dynamodb:PutItem", "Resource": TABLE_ARN,
         "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["agent#c1", "agent#c1#command#*"]}}},
        {"Effect": "Allow", "Action": "dynamodb:ConditionCheckItem", "Resource": TABLE_ARN,
         "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["command#c1#*"]}}}]}
    t = template([])
    t.resources["AgentPolicy"] = {"Type": "AWS::IAM::ManagedPolicy", "Properties": {
        "Description": "Medic agent on the c1 Slurm controller: its command queue and ledger items",
        "PolicyDocument": agent_policy}}
    permissions = Permissions(t)
    session = boto3.Session(region_name=REGION)
    permissions.install(session, agents=True)
    client = session.client("dynamodb")
    client.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST", KeySchema=[
        {"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}], AttributeDefinitions=[
        {"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}])

    def claim(issued_pk: str) -> None:
        client.transact_write_items(TransactItems=[
            {"ConditionCheck": {"TableName": TABLE, "Key": {"pk": {"S": issued_pk}, "sk": {"S": "issued"}},
                                "ConditionExpression": "attribute_exists(pk)"}},
            {"Put": {"TableName": TABLE, "Item": key("agent#c1#command#c-9")}}])

    with permissions.acting_agent("c1"):
        # When the agent checks a command at its old key (the claim's fallback), AWS denies it: as designed
        with pytest.raises(ClientError, match="AccessDeniedException"):
            claim("command#c-9")
        permissions.raise_if_denied("line 1")  # not a failure of the replay
        assert permissions.designed_denials["dynamodb:ConditionCheckItem"] == 1
        # When it checks another cluster's command, the denial is a failure
        with pytest.raises(ClientError, match="AccessDeniedException"):
            claim("command#c2#c-9")
    with pytest.raises(AccessDenied, match=r"medic-agent@c1 may not dynamodb:ConditionCheckItem .*command#c2#c-9"):
        permissions.raise_if_denied("line 2")


def test_lambdas_send_to_a_dead_letter_queue_needs_the_functions_role_to_allow_it():
    dlq = f"arn:aws:sqs:{REGION}:{ACCOUNT}:medic-dlq"
    send = Authorization("sqs:SendMessage", dlq, {}, frozenset())
    granted = Permissions(template([{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": dlq}]))
    assert granted.on_behalf_of("medic-fn", "Fn", send)
    missing = Permissions(template(ledger_grants()))
    assert not missing.on_behalf_of("medic-fn", "Fn", send)
    with pytest.raises(AccessDenied, match="Lambda, for medic-fn, may not sqs:SendMessage"):
        missing.raise_if_denied()
