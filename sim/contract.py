"""AWS's contract, checked on both sides of every call the handlers make in the replay.

botocore's own ParamValidator checks a request's types, required members and minimum lengths only
(botocore/validate.py: no maximum lengths, patterns or enums; the service checks those). So a handler
could send what AWS rejects and pass the replay. And what the emulator answers (moto's models, the
harness's own Batch* node calls) is whatever its authors believed. Both sides are checked here against
the operation's shapes in botocore's service model: types, enums, lengths and ranges, patterns,
required members, unions, and (in responses) members the model does not have.

- ``check_request(service, operation, params)`` / ``check_response(service, operation, body)`` raise
  ``ContractViolation`` (naming the operation, the member path, the value and the constraint);
  ``request_violations`` / ``response_violations`` return the list instead. Usable from any test.
- ``Contract`` plugs into a boto3 session (``install``) and the harness router (``check_answer``),
  keeps every violation, and ``raise_if_violated()`` makes the replay fail loudly even when a handler
  swallowed the exception its call raised.

Patterns are matched against the whole value, as the services do (AWS's error reads "Member must
satisfy regular expression pattern: ..."), with the ``regex`` module: the model's patterns are Java
regular expressions (``\\p{L}``, UTF-16 surrogate ranges), which ``re`` cannot compile.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import botocore.session
import regex
from botocore.model import OperationModel, Shape

# What the emulator answers for the handlers, checked against the operation's output shape: the node
# calls and ListTags the harness makes up, moto's HyperPod and training-job answers (moto's models are
# not the service model).
CHECKED_RESPONSES = frozenset({
    "sagemaker:BatchRebootClusterNodes",
    "sagemaker:BatchReplaceClusterNodes",
    "sagemaker:DescribeCluster",
    "sagemaker:DescribeClusterNode",
    "sagemaker:ListClusterNodes",
    "sagemaker:ListTags",
    # moto's training jobs, with sim/training.py's corrections
    "sagemaker:CreateTrainingJob",
    "sagemaker:DescribeTrainingJob",
    "sagemaker:ListTrainingJobs",
    # the emulator's own Batch jobs (sim/batch.py)
    "batch:DescribeJobs",
    "batch:SubmitJob",
    # the emulator's own Bedrock customization jobs (sim/bedrock.py)
    "bedrock:GetModelCustomizationJob",
    "bedrock:CreateModelCustomizationJob",
    "bedrock:ListTagsForResource",
})
# Java's UTF-16 spelling of "any supplementary character", as it appears in the models' patterns.
_SURROGATE_RANGE = r"\uD800\uDC00-\uDBFF\uDFFF"
_PARAMS = "sim.contract.params"  # where a call's API parameters wait for their check, in its context
_VALUE_SHOWN = 120  # characters of an offending value quoted in a message


class ContractViolation(AssertionError):
    """A request or response that AWS's service model does not allow."""

    def __init__(self, violations: list[Violation], where: str = "") -> None:
        self.violations = list(violations)
        super().__init__((f"{where}: " if where else "") + "; ".join(str(v) for v in self.violations))


@dataclass(frozen=True)
class Violation:
    operation: str  # service:Operation
    direction: str  # "request" | "response"
    path: str  # member path, e.g. NodeDetails.InstanceStatus.Status
    value: Any
    constraint: str  # what the model asks for

    def __str__(self) -> str:
        shown = repr(self.value)
        if len(shown) > _VALUE_SHOWN:
            shown = shown[:_VALUE_SHOWN] + "..."
        return (f"{self.operation} {self.direction} violates AWS's service model: "
                f"{self.path or '(top level)'} = {shown}: {self.constraint}")


@functools.cache
def _session() -> botocore.session.Session:
    return botocore.session.get_session()


@functools.cache
def operation_model(service: str, operation: str) -> OperationModel:
    return _session().get_service_model(service).operation_model(operation)


@functools.cache
def _pattern(pattern: str) -> Any:
    return regex.compile(pattern.replace(_SURROGATE_RANGE, r"\U00010000-\U0010FFFF"))


def request_violations(service: str, operation: str, params: Mapping[str, Any]) -> list[Violation]:
    """What in these API parameters (as passed to the boto3 client) the operation's input shape forbids."""
    model = operation_model(service, operation)
    return _violations(service, operation, "request", model.input_shape, params, "takes no parameters")


def response_violations(service: str, operation: str, body: Mapping[str, Any]) -> list[Violation]:
    """What in this decoded JSON response body the operation's output shape forbids (unknown members too)."""
    model = operation_model(service, operation)
    return _violations(service, operation, "response", model.output_shape, body, "returns no members")


def _violations(service: str, operation: str, direction: str, shape: Shape | None, value: Mapping[str, Any],
                shapeless: str) -> list[Violation]:
    # Responses are checked on the wire (decoded JSON), requests as boto3 parameters.
    checker = _Checker(f"{service}:{operation}", direction, wire=direction == "response")
    if shape is not None:
        checker.check(shape, value, "")
    elif value:
        checker.add("", dict(value), f"the operation {shapeless}")
    return checker.violations


def check_request(service: str, operation: str, params: Mapping[str, Any]) -> None:
    violations = request_violations(service, operation, params)
    if violations:
        raise ContractViolation(violations)


def check_response(service: str, operation: str, body: Mapping[str, Any]) -> None:
    violations = response_violations(service, operation, body)
    if violations:
        raise ContractViolation(violations)


# Responses AWS is known to send against its own model's "required": DescribeTrainingJob returns
# `VpcConfig: {}` for a job without a VPC (seen in real responses, issue 11 item 8), although the output
# shape marks SecurityGroupIds and Subnets required. Only an empty object at exactly these paths passes.
OBSERVED_EMPTY = frozenset({("sagemaker:DescribeTrainingJob", "VpcConfig")})


class _Checker:
    """One walk over a value and its shape. ``wire``: a decoded JSON body (timestamps are epoch numbers or
    ISO strings, blobs base64 text, unknown members are the emulator's invention); else boto3 parameters."""

    def __init__(self, operation: str, direction: str, wire: bool) -> None:
        self.operation = operation
        self.direction = direction
        self.wire = wire
        self.violations: list[Violation] = []

    def add(self, path: str, value: Any, constraint: str) -> None:
        self.violations.append(Violation(self.operation, self.direction, path, value, constraint))

    def check(self, shape: Shape, value: Any, path: str) -> None:
        if shape.metadata.get("document"):
            return  # a free-form document: any JSON value
        kind = shape.type_name
        checker = getattr(self, f"_{kind}", None)
        if checker is None:
            self.add(path, value, f"shape {shape.name} has type {kind!r}, which the contract check does not know")
            return
        checker(shape, value, path)

    def _structure(self, shape: Any, value: Any, path: str) -> None:
        if not isinstance(value, Mapping):
            self.add(path, value, f"must be a structure ({shape.name}), not {type(value).__name__}")
            return
        observed_empty = self.direction == "response" and not value and (self.operation, path) in OBSERVED_EMPTY
        for name in shape.required_members:
            if name not in value and not observed_empty:
                self.add(_join(path, name), None, f"required member of {shape.name} is missing")
        present = [name for name, member in value.items() if not (self.wire and member is None)]
        if shape.metadata.get("union") and len(present) != 1:
            self.add(path, sorted(present), f"{shape.name} is a union: exactly one member must be set")
        for name, member in value.items():
            if name not in shape.members:
                if not (self.wire and name == "ResponseMetadata"):
                    known = ", ".join(shape.members) or "none"
                    self.add(_join(path, name), member, f"{shape.name} has no member {name!r} (members: {known})")
                continue
            if member is None and self.wire:
                continue  # JSON null: the member is absent
            self.check(shape.members[name], member, _join(path, name))

    def _list(self, shape: Any, value: Any, path: str) -> None:
        if not isinstance(value, list | tuple):
            self.add(path, value, f"must be a list ({shape.name}), not {type(value).__name__}")
            return
        self._length(shape, value, path, "items")
        for index, item in enumerate(value):
            self.check(shape.member, item, f"{path}[{index}]")

    def _map(self, shape: Any, value: Any, path: str) -> None:
        if not isinstance(value, Mapping):
            self.add(path, value, f"must be a map ({shape.name}), not {type(value).__name__}")
            return
        self._length(shape, value, path, "entries")
        for key, item in value.items():
            self.check(shape.key, key, f"{path}.(key {key!r})")
            self.check(shape.value, item, f"{path}[{key!r}]")

    def _string(self, shape: Any, value: Any, path: str) -> None:
        if not isinstance(value, str):
            self.add(path, value, f"must be a string ({shape.name}), not {type(value).__name__}")
            return
        enum = shape.metadata.get("enum")
        if enum and value not in enum:
            self.add(path, value, f"must be one of the enum {shape.name}: {', '.join(enum)}")
        self._length(shape, value, path, "characters")
        pattern = shape.metadata.get("pattern")
        if pattern and _pattern(pattern).fullmatch(value) is None:
            self.add(path, value, f"must satisfy the pattern of {shape.name}: {pattern}")

    def _integer(self, shape: Any, value: Any, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(path, value, f"must be an integer ({shape.name}), not {type(value).__name__}")
            return
        self._range(shape, value, path)

    _long = _integer

    def _float(self, shape: Any, value: Any, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
            self.add(path, value, f"must be a number ({shape.name}), not {type(value).__name__}")
            return
        self._range(shape, value, path)

    _double = _float

    def _boolean(self, shape: Any, value: Any, path: str) -> None:
        if not isinstance(value, bool):
            self.add(path, value, f"must be a boolean ({shape.name}), not {type(value).__name__}")

    def _timestamp(self, shape: Any, value: Any, path: str) -> None:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number or isinstance(value, dt.datetime) and not self.wire:
            return
        if isinstance(value, str):
            try:
                dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
                return
            except ValueError:
                pass
        self.add(path, value, f"must be a timestamp ({shape.name}: epoch seconds or ISO 8601)")

    def _blob(self, shape: Any, value: Any, path: str) -> None:
        if self.wire:
            if not isinstance(value, str):
                self.add(path, value, f"must be base64 text ({shape.name}), not {type(value).__name__}")
                return
            try:
                data = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                self.add(path, value, f"must be base64 text ({shape.name})")
                return
            self._length(shape, data, path, "bytes")
        elif isinstance(value, bytes | bytearray | str):
            self._length(shape, value.encode() if isinstance(value, str) else value, path, "bytes")
        elif not hasattr(value, "read"):
            self.add(path, value, f"must be bytes or a file-like object ({shape.name}), not {type(value).__name__}")

    def _length(self, shape: Shape, value: Any, path: str, unit: str) -> None:
        low, high = shape.metadata.get("min"), shape.metadata.get("max")
        if low is not None and len(value) < low:
            self.add(path, value, f"{shape.name} must have at least {low} {unit} (has {len(value)})")
        if high is not None and len(value) > high:
            self.add(path, value, f"{shape.name} must have at most {high} {unit} (has {len(value)})")

    def _range(self, shape: Shape, value: Any, path: str) -> None:
        low, high = shape.metadata.get("min"), shape.metadata.get("max")
        if low is not None and value < low:
            self.add(path, value, f"{shape.name} must be >= {low}")
        if high is not None and value > high:
            self.add(path, value, f"{shape.name} must be <= {high}")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class Contract:
    """The contract check of one emulated account: every request its handlers' clients send, and the
    emulator's answers to the operations in ``responses``. Violations are kept for ``raise_if_violated``."""

    def __init__(self, responses: Iterable[str] = CHECKED_RESPONSES) -> None:
        self.responses = frozenset(responses)
        self.violations: list[Violation] = []

    def install(self, session: Any) -> None:
        """Check each request's API parameters after botocore's own validation (which raises
        ParamValidationError in the handler, as it would in Lambda) and before it is sent: a violation of
        what only the service checks raises ContractViolation in the handler's call, and is kept."""
        session.events.register_last("before-parameter-build", self._keep_params)
        session.events.register_last("before-call", self._before_call)

    @staticmethod
    def _keep_params(params: Mapping[str, Any], context: dict, **kwargs: Any) -> None:
        context[_PARAMS] = params  # the API parameters, complete (idempotency tokens filled in)

    def _before_call(self, model: OperationModel, context: dict, **kwargs: Any) -> None:
        params = context.get(_PARAMS, {})
        violations = request_violations(model.service_model.service_name, model.name, params)
        if violations:
            self.violations.extend(violations)
            raise ContractViolation(violations)

    def check_answer(self, model: OperationModel, response: Any) -> None:
        """A successful answer of a checked operation, as the harness is about to hand it to botocore."""
        key = f"{model.service_model.service_name}:{model.name}"
        if key not in self.responses or response is None or response.status_code >= 300:
            return
        protocol = model.service_model.protocol
        if protocol not in ("json", "rest-json"):  # rest-json: checked operations bind no output to headers
            raise ContractViolation([Violation(key, "response", "", protocol,
                                               "only JSON-protocol responses can be checked")])
        try:
            body = json.loads(response.content or b"{}")
        except ValueError as error:
            violations = [Violation(key, "response", "", response.content[:_VALUE_SHOWN], f"not JSON: {error}")]
        else:
            violations = response_violations(model.service_model.service_name, model.name, body)
        if violations:
            self.violations.extend(violations)
            raise ContractViolation(violations)

    def raise_if_violated(self, where: str = "") -> None:
        """Raise every violation seen so far (a handler may have swallowed the exception its call raised)."""
        if self.violations:
            violations, self.violations = self.violations, []
            raise ContractViolation(violations, where)
