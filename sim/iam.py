"""The functions' and agents' own permissions, checked on every call they make in the replay: the identity-based
policies the stack attaches to each function's role (and each agent's managed policy), evaluated with IAM's rules
(sim/policy.py) against the request context AWS builds for the call.

Which calls (services) are checked, and the request context of each, from the services' documentation:

- DynamoDB (every operation a function sends; one it does not model fails loudly). "Using IAM policy conditions for
  fine-grained access control", Amazon DynamoDB Developer Guide
  (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html):
  ``dynamodb:LeadingKeys`` "represents the first key attribute of a table, in other words the partition key. The key
  name LeadingKeys is plural, even if the key is used with single-item actions", and takes ``ForAllValues``: it holds
  the partition key value of every item the request touches. GetItem, DeleteItem, UpdateItem: the ``Key``'s;
  PutItem: the ``Item``'s; Query: the partition key value of its key condition (KeyConditionExpression ``pk = :v``,
  or legacy KeyConditions EQ); BatchGetItem / BatchWriteItem: one authorization per table, the partition keys of
  all its keys / put and delete requests. Scan has none ("The list of actions does not include permissions for
  Scan because Scan returns all items regardless of the leading keys", same page): the key is absent, so a
  ForAllValues condition on it holds. Transactions: "Using IAM with DynamoDB transactions"
  (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html): "Permissions for
  Put, Update, Delete, and Get actions are governed by the permissions used for the underlying PutItem, UpdateItem,
  DeleteItem, and GetItem operations. For the ConditionCheck action, you can use the dynamodb:ConditionCheckItem
  permission"; each item is one authorization (its own partition key) with ``dynamodb:EnclosingOperation``
  TransactWriteItems / TransactGetItems (the page's examples 2 and 3). Resource: the table's ARN ("DynamoDB API
  permissions: Actions, resources, and conditions reference"). Not modelled (a policy that tests them fails loudly):
  ``dynamodb:Attributes``, ``dynamodb:Select``, ``dynamodb:ReturnValues``, ``dynamodb:ReturnConsumedCapacity``, a
  Query on an index, binary partition keys.
- EventBridge PutEvents: one authorization per entry, on its bus (``EventBusName``, else the account's default bus),
  with ``events:source`` and ``events:detail-type`` the entry's ("Using IAM policy conditions in Amazon
  EventBridge", https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-conditions.html: detail-type "the
  literal string of the detail-type field of the event"; per entry: botocore's events model, PutEventsResultEntry
  ErrorCode NotAuthorizedForSourceException / NotAuthorizedForDetailTypeException). The replay fails the whole call
  where EventBridge would fail the entry (assumption on the deny side: the replay stops either way).
- SNS Publish (the topic, ``TopicArn`` or ``TargetArn``) and SSM GetParameter, GetParameterHistory (the parameter,
  ``arn:...:parameter/<name>``: "Actions, resources, and condition keys for AWS Systems Manager", parameter resource
  type), with no condition key: a statement on them that tests one fails loudly.
- The role a call passes to a service (SageMaker CreateTrainingJob's ``RoleArn``, Bedrock
  CreateModelCustomizationJob's ``roleArn``): ``iam:PassRole`` on it with ``iam:PassedToService`` the service's
  principal (PASSES_ROLE); not the call's own action.
- Lambda's send of a failed event to the function's dead-letter queue, with the function's role: ``sqs:SendMessage``
  on the queue (``on_behalf_of``, from sim/cloudwatch.py; AWS SAM "DeadLetterQueue": the permission goes "to your
  Lambda function execution role to give Lambda service access to the resource").
- Other services' calls (and those calls' own actions) are not checked.

The identity: a function's role while its handler runs (the handlers' session); an agent's policy while it runs
(the harness's session, whose other calls are the harness's own: no identity).

A denied call raises AccessDeniedException in the handler's call, as AWS answers (the message IAM writes:
"User: <principal> is not authorized to perform: <action> on resource: <arn> because no identity-based policy
allows the <action> action"), and is kept: ``raise_if_denied`` stops the replay (``AccessDenied``, a SimError:
``sim replay`` exits 2) even when the handler swallowed the error.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from botocore.exceptions import ClientError

from sim.cfn import SimError, Template
from sim.policy import Request, decide

_PARAMS = "sim.iam.params"  # where a call's API parameters wait for the check, in its context
DYNAMODB_KEYS = frozenset({"dynamodb:leadingkeys", "dynamodb:enclosingoperation"})
EVENTS_KEYS = frozenset({"events:source", "events:detail-type"})
PASS_ROLE_KEYS = frozenset({"iam:passedtoservice"})
# The calls that pass a role to the service (the member naming it, the service it goes to): the caller needs
# iam:PassRole on that role, iam:PassedToService the service's principal (IAM User Guide, "Grant a user permissions to
# pass a role to an AWS service", https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_use_passrole.html; "IAM
# and AWS STS condition context keys", iam:PassedToService). Only this authorization of those calls is checked.
PASSES_ROLE = {("sagemaker", "CreateTrainingJob"): ("RoleArn", "sagemaker.amazonaws.com"),
               ("bedrock", "CreateModelCustomizationJob"): ("roleArn", "bedrock.amazonaws.com")}
_TRANSACT = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem",
             "Get": "GetItem"}
_EQUALS = re.compile(r"^\(?\s*([#\w.-]+)\s*=\s*(:[\w-]+)\s*\)?$")


class AccessDenied(SimError):
    """A function's call that its role's policies do not allow (AWS would answer AccessDeniedException)."""


@dataclass(frozen=True)
class Authorization:
    """One authorization AWS makes for a call: an action on a resource in a request context."""

    action: str
    resource: str
    context: Mapping[str, str | tuple[str, ...]]
    modelled: frozenset[str]  # the condition keys computed for it (lower case)


@dataclass(frozen=True)
class TableKeys:
    arn: str
    partition_key: str


def _scalar(value: Any, where: str) -> str:
    """A key attribute value as IAM compares it: a string's or a number's text."""
    if isinstance(value, dict) and len(value) == 1:
        (kind, text), = value.items()
        if kind in ("S", "N"):
            return str(text)
    raise SimError(f"iam: {where}: partition key value {value!r} is not modelled (only S and N)")


def dynamodb_authorizations(operation: str, params: Mapping[str, Any],
                            table: Callable[[str], TableKeys]) -> list[Authorization]:
    """What DynamoDB authorizes for one request (see the module's sources)."""

    def item(action: str, table_name: str, pk_of: Mapping[str, Any], enclosing: str | None = None) -> Authorization:
        keys = table(table_name)
        context: dict[str, str | tuple[str, ...]] = {
            "dynamodb:LeadingKeys": (_scalar(pk_of.get(keys.partition_key), f"{operation} on {table_name}"),)}
        if enclosing:
            context["dynamodb:EnclosingOperation"] = enclosing
        return Authorization(f"dynamodb:{action}", keys.arn, context, DYNAMODB_KEYS)

    if operation in ("GetItem", "DeleteItem", "UpdateItem"):
        return [item(operation, params["TableName"], params["Key"])]
    if operation == "PutItem":
        return [item(operation, params["TableName"], params["Item"])]
    if operation == "Query":
        if params.get("IndexName"):
            raise SimError(f"iam: a Query on index {params['IndexName']!r} is not modelled")
        keys = table(params["TableName"])
        value = _query_partition_value(params, keys.partition_key)
        return [Authorization("dynamodb:Query", keys.arn, {"dynamodb:LeadingKeys": (value,)}, DYNAMODB_KEYS)]
    if operation == "Scan":
        return [Authorization("dynamodb:Scan", table(params["TableName"]).arn, {}, DYNAMODB_KEYS)]
    if operation == "BatchGetItem":
        return [_batch("BatchGetItem", name, list(request.get("Keys", [])), table)
                for name, request in params["RequestItems"].items()]
    if operation == "BatchWriteItem":
        return [_batch("BatchWriteItem", name, [write["PutRequest"]["Item"] if "PutRequest" in write
                                                else write["DeleteRequest"]["Key"] for write in writes], table)
                for name, writes in params["RequestItems"].items()]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        found = []
        for entry in params["TransactItems"]:
            (kind, body), = entry.items()
            found.append(item(_TRANSACT[kind], body["TableName"], body.get("Item") or body["Key"], operation))
        return found
    raise SimError(f"iam: dynamodb:{operation} is not modelled by the replay's permission check")


def _batch(action: str, table_name: str, items: list[Mapping[str, Any]],
           table: Callable[[str], TableKeys]) -> Authorization:
    keys = table(table_name)
    values = tuple(_scalar(i.get(keys.partition_key), f"{action} on {table_name}") for i in items)
    return Authorization(f"dynamodb:{action}", keys.arn, {"dynamodb:LeadingKeys": values}, DYNAMODB_KEYS)


def _query_partition_value(params: Mapping[str, Any], partition_key: str) -> str:
    """The partition key value a Query's key condition tests for equality (the condition must have one:
    QueryRequest KeyConditionExpression, "The condition must perform an equality test on a single partition key
    value")."""
    legacy = params.get("KeyConditions")
    if legacy:
        condition = legacy.get(partition_key) or {}
        if condition.get("ComparisonOperator") == "EQ" and len(condition.get("AttributeValueList", [])) == 1:
            return _scalar(condition["AttributeValueList"][0], "Query KeyConditions")
        raise SimError(f"iam: Query KeyConditions without an EQ on {partition_key!r}: {legacy!r}")
    expression = params.get("KeyConditionExpression", "")
    names = params.get("ExpressionAttributeNames", {})
    values = params.get("ExpressionAttributeValues", {})
    for part in re.split(r"\s+AND\s+", expression, flags=re.IGNORECASE):
        match = _EQUALS.match(part.strip())
        if match and names.get(match.group(1), match.group(1)) == partition_key and match.group(2) in values:
            return _scalar(values[match.group(2)], "Query KeyConditionExpression")
    raise SimError(f"iam: cannot read the partition key value of KeyConditionExpression {expression!r}")


def legacy_command_check(authorization: Authorization) -> bool:
    """The one denial an agent is built to meet: its claim's fallback check of a command at the key Medic used before
    commands were keyed by cluster, `command#<id>` (agent/medic_agent/ledger.py Ledger.claim: "the current stack's
    grant refuses the check (AccessDenied): no such command for us"; agent/README.md, "Upgrading to commands keyed by
    cluster"). Its grant allows `command#<cluster>#*` only, so AWS denies it; the agent takes that as not issued."""
    keys = authorization.context.get("dynamodb:LeadingKeys", ())
    return (authorization.action == "dynamodb:ConditionCheckItem" and bool(keys)
            and all(re.fullmatch(r"command#[^#]+", key) for key in keys))


class _Seat:
    """Who acts on one boto3 session, if anyone: a function while its handler runs (the handlers' session), an agent
    while it runs (the harness's session, which the agents' clients come from). ``designed`` tells a denial its
    caller is built to meet (answered AccessDeniedException as any, counted, but not a failure of the replay)."""

    def __init__(self, permissions: Permissions,
                 designed: Callable[[Authorization], bool] = lambda authorization: False) -> None:
        self.permissions = permissions
        self.designed = designed
        self.who: tuple[str, str] | None = None  # (the caller's name, the logical id of its role or managed policy)

    @contextlib.contextmanager
    def acting(self, name: str, identity: str) -> Iterator[None]:
        saved, self.who = self.who, (name, identity)
        try:
            yield
        finally:
            self.who = saved

    def before_call(self, model: Any, context: dict, **kwargs: Any) -> None:
        if self.who is not None:
            self.permissions.check_call(*self.who, model, context.get(_PARAMS, {}), self.designed)


class Permissions:
    """The identity-based policies of the stack's functions (and its agents), and the check of their calls."""

    def __init__(self, template: Template) -> None:
        self.template = template
        self.denials: list[str] = []
        self.checked: Counter[str] = Counter()  # authorizations evaluated, by action
        self._documents: dict[str, list[dict]] = {}
        self._tables: dict[str, TableKeys] | None = None
        self.designed_denials: Counter[str] = Counter()  # denials their callers are built to meet, by action
        self._functions = _Seat(self)  # a function meets no denial by design: each one is a defect
        self._agents = _Seat(self, legacy_command_check)

    def install(self, session: Any, *, agents: bool = False) -> None:
        """Check the calls made on this session: the functions' (the handlers' session), or with ``agents`` the
        agents' (the harness's session: only while an agent runs, `acting_agent`; its other calls are the harness's
        own)."""
        seat = self._agents if agents else self._functions
        session.events.register_last("before-parameter-build", self._keep_params)
        session.events.register("before-call", seat.before_call)

    def acting(self, function_name: str, function_logical_id: str) -> contextlib.AbstractContextManager[None]:
        """The function's role is the identity of every call its handler makes until the block ends."""
        return self._functions.acting(function_name, self._role_of(function_logical_id))

    def _role_of(self, function_logical_id: str) -> str:
        role = self.template.properties(function_logical_id).get("Role")
        if not (isinstance(role, dict) and "Fn::GetAtt" in role):
            raise SimError(f"iam: function {function_logical_id}'s Role is not a role of the stack ({role!r})")
        target = role["Fn::GetAtt"]
        return (target.split(".", 1) if isinstance(target, str) else target)[0]

    def acting_agent(self, cluster: str) -> contextlib.AbstractContextManager[None]:
        """The cluster's agent policy (infra/components/agent_channel.py: the managed policy the operator attaches to
        the controller's role, or the EKS agent's role has; its description names the cluster) is the identity of
        every call the agent makes until the block ends."""
        named = f"Medic agent on the {cluster} "
        found = [lid for lid, _ in self.template.of_type("AWS::IAM::ManagedPolicy")
                 if str(self.template.properties(lid).get("Description", "")).startswith(named)]
        if len(found) != 1:
            raise SimError(f"iam: the template has {len(found)} agent policies for cluster {cluster!r} "
                           f"(a ManagedPolicy described {named!r}...)")
        return self._agents.acting(f"medic-agent@{cluster}", found[0])

    def on_behalf_of(self, function_name: str, function_logical_id: str, authorization: Authorization) -> bool:
        """An authorization a service makes with the function's role (Lambda sending a failed event to the function's
        dead-letter queue): True when allowed; a denial is kept (the replay stops after the line)."""
        allowed, why = self.check(self._role_of(function_logical_id), authorization)
        self.checked[authorization.action] += 1
        if not allowed:
            self.denials.append(f"Lambda, for {function_name}, may not {authorization.action} on "
                                f"{authorization.resource}: {why}")
        return allowed

    # the identity's documents
    def documents(self, role_lid: str) -> list[dict]:
        """Every identity-based policy document of the role: its inline `Policies`, the AWS::IAM::Policy and
        AWS::IAM::ManagedPolicy resources attached to it (`Roles`), and its `ManagedPolicyArns` of the stack; of a
        managed policy, its own document."""
        if role_lid not in self._documents:
            t = self.template
            props = t.properties(role_lid)
            if t.resources[role_lid].get("Type") == "AWS::IAM::ManagedPolicy":
                self._documents[role_lid] = [t.resolve(props["PolicyDocument"])]
                return self._documents[role_lid]
            found = [policy["PolicyDocument"] for policy in props.get("Policies", [])]
            managed = {lid for lid, _ in t.of_type("AWS::IAM::ManagedPolicy")}
            for arn in props.get("ManagedPolicyArns", []):
                if isinstance(arn, dict) and arn.get("Ref") in managed:
                    found.append(t.properties(arn["Ref"])["PolicyDocument"])
                else:  # an AWS managed policy: its statements are not in the template
                    raise SimError(f"iam: role {role_lid} has managed policy {arn!r}, which the replay cannot read")
            for lid, _ in t.of_type("AWS::IAM::Policy") + t.of_type("AWS::IAM::ManagedPolicy"):
                if {"Ref": role_lid} in t.properties(lid).get("Roles", []):
                    found.append(t.properties(lid)["PolicyDocument"])
            self._documents[role_lid] = [t.resolve(document) for document in found]
        return self._documents[role_lid]

    def _table(self, name_or_arn: str) -> TableKeys:
        if self._tables is None:
            t = self.template
            self._tables = {}
            for lid, _ in t.of_type("AWS::DynamoDB::Table") + t.of_type("AWS::DynamoDB::GlobalTable"):
                physical = t.physical.get(lid)
                if physical is None:
                    continue
                hashes = [k["AttributeName"] for k in t.properties(lid)["KeySchema"] if k["KeyType"] == "HASH"]
                keys = TableKeys(physical.attrs["Arn"], hashes[0])
                self._tables[physical.ref] = self._tables[keys.arn] = keys
        if name_or_arn not in self._tables:
            raise SimError(f"iam: table {name_or_arn!r} is not one of the stack's")
        return self._tables[name_or_arn]

    # the check
    @staticmethod
    def _keep_params(params: Mapping[str, Any], context: dict, **kwargs: Any) -> None:
        context[_PARAMS] = params

    def authorizations(self, service: str, operation: str, params: Mapping[str, Any]) -> list[Authorization] | None:
        """What AWS authorizes for the call; None for a service the replay does not check."""
        t = self.template
        if service == "dynamodb":
            return dynamodb_authorizations(operation, params, self._table)
        if service == "events" and operation == "PutEvents":
            return [Authorization("events:PutEvents", self._bus_arn(entry.get("EventBusName")),
                                  {"events:source": entry.get("Source", ""),
                                   "events:detail-type": entry.get("DetailType", "")}, EVENTS_KEYS)
                    for entry in params["Entries"]]
        if service == "sns" and operation == "Publish":
            return [Authorization("sns:Publish", params.get("TopicArn") or params.get("TargetArn", ""), {},
                                  frozenset())]
        if service == "ssm" and operation in ("GetParameter", "GetParameterHistory"):
            name = params["Name"]
            arn = name if name.startswith("arn:") else t.arn("ssm", f"parameter/{name.lstrip('/')}")
            return [Authorization(f"ssm:{operation}", arn, {}, frozenset())]
        if (service, operation) in PASSES_ROLE:
            member, to_service = PASSES_ROLE[(service, operation)]
            return [Authorization("iam:PassRole", params[member], {"iam:PassedToService": to_service},
                                  PASS_ROLE_KEYS)]
        if service in ("events", "sns", "ssm"):
            raise SimError(f"iam: {service}:{operation} is not modelled by the replay's permission check")
        return None

    def _bus_arn(self, name: str | None) -> str:
        if name and name.startswith("arn:"):
            return name
        return self.template.arn("events", f"event-bus/{unquote(name or 'default')}")

    def check(self, role_lid: str, authorization: Authorization) -> tuple[bool, str]:
        return decide(self.documents(role_lid), Request(None, authorization.action, authorization.resource,
                                                        authorization.context, authorization.modelled))

    def check_call(self, caller: str, identity: str, model: Any, params: Mapping[str, Any],
                   designed: Callable[[Authorization], bool] = lambda authorization: False) -> None:
        """Raise AccessDeniedException (and keep the denial, unless the caller is built to meet it) when the identity
        may not make this call."""
        function, role_lid = caller, identity
        service, operation = model.service_model.service_name, model.name
        try:
            authorizations = self.authorizations(service, operation, params) or []
            decisions = [(authorization, *self.check(role_lid, authorization)) for authorization in authorizations]
        except SimError as error:  # kept too: the handler may catch what its call raised
            self.denials.append(f"{function}'s {service}:{operation} cannot be checked: {error}")
            raise
        for authorization, allowed, why in decisions:
            self.checked[authorization.action] += 1
            if allowed:
                continue
            keys = "; ".join(f"{key}={list(value) if isinstance(value, tuple) else value}"
                             for key, value in authorization.context.items())
            denial = (f"{function} may not {authorization.action} on {authorization.resource}"
                      f"{f' ({keys})' if keys else ''}: {why}")
            if designed(authorization):
                self.designed_denials[authorization.action] += 1
            else:
                self.denials.append(denial)
            principal = self.template.arn("sts", f"assumed-role/{role_lid}/{function}").replace(
                f":{self.template.region}:", "::")
            raise ClientError({"Error": {
                "Code": "AccessDeniedException",
                "Message": f"User: {principal} is not authorized to perform: {authorization.action} on resource: "
                           f"{authorization.resource} " + (
                               "with an explicit deny in an identity-based policy" if why.startswith("explicitly")
                               else f"because no identity-based policy allows the {authorization.action} action")},
                "ResponseMetadata": {"HTTPStatusCode": 400}}, operation)

    def raise_if_denied(self, where: str = "") -> None:
        """Stop the replay on every denial seen so far (a handler may have swallowed its AccessDeniedException)."""
        if self.denials:
            denials, self.denials = self.denials, []
            raise AccessDenied(f"{where}: " * bool(where) + "permission denied: " + "; ".join(denials))
