"""``--fault service:Operation=ErrorCode:N``: the first N attempts of an operation fail with ErrorCode.

The failure is a real HTTP error response in the service's own wire protocol, handed to botocore
at ``before-send``: botocore's retry logic and error parsing then behave as with real AWS.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
import uuid
from dataclasses import dataclass
from xml.sax.saxutils import escape

import botocore.session
from botocore.awsrequest import AWSResponse

SPEC = re.compile(r"^(?P<service>[^:=]*):(?P<operation>[^=]*)=(?P<code>[^:]*):(?P<count>[^:]*)$")
USAGE = "--fault service:Operation=ErrorCode:N, e.g. sagemaker:BatchReplaceClusterNodes=ThrottlingException:2"
UNAVAILABLE = frozenset({"ServiceUnavailable", "ServiceUnavailableException", "SlowDown"})


class FaultSpecError(ValueError):
    pass


@dataclass
class Fault:
    service: str  # botocore service name, as in boto3.client("sagemaker")
    operation: str  # API operation name, as in the service model
    code: str
    count: int
    fired: int = 0

    @property
    def key(self) -> str:
        return f"{self.service}:{self.operation}"

    @property
    def status(self) -> int:
        if self.code in UNAVAILABLE:
            return 503
        if self.code.startswith("Internal"):  # InternalFailure, InternalServerError, InternalError
            return 500
        return 400

    def take(self) -> bool:
        """True while this fault still has failures to hand out."""
        if self.fired >= self.count:
            return False
        self.fired += 1
        return True


@functools.cache
def _session() -> botocore.session.Session:
    return botocore.session.get_session()


@functools.cache
def _services() -> tuple[str, ...]:
    return tuple(_session().get_available_services())


def parse_fault(spec: str) -> Fault:
    """Parse and check one spec against the real service models; the error names the bad part."""
    match = SPEC.match(spec.strip())
    if not match:
        raise FaultSpecError(f"--fault {spec!r}: expected {USAGE}")
    service, operation, code, count = (match.group(name).strip() for name in ("service", "operation", "code", "count"))
    if service not in _services():
        raise FaultSpecError(f"--fault {spec!r}: unknown service {service!r}{_hint(service, _services())}")
    operations = _session().get_service_model(service).operation_names
    if operation not in operations:
        raise FaultSpecError(f"--fault {spec!r}: service {service} has no operation {operation!r}"
                             f"{_hint(operation, operations)}")
    if not re.match(r"^[A-Za-z][A-Za-z0-9._-]{0,127}$", code):
        raise FaultSpecError(f"--fault {spec!r}: error code {code!r} is not an AWS error code name")
    if not count.isdigit() or int(count) < 1:
        raise FaultSpecError(f"--fault {spec!r}: count {count!r} must be a whole number >= 1")
    return Fault(service, operation, code, int(count))


def _hint(word: str, choices: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def error_response(url: str, protocol: str, code: str, status: int, message: str) -> AWSResponse:
    """An AWS error response, encoded as the service's protocol encodes it."""
    request_id = str(uuid.uuid4())
    headers = {"x-amzn-RequestId": request_id, "x-amz-request-id": request_id}
    if protocol == "json":
        headers["Content-Type"] = "application/x-amz-json-1.1"
        headers["x-amzn-query-error"] = f"{code};{'Receiver' if status >= 500 else 'Sender'}"
        body = json.dumps({"__type": code, "message": message}).encode()
    elif protocol == "rest-json":
        headers["Content-Type"] = "application/json"
        headers["x-amzn-ErrorType"] = code
        body = json.dumps({"message": message}).encode()
    elif protocol == "query":
        headers["Content-Type"] = "text/xml"
        kind = "Receiver" if status >= 500 else "Sender"
        body = (f"<ErrorResponse><Error><Type>{kind}</Type><Code>{escape(code)}</Code>"
                f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId>"
                f"</ErrorResponse>").encode()
    elif protocol == "ec2":
        headers["Content-Type"] = "text/xml"
        body = (f"<Response><Errors><Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
                f"</Error></Errors><RequestID>{request_id}</RequestID></Response>").encode()
    elif protocol == "rest-xml":
        headers["Content-Type"] = "application/xml"
        body = (f"<Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
                f"<RequestId>{request_id}</RequestId></Error>").encode()
    elif protocol == "smithy-rpc-v2-cbor":
        headers["Content-Type"] = "application/cbor"
        headers["smithy-protocol"] = "rpc-v2-cbor"
        body = _cbor_text_map({"__type": code, "message": message})
    else:
        raise FaultSpecError(f"cannot inject a fault into protocol {protocol!r}")
    return raw_response(url, status, headers, body)


def raw_response(url: str, status: int, headers: dict[str, str], body: bytes) -> AWSResponse:
    return AWSResponse(url, status, headers, _Raw(body))


class _Raw:
    """The raw body an AWSResponse reads (what urllib3 would hand botocore)."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **kwargs: object) -> object:
        yield self._body


def _cbor_text_map(values: dict[str, str]) -> bytes:
    """A CBOR map of text strings (all an error body needs)."""

    def head(major: int, length: int) -> bytes:
        if length < 24:
            return bytes([major << 5 | length])
        if length < 256:
            return bytes([major << 5 | 24, length])
        if length < 65536:
            return bytes([major << 5 | 25]) + length.to_bytes(2, "big")
        return bytes([major << 5 | 26]) + length.to_bytes(4, "big")

    def text(value: str) -> bytes:
        data = value.encode()
        return head(3, len(data)) + data

    return head(5, len(values)) + b"".join(text(key) + text(value) for key, value in values.items())
