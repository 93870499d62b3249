"""Replay: each input line is an EventBridge event (routed by the stack's rules, handled by the
stack's real handler in-process, the clock at the event's ``time``) or a ``{"sim": ...}``
directive that sets up the emulated world first.

``run(lines, config_path, faults)`` is the whole tool as a function; the CLI and the demo call it.
"""

from __future__ import annotations

import contextlib
import copy
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
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO
from unittest import mock

import time_machine

from sim.cfn import SimError
from sim.faults import Fault, parse_fault
from sim.synth import ROOT, import_paths, load_config, stack_template
from sim.world import Function, World

HANDLER_LOGGER = "medic"  # the Powertools logger the handlers write their records through
RECORD_MESSAGE = "remediation"
LAMBDA_RETRY_DELAYS = (timedelta(minutes=1), timedelta(minutes=2))  # async invoke retries, roughly
_STANDARD_ATTRS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
NODE_STATUSES = ("Running", "Failure", "Pending", "ShuttingDown", "SystemUpdating", "DeepHealthCheckInProgress")
CLUSTER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


@dataclass
class ReplayResult:
    lines: list[dict] = field(default_factory=list)  # stdout, in order
    calls: Counter[str] = field(default_factory=Counter)  # the handlers' API calls, by service:Operation
    attempts: Counter[str] = field(default_factory=Counter)  # HTTP attempts, retries included
    injected: Counter[str] = field(default_factory=Counter)  # attempts failed by --fault
    errors: list[str] = field(default_factory=list)  # what went to stderr about the input
    node_actions: list[dict] = field(default_factory=list)  # Batch* calls the emulated HyperPod answered

    @property
    def records(self) -> list[dict]:
        return [line for line in self.lines if line["kind"] == "record"]

    @property
    def pages(self) -> list[dict]:
        return [line for line in self.lines if line["kind"] == "page"]

    @property
    def training_jobs(self) -> list[dict]:
        """Training jobs the handlers created (CreateTrainingJob calls the emulated SageMaker accepted)."""
        return [line for line in self.lines if line["kind"] == "training_job"]


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

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() != RECORD_MESSAGE:
            return
        fields = {key: _plain(value) for key, value in record.__dict__.items()
                  if key not in _STANDARD_ATTRS and not key.startswith("_")}
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
        self.handler_output = handler_output
        router = world.router  # the result shows the live counters
        self.result = ReplayResult(calls=router.calls, attempts=router.attempts, injected=router.injected,
                                   node_actions=world.hyperpod.actions)
        self.now: datetime | None = None  # the replay clock: the last event's time
        self._last_function: str | None = None
        self._monotonic_base = time.monotonic()
        self._epoch: datetime | None = None
        self._monotonic_last = 0.0

    def error(self, lineno: int, message: str) -> None:
        text = f"line {lineno}: {message}"
        self.result.errors.append(text)
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
                with time_machine.travel(self.now or datetime.now(UTC), tick=False):
                    handler(value)
            except (ValueError, TypeError, KeyError) as error:
                self.error(lineno, f"directive {kind}: {error}; skipped")

    def _directive_cluster(self, value: Any) -> None:
        if not isinstance(value, dict):
            raise ValueError("expected {\"name\": ..., \"groups\": {\"<group>\": <count>, ...}}")
        name = value.get("name")
        if not isinstance(name, str) or not CLUSTER_NAME.match(name):
            raise ValueError(f"'name' must be a HyperPod cluster name (got {name!r})")
        groups = value.get("groups", {"controller": 1, "workers": 16})
        if not isinstance(groups, dict) or not groups or not all(
                isinstance(g, str) and CLUSTER_NAME.match(g) and isinstance(n, int) and 0 <= n <= 5000
                for g, n in groups.items()):
            raise ValueError("'groups' must map instance group names to node counts (0..5000)")
        self.world.ensure_cluster(name, dict(groups))

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
        self.world.hyperpod.put_node(cluster, node_id, group, status)

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
        if value not in ("act", "dry_run", "paused"):
            raise ValueError(f"mode must be act, dry_run or paused (got {value!r})")
        names = {f.environment.get("MODE_PARAMETER") for f in self.world.functions.values()} - {None}
        if not names:
            raise ValueError("the stack's functions name no MODE_PARAMETER")
        for name in names:
            self.world.client("ssm").put_parameter(Name=name, Value=value, Type="String", Overwrite=True)

    def _directive_training_job(self, value: Any) -> None:
        self.world.training.put(value)

    def _directive_slurm_job(self, value: Any) -> None:
        if not isinstance(value, dict) or "id" not in value:
            raise ValueError("expected an object with 'id'")

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
                               f"replaying it at {when.isoformat()}")
        self.now = when
        with time_machine.travel(when, tick=False) as clock:  # the world moves with the event's time
            self.world.hyperpod.finish_repairs(when)
            functions = self.world.route(event)
            if not functions:
                return
            self.world.prepare_for(event)
            for function in functions:
                self.invoke(function, event, when, clock)

    def invoke(self, function: Function, event: dict, when: datetime, clock: Any) -> None:
        if self._last_function != function.logical_id:  # another function: another container
            self._cold_start()
            self._last_function = function.logical_id
        capture = _RecordCapture()
        for attempt in range(1 + function.max_retries):
            clock.move_to(when + sum(LAMBDA_RETRY_DELAYS[:attempt], timedelta()), tick=False)
            try:
                with self._invocation(function, clock, capture):
                    handler = _load_handler(function.handler)
                    handler(copy.deepcopy(event), LambdaContext(function.name, function.arn))
                break
            except Exception:  # noqa: BLE001 - the handler failed: Lambda retries the async invoke
                tail = traceback.format_exc(limit=-3).rstrip().replace("\n", "\n    ")
                gives_up = attempt == function.max_retries
                print(f"sim: {function.name} raised on attempt {attempt + 1} of {1 + function.max_retries}"
                      f"{' (event dropped to the DLQ)' if gives_up else ''}:\n    {tail}", file=self.err)
                self.result.errors.append(f"{function.name} raised on attempt {attempt + 1}")
        for job in self.world.training.drain_created():
            self.emit({"kind": "training_job", **job})
        for record in capture.records:
            self.emit({"kind": "record", **record})
        for page in self.world.drain_pages():
            self.emit({"kind": "page", **page})

    def _cold_start(self) -> None:
        deps = sys.modules.get("medic.deps")
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
            with mock.patch("time.monotonic", self._monotonic), contextlib.redirect_stdout(self.handler_output):
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


def _point_streams(logger: logging.Logger, stream: TextIO) -> list[tuple[logging.StreamHandler, Any]]:
    """Powertools writes its log lines to the stdout it saw at import: point them at our sink."""
    changed = []
    for handler in logger.handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            changed.append((handler, handler.setStream(stream)))
    return [(handler, old) for handler, old in changed if old is not None]


def _load_handler(spec: str) -> Callable[[dict, Any], Any]:
    module_name, _, function_name = spec.rpartition(".")
    if not module_name:
        raise SimError(f"template: handler {spec!r} is not module.function")
    return getattr(importlib.import_module(module_name), function_name)


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


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
        replay._cold_start()
        try:
            for lineno, text in enumerate(lines, 1):
                replay.line(lineno, text)
        finally:
            replay._cold_start()  # no client of this emulated world outlives it
        return replay.result
