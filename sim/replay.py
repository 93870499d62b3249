"""Replay: each input line is an EventBridge event (routed by the stack's rules, handled by the
stack's real handler in-process, the clock at the event's arrival: its ``time``, or now for an old one,
Replay.arrival) or a ``{"sim": ...}``
directive that sets up the emulated world first.

``run(lines, config_path, faults)`` is the whole tool as a function; the CLI and the demo call it.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import io
import json
import logging
import os
import re
import sys
import time
import traceback
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO
from unittest import mock

import time_machine

from sim.alarms import Transition
from sim.cfn import SimError
from sim.cloudwatch import MAX_EVALUATIONS, EmulatedCloudWatch
from sim.faults import Fault, parse_fault
from sim.hyperpod import INSTANCE_ID, LOGICAL_ID_PATTERN, NODE_RECOVERY, PROVISIONING, TRAINING_PLAN_NAME
from sim.kubeapi import DEFAULT_BACKOFF_LIMIT, SIGTERM_EXIT_CODE
from sim.kubeapi import FINISHED as K8S_FINISHED
from sim.kubeapi import RESTART_POLICIES as K8S_RESTART_POLICIES
from sim.scenario import documents
from sim.slurm import JOB_NAME as SLURM_JOB_NAME
from sim.slurm import MAX_CONTROLLERS as SLURM_MAX_CONTROLLERS
from sim.slurm import STATES as SLURM_STATES
from sim.streams import StreamMapping, failure_record
from sim.synth import ROOT, import_paths, load_config, stack_template
from sim.world import Function, Schedule, World

HANDLER_LOGGER = "medic"  # the Powertools logger the handlers write their records through
RECORD_MESSAGE = "remediation"
INCIDENT_MESSAGE = "incident"  # medic.obs.emit_incident: a closed incident's timeline
LAMBDA_RETRY_DELAYS = (timedelta(minutes=1), timedelta(minutes=2))  # async invoke retries, roughly
AGENT_LAG = timedelta(seconds=1)  # from a command queued to the agent's run and its result on the stream
SETTLE_ROUNDS = 10
STREAM_RETRY_CAP = 100  # MaximumRetryAttempts -1 (until the record expires) stops here in the replay
_STANDARD_ATTRS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
# ClusterInstanceStatus, all seven values of botocore's model.
NODE_STATUSES = ("Running", "Failure", "Pending", "ShuttingDown", "SystemUpdating", "DeepHealthCheckInProgress",
                 "NotFound")
CLUSTER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
MAX_TICKS = 2016  # runs of one schedule between two lines (a week of 5-minute runs); older ones are skipped
K8S_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)  # DNS-1123 label
K8S_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*", re.ASCII)
EKS_MAX_REPLICAS = 512
RELATIVE = re.compile(r"^\+\s*([0-9]+)\s*(s|m|h|d)$")
RELATIVE_UNIT = {"s": timedelta(seconds=1), "m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1)}
# The replay clock never goes past this: the handlers add days to their clock (an item's TTL), and datetime ends in
# the year 9999 (assumption: no scenario needs a later time; an event dated later arrives at the clock).
LATEST_CLOCK = datetime(9000, 1, 1, tzinfo=UTC)


@dataclass
class ReplayResult:
    lines: list[dict] = field(default_factory=list)  # stdout, in order
    calls: Counter[str] = field(default_factory=Counter)  # the handlers' API calls, by service:Operation
    attempts: Counter[str] = field(default_factory=Counter)  # HTTP attempts, retries included
    injected: Counter[str] = field(default_factory=Counter)  # attempts failed by --fault
    errors: list[str] = field(default_factory=list)  # what went to stderr about the input
    node_actions: list[dict] = field(default_factory=list)  # Batch* calls the emulated HyperPod answered
    invocations: Counter[str] = field(default_factory=Counter)  # handler invocations, by function logical id
    schedule_runs: Counter[str] = field(default_factory=Counter)  # scheduled events delivered, by rule logical id
    dropped: list[dict] = field(default_factory=list)  # events Lambda gave up on (to the DLQ / on-failure target)
    metrics: Counter[str] = field(default_factory=Counter)  # the handlers' EMF metrics: total value by name
    published: list[dict] = field(default_factory=list)  # datapoints the probe/metric directives put
    # events the handlers put (PutEvents: Medic's canary), as the rules delivered them: id, source, detail-type, time,
    # functions (the names of the functions the rules took it to; [] when no rule took it)
    put_events: list[dict] = field(default_factory=list)
    skipped: int = 0  # input lines (or documents) the replay could not use, each said on stderr
    # the authorizations the permission check evaluated for the functions' and agents' calls (sim/iam.py), by action
    authorizations: Counter[str] = field(default_factory=Counter)
    # denials a caller is built to meet (an agent's check of a command's pre-cluster key: sim/iam.py), by action
    designed_denials: Counter[str] = field(default_factory=Counter)

    @property
    def records(self) -> list[dict]:
        return [line for line in self.lines if line["kind"] == "record"]

    @property
    def pages(self) -> list[dict]:
        return [line for line in self.lines if line["kind"] == "page"]

    @property
    def incidents(self) -> list[dict]:
        return [line for line in self.lines if line["kind"] == "incident"]

    @property
    def alarms(self) -> list[dict]:
        """The state changes of the template's alarms, as the evaluator produced them."""
        return [line for line in self.lines if line["kind"] == "alarm"]

    @property
    def slurm_commands(self) -> list[dict]:
        """What the agents ran against the fake Slurm: ``cluster``, ``argv``, ``exit``, ``output``."""
        return [line for line in self.lines if line["kind"] == "slurm_command"]

    @property
    def kubernetes_calls(self) -> list[dict]:
        """What the EKS agents asked the emulated Kubernetes API: ``cluster``, ``verb``, ``path``, ``status``."""
        return [line for line in self.lines if line["kind"] == "kubernetes_call"]

    @property
    def training_jobs(self) -> list[dict]:
        """Training jobs the handlers created (CreateTrainingJob calls the emulated SageMaker accepted)."""
        return [line for line in self.lines if line["kind"] == "training_job"]

    @property
    def batch_jobs(self) -> list[dict]:
        """Batch jobs the handlers submitted (SubmitJob calls the emulated Batch accepted): ``name``, ``job_id``,
        ``queue``, ``definition``, ``request``."""
        return [line for line in self.lines if line["kind"] == "batch_job"]

    @property
    def bedrock_jobs(self) -> list[dict]:
        """Bedrock customization jobs the handlers created (CreateModelCustomizationJob calls the emulated Bedrock
        accepted, not the ones its token answered again): ``name``, ``arn``, ``model``, ``request``."""
        return [line for line in self.lines if line["kind"] == "bedrock_job"]


@dataclass
class LambdaContext:
    function_name: str
    invoked_function_arn: str
    memory_limit_in_mb: int = 128
    timeout_seconds: int = 60
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return "replay"

    def get_remaining_time_in_millis(self) -> int:
        return self.timeout_seconds * 1000


class _RecordCapture(logging.Handler):
    """Remediation records as the handler logs them: the record fields travel as LogRecord extras."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[dict] = []
        self.incidents: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message not in (RECORD_MESSAGE, INCIDENT_MESSAGE):
            return
        fields = {key: _plain(value) for key, value in record.__dict__.items()
                  if key not in _STANDARD_ATTRS and not key.startswith("_")}
        if message == INCIDENT_MESSAGE:
            self.incidents.append(fields)
            return
        fields["timestamp"] = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        self.records.append(fields)


def _plain(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


class Replay:
    def __init__(self, world: World, out: Callable[[dict], None], err: TextIO, handler_output: TextIO) -> None:
        self.world = world
        self.out = out
        self.err = err
        router = world.router  # the result shows the live counters
        self.result = ReplayResult(calls=router.calls, attempts=router.attempts, injected=router.injected,
                                   node_actions=world.hyperpod.actions, published=world.metrics.published)
        self.cloudwatch = EmulatedCloudWatch(world)
        self.handler_output = _EmfTap(handler_output, self.result.metrics, self.cloudwatch.emf)
        self.now: datetime | None = None  # the replay clock: the last event's (or advance's) time
        self.start: datetime | None = None  # the first time the clock was set: schedules run from here
        self._last_function: str | None = None
        self._containers: dict[str, Callable[[], Any]] = {}  # function logical id -> its dependencies()
        self._monotonic_base = time.monotonic()
        self._epoch: datetime | None = None
        self._monotonic_last = 0.0

    def error(self, lineno: int, message: str, *, skipped: bool = True) -> None:
        """An input line the replay says something about: by default one it could not use (skipped)."""
        text = f"line {lineno}: {message}"
        self.result.errors.append(text)
        self.result.skipped += skipped
        print(f"sim: {text}", file=self.err)

    def emit(self, line: dict) -> None:
        self.result.lines.append(line)
        self.out(line)

    def line(self, lineno: int, text: str) -> None:
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            return
        try:
            item = json.loads(stripped)
        except json.JSONDecodeError as error:
            self.error(lineno, f"not valid JSON ({error.msg} at column {error.colno}); skipped")
            return
        if not isinstance(item, dict):
            self.error(lineno, "expected a JSON object (an EventBridge event or a {\"sim\": ...} directive); skipped")
            return
        if "sim" in item:
            if len(item) != 1:
                self.error(lineno, "a directive is {\"sim\": {...}} and nothing else; skipped")
                return
            self.directive(lineno, item["sim"])
            return
        self.event(lineno, item)

    # directives
    def directive(self, lineno: int, spec: Any) -> None:
        if not isinstance(spec, dict) or not spec:
            self.error(lineno, "directive: expected {\"sim\": {\"<kind>\": ...}}; skipped")
            return
        for kind, value in spec.items():
            handler = getattr(self, f"_directive_{kind}", None)
            if handler is None:
                known = ", ".join(name.removeprefix("_directive_") for name in dir(self)
                                  if name.startswith("_directive_"))
                self.error(lineno, f"unknown directive {kind!r} (known: {known}); skipped")
                continue
            try:
                if kind in _CLOCK_DIRECTIVES:  # moves the clock itself
                    handler(value)
                    continue
                with time_machine.travel(self.now or datetime.now(UTC), tick=False):
                    handler(value)
            except (ValueError, TypeError, KeyError) as error:
                self.error(lineno, f"directive {kind}: {error}; skipped")

    def _directive_cluster(self, value: Any) -> None:
        if not isinstance(value, dict):
            raise ValueError("expected {\"name\": ..., \"groups\": {\"<group>\": <count>, ...}, "
                             "\"node_recovery\": ..., \"provisioning\": ...}")
        name = value.get("name")
        if not isinstance(name, str) or not CLUSTER_NAME.match(name):
            raise ValueError(f"'name' must be a HyperPod cluster name (got {name!r})")
        recovery, provisioning = value.get("node_recovery"), value.get("provisioning")
        if recovery is not None and recovery not in NODE_RECOVERY:
            raise ValueError(f"'node_recovery' must be one of {', '.join(NODE_RECOVERY)} (got {recovery!r})")
        if provisioning is not None and provisioning not in PROVISIONING:
            raise ValueError(f"'provisioning' must be one of {', '.join(PROVISIONING)} (got {provisioning!r})")
        settings_only = "groups" not in value and (recovery is not None or provisioning is not None)
        if settings_only:
            self.world.ensure_cluster(name)  # an existing cluster keeps its groups; a new one gets the defaults
        else:
            groups = value.get("groups", {"controller": 1, "workers": 16})
            if not isinstance(groups, dict) or not groups or not all(
                    isinstance(g, str) and CLUSTER_NAME.match(g) and isinstance(n, int) and 0 <= n <= 5000
                    for g, n in groups.items()):
                raise ValueError("'groups' must map instance group names to node counts (0..5000)")
            self.world.ensure_cluster(name, dict(groups))
        self.world.hyperpod.configure(name, node_recovery=recovery, provisioning=provisioning)

    def _directive_node(self, value: Any) -> None:
        if not isinstance(value, dict):
            raise ValueError("expected {\"cluster\": ..., \"id\": ..., \"group\": ...}")
        cluster, node_id = value.get("cluster"), value.get("id")
        if not isinstance(cluster, str) or not CLUSTER_NAME.match(cluster):
            raise ValueError(f"'cluster' must be a HyperPod cluster name (got {cluster!r})")
        if not isinstance(node_id, str) or not node_id:
            raise ValueError(f"'id' must be a node (instance) id (got {node_id!r})")
        status = value.get("status")
        if status is not None and status not in NODE_STATUSES:
            raise ValueError(f"'status' must be one of {', '.join(NODE_STATUSES)} (got {status!r})")
        self.world.ensure_cluster(cluster)
        group = value.get("group")
        if group is None:
            protected = self.world.protected_groups(cluster)
            group = next((g for g in self.world.hyperpod.groups(cluster) if g not in protected), "workers")
        if not isinstance(group, str) or not CLUSTER_NAME.match(group):
            raise ValueError(f"'group' must be an instance group name (got {group!r})")
        logical = value.get("logical_id")
        if logical is not None and (not isinstance(logical, str) or len(logical) > 128
                                    or not LOGICAL_ID_PATTERN.fullmatch(logical)):
            raise ValueError(f"'logical_id' must be a NodeLogicalId ({LOGICAL_ID_PATTERN.pattern}, at most 128 "
                             f"characters; got {logical!r})")
        self.world.hyperpod.put_node(cluster, node_id, group, status)
        if logical is not None:
            self.world.hyperpod.set_logical_id(cluster, node_id, logical)

    def _directive_training_plan(self, value: Any) -> None:
        """A SageMaker training plan an instance group runs on (DescribeCluster's InstanceGroups[].TrainingPlanArn) and
        how many of its instances are available (DescribeTrainingPlan's AvailableInstanceCount): set, or changed."""
        if not isinstance(value, dict):
            raise ValueError("expected {\"cluster\": ..., \"group\": ..., \"name\": ..., \"available\": <count>}")
        cluster, group, name = value.get("cluster"), value.get("group", "workers"), value.get("name")
        available = value.get("available")
        if not isinstance(cluster, str) or not CLUSTER_NAME.match(cluster):
            raise ValueError(f"'cluster' must be a HyperPod cluster name (got {cluster!r})")
        if not isinstance(group, str) or not CLUSTER_NAME.match(group):
            raise ValueError(f"'group' must be an instance group name (got {group!r})")
        if not isinstance(name, str) or not TRAINING_PLAN_NAME.fullmatch(name):
            raise ValueError(f"'name' must be a training plan name ({TRAINING_PLAN_NAME.pattern}; got {name!r})")
        if not isinstance(available, int) or isinstance(available, bool) or not 0 <= available <= 5000:
            raise ValueError(f"'available' must be an instance count, 0..5000 (got {available!r})")
        self.world.ensure_cluster(cluster)
        self.world.hyperpod.set_training_plan(cluster, group, name, available)

    def _directive_s3_put(self, value: Any) -> None:
        uri, body = (value.get("uri"), value.get("body", "")) if isinstance(value, dict) else (value, "")
        match = re.match(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(.+)$", uri if isinstance(uri, str) else "")
        if not match:
            raise ValueError(f"expected an s3://bucket/key URI (got {uri!r})")
        s3 = self.world.client("s3")
        bucket, key = match.groups()
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": self.world.region})
        s3.put_object(Bucket=bucket, Key=key, Body=str(body).encode())

    def _directive_mode(self, value: Any) -> None:
        """Someone sets the run-time mode parameter; SSM then sends "Parameter Store Change" (operation Update) to
        EventBridge (AWS Systems Manager User Guide, "Setting up notifications or trigger actions based on Parameter
        Store events": created, updated or deleted parameters, best effort; its event examples give the shape).
        ``{"value": ..., "event": false}`` sets it without the event (the backtest's world: the live records already
        say what the change did)."""
        spec = value if isinstance(value, dict) else {"value": value}
        mode, notify = spec.get("value"), spec.get("event", True)
        if mode not in ("act", "dry_run", "paused") or not isinstance(notify, bool) or set(spec) - {"value", "event"}:
            raise ValueError(f"mode must be act, dry_run or paused, or {{\"value\": <mode>, \"event\": false}} "
                             f"(got {value!r})")
        names = {f.environment.get("MODE_PARAMETER") for f in self.world.functions.values()} - {None}
        if not names:
            raise ValueError("the stack's functions name no MODE_PARAMETER")
        now = self.now or datetime.now(UTC).replace(microsecond=0)
        for name in sorted(names):
            version = self.world.client("ssm").put_parameter(Name=name, Value=mode, Type="String",
                                                               Overwrite=True)["Version"]
            if notify:
                self.deliver_event(self.world.parameter_change(name, "Update", version, now), now)

    def _directive_pause(self, value: Any) -> None:
        """An operator runs ``medic pause [--cluster C]... [--for 4h] --reason TEXT``: the pause's ledger item, written
        as the CLI writes it (cli/medic_cli/pauses.py: ledger/pauses.py PauseStore.put, ``--for`` read by the CLI's
        own parse_for). ``{"cluster": "C" | ["C", ...] (absent: the whole stack), "for": "4h" (absent: no end),
        "reason": "...", "by": "<caller ARN>"}``. No event: the functions read it with the mode (within 30 s)."""
        from medic_cli.context import CliError
        from medic_cli.pauses import parse_for

        from medic.core.mode import ALL_CLUSTERS, Pause
        from medic.ledger.pauses import PauseStore

        if not isinstance(value, dict) or set(value) - {"cluster", "for", "reason", "by"}:
            raise ValueError("expected {\"cluster\": ..., \"for\": \"4h\", \"reason\": ..., \"by\": ...}")
        reason, by = value.get("reason"), value.get("by", "arn:aws:iam::123456789012:user/operator")
        if not isinstance(reason, str) or not reason.strip() or not isinstance(by, str):
            raise ValueError("a pause needs a 'reason' (text), and 'by' is a caller ARN")
        try:
            length = parse_for(value["for"]) if "for" in value else None
        except CliError as error:
            raise ValueError(str(error)) from None
        now = self.now or datetime.now(UTC).replace(microsecond=0)
        for store in self._pause_stores(PauseStore):
            for scope in self._pause_scopes(value, ALL_CLUSTERS):
                store.put(Pause(scope=scope, by=by, reason=reason, since=now, until=now + length if length else None))

    def _directive_resume(self, value: Any) -> None:
        """An operator runs ``medic resume --cluster C`` (``{"cluster": "C" | [...]}``) or ``medic resume``
        (``true``: every pause; the mode parameter is the ``mode`` directive's): the pauses' items deleted, as the
        CLI deletes them (PauseStore.lift)."""
        from medic.core.mode import ALL_CLUSTERS
        from medic.ledger.pauses import PauseStore

        if value is not True and not isinstance(value, dict):
            raise ValueError("expected true (every pause) or {\"cluster\": ...}")
        for store in self._pause_stores(PauseStore):
            wanted = (self._pause_scopes(value, ALL_CLUSTERS) if isinstance(value, dict)
                      else [pause.scope for pause in store.pauses()])
            for scope in wanted:
                store.lift(scope)

    def _pause_scopes(self, value: dict, everything: str) -> list[str]:
        clusters = value.get("cluster")
        names = [clusters] if isinstance(clusters, str) else clusters if isinstance(clusters, list) else None
        if clusters is None:
            return [everything]
        if not names or not all(isinstance(name, str) and self.world.configured(name) for name in names):
            raise ValueError(f"'cluster' must name configured clusters (got {clusters!r})")
        return names

    def _pause_stores(self, store_class: Any) -> list[Any]:
        """The pause store of each mode parameter the stack's functions read (one per stack)."""
        from medic.ledger.table import Table

        pairs = {(f.environment.get("LEDGER_TABLE"), f.environment.get("MODE_PARAMETER"))
                 for f in self.world.functions.values()} - {(None, None)}
        stores = [store_class(Table(table, self.world.client("dynamodb")), parameter)
                  for table, parameter in sorted(pairs) if table and parameter]
        if not stores:
            raise ValueError("the stack's functions name no LEDGER_TABLE and MODE_PARAMETER")
        return stores

    def _directive_training_job(self, value: Any) -> None:
        self.world.training.put(value)

    def _directive_batch_job(self, value: Any) -> None:
        self.world.batch.put(value)

    def _directive_bedrock_job(self, value: Any) -> None:
        self.world.bedrock.put(value)

    def _directive_slurm_job(self, value: Any) -> None:
        if not isinstance(value, dict):
            raise ValueError("expected {\"cluster\": ..., \"id\": <job id>, \"name\": ..., \"state\": ...}")
        unknown = sorted(set(value) - {"cluster", "id", "name", "state", "nodes", "auto_resume", "requeue"})
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown)}: expected cluster, id, name, state, nodes, "
                             "auto_resume, requeue")
        cluster = self._slurm_cluster(value)
        job_id, name, state = value.get("id"), value.get("name", ""), value.get("state", "RUNNING")
        if isinstance(job_id, int) and not isinstance(job_id, bool) and 0 < job_id < 10**10:
            job_id = str(job_id)
        if not isinstance(job_id, str) or not re.fullmatch(r"[0-9]{1,10}", job_id, re.ASCII):
            raise ValueError(f"'id' must be a Slurm job id, 1-10 digits (got {job_id!r})")
        if not isinstance(name, str) or (name and not SLURM_JOB_NAME.match(name)):
            raise ValueError(f"'name' must be a Slurm job name without spaces (got {name!r})")
        if state not in SLURM_STATES:
            raise ValueError(f"'state' must be one of {', '.join(SLURM_STATES)} (got {state!r})")
        nodes, auto_resume = value.get("nodes", []), value.get("auto_resume", False)
        requeue = value.get("requeue", True)
        if not isinstance(nodes, list) or not all(isinstance(node, str) and INSTANCE_ID.match(node) for node in nodes):
            raise ValueError(f"'nodes' must be a list of the cluster's instance ids (got {nodes!r})")
        if not isinstance(auto_resume, bool):
            raise ValueError(f"'auto_resume' must be true or false (got {auto_resume!r})")
        if not isinstance(requeue, bool):
            raise ValueError(f"'requeue' must be true (sbatch --requeue, Slurm's default JobRequeue=1) or false "
                             f"(sbatch --no-requeue) (got {requeue!r})")
        for node in nodes:  # placed on nodes the cluster has (an undeclared one joins its first unprotected group)
            self.world.ensure_cluster(cluster)
            if self.world.hyperpod.node(cluster, node) is None:
                self._directive_node({"cluster": cluster, "id": node})
        self.world.slurm.put_job(cluster, job_id, name or f"job-{job_id}", state, nodes=nodes, auto_resume=auto_resume,
                                 requeue=requeue, now=self.now)

    def _directive_k8s_job(self, value: Any) -> None:
        """A Kubernetes job on an EKS cluster: {"cluster", "namespace", "name", "kind", "replicas", "watched",
        "restart_policy", "backoff_limit", "status", "sigterm_exit_code"}; its emulated controller creates its pods
        and, by its own rules (sim/kubeapi.py), recreates them when they are deleted or fails the job."""
        if not isinstance(value, dict):
            raise ValueError("expected {\"cluster\": ..., \"namespace\": ..., \"name\": ..., \"kind\": "
                             "\"PyTorchJob\" | \"HyperPodPyTorchJob\" | \"Job\", \"replicas\": R}")
        unknown = sorted(set(value) - {"cluster", "namespace", "name", "kind", "replicas", "watched", "restart_policy",
                                       "backoff_limit", "status", "sigterm_exit_code"})
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown)}")
        cluster = value.get("cluster")
        if not isinstance(cluster, str) or not CLUSTER_NAME.match(cluster) or not self.world.is_eks(cluster):
            raise ValueError(f"'cluster' must be an EKS cluster of the config (got {cluster!r})")
        namespace, name = value.get("namespace", "default"), value.get("name")
        if not isinstance(namespace, str) or not K8S_LABEL.fullmatch(namespace):
            raise ValueError(f"'namespace' must be a DNS-1123 label (got {namespace!r})")
        if not isinstance(name, str) or len(name) > 253 or not K8S_SUBDOMAIN.fullmatch(name):
            raise ValueError(f"'name' must be a DNS-1123 subdomain (got {name!r})")
        kind = value.get("kind", "PyTorchJob")
        replicas, watched = value.get("replicas", 2), value.get("watched", True)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or not 1 <= replicas <= EKS_MAX_REPLICAS:
            raise ValueError(f"'replicas' must be 1..{EKS_MAX_REPLICAS} (got {replicas!r})")
        if not isinstance(watched, bool):
            raise ValueError(f"'watched' must be true or false (got {watched!r})")
        policy, limit = value.get("restart_policy"), value.get("backoff_limit")
        if policy is not None and (kind != "PyTorchJob" or policy not in K8S_RESTART_POLICIES):
            raise ValueError(f"'restart_policy' is a PyTorchJob's, one of {', '.join(K8S_RESTART_POLICIES)} "
                             f"(got {policy!r} for a {kind})")
        if limit is not None and (kind != "Job" or not isinstance(limit, int) or isinstance(limit, bool)
                                  or not 0 <= limit <= 2_147_483_647):
            raise ValueError(f"'backoff_limit' is a batch Job's, 0..2147483647 (got {limit!r} for a {kind})")
        status, exit_code = value.get("status"), value.get("sigterm_exit_code", SIGTERM_EXIT_CODE)
        if status is not None and status not in K8S_FINISHED:
            raise ValueError(f"'status' must be one of {', '.join(K8S_FINISHED)} (got {status!r})")
        if not isinstance(exit_code, int) or isinstance(exit_code, bool) or not 0 <= exit_code <= 255:
            raise ValueError(f"'sigterm_exit_code' must be 0..255 (got {exit_code!r})")
        self.world.ensure_cluster(cluster)
        self.world.eks.put_job(cluster, namespace, name, kind, replicas, watched, restart_policy=policy or "OnFailure",
                               backoff_limit=DEFAULT_BACKOFF_LIMIT if limit is None else limit, status=status,
                               sigterm_exit_code=exit_code)

    def _directive_k8s_pod(self, value: Any) -> None:
        """A pod someone with `create pods` in a namespace made on an EKS cluster (a tenant's, not a job
        controller's): {"cluster", "namespace", "name", "node" (instance id), "owner": {"kind", "name", "uid"},
        "terminating_since"}; `uid` "job" is the named job's real uid (which anyone who may read the job can copy),
        any other text a uid that is not its."""
        if not isinstance(value, dict):
            raise ValueError("expected {\"cluster\": ..., \"namespace\": ..., \"name\": ..., \"node\": \"i-...\", "
                             "\"owner\": {\"kind\": ..., \"name\": ..., \"uid\": \"job\" | \"<uid>\"}, "
                             "\"terminating_since\": \"<ISO time>\"}")
        unknown = sorted(set(value) - {"cluster", "namespace", "name", "node", "owner", "terminating_since"})
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown)}")
        cluster = value.get("cluster")
        if not isinstance(cluster, str) or not CLUSTER_NAME.match(cluster) or not self.world.is_eks(cluster):
            raise ValueError(f"'cluster' must be an EKS cluster of the config (got {cluster!r})")
        namespace, name, node = value.get("namespace", "default"), value.get("name"), value.get("node")
        if not isinstance(namespace, str) or not K8S_LABEL.fullmatch(namespace):
            raise ValueError(f"'namespace' must be a DNS-1123 label (got {namespace!r})")
        if not isinstance(name, str) or len(name) > 253 or not K8S_SUBDOMAIN.fullmatch(name):
            raise ValueError(f"'name' must be a DNS-1123 subdomain (got {name!r})")
        if not isinstance(node, str) or not INSTANCE_ID.fullmatch(node):
            raise ValueError(f"'node' must be an instance id of the cluster (got {node!r})")
        owner = value.get("owner")
        if owner is not None and (not isinstance(owner, dict) or set(owner) - {"kind", "name", "uid"}
                                  or not all(isinstance(owner.get(key), str) and owner.get(key)
                                             for key in ("kind", "name", "uid"))):
            raise ValueError(f"'owner' must be {{\"kind\", \"name\", \"uid\"}}, each a string (got {owner!r})")
        since = value.get("terminating_since")
        terminating = _parse_time(since) if since is not None else None
        if since is not None and terminating is None:
            raise ValueError(f"'terminating_since' must be an ISO 8601 time (got {since!r})")
        self.world.ensure_cluster(cluster)
        self.world.eks.put_pod(cluster, namespace, name, node, owner, terminating)

    def _eks_agent(self, cluster: str, value: dict) -> None:
        """The `agent` directive on an EKS cluster: replica `replica` (default 1) of its agent Deployment."""
        unknown = sorted(set(value) - {"cluster", "heartbeat", "replica"})
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown)} for an EKS agent (cluster, heartbeat, replica)")
        replica = value.get("replica", 1)
        if not isinstance(replica, int) or isinstance(replica, bool) or not 1 <= replica <= 3:
            raise ValueError(f"'replica' must be 1..3 (got {replica!r})")
        self.world.ensure_cluster(cluster)
        handle = self.world.eks.agent(cluster, replica)
        beat = value.get("heartbeat", True)
        if isinstance(beat, bool):
            handle.running = beat
            return
        when = _parse_time(beat)
        if when is None:
            raise ValueError(f"'heartbeat' must be true, false or an ISO 8601 time (got {beat!r})")
        with time_machine.travel(when, tick=False):
            handle.running = False
            self.world.eks.heartbeat_at(handle, self.handler_output)
        self._emit_kubernetes_calls()

    def _directive_agent(self, value: Any) -> None:
        if not isinstance(value, dict):
            raise ValueError("expected {\"cluster\": ..., \"heartbeat\": true | false | \"<ISO time>\", "
                             "\"clock_ahead\": \"+1h\"}")
        if isinstance(value.get("cluster"), str) and self.world.is_eks(value["cluster"]):
            self._eks_agent(value["cluster"], value)
            return
        cluster = self._slurm_cluster(value)
        beat = value.get("heartbeat", True)
        controller = value.get("controller")
        if controller is not None and (not isinstance(controller, int) or isinstance(controller, bool)):
            raise ValueError(f"'controller' must be a head node's number, 1-based (got {controller!r})")
        handles = self.world.slurm.cluster_agents(cluster, controller)  # every head node's agent, or one
        if "clock_ahead" in value:  # the controller's clock runs ahead of AWS's (its heartbeats' `at` too)
            ahead = RELATIVE.match(value["clock_ahead"].strip()) if isinstance(value["clock_ahead"], str) else None
            if ahead is None:
                raise ValueError(f"'clock_ahead' must be like \"+1h\" (got {value['clock_ahead']!r})")
            for handle in handles:
                self.world.slurm.set_clock_ahead(handle, int(ahead.group(1)) * RELATIVE_UNIT[ahead.group(2)])
        if isinstance(beat, bool):
            for handle in handles:
                handle.running = beat  # a running agent reports and polls at every event from now on
            return
        when = _parse_time(beat)
        if when is None:
            raise ValueError(f"'heartbeat' must be true, false or an ISO 8601 time (got {beat!r})")
        with time_machine.travel(when, tick=False):
            for handle in handles:
                handle.running = False  # it reported then, and nothing since
                self.world.slurm.heartbeat_at(handle, self.handler_output)

    def _directive_slurm(self, value: Any) -> None:
        """The cluster's head nodes (`controllers`, one agent on each), the slurmctld in charge (`primary`), and
        whether HyperPod returns a node it repaired to service in Slurm (`repair_resumes`: an assumption)."""
        if not isinstance(value, dict):
            raise ValueError("expected {\"cluster\": ..., \"controllers\": 2, \"primary\": 1}")
        cluster = self._slurm_cluster(value)
        unknown = sorted(set(value) - {"cluster", "controllers", "primary", "accounting", "repair_resumes"})
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown)}: expected cluster, controllers, primary, "
                             "accounting, repair_resumes")
        if "accounting" in value:
            if not isinstance(value["accounting"], bool):
                raise ValueError(f"'accounting' must be true (slurmdbd keeps the job accounting sacct reads) or "
                                 f"false (got {value['accounting']!r})")
            self.world.slurm.set_accounting(cluster, value["accounting"])
        if "repair_resumes" in value:
            if not isinstance(value["repair_resumes"], bool):
                raise ValueError(f"'repair_resumes' must be true or false (got {value['repair_resumes']!r})")
            self.world.slurm.set_repair_resumes(cluster, value["repair_resumes"])
        numbers = {}
        for key, low, high in (("controllers", 1, SLURM_MAX_CONTROLLERS), ("primary", 0, SLURM_MAX_CONTROLLERS)):
            number = value.get(key)
            if number is not None and (not isinstance(number, int) or isinstance(number, bool)
                                       or not low <= number <= high):
                raise ValueError(f"'{key}' must be a number {low}..{high} (got {number!r})")
            numbers[key] = number
        self.world.slurm.set_controllers(cluster, numbers["controllers"], numbers["primary"])

    def _directive_agent_result(self, value: Any) -> None:
        """A result written as the agent of ``cluster`` would write it (its own key), for a command Medic
        issued (``"latest"``: the last one) or any id; the stream then delivers it."""
        if not isinstance(value, dict):
            raise ValueError("expected {\"cluster\": ..., \"command\": \"latest\" | \"<id>\", \"status\": ..., "
                             "\"message\": ..., \"kind\"/\"target\"/\"incident\": ...}")
        if self.now is None:
            raise ValueError("an agent result needs a clock: put an event or an absolute time first")
        eks = isinstance(value.get("cluster"), str) and value["cluster"] in self.world.eks.queues
        cluster = value["cluster"] if eks else self._slurm_cluster(value)  # an EKS agent writes the same items
        if eks and not self.world.slurm.table:
            self.world.slurm.table = self.world.eks.table
        command = value.get("command", "latest")
        if not isinstance(command, str) or not command:
            raise ValueError(f"'command' must be \"latest\" or a command id (got {command!r})")
        issued: dict[str, str] = {}
        if command == "latest":
            issued = self.world.slurm.latest_command()
            command = issued["pk"].rsplit("#", 1)[-1]  # command#<cluster>#<id>: ids never contain `#`
        fields = {key: issued.get(key, "") for key in ("kind", "target", "incident")}
        fields.update({"status": "executed", "message": ""})
        for key in ("status", "message", "kind", "target", "incident"):
            if key in value:
                if not isinstance(value[key], str):
                    raise ValueError(f"'{key}' must be a string (got {value[key]!r})")
                fields[key] = value[key]
        with time_machine.travel(self.now, tick=False) as clock:
            self.world.slurm.forge_result(cluster, command, fields, self.now)
            self.settle(self.now, clock, lag=timedelta(0))

    def _directive_advance(self, value: Any) -> None:
        """Time passes with no event: the due schedules run, then the clock stands at the new time."""
        when = self._time_of(value)
        if self.now is not None and when < self.now:
            raise ValueError(f"the clock cannot go back (it is {self.now.isoformat()}; asked for {when.isoformat()})")
        if when > LATEST_CLOCK:
            raise ValueError(f"the clock stops at {LATEST_CLOCK.isoformat()} (asked for {when.isoformat()})")
        self.move_clock(when)
        with time_machine.travel(when, tick=False) as clock:
            self.world.catch_up(when)
            self.settle(when, clock, lag=timedelta(0))  # running agents report in, as they do every minute

    def _time_of(self, value: Any) -> datetime:
        relative = RELATIVE.match(value.strip()) if isinstance(value, str) else None
        if relative:
            if self.now is None:
                raise ValueError("a relative time needs a clock: put an event or an absolute time first")
            try:
                return self.now + int(relative.group(1)) * RELATIVE_UNIT[relative.group(2)]
            except OverflowError:
                raise ValueError(f"{value!r} is past the end of time (the clock stops at "
                                 f"{LATEST_CLOCK.isoformat()})") from None
        when = _parse_time(value)
        if when is None:
            raise ValueError(f"expected an ISO 8601 time or +N(s|m|h|d) (got {value!r})")
        return when

    def _directive_ttl_sweep(self, value: Any) -> None:
        """DynamoDB's TTL deletes every expired item now (World.ttl_sweep): what AWS does within about two days."""
        if value is not True:
            raise ValueError(f"expected true (got {value!r})")
        if self.now is None:
            raise ValueError("a TTL sweep needs a clock: put an event or an absolute time first")
        self.world.ttl_sweep(self.now)

    def _directive_probe(self, value: Any) -> None:
        self.world.metrics.probe(value)

    def _directive_metric(self, value: Any) -> None:
        self.world.metrics.put(value, datetime.now(UTC))

    def _slurm_cluster(self, value: dict) -> str:
        cluster = value.get("cluster")
        if not isinstance(cluster, str) or not CLUSTER_NAME.match(cluster):
            raise ValueError(f"'cluster' must be a cluster name (got {cluster!r})")
        if cluster not in self.world.slurm.queues:
            known = ", ".join(sorted(self.world.slurm.queues)) or "none"
            raise ValueError(f"the stack has no Slurm agent queue for {cluster!r} (agent queues: {known})")
        return cluster

    # events
    def event(self, lineno: int, event: dict) -> None:
        missing = [key for key in ("source", "detail-type", "detail") if key not in event]
        if missing:
            self.error(lineno, f"not an EventBridge event (missing {', '.join(missing)}); skipped")
            return
        when = _parse_time(event.get("time"))
        if when is None:
            when = self.now or datetime.now(UTC).replace(microsecond=0)
            self.error(lineno, f"event time {event.get('time')!r} is not an ISO 8601 time; "
                               f"replaying it at {when.isoformat()}", skipped=False)
        when = self.arrival(when)
        self.move_clock(when)
        self.deliver_event(event, when)

    def arrival(self, when: datetime) -> datetime:
        """When an event whose `time` is ``when`` reaches the rules. Its time is when it happened, as its sender says
        (PutEvents takes any `Time`: "If no timestamp is provided, the timestamp of the PutEvents call will be used",
        botocore's events model, PutEventsRequestEntry); EventBridge delivers it when it is put, whatever it says.
        - An event older than the clock arrives now, its time unchanged: an EventBridge replay (StartReplay replays
          events "based on the time in the event", with `replay-name`), a dead-letter queue redriven by an operator
          days later, a late redelivery. The handlers see its age.
        - Otherwise the clock moves to its time (time passed until it happened; the schedules and alarm minutes on
          the way are bounded: MAX_TICKS, MAX_EVALUATIONS), but never past LATEST_CLOCK: the handlers add days to
          their clock, and a datetime ends in 9999. An event dated later arrives now. (An event sent now with a
          later time, within the clock's reach, is the `put_event` directive.)
        Before the first clock line there is no "now" but the wall clock's."""
        if self.now is None:
            return when if when <= LATEST_CLOCK else datetime.now(UTC).replace(microsecond=0)
        if when < self.now or when > LATEST_CLOCK:
            return self.now
        return when

    def _directive_put_event(self, value: Any) -> None:
        """An event put now (PutEvents at the replay clock) whatever its `time` says: a sender dating it later (or
        earlier) than it is sent. The clock does not move."""
        if self.now is None:
            raise ValueError("put_event needs a clock: put an event or an absolute time first")
        if not isinstance(value, dict) or any(key not in value for key in ("source", "detail-type", "detail")):
            raise ValueError("expected an EventBridge event (with source, detail-type and detail)")
        self.deliver_event(value, self.now)

    def deliver_event(self, event: dict, when: datetime) -> list[str]:
        """The event through the stack's rules to their functions, at ``when``; then what the handlers put. The names
        of the functions it reached."""
        with time_machine.travel(when, tick=False) as clock:  # the world moves with the event's time
            self.world.catch_up(when)
            functions = self.world.route(event)
            if not functions:
                return []
            self.world.prepare_for(event)
            self.settle(when, clock, lag=timedelta(0))  # running agents have just reported in (and polled)
            for function in functions:
                self.invoke(function, event, when, clock)
            self.settle(when, clock)
        self.deliver_put_events(when)
        return [function.name for function in functions]

    def deliver_put_events(self, when: datetime) -> None:
        """The events the handlers put (sim.world.World.put_events), each through the rules as EventBridge delivers
        an event when it is put (at ``when``: the handlers ran at the replay clock); kept in ``put_events``."""
        while self.world.put_by_handlers:
            event = self.world.put_by_handlers.pop(0)
            reached = self.deliver_event(event, when)
            self.result.put_events.append({"id": event["id"], "source": event["source"],
                                           "detail-type": event["detail-type"], "time": event["time"],
                                           "functions": reached})

    # time passing: the schedules
    def move_clock(self, when: datetime) -> None:
        """Set the clock to ``when``, first running every schedule due at or before it (in time order)."""
        if self.start is None:
            self.start = when
        elif self.now is not None and when > self.now:
            due: list[tuple[datetime, int, Schedule | None]] = []
            for order, schedule in enumerate(self.world.schedules):
                due.extend((tick, order, schedule) for tick in self._ticks(schedule, when))
            # CloudWatch's evaluation of a minute comes after the schedules EventBridge fires on it
            skipped = self.cloudwatch.skipped
            due.extend((tick, len(self.world.schedules), None) for tick in self.cloudwatch.due(self.start, when))
            if self.cloudwatch.skipped > skipped:
                text = (f"alarms: {self.cloudwatch.skipped - skipped} minutes before {when.isoformat()} are not "
                        f"evaluated; the replay evaluates the last {MAX_EVALUATIONS}")
                print(f"sim: {text}", file=self.err)
                self.result.errors.append(text)
            for tick, _, schedule in sorted(due, key=lambda item: item[:2]):
                self.now = tick
                if schedule is None:
                    self.evaluate_alarms(tick)
                else:
                    self.run_schedule(schedule, tick)
        self.now = when  # (an event earlier than the last one is replayed at its own time; no schedule runs)

    def _ticks(self, schedule: Schedule, until: datetime) -> list[datetime]:
        assert self.start is not None
        last = int((until - self.start) / schedule.every)
        first = schedule.fired + 1
        if last - first + 1 > MAX_TICKS:
            skipped = last - MAX_TICKS + 1 - first
            text = (f"schedule {schedule.name}: {last - first + 1} runs due before {until.isoformat()}; "
                    f"the replay skips the {skipped} oldest and runs the last {MAX_TICKS}")
            print(f"sim: {text}", file=self.err)
            self.result.errors.append(text)
            first = last - MAX_TICKS + 1
        schedule.fired = max(schedule.fired, last)
        return [self.start + k * schedule.every for k in range(first, last + 1)]

    def run_schedule(self, schedule: Schedule, when: datetime) -> None:
        """One run of a schedule: its "Scheduled Event" to each target, at the tick's time."""
        event = self.world.scheduled_event(schedule, when)
        self.result.schedule_runs[schedule.logical_id] += 1
        with time_machine.travel(when, tick=False) as clock:
            self.world.ensure_configured_clusters()
            self.world.catch_up(when)
            self.settle(when, clock, lag=timedelta(0))
            for function, constant in schedule.targets:
                self.invoke(function, event if constant is None else constant, when, clock)
            self.settle(when, clock)
        self.deliver_put_events(when)  # the reconciler's canary, through its rule

    # the template's alarms: CloudWatch evaluates them each minute
    def evaluate_alarms(self, when: datetime) -> None:
        """One minute of CloudWatch: each alarm evaluated on the metrics so far; each state change is an
        ``alarm`` line, its actions' notifications, and its "CloudWatch Alarm State Change" event."""
        with time_machine.travel(when, tick=False):
            changes = self.cloudwatch.evaluate(when)
        for change in changes:
            # Under the replay's clock, publish and receive alike: SQS deletes a message older than the queue's
            # MessageRetentionPeriod (SQS API reference, SetQueueAttributes: "The length of time, in seconds, for
            # which Amazon SQS retains a message"; at most 1,209,600 = 14 days), so read on the wall clock a
            # notification sent at the scenario's time expires once the scenario is 14 days old.
            with time_machine.travel(when, tick=False):
                notified = self.cloudwatch.notify(change)
                pages = self.world.drain_pages()
            self.emit(_alarm_line(change, notified))
            for page in pages:
                self.emit({"kind": "page", **page})
            self.deliver_event(self.cloudwatch.event(change), when)

    # what happens after an event: the agents pick up their commands, the streams deliver
    def agents_cycle(self) -> bool:
        handled = self.world.slurm.cycle(self.handler_output)
        for run in self.world.slurm.drain_runs():
            self.emit({"kind": "slurm_command", **run})
        handled = self.world.eks.cycle(self.handler_output) or handled
        self._emit_kubernetes_calls()
        return handled

    def _emit_kubernetes_calls(self) -> None:
        for call in self.world.eks.drain_calls():
            self.emit({"kind": "kubernetes_call", **call})

    def settle(self, when: datetime, clock: Any, lag: timedelta = AGENT_LAG) -> None:
        """Until nothing moves: each running agent takes its queued commands (``lag`` later each round), then
        each stream mapping delivers the new records its filters keep. Starts at ``when`` or, after a
        handler's retries, when the last retry ran."""
        moment = max(when, datetime.now(UTC))
        for _ in range(SETTLE_ROUNDS):
            moment += lag
            clock.move_to(moment, tick=False)
            progressed = self.agents_cycle()
            for mapping in self.world.streams.mappings:
                records = self.world.streams.poll(mapping)
                if records:
                    progressed = True
                    self.deliver(mapping, records, clock)
            if not progressed:
                return

    def deliver(self, mapping: StreamMapping, records: list[dict], clock: Any) -> None:
        """Batches of stream records to the mapping's function, retried as Lambda retries a stream batch."""
        batches = deque(records[i:i + max(1, mapping.batch_size)]
                        for i in range(0, len(records), max(1, mapping.batch_size)))
        while batches:
            batch, attempts = batches.popleft(), 0
            while batch:
                response, raised = self.invoke_sync(mapping.function, {"Records": batch}, clock)
                failed_from = 0 if raised else _first_failed(batch, response, mapping.report_item_failures)
                if failed_from is None:
                    break
                attempts += 1
                limit = mapping.max_retries if mapping.max_retries >= 0 else STREAM_RETRY_CAP
                if attempts > limit:
                    text = (f"{mapping.function.name} failed on {len(batch)} stream record(s) after {attempts} "
                            f"attempts; dropped to the mapping's on-failure destination")
                    print(f"sim: {text}", file=self.err)
                    self.result.errors.append(text)
                    self.result.dropped.append({"function": mapping.function.name, "source": mapping.stream_arn,
                                                "records": len(batch)})
                    if mapping.on_failure:  # where the batch was, not its records (sim.streams.failure_record)
                        record = failure_record(mapping, batch, attempts, raised, str(uuid.uuid4()), datetime.now(UTC))
                        self.world.client("sqs").send_message(QueueUrl=mapping.on_failure,
                                                              MessageBody=json.dumps(record))
                    break
                if raised and mapping.bisect and len(batch) > 1:
                    half = len(batch) // 2
                    batches.appendleft(batch[half:])
                    batch = batch[:half]
                else:
                    batch = batch[failed_from:]

    def invoke(self, function: Function, event: dict, when: datetime, clock: Any) -> None:
        """An asynchronous invoke (EventBridge): an exception is retried, then the event is dropped."""
        capture = _RecordCapture()
        for attempt in range(1 + function.max_retries):
            clock.move_to(when + sum(LAMBDA_RETRY_DELAYS[:attempt], timedelta()), tick=False)
            try:
                self._call(function, event, clock, capture)
                break
            except Exception:  # noqa: BLE001 - the handler failed: Lambda retries the async invoke
                gives_up = attempt == function.max_retries
                self._report_raise(function, f"on attempt {attempt + 1} of {1 + function.max_retries}"
                                             f"{' (event dropped to the DLQ)' if gives_up else ''}")
                if gives_up:
                    self.result.dropped.append({"function": function.name, "id": event.get("id"),
                                                "detail-type": event.get("detail-type")})
                    self.cloudwatch.dead_letter(function, event, traceback.format_exc(limit=-1))
        self._emit_outputs(capture)

    def invoke_sync(self, function: Function, payload: dict, clock: Any) -> tuple[Any, bool]:
        """A synchronous invoke (an event source mapping): the response, and whether the handler raised."""
        capture = _RecordCapture()
        try:
            response, raised = self._call(function, payload, clock, capture), False
        except Exception:  # noqa: BLE001 - the mapping decides what a failed batch means
            self._report_raise(function, f"on a batch of {len(payload.get('Records', []))} stream record(s)")
            response, raised = None, True
        self._emit_outputs(capture)
        return response, raised

    def _call(self, function: Function, payload: dict, clock: Any, capture: _RecordCapture) -> Any:
        self.result.invocations[function.logical_id] += 1
        started, began, raised = datetime.now(UTC), time.perf_counter(), True
        try:
            with self._invocation(function, clock, capture):
                module, handler = _load_handler(function.handler)
                with self._container(function, module):
                    response = handler(copy.deepcopy(payload), LambdaContext(function.name, function.arn))
            raised = False
            return response
        finally:  # what Lambda reports for the attempt (AWS/Lambda Invocations, Errors, Duration)
            self.cloudwatch.invoked(function, started, raised, (time.perf_counter() - began) * 1000)

    @contextlib.contextmanager
    def _container(self, function: Function, module: Any) -> Iterator[None]:
        """The function's own warm container: what its handler built once (``medic.wiring.dependencies()``:
        config, clients, the mode's short cache) lasts from its first invocation to the end of the replay,
        whatever other functions run in between, as Lambda keeps a container per function."""
        deps = sys.modules.get("medic.wiring")
        shared = getattr(deps, "dependencies", None)
        if shared is None or not hasattr(shared, "__wrapped__") or getattr(module, "dependencies", None) is not shared:
            # Not the usual wiring: one container at a time (another function is a cold start).
            if self._last_function != function.logical_id:
                self._cold_start()
                self._last_function = function.logical_id
            yield
            return
        own = self._containers.get(function.logical_id)
        if own is None:
            own = self._containers[function.logical_id] = functools.cache(shared.__wrapped__)
        module.dependencies = own
        try:
            yield
        finally:
            module.dependencies = shared

    def _report_raise(self, function: Function, when: str) -> None:
        tail = traceback.format_exc(limit=-3).rstrip().replace("\n", "\n    ")
        print(f"sim: {function.name} raised {when}:\n    {tail}", file=self.err)
        self.result.errors.append(f"{function.name} raised {when.split(' (')[0]}")

    def _emit_outputs(self, capture: _RecordCapture) -> None:
        for job in self.world.training.drain_created():
            self.emit({"kind": "training_job", **job})
        for job in self.world.batch.drain_submitted():
            self.emit({"kind": "batch_job", **job})
        for job in self.world.bedrock.drain_created():
            self.emit({"kind": "bedrock_job", **job})
        for record in capture.records:
            self.emit({"kind": "record", **record})
        for incident in capture.incidents:
            # "kind" names the line kind here: the incident's own kind (stall, node, ...) becomes incident_kind
            fields = {("incident_kind" if key == "kind" else key): value for key, value in incident.items()}
            self.emit({"kind": "incident", **fields})
        for page in self.world.drain_pages():
            self.emit({"kind": "page", **page})

    def _cold_start(self) -> None:
        deps = sys.modules.get("medic.wiring")
        if deps is not None and hasattr(deps, "dependencies"):
            deps.dependencies.cache_clear()

    @contextlib.contextmanager
    def _invocation(self, function: Function, clock: Any, capture: _RecordCapture) -> Iterator[None]:
        """The function's environment, the replay clock, handler output kept off stdout."""
        if self._epoch is None:
            self._epoch = datetime.now(UTC)
        saved = {key: os.environ.get(key) for key in self.world.environment(function)}
        os.environ.update(self.world.environment(function))
        import_paths()
        logger = logging.getLogger(HANDLER_LOGGER)
        try:
            with mock.patch("time.monotonic", self._monotonic), contextlib.redirect_stdout(self.handler_output), \
                    self.world.permissions.acting(function.name, function.logical_id):
                self.world.router.on_backoff = clock.shift
                logger.addHandler(capture)
                streams = _point_streams(logger, self.handler_output)
                try:
                    yield
                finally:
                    logger.removeHandler(capture)
                    for handler, stream in streams:
                        handler.setStream(stream)
                    self.world.router.on_backoff = None
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def _monotonic(self) -> float:
        """Monotonic time that follows the replay clock, so the handlers' short caches expire as in AWS."""
        elapsed = (datetime.now(UTC) - self._epoch).total_seconds() if self._epoch else 0.0
        self._monotonic_last = max(self._monotonic_last, self._monotonic_base + elapsed)
        return self._monotonic_last


_CLOCK_DIRECTIVES = frozenset({"advance", "agent_result", "put_event"})  # each travels (and settles) itself


class _EmfTap(io.TextIOBase):
    """The handlers' output, passed on to its sink; their EMF metric lines are also summed by metric name."""

    def __init__(self, sink: TextIO, totals: Counter[str], on_document: Callable[[dict], None]) -> None:
        super().__init__()
        self.sink = sink
        self.totals = totals
        self.on_document = on_document  # CloudWatch Logs' metric extraction
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.sink.write(text)
        self._partial += text
        if "\n" in self._partial:
            *lines, self._partial = self._partial.split("\n")
            for line in lines:
                if '"_aws"' in line:
                    self._metrics(line)
        return len(text)

    def flush(self) -> None:
        self.sink.flush()

    def _metrics(self, line: str) -> None:
        try:
            document = json.loads(line)
            directives = document["_aws"]["CloudWatchMetrics"]
        except (ValueError, TypeError, KeyError):
            return
        self.on_document(document)
        for directive in directives if isinstance(directives, list) else []:
            for metric in directive.get("Metrics", []) if isinstance(directive, dict) else []:
                name = metric.get("Name") if isinstance(metric, dict) else None
                value = document.get(name) if isinstance(name, str) else None
                values = value if isinstance(value, list) else [value]
                numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
                if numbers:
                    self.totals[name] += sum(numbers)


def _alarm_line(change: Transition, notified: list[str]) -> dict:
    return {"kind": "alarm", "alarm": change.alarm.name, "from": change.previous, "to": change.state,
            "timestamp": change.at.isoformat(timespec="milliseconds"), "reason": change.reason,
            "notified": notified}


def _point_streams(logger: logging.Logger, stream: TextIO) -> list[tuple[logging.StreamHandler, Any]]:
    """Powertools writes its log lines to the stdout it saw at import: point them at our sink."""
    changed = []
    for handler in logger.handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            changed.append((handler, handler.setStream(stream)))
    return [(handler, old) for handler, old in changed if old is not None]


def _first_failed(batch: list[dict], response: Any, reports_item_failures: bool) -> int | None:
    """None when the batch succeeded, else the index Lambda retries from (the lowest failed record)."""
    if not reports_item_failures or not isinstance(response, dict):
        return None
    failures = response.get("batchItemFailures") or []
    if not failures:
        return None
    sequence = [record.get("dynamodb", {}).get("SequenceNumber") for record in batch]
    indexes = []
    for failure in failures:
        identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if identifier not in sequence:
            return 0  # an identifier Lambda cannot place: the whole batch is retried
        indexes.append(sequence.index(identifier))
    return min(indexes)


def _load_handler(spec: str) -> tuple[Any, Callable[[dict, Any], Any]]:
    module_name, _, function_name = spec.rpartition(".")
    if not module_name:
        raise SimError(f"template: handler {spec!r} is not module.function")
    module = importlib.import_module(module_name)
    return module, getattr(module, function_name)


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _forget_model_instances() -> None:
    """moto keeps every model instance it creates (for MotoServer's dashboard), and its TransactWriteItems
    deep-copies each table it writes, DynamoDB stream included, as its rollback copy: a long replay would
    keep every copy of every stream record. Dropping those references (and collecting the copies, which
    are cycles: each record points back at its copied table) frees what no table holds."""
    import gc

    from moto.core.model_instances import reset_model_data

    reset_model_data()
    gc.collect()


def run(lines: Iterable[str], config_path: str | Path | None = None, faults: Iterable[str | Fault] = (), *,
        template: dict | None = None, out: Callable[[dict], None] | None = None, err: TextIO | None = None,
        handler_output: TextIO | None = None) -> ReplayResult:
    """Replay the lines against the stack synthesized for the config; what ``sim replay`` prints."""
    config_path = Path(config_path) if config_path else ROOT / "medic.yaml"
    parsed = [fault if isinstance(fault, Fault) else parse_fault(fault) for fault in faults]
    if template is None:
        template = stack_template(config_path)
    config = load_config(config_path)
    sink = handler_output if handler_output is not None else io.StringIO()
    with World(template, config, parsed) as world:
        replay = Replay(world, out or (lambda line: None), err or sys.stderr, sink)
        for note in world.unsupported:
            print(f"sim: note: {note}", file=replay.err)
        replay._cold_start()
        try:
            for count, (lineno, text) in enumerate(documents(lines), 1):
                replay.line(lineno, text)
                world.router.contract.raise_if_violated(f"line {lineno}")  # fail loudly: sim/contract.py
                world.permissions.raise_if_denied(f"line {lineno}")  # a function's role does not allow: sim/iam.py
                if count % 500 == 0:
                    _forget_model_instances()
        finally:
            replay._cold_start()  # no client of this emulated world outlives it
        replay.result.authorizations = Counter(world.permissions.checked)
        replay.result.designed_denials = Counter(world.permissions.designed_denials)
        return replay.result
