"""Per-invocation measurements during a replay, from outside the harness.

Inside ``instrumented()``, each handler module's ``handler`` is wrapped (the harness looks it up on the
module at every invocation, so it finds the wrapper): every handler call is timed (wall clock), the API
calls it makes are counted by a botocore ``before-call`` hook on the session the handlers' clients come
from, and the time the emulated services (moto and the harness's own emulations) spend answering is
summed per invocation, so the handler's own share (Medic plus botocore's client-side work: serializing,
signing, parsing) can be told apart from the emulator's.
"""

from __future__ import annotations

import functools
import importlib
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Invocation:
    handler: str  # module.function, as in the template
    cold: bool  # the container's dependencies were built in this invocation
    wall_ns: int = 0
    emulator_ns: int = 0
    cpu_ns: int = 0  # the thread's CPU time over the handler call (the emulator's included)
    emulator_cpu_ns: int = 0
    calls: list[str] = field(default_factory=list)  # service:Operation, in order
    action: str | None = None
    outcome: str | None = None
    paged: bool = False
    raised: bool = False

    @property
    def function(self) -> str:
        return self.handler.rsplit(".", 2)[-2] if self.handler.count(".") >= 2 else self.handler

    @property
    def own_ns(self) -> int:
        return max(0, self.wall_ns - self.emulator_ns)

    @property
    def own_cpu_ns(self) -> int:
        """Medic's own CPU time (botocore's client side included), the emulator's answers left out."""
        return max(0, self.cpu_ns - self.emulator_cpu_ns)


@dataclass
class Probe:
    invocations: list[Invocation] = field(default_factory=list)
    current: Invocation | None = None
    emulator_ns_by_call: Counter[str] = field(default_factory=Counter)  # summed over every invocation
    attempts_by_call: Counter[str] = field(default_factory=Counter)

    def emulator_ms_per_call(self) -> dict[str, float]:
        """Median-free but telling: the emulator's mean time per HTTP attempt, by operation (ms)."""
        return {key: round(self.emulator_ns_by_call[key] / n / 1e6, 2)
                for key, n in self.attempts_by_call.most_common()}

    def on_call(self, model: Any = None, **kwargs: Any) -> None:
        if self.current is not None and model is not None:
            self.current.calls.append(f"{model.service_model.service_name}:{model.name}")

    def of(self, function: str, action: str | None = None, outcome: str | None = None,
           cold: bool | None = None) -> list[Invocation]:
        return [i for i in self.invocations if i.function == function
                and (action is None or i.action == action) and (outcome is None or i.outcome == outcome)
                and (cold is None or i.cold == cold)]


def _deps_cold(module: Any) -> bool:
    """No dependencies built yet for this container (the harness may give each function its own cache)."""
    wiring = sys.modules.get("medic.wiring")
    dependencies = getattr(module, "dependencies", None) or getattr(wiring, "dependencies", None)
    info = getattr(dependencies, "cache_info", None)
    return info is None or info().currsize == 0


def handler_modules() -> list[Any]:
    from bench.common import FUNCTIONS

    names = sorted(p.stem for p in (FUNCTIONS / "medic" / "handlers").glob("*.py") if p.stem != "__init__")
    return [importlib.import_module(f"medic.handlers.{name}") for name in names]


@contextmanager
def instrumented() -> Iterator[Probe]:
    from sim.router import Router

    probe = Probe()
    before_send, install = Router._before_send, Router.install

    def timed_handler(module: Any, handler: Any) -> Any:
        spec = f"{module.__name__}.handler"

        @functools.wraps(handler)
        def timed(event: Any, context: Any) -> Any:
            invocation = Invocation(spec, cold=_deps_cold(module))
            probe.current = invocation
            started, cpu_started = time.perf_counter_ns(), time.thread_time_ns()
            try:
                response = handler(event, context)
            except BaseException:
                invocation.raised = True
                raise
            finally:
                invocation.wall_ns = time.perf_counter_ns() - started
                invocation.cpu_ns = time.thread_time_ns() - cpu_started
                probe.current = None
                probe.invocations.append(invocation)
            if isinstance(response, dict):
                invocation.action = _text(response.get("action"))
                invocation.outcome = _text(response.get("outcome"))
                invocation.paged = response.get("paged") is True
            return response

        return timed

    def timed_send(self: Any, request: Any, **kwargs: Any) -> Any:
        started, cpu_started = time.perf_counter_ns(), time.thread_time_ns()
        try:
            return before_send(self, request, **kwargs)
        finally:
            if probe.current is not None:
                spent = time.perf_counter_ns() - started
                probe.current.emulator_ns += spent
                probe.current.emulator_cpu_ns += time.thread_time_ns() - cpu_started
                model = (getattr(request, "context", None) or {}).get("sim.operation")
                if model is not None:
                    key = f"{model.service_model.service_name}:{model.name}"
                    probe.emulator_ns_by_call[key] += spent
                    probe.attempts_by_call[key] += 1

    def counting_install(self: Any, session: Any) -> None:
        install(self, session)
        session.events.register("before-call", probe.on_call)  # the handlers' clients copy this emitter

    wrapped = [(module, module.handler) for module in handler_modules() if callable(getattr(module, "handler", None))]
    for module, handler in wrapped:
        module.handler = timed_handler(module, handler)
    Router._before_send = timed_send
    Router.install = counting_install
    try:
        yield probe
    finally:
        for module, handler in wrapped:
            module.handler = handler
        Router._before_send = before_send
        Router.install = install


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


def call_profile(invocations: list[Invocation]) -> dict:
    """How many API calls these invocations made: median, range, and each distinct sequence with its count."""
    if not invocations:
        return {"count": 0}
    counts = sorted(len(i.calls) for i in invocations)
    sequences = Counter(tuple(i.calls) for i in invocations)
    return {
        "count": len(invocations),
        "median": counts[len(counts) // 2],
        "min": counts[0],
        "max": counts[-1],
        "sequences": [{"calls": list(seq), "n": n} for seq, n in sequences.most_common()],
    }
