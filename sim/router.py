"""The one ``before-send`` responder of the handlers' boto3 clients: fault injection first, then
the operations the harness emulates itself, then moto.

Why not just ``register_first`` next to moto: botocore's endpoint *emits* ``before-send`` to every
handler and takes the first non-None response, so moto's own handler (registered through
botocore's BUILTIN_HANDLERS) would still run and apply a faulted call's side effects, or trip over
an operation it does not implement. So on the session the handlers' clients come from, moto's
handler is unregistered and this router delegates to it. Clients copy the session's event
emitter when they are created, so every client the handlers create later inherits the router.
Parameter validation against the service model happens before ``before-send``, as with real AWS;
``sim.contract`` adds what only the service checks (patterns, enums, maximums) to every request, and
checks the emulator's answers of ``CHECKED_RESPONSES`` against the output shape before botocore parses them.
"""

from __future__ import annotations

import types
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import boto3
import botocore.endpoint
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from moto.core.models import botocore_stubber

from sim.contract import Contract
from sim.faults import Fault, error_response

# An emulated operation answers the request itself, or returns None to leave it to moto.
Emulated = Callable[[AWSPreparedRequest], AWSResponse | None]
# An observer sees each request moto answered, with the answer (to record or adjust what moto did).
Observer = Callable[[AWSPreparedRequest, AWSResponse], None]
_OPERATION = "sim.operation"


class Router:
    def __init__(self, faults: Iterable[Fault] = (), emulated: dict[str, Emulated] | None = None,
                 observers: dict[str, Observer] | None = None, contract: Contract | None = None) -> None:
        self.faults = {fault.key: fault for fault in faults}
        self.emulated = dict(emulated or {})
        self.observers = dict(observers or {})
        self.contract = contract or Contract()  # AWS's service model, on the handlers' requests and our answers
        self.calls: Counter[str] = Counter()  # API calls, by service:Operation
        self.attempts: Counter[str] = Counter()  # HTTP attempts (retries included)
        self.injected: Counter[str] = Counter()  # attempts answered with an injected fault
        self.backoff_seconds: list[float] = []  # retry delays botocore asked for (not slept)
        self.on_backoff: Callable[[float], None] | None = None
        self._saved_time: Any = None

    def install(self, session: boto3.Session) -> None:
        events = session.events
        events.unregister("before-send", botocore_stubber)
        events.register_first("before-call", self._before_call)
        events.register_first("before-send", self._before_send)
        self.contract.install(session)

    def __enter__(self) -> Router:
        # botocore sleeps between retries; the replay's clock is virtual, so record the delay instead.
        self._saved_time = botocore.endpoint.time
        botocore.endpoint.time = types.SimpleNamespace(sleep=self._sleep)
        return self

    def __exit__(self, *exc: object) -> None:
        botocore.endpoint.time = self._saved_time

    def _sleep(self, seconds: float) -> None:
        self.backoff_seconds.append(seconds)
        if self.on_backoff is not None:
            self.on_backoff(seconds)

    def _before_call(self, model: Any, context: dict, **kwargs: Any) -> None:
        context[_OPERATION] = model
        self.calls[f"{model.service_model.service_name}:{model.name}"] += 1

    def _before_send(self, request: AWSPreparedRequest, **kwargs: Any) -> AWSResponse | None:
        model = (request.context or {}).get(_OPERATION)
        if model is not None:
            key = f"{model.service_model.service_name}:{model.name}"
            self.attempts[key] += 1
            fault = self.faults.get(key)
            if fault is not None and fault.take():
                self.injected[key] += 1
                # the protocol botocore speaks to it (ServiceModel.resolved_protocol: the first of the model's
                # `protocols` botocore supports, json before smithy-rpc-v2-cbor for CloudWatch), not the legacy one
                return error_response(request.url, model.service_model.resolved_protocol, fault.code, fault.status,
                                      f"{fault.code} injected by the replay harness "
                                      f"({fault.fired} of {fault.count}).")
            if key in self.emulated:
                response = self.emulated[key](request)
                if response is not None:
                    self.contract.check_answer(model, response)
                    return response
            response = botocore_stubber(request=request, **kwargs)
            self.contract.check_answer(model, response)
            observer = self.observers.get(key)
            if observer is not None and response is not None:
                observer(request, response)
            return response
        return botocore_stubber(request=request, **kwargs)
