"""The emulated AWS account: moto in-process, with the stack's resources created from the
synthesized template, generically by resource type."""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import boto3
import botocore.loaders
import botocore.session
from moto import mock_aws
from moto.events.models import EventPattern

from sim.batch import BATCH_JOB_EVENT, BatchWorld
from sim.bedrock import BEDROCK_JOB_EVENT, BedrockWorld
from sim.cfn import Physical, SimError, Template
from sim.eks import EksWorld
from sim.faults import Fault, raw_response
from sim.hyperpod import DEFAULT_WORKERS, INSTANCE_ID, HyperPodWorld, slurm_node_type
from sim.iam import Permissions
from sim.metrics import Metrics
from sim.router import Router
from sim.slurm import SlurmWorld
from sim.streams import StreamMapping, Streams, parse_filters
from sim.training import TrainingWorld

ACCOUNT = "123456789012"  # moto's default account
REGION = "us-west-2"
PAGE_CAPTURE_QUEUE = "medic-sim-page-capture"
TRAINING_JOB_EVENT = "SageMaker Training Job State Change"
NODE_HEALTH_EVENT = "SageMaker HyperPod Cluster Node Health Event"
RATE = re.compile(r"^rate\(\s*([1-9][0-9]*)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_NODE_RECOVERY = {"automatic": "Automatic", "none": "None"}  # config's words -> DescribeCluster NodeRecovery
RATE_UNIT = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
# EventBridge's quota "Event pattern size": "Maximum size, in characters, of an event pattern", 2,048 by default
# (Amazon EventBridge quotas, docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html; adjustable up to the
# API's 4,096, botocore's events model, shape EventPattern). A longer rule or archive pattern fails its PutRule or
# CreateArchive with a 400 (the error code AWS gives is not documented), so the deploy fails: the replay refuses
# the template. Counted on the pattern as CloudFormation sends it: compact JSON, every intrinsic resolved
# (aws/serverless-application-model issue 1455 quotes the string EventBridge received).
EVENT_PATTERN_QUOTA = 2048
# DynamoDB's TTL ignores an item whose TTL value is more than five years in the past ("Using DynamoDB Time to Live
# (TTL)", DynamoDB developer guide: "no more than five years in the past").
TTL_IGNORED_AFTER = timedelta(days=5 * 365)


@functools.cache
def _symmetric_key_material(key_spec: str) -> Any:
    """moto makes an RSA-2048 key pair even for a symmetric key (~0.1 s each); it only ever signs with
    asymmetric keys, so one pair per process serves every replay's symmetric keys."""
    from moto.kms.utils import generate_private_key

    return generate_private_key(key_spec)


@functools.cache
def _loader() -> Any:
    return botocore.loaders.create_loader()


def _botocore_session() -> botocore.session.Session:
    """A fresh session sharing one service-model loader: parsing the SageMaker model once is enough."""
    session = botocore.session.get_session()
    session.register_component("data_loader", _loader())
    return session


@dataclass
class Function:
    logical_id: str
    name: str
    arn: str
    handler: str
    environment: dict[str, str] = field(default_factory=dict)
    max_retries: int = 2  # Lambda async invocation default


@dataclass
class Rule:
    logical_id: str
    name: str
    bus: str
    functions: list[Function]
    pattern: EventPattern | None = None  # moto's matcher on the rule's pattern: how a replayed event is routed


@dataclass
class Schedule:
    """A ``rate(...)`` rule: its targets run every ``every`` from the replay's first event."""

    logical_id: str
    name: str
    arn: str
    every: timedelta
    targets: list[tuple[Function, Any]]  # (function, the target's constant Input or None)
    fired: int = 0  # ticks delivered so far (tick k is at start + k * every)


def parse_rate(expression: str) -> timedelta | None:
    """``rate(5 minutes)`` → 5 minutes; None for anything else (cron, malformed)."""
    match = RATE.match(expression.strip())
    if match is None:
        return None
    count, unit = int(match.group(1)), match.group(2)
    if (count == 1) != (not unit.endswith("s")):
        return None  # EventBridge: "rate(1 minute)", "rate(5 minutes)"; the other forms are invalid
    return count * RATE_UNIT[unit.rstrip("s")]


class World:
    """``with World(template, config, faults) as world:`` the emulated account, ready for events."""

    def __init__(self, template: dict, config: Any = None, faults: Iterable[Fault] = (),
                 region: str = REGION, account: str = ACCOUNT) -> None:
        self.template = Template(template, region, account)
        self.config = config
        self.region = region
        self.account = account
        self.functions: dict[str, Function] = {}
        self.rules: list[Rule] = []
        self._probe_queue_url = ""  # where moto's EventBridge tells which rules matched (see _routing_probe)
        self._probe_queue_arn = ""
        self.schedules: list[Schedule] = []
        self.page_queue_url = ""
        self.topics: list[str] = []
        self.mode_parameters: list[str] = []
        self.hyperpod = HyperPodWorld(account, region, f"arn:aws:iam::{account}:role/medic-sim-hyperpod-nodes")
        self.training = TrainingWorld(account, region, self.client)
        self.batch = BatchWorld(account, region)
        self.bedrock = BedrockWorld(account, region)
        self.slurm = SlurmWorld(self.client)
        self.eks = EksWorld(self.client, config_jobs=self._eks_config_jobs, hyperpod_nodes=self._hyperpod_nodes,
                            quarantines=lambda name: bool(getattr(self.configured(name),
                                                                  "quarantine_repeat_offenders", False)))
        self.slurm.node_names = self._slurm_node_names
        self.slurm.compute_nodes = self._slurm_compute_nodes
        self.hyperpod.on_repair.append(self.slurm.node_repaired)
        self.hyperpod.on_back.append(self.slurm.node_back)
        self.streams = Streams(self.client, region)
        self.metrics = Metrics(self.client)
        self.unsupported: list[str] = []  # what the template asks for that the replay does not deliver
        self.router = Router(faults, {
            "sagemaker:BatchRebootClusterNodes": self.hyperpod.batch_reboot,
            "sagemaker:BatchReplaceClusterNodes": self.hyperpod.batch_replace,
            "sagemaker:DescribeClusterNode": self.hyperpod.describe_cluster_node,
            "sagemaker:ListClusterNodes": self.hyperpod.list_cluster_nodes,
            "sagemaker:DescribeTrainingPlan": self.hyperpod.describe_training_plan,
            "sagemaker:ListTags": self.training.list_tags,
            "sagemaker:CreateTrainingJob": self.training.refuse_create,
            "batch:DescribeJobs": self.batch.describe_jobs,
            "batch:SubmitJob": self.batch.submit_job,
            "bedrock:GetModelCustomizationJob": self.bedrock.get_job,
            "bedrock:CreateModelCustomizationJob": self.bedrock.create_job,
            "bedrock:ListTagsForResource": self.bedrock.list_tags,
            "events:PutEvents": self.put_events,
        }, observers={
            "sagemaker:CreateTrainingJob": self.training.observe_create,
        })
        self.permissions = Permissions(self.template)
        self._mock: Any = None
        self._clients: dict[str, Any] = {}
        self._pages_drained_at = 0
        self.harness_publishes = 0  # SNS messages the emulation itself published (alarm actions)
        self.put_by_handlers: list[dict] = []  # events a handler put (PutEvents), waiting for the rules (Replay)

    # lifecycle
    def __enter__(self) -> World:
        self._mock = mock_aws()
        self._mock.start()
        # moto 5.2.5 pages ListClusterNodes on an `arn` its cluster nodes do not have: past 100 nodes it
        # hands out the same NextToken twice and the reconciler's paginator fails. Page on the instance id.
        from moto.sagemaker import models as sagemaker_models

        self._pagination = mock.patch.dict(sagemaker_models.PAGINATION_MODEL, {"list_cluster_nodes": {
            **sagemaker_models.PAGINATION_MODEL["list_cluster_nodes"], "unique_attribute": "instance_id"}})
        self._pagination.start()
        self._hyperpod_answers = self.hyperpod.patched()
        self._hyperpod_answers.__enter__()
        try:
            # The harness's own clients (setup, page capture) keep moto's plain behaviour: no faults.
            self.harness = boto3.Session(region_name=self.region, botocore_session=_botocore_session())
            self.harness.events.register("before-call.dynamodb", self.streams.count_write)
            # The handlers' clients come from boto3's default session, routed through the router.
            boto3.setup_default_session(region_name=self.region, botocore_session=_botocore_session())
            self.router.install(boto3.DEFAULT_SESSION)
            self.permissions.install(boto3.DEFAULT_SESSION)  # each function's own role: sim/iam.py
            self.permissions.install(self.harness, agents=True)  # and each agent's policy, while it runs
            self.slurm.acting = self.eks.acting = self.permissions.acting_agent
            boto3.DEFAULT_SESSION.events.register("before-call.dynamodb", self.streams.count_write)
            self.router.__enter__()
            self._create_resources()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _slurm_node_names(self, cluster: str) -> dict[str, str]:
        """Every node of the cluster, instance id -> Slurm node name (what DescribeClusterNode's hostname says)."""
        if not self.hyperpod.has_cluster(cluster):
            return {}
        return {node_id: self.hyperpod.slurm_node_name(cluster, node_id)
                for node_id in self.hyperpod.backend.clusters[cluster].nodes}

    def _slurm_compute_nodes(self, cluster: str) -> dict[str, str]:
        """The cluster's compute nodes (not its controller or login groups), instance id -> HyperPod status."""
        if not self.hyperpod.has_cluster(cluster):
            return {}
        return {node_id: node.status for node_id, node in self.hyperpod.backend.clusters[cluster].nodes.items()
                if slurm_node_type(node.instance_group_name) == "Compute"}

    def catch_up(self, now: datetime) -> None:
        """The emulated services' own work up to ``now``: repairs that took their node down or finished, then
        slurmctld's scheduling passes and purges, then the training jobs Medic started reaching `Training`."""
        self.hyperpod.finish_repairs(now)
        self.slurm.catch_up(now)
        self.training.catch_up(now)

    def __exit__(self, *exc: object) -> None:
        self.router.__exit__()
        self.slurm.close()
        self.eks.close()
        self.metrics.close()
        if self._mock is not None:
            self._hyperpod_answers.__exit__(None, None, None)
            self._pagination.stop()
            self._mock.stop()
            self._mock = None

    def client(self, service: str) -> Any:
        if service not in self._clients:
            extra = {}
            if service == "dynamodbstreams":  # botocore picks the account-based endpoint, which moto does not serve
                extra["endpoint_url"] = f"https://streams.dynamodb.{self.region}.amazonaws.com"
            self._clients[service] = self.harness.client(service, region_name=self.region, **extra)
        return self._clients[service]

    # resources from the template
    def _create_resources(self) -> None:
        t = self.template
        for lid, _ in t.of_type("AWS::KMS::Key"):
            with mock.patch("moto.kms.models.generate_private_key", _symmetric_key_material):
                key = self.client("kms").create_key(Description=f"{lid} (replay)")["KeyMetadata"]
            t.physical[lid] = Physical(key["KeyId"], {"Arn": key["Arn"], "KeyId": key["KeyId"]})
        for lid, _ in t.of_type("AWS::KMS::Alias"):
            props = t.resolve(t.properties(lid))
            self.client("kms").create_alias(AliasName=props["AliasName"], TargetKeyId=props["TargetKeyId"])
            t.physical[lid] = Physical(props["AliasName"])
        for lid, _ in t.of_type("AWS::SQS::Queue"):
            self._queue(lid)
        for lid, _ in t.of_type("AWS::SQS::Queue"):  # redrive policies once every queue exists
            redrive = t.properties(lid).get("RedrivePolicy")
            if redrive:
                self.client("sqs").set_queue_attributes(QueueUrl=t.physical[lid].ref, Attributes={
                    "RedrivePolicy": json.dumps(t.resolve(redrive))})
        for lid, _ in t.of_type("AWS::SNS::Topic"):
            self._topic(lid)
        for lid, _ in t.of_type("AWS::DynamoDB::Table") + t.of_type("AWS::DynamoDB::GlobalTable"):
            self._table(lid)
        for lid, _ in t.of_type("AWS::SSM::Parameter"):
            self._parameter(lid)
        for lid, _ in t.of_type("AWS::Lambda::Function"):
            props = t.properties(lid)
            name = props.get("FunctionName") if isinstance(props.get("FunctionName"), str) else t.default_name(lid)
            arn = t.arn("lambda", f"function:{name}")
            t.physical[lid] = Physical(name, {"Arn": arn})
            self.functions[lid] = Function(lid, name, arn, props.get("Handler", ""))
        for lid, function in self.functions.items():
            variables = t.properties(lid).get("Environment", {}).get("Variables", {})
            function.environment = {key: str(value) for key, value in t.resolve(variables).items()}
        for lid, _ in t.of_type("AWS::Lambda::EventInvokeConfig"):
            props = t.properties(lid)
            target = t.resolve(props.get("FunctionName"))
            for function in self.functions.values():
                if target in (function.name, function.arn) and "MaximumRetryAttempts" in props:
                    function.max_retries = int(props["MaximumRetryAttempts"])
        for lid, _ in t.of_type("AWS::Lambda::EventSourceMapping"):
            self._event_source_mapping(lid)
        self._slurm_agents()
        self._eks_agents()
        for lid, _ in t.of_type("AWS::Events::EventBus"):
            name = t.resolve(t.properties(lid).get("Name")) or t.default_name(lid)
            arn = self.client("events").create_event_bus(Name=name)["EventBusArn"]
            t.physical[lid] = Physical(name, {"Arn": arn, "Name": name})
        for lid, _ in t.of_type("AWS::Events::Rule"):
            self._rule(lid)
        for lid, _ in t.of_type("AWS::Events::Archive"):
            # Checked as CreateArchive checks it; the replay archives nothing (medic backtest reads a real archive)
            pattern = t.resolve(t.properties(lid).get("EventPattern"))
            if pattern is not None:
                _check_pattern_size(f"archive {lid}", pattern)
        self._capture_pages()

    def _queue(self, lid: str) -> None:
        t = self.template
        props = t.properties(lid)
        name = t.resolve(props.get("QueueName")) or t.default_name(lid, 75 if props.get("FifoQueue") else 80)
        if props.get("FifoQueue") and not name.endswith(".fifo"):
            name += ".fifo"
        attributes = {key: str(t.resolve(props[key])).lower() if isinstance(props[key], bool)
                      else str(t.resolve(props[key]))
                      for key in ("FifoQueue", "ContentBasedDeduplication", "KmsMasterKeyId",
                                  "MessageRetentionPeriod", "VisibilityTimeout", "DelaySeconds",
                                  "ReceiveMessageWaitTimeSeconds", "SqsManagedSseEnabled")
                      if key in props}
        sqs = self.client("sqs")
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        t.physical[lid] = Physical(url, {"Arn": arn, "QueueName": name, "QueueUrl": url})

    def _topic(self, lid: str) -> None:
        t = self.template
        props = t.properties(lid)
        name = t.resolve(props.get("TopicName")) or t.default_name(lid, 256)
        attributes = {key: str(t.resolve(props[key])) for key in ("KmsMasterKeyId", "DisplayName") if key in props}
        arn = self.client("sns").create_topic(Name=name, Attributes=attributes)["TopicArn"]
        t.physical[lid] = Physical(arn, {"TopicArn": arn, "TopicName": name})
        self.topics.append(arn)

    def _table(self, lid: str) -> None:
        t = self.template
        props = t.resolve(t.properties(lid))
        name = props.get("TableName") or t.default_name(lid, 255)
        args: dict[str, Any] = {"TableName": name, "KeySchema": props["KeySchema"],
                                "AttributeDefinitions": props["AttributeDefinitions"]}
        if props.get("ProvisionedThroughput"):
            args["ProvisionedThroughput"] = props["ProvisionedThroughput"]
        else:
            args["BillingMode"] = "PAY_PER_REQUEST"
        for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            if props.get(key):
                args[key] = props[key]
        if props.get("StreamSpecification", {}).get("StreamViewType"):
            args["StreamSpecification"] = {"StreamEnabled": True, **props["StreamSpecification"]}
        dynamodb = self.client("dynamodb")
        table = dynamodb.create_table(**args)["TableDescription"]
        ttl = props.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification={
                "Enabled": True, "AttributeName": ttl["AttributeName"]})
        t.physical[lid] = Physical(name, {"Arn": table["TableArn"], "StreamArn": table.get("LatestStreamArn", "")})

    def ttl_sweep(self, now: datetime) -> int:
        """DynamoDB's TTL process over every table of the stack, at ``now`` (ttl_sweep)."""
        return ttl_sweep(self.client("dynamodb"), now)

    def _parameter(self, lid: str) -> None:
        t = self.template
        props = t.resolve(t.properties(lid))
        name = props.get("Name") or t.default_name(lid, 2048)
        self.client("ssm").put_parameter(Name=name, Value=str(props.get("Value", "")),
                                         Type=props.get("Type", "String"), Overwrite=True)
        t.physical[lid] = Physical(name, {"Type": props.get("Type", "String"), "Value": str(props.get("Value", ""))})
        self.mode_parameters.append(name)

    def _rule(self, lid: str) -> None:
        t = self.template
        props = t.properties(lid)
        if props.get("State", "ENABLED") != "ENABLED":
            return  # disabled rules deliver nothing
        name = t.resolve(props.get("Name")) or t.default_name(lid, 64)
        for target in t.resolve(props.get("Targets", [])):
            shaping = [key for key in ("InputPath", "InputTransformer") if key in target]
            if shaping:
                self.unsupported.append(f"rule {lid} target {target.get('Id')}: {', '.join(shaping)} is not applied "
                                        "by the replay (the function gets the event as it is)")
        if "ScheduleExpression" in props:
            self._schedule(lid, name, props)
        if "EventPattern" not in props:
            return
        bus = t.resolve(props.get("EventBusName")) or "default"
        events = self.client("events")
        pattern = t.resolve(props["EventPattern"])
        _check_pattern_size(f"rule {lid}", pattern)
        text = pattern if isinstance(pattern, str) else json.dumps(pattern)
        if isinstance(pattern, dict) and pattern.get("replay-name") not in (None, [{"exists": False}]):
            return  # it takes only replays (backtest read-back), into a queue: no function of the replay's to run
        events.put_rule(Name=name, EventBusName=bus, State="ENABLED", EventPattern=text)
        functions = []
        for target in t.resolve(props.get("Targets", [])):
            matched = [f for f in self.functions.values() if target.get("Arn") in (f.arn, f.name)]
            if not matched:
                raise SimError(f"template: rule {lid} targets {target.get('Arn')!r}, which the replay "
                               "cannot invoke (only the stack's Lambda functions)")
            functions.extend(matched)
        events.put_targets(Rule=name, EventBusName=bus, Targets=[self._routing_probe(lid)])
        self.rules.append(Rule(lid, name, bus, functions, EventPattern.load(text)))

    def _routing_probe(self, lid: str) -> dict:
        """The target that tells the replay a rule matched: moto's own routing (PutEvents, each rule's pattern,
        its targets) delivers ``{"rule": <logical id>}`` to one queue that every rule shares, so an event's
        matching rules are one ReceiveMessage away, however many rules the stack has. The input transformer's
        template is a constant (EventBridge user guide, "Transforming target input": the template may hold no
        placeholder); its one path keeps moto's parser from evaluating its default eight."""
        if not self._probe_queue_url:
            sqs = self.client("sqs")
            self._probe_queue_url = sqs.create_queue(QueueName="medic-sim-routing-probe")["QueueUrl"]
            self._probe_queue_arn = sqs.get_queue_attributes(
                QueueUrl=self._probe_queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        return {"Id": "sim-probe", "Arn": self._probe_queue_arn,
                "InputTransformer": {"InputPathsMap": {"source": "$.source"},
                                     "InputTemplate": json.dumps({"rule": lid})}}

    def _schedule(self, lid: str, name: str, props: dict) -> None:
        t = self.template
        expression = str(t.resolve(props["ScheduleExpression"]))
        every = parse_rate(expression)
        if every is None:
            self.unsupported.append(f"rule {lid}: schedule {expression!r} never fires in the replay (only "
                                    "rate(N minutes|hours|days) schedules do)")
            return
        targets: list[tuple[Function, Any]] = []
        for target in t.resolve(props.get("Targets", [])):
            matched = [f for f in self.functions.values() if target.get("Arn") in (f.arn, f.name)]
            if not matched:
                raise SimError(f"template: rule {lid} targets {target.get('Arn')!r}, which the replay "
                               "cannot invoke (only the stack's Lambda functions)")
            constant = None
            if "Input" in target:
                try:
                    constant = json.loads(target["Input"]) if isinstance(target["Input"], str) else target["Input"]
                except ValueError as error:
                    raise SimError(f"template: rule {lid} target Input is not JSON: {error}") from None
            targets.extend((function, constant) for function in matched)
        # Schedules run on the account's default bus.
        self.schedules.append(Schedule(lid, name, t.arn("events", f"rule/{name}"), every, targets))

    def scheduled_event(self, schedule: Schedule, when: datetime) -> dict:
        """What EventBridge sends a schedule's target: a "Scheduled Event" naming the rule."""
        stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"version": "0", "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/{schedule.arn}/{stamp}")),
                "detail-type": "Scheduled Event", "source": "aws.events", "account": self.account,
                "time": stamp, "region": self.region, "resources": [schedule.arn], "detail": {}}

    def _event_source_mapping(self, lid: str) -> None:
        t = self.template
        props = t.resolve(t.properties(lid))
        if props.get("Enabled", True) in (False, "false"):
            return
        target = str(props.get("FunctionName", ""))
        function = next((f for f in self.functions.values()
                         if target in (f.name, f.arn) or target.startswith((f"{f.name}:", f"{f.arn}:"))), None)
        source = str(props.get("EventSourceArn", ""))
        if function is None:
            raise SimError(f"template: event source mapping {lid} targets {target!r}, which the replay cannot invoke")
        if ":dynamodb:" not in source or "/stream/" not in source:
            self.unsupported.append(f"event source mapping {lid} ({source or 'no source'} -> {function.name}): only "
                                    "DynamoDB streams are delivered by the replay")
            return
        retries = props.get("MaximumRetryAttempts")
        on_failure = str(((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination", ""))
        queue = next((physical.ref for physical in t.physical.values() if physical.attrs.get("Arn") == on_failure
                      and physical.attrs.get("QueueUrl")), "")
        if on_failure and not queue:
            self.unsupported.append(f"event source mapping {lid}: on-failure destination {on_failure} is not one of "
                                    "the stack's queues; a batch Lambda gives up on is only reported")
        self.streams.add(StreamMapping(
            lid, function, source, parse_filters(props.get("FilterCriteria")),
            batch_size=int(props.get("BatchSize", 100)),
            max_retries=int(retries) if retries is not None else -1,
            bisect=props.get("BisectBatchOnFunctionError") in (True, "true"),
            report_item_failures="ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or []),
            starting_position=str(props.get("StartingPosition", "TRIM_HORIZON")), on_failure=queue))

    def _slurm_agents(self) -> None:
        """Where the stack's functions send agent commands (AGENT_QUEUES), and the ledger they share."""
        for function in self.functions.values():
            text = function.environment.get("AGENT_QUEUES")
            if not text:
                continue
            try:
                queues = json.loads(text)
            except ValueError as error:
                raise SimError(f"template: {function.logical_id} AGENT_QUEUES is not JSON: {error}") from None
            if not isinstance(queues, dict):
                raise SimError(f"template: {function.logical_id} AGENT_QUEUES is not a JSON object")
            self.slurm.queues.update({str(cluster): str(url) for cluster, url in queues.items()})
            self.slurm.table = self.slurm.table or function.environment.get("LEDGER_TABLE", "")

    def is_eks(self, cluster: str) -> bool:
        spec = self.configured(cluster)
        return (spec is not None and getattr(spec, "orchestrator", None) == "eks") or cluster in self.eks.queues

    def _eks_agents(self) -> None:
        """The EKS clusters' entries of the functions' agent queues (AGENT_QUEUES, read by _slurm_agents first):
        a cluster the config says is `orchestrator: eks` gets the EKS agent, not a Slurm one."""
        for cluster in [name for name in self.slurm.queues if self.is_configured_eks(name)]:
            self.eks.queues[cluster] = self.slurm.queues.pop(cluster)
        self.eks.table = self.eks.table or self.slurm.table

    def is_configured_eks(self, cluster: str) -> bool:
        spec = self.configured(cluster)
        return spec is not None and getattr(spec, "orchestrator", None) == "eks"

    def _eks_config_jobs(self, cluster: str) -> list[dict]:
        """The config's jobs on an EKS cluster, as their Kubernetes objects: the agent's watched jobs (render.py
        makes the same list from medic.yaml)."""
        spec = self.config.cluster(cluster) if self.config is not None else None
        if spec is None or spec.orchestrator != "eks":
            return []
        # the namespaces its watch rules opt in: any job of each kind there (render.py watched_namespaces, `*`)
        opted_in = [{"namespace": namespace, "kind": kind, "name": "*", "launcher_exits_128_or_more_on_sigterm": False}
                    for namespace in spec.opted_in_namespaces for kind in ("HyperPodPyTorchJob", "Job", "PyTorchJob")]
        return [{"namespace": job.kubernetes_object().namespace, "kind": job.kubernetes_object().kind,
                 "name": job.kubernetes_object().name,
                 "launcher_exits_128_or_more_on_sigterm": job.launcher_exits_128_or_more_on_sigterm}
                for job in self.config.jobs if job.cluster == cluster] + opted_in

    def _hyperpod_nodes(self, cluster: str) -> dict[str, str]:
        if not self.hyperpod.has_cluster(cluster):
            return {}
        return {node.instance_id: str(node.status) for node in self.hyperpod.backend.clusters[cluster].nodes.values()}

    def _capture_pages(self) -> None:
        """Every page actually published lands in a queue subscribed to each topic."""
        sqs, sns = self.client("sqs"), self.client("sns")
        self.page_queue_url = sqs.create_queue(QueueName=PAGE_CAPTURE_QUEUE, Attributes={
            "MessageRetentionPeriod": "1209600"})["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=self.page_queue_url,
                                       AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        for topic in self.topics:
            sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)

    # routing
    def parameter_change(self, name: str, operation: str, version: int, when: datetime) -> dict:
        """SSM's "Parameter Store Change" event for a parameter (its shape: AWS Systems Manager User Guide, EventBridge
        event examples for Parameter Store: no value, no version in it)."""
        stamp = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"version": "0", "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"ssm:{name}:{version}:{operation}")),
                "detail-type": "Parameter Store Change", "source": "aws.ssm", "account": self.account,
                "time": stamp, "region": self.region,
                "resources": [f"arn:aws:ssm:{self.region}:{self.account}:parameter/{name.lstrip('/')}"],
                "detail": {"name": name, "type": "String", "operation": operation}}

    def put_events(self, request: Any) -> Any:
        """A handler's PutEvents: each entry becomes the event EventBridge delivers to the rules that match it
        (EventBridge user guide, "Amazon EventBridge events": `version`, `id`, `detail-type`, `source`, `account`,
        `time`, `region`, `resources`, `detail`; PutEventsRequestEntry: "If no timestamp is provided, the timestamp
        of the PutEvents call will be used"), queued here and routed by the replay once the handler returned (the
        harness answers the call itself: moto's own EventBridge would deliver it to the probe queues of the rules
        mid-invocation). Each entry gets an EventId, as PutEvents' answer gives one per entry that was put."""
        params = json.loads(request.body or b"{}")
        answers = []
        for entry in params.get("Entries", []):
            event_id = str(uuid.uuid4())
            at = entry.get("Time")
            when = (datetime.fromtimestamp(float(at), UTC) if isinstance(at, (int, float)) else
                    datetime.now(UTC)).replace(microsecond=0)  # the handler's clock is the replay's
            self.put_by_handlers.append({
                "version": "0", "id": event_id, "detail-type": entry.get("DetailType", ""),
                "source": entry.get("Source", ""), "account": self.account,
                "time": when.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": self.region,
                "resources": list(entry.get("Resources", [])), "detail": json.loads(entry.get("Detail") or "{}")})
            answers.append({"EventId": event_id})
        body = json.dumps({"FailedEntryCount": 0, "Entries": answers}).encode()
        return raw_response(request.url, 200, {"Content-Type": "application/x-amz-json-1.1"}, body)

    def route(self, event: dict) -> list[Function]:
        """The functions the stack's rules deliver this event to, as moto's EventBridge matches it."""
        if "replay-name" in event:
            return self._route_replayed(event)
        entry: dict[str, Any] = {"Source": str(event.get("source", "")),
                                 "DetailType": str(event.get("detail-type", "")),
                                 "Detail": json.dumps(event.get("detail", {})),
                                 "Resources": [str(r) for r in event.get("resources", []) or []]}
        try:
            entry["Time"] = datetime.fromisoformat(str(event.get("time", "")).replace("Z", "+00:00"))
        except ValueError:
            pass
        events, sqs = self.client("events"), self.client("sqs")
        for bus in dict.fromkeys(rule.bus for rule in self.rules):
            events.put_events(Entries=[{**entry, "EventBusName": bus}])
        matched: set[str] = set()
        while self._probe_queue_url:
            messages = sqs.receive_message(QueueUrl=self._probe_queue_url, MaxNumberOfMessages=10).get("Messages")
            if not messages:
                break
            matched.update(json.loads(message["Body"])["rule"] for message in messages)
            sqs.delete_message_batch(QueueUrl=self._probe_queue_url, Entries=[
                {"Id": str(n), "ReceiptHandle": message["ReceiptHandle"]} for n, message in enumerate(messages)])
        return [function for rule in self.rules if rule.logical_id in matched for function in rule.functions]

    def _route_replayed(self, event: dict) -> list[Function]:
        """An event EventBridge replays from an archive. PutEvents cannot set replay-name (EventBridge adds it, at
        the top level, to each event it replays: EventBridge user guide, "Archiving and replaying events"), so the
        event is matched here, whole, against each rule's pattern with moto's matcher, which is what moto's own
        replay does (moto.events.models.Replay.replay_events: the archived event plus replay-name, to each rule's
        send_to_targets). A replay without Destination.FilterArns reaches every rule on the bus: so here."""
        return [function for rule in self.rules if rule.pattern is not None and rule.pattern.matches_event(event)
                for function in rule.functions]

    def drain_pages(self) -> list[dict]:
        published = self.router.calls["sns:Publish"] + self.harness_publishes
        if published == self._pages_drained_at:
            return []  # pages come only from the handlers' and the alarms' Publish calls: none since the last look
        self._pages_drained_at = published
        sqs = self.client("sqs")
        pages = []
        while True:
            messages = sqs.receive_message(QueueUrl=self.page_queue_url, MaxNumberOfMessages=10,
                                           MessageAttributeNames=["All"]).get("Messages", [])
            if not messages:
                return pages
            for message in messages:
                envelope = json.loads(message["Body"])
                attributes = {name: value.get("Value") for name, value in
                              (envelope.get("MessageAttributes") or {}).items()}
                page: dict[str, Any] = {"topic": envelope.get("TopicArn"), "subject": envelope.get("Subject"),
                                        "message": envelope.get("Message"), "attributes": attributes}
                if "record" in attributes:
                    try:
                        page["record"] = json.loads(attributes["record"])
                    except (TypeError, ValueError):
                        page["record"] = None
                pages.append(page)
                sqs.delete_message(QueueUrl=self.page_queue_url, ReceiptHandle=message["ReceiptHandle"])

    # the HyperPod world
    def configured(self, cluster: str) -> Any:
        return self.config.cluster(cluster) if self.config is not None else None

    def protected_groups(self, cluster: str) -> list[str]:
        spec = self.configured(cluster)
        return list(spec.protected_groups) if spec is not None else ["controller", "login"]

    def ensure_cluster(self, name: str, groups: dict[str, int] | None = None) -> None:
        if self.hyperpod.has_cluster(name):
            if groups is not None:
                raise ValueError(f"cluster {name!r} already exists")
            return
        spec = self.configured(name)
        if spec is not None:
            self.hyperpod.cluster_ids[spec.id] = name
        # DescribeCluster's truth matches the config's expectation until a `cluster` directive says otherwise.
        self.hyperpod.configure(name, orchestrator=spec.orchestrator if spec is not None else "slurm",
                                node_recovery=_NODE_RECOVERY.get(spec.node_recovery if spec is not None else "none"))
        if groups is None:
            eks = spec is not None and spec.orchestrator == "eks"
            groups = {"workers": DEFAULT_WORKERS} if eks else {"controller": 1, "workers": DEFAULT_WORKERS}
        self.hyperpod.create_cluster(self.client("sagemaker"), name, groups)

    def ensure_configured_clusters(self) -> None:
        """Every cluster the config names exists (as in the account the stack watches): a sweep of them all
        (the scheduled reconciler) finds each one."""
        for spec in getattr(self.config, "clusters", None) or []:
            self.ensure_cluster(spec.name)

    def prepare_for(self, event: dict) -> None:
        """Create what the event refers to: a configured cluster, and an undeclared node in it; a
        training job under a configured prefix (a known job takes the event's status)."""
        detail = event.get("detail")
        if not isinstance(detail, dict):
            return
        managed = {TRAINING_JOB_EVENT: ("TrainingJobName", "training_jobs_for", self.training.sync),
                   BATCH_JOB_EVENT: ("jobName", "batch_jobs_for", self.batch.sync),
                   BEDROCK_JOB_EVENT: ("jobName", "bedrock_jobs_for", self.bedrock.sync)}.get(event.get("detail-type"))
        if managed is not None:  # a managed job's state change: the job, known or (configured) created
            field, spec_for, sync = managed
            name = detail.get(field)
            sync(detail, create=isinstance(name, str) and self.config is not None
                 and getattr(self.config, spec_for)(name) is not None)
            return
        nested = detail.get("EventDetails")  # "SageMaker HyperPod Cluster Event" nests its details
        cluster = detail.get("ClusterName") or (nested.get("ClusterName") if isinstance(nested, dict) else None)
        if not isinstance(cluster, str) or self.configured(cluster) is None:
            return
        self.ensure_cluster(cluster)
        node_id = detail.get("InstanceId")
        if (isinstance(node_id, str) and INSTANCE_ID.match(node_id) and not self.hyperpod.node(cluster, node_id)
                and (cluster, node_id) not in self.hyperpod.terminated):  # a replaced instance stays gone
            protected = self.protected_groups(cluster)
            groups = self.hyperpod.groups(cluster)
            group = next((g for g in groups if g not in protected), None)
            if group is None:
                group = "workers"
            self.hyperpod.put_node(cluster, node_id, group)
        health = detail.get("HealthSummary")
        if (event.get("detail-type") == NODE_HEALTH_EVENT and isinstance(node_id, str) and isinstance(health, dict)
                and health.get("HealthStatus") == "Unhealthy"):  # HMA's report: HyperPod's own recovery, if Automatic
            self.hyperpod.fault_reported(cluster, node_id, str(health.get("HealthStatusReason", "")),
                                         datetime.now(UTC))  # the replay clock

    # environment for an invocation
    def environment(self, function: Function) -> dict[str, str]:
        # Lambda sets the region; X-Ray is not emulated.
        return {**function.environment, "AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region,
                "POWERTOOLS_TRACE_DISABLED": "true"}


def _check_pattern_size(what: str, pattern: Any) -> None:
    """EventBridge refuses a pattern over its quota (EVENT_PATTERN_QUOTA): so does the replay, naming it."""
    text = pattern if isinstance(pattern, str) else json.dumps(pattern, separators=(",", ":"), ensure_ascii=False)
    if len(text) > EVENT_PATTERN_QUOTA:
        raise SimError(f"template: {what}: its EventPattern is {len(text):,} characters, over EventBridge's \"Event "
                       f"pattern size\" quota of {EVENT_PATTERN_QUOTA:,} (Amazon EventBridge quotas): AWS refuses it "
                       "and the deploy fails")


def ttl_sweep(dynamodb: Any, now: datetime) -> int:
    """DynamoDB's TTL process, run once at ``now``: every item of a table with TTL enabled whose TTL attribute
    is a Number (epoch seconds) at or before now, and no more than five years before it, is deleted; an item
    without the attribute, with another type, or older than that is ignored ("Using DynamoDB Time to Live (TTL)",
    DynamoDB developer guide: "Formatting an item's TTL attribute"). AWS runs it in the background and "typically
    deletes expired items within two days of expiration", and "items that have expired and not been deleted will
    still show up in reads, queries, and scans" (DynamoDB API reference, UpdateTimeToLive): the replay deletes
    only when a scenario says so ({"sim": {"ttl_sweep": true}}), so both moments can be replayed. Each deletion is
    a REMOVE on the table's stream, as a TTL deletion is. Returns how many items went."""
    deleted = 0
    cutoff, oldest = now.timestamp(), now.timestamp() - TTL_IGNORED_AFTER.total_seconds()
    for table in dynamodb.list_tables()["TableNames"]:
        spec = dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
        if spec.get("TimeToLiveStatus") != "ENABLED":
            continue
        attribute = spec["AttributeName"]
        keys = [key["AttributeName"] for key in dynamodb.describe_table(TableName=table)["Table"]["KeySchema"]]
        for page in dynamodb.get_paginator("scan").paginate(TableName=table):
            for item in page.get("Items", []):
                try:
                    expiry = float(item[attribute]["N"])
                except (KeyError, TypeError, ValueError):
                    continue  # no TTL attribute, or not a Number: never expires
                if oldest <= expiry <= cutoff:
                    dynamodb.delete_item(TableName=table, Key={key: item[key] for key in keys})
                    deleted += 1
    return deleted
