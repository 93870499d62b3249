"""A live replay: the emulated AWS account driven as things happen, by a harness around real processes.

``sim replay`` reads a whole file of lines, each at the time it names. A live session instead takes its input as it
comes, on a clock that runs at a fixed multiple of the wall clock (``ScaledClock``), so a real training job, a real
Slurm and the real agent (each its own process) can meet Medic's real handlers on emulated AWS:

- ``feed(line)``: a replay line (event or ``{"sim": ...}`` directive) now, at the live clock;
- ``ingest_emf(line)``: one EMF line of the probe (``Probe(emf=True)`` on the job's stdout), as CloudWatch Logs
  extracts it, stamped on the emulated clock (its ``_aws.Timestamp`` is the job's wall clock);
- ``tick()``: time passes to the live clock's now: the schedules and the alarms' minutes due run, running in-process
  agents poll, and the DynamoDB streams deliver, records of writes made by other processes included;
- ``endpoint``: the emulated account over HTTP (moto's server, sharing the session's backends), for the real agent
  as its own process (``python -m medic_agent``) with ``AWS_ENDPOINT_URL``;
- ``use_real_slurm``: the session's own (in-process) agent of a cluster runs the real scontrol/squeue.

The whole session runs under one time_machine travel that follows the live clock (``tick`` moves it; between two ticks
it runs at 1x), so what the other processes write through the endpoint is stamped by the emulated AWS on the emulated
clock (a stream record's ApproximateCreationDateTime, the heartbeat Medic times), as it would be by AWS on its own.
What the agent writes itself (its heartbeat's `at`, a result's `finished_at`) is its wall clock: behind the emulated
one by (factor - 1) x the session's age. Medic never times anything by them (flows/agent/heartbeats.py).
"""

from __future__ import annotations

import io
import json
import logging
import math
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import time_machine

from sim.replay import Replay, ReplayResult
from sim.synth import load_config, stack_template
from sim.world import World

MINUTE = timedelta(minutes=1)


def _wall_time() -> float:
    """The wall clock, even under the session's travel (time_machine patches time.time for the whole process)."""
    return time_machine.escape_hatch.time.time() if time_machine.escape_hatch.is_travelling() else time.time()


class ScaledClock:
    """Emulated time = ``origin`` + ``factor`` x (wall time - ``wall_origin``).

    By default the origin is the wall clock's last whole multiple of 60/factor seconds, mapped to the whole minute of
    the wall clock at that moment: a probe whose period is 60/factor wall seconds, flushing mid-period on the wall clock
    (medic_probe.Probe._delay), then lands mid-minute on the emulated clock, one datapoint a minute."""

    def __init__(self, factor: float, origin: datetime | None = None, wall_origin: float | None = None) -> None:
        if not isinstance(factor, int | float) or isinstance(factor, bool) or not 1 <= factor <= 3600:
            raise ValueError(f"the clock's factor must be a number from 1 to 3600 (got {factor!r})")
        self.factor = float(factor)
        if wall_origin is None:
            step = 60.0 / self.factor
            wall_origin = math.floor(_wall_time() / step) * step
        self.wall_origin = float(wall_origin)
        if origin is None:
            origin = datetime.fromtimestamp(self.wall_origin, UTC).replace(second=0, microsecond=0)
        if origin.tzinfo is None:
            raise ValueError(f"the clock's origin needs a time zone (got {origin.isoformat()})")
        self.origin = origin

    def at(self, wall: float) -> datetime:
        """The emulated time of a wall-clock moment (epoch seconds)."""
        return self.origin + timedelta(seconds=(wall - self.wall_origin) * self.factor)

    def now(self) -> datetime:
        return self.at(_wall_time())

    def wall_seconds(self, emulated: timedelta) -> float:
        """How long ``emulated`` takes on the wall clock."""
        return emulated.total_seconds() / self.factor


class LiveSession:
    """``with LiveSession(config_path, ScaledClock(30)) as live:`` the emulated account, live."""

    def __init__(self, config_path: str | Path, clock: ScaledClock, *, out: Callable[[dict], None] | None = None,
                 err: TextIO | None = None, handler_output: TextIO | None = None) -> None:
        self.config_path = Path(config_path)
        self.clock = clock
        self._out = out or (lambda line: None)
        self._err = err or sys.stderr
        self._handler_output = handler_output if handler_output is not None else io.StringIO()
        self.world: World | None = None
        self.replay: Replay | None = None
        self.endpoint = ""
        self._server: Any = None
        self._travel: Any = None
        self._traveller: Any = None
        self._lineno = 0

    # lifecycle
    def __enter__(self) -> LiveSession:
        template = stack_template(self.config_path)
        config = load_config(self.config_path)
        self._travel = time_machine.travel(self._now(), tick=True)
        self._traveller = self._travel.start()
        try:
            self.world = World(template, config).__enter__()
            self.world.streams.other_writers = True
            self.replay = Replay(self.world, self._emit, self._err, self._handler_output)
            self.replay._cold_start()
            self._start_endpoint()
            self.tick()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self.replay is not None:
            self.replay._cold_start()
        if self.world is not None:
            self.world.__exit__()
            self.world = None
        if self._travel is not None:
            self._travel.stop()
            self._travel = None

    def _start_endpoint(self) -> None:
        """moto's own server on a free local port: the same backends as the session (one process), so the other
        processes see the stack's queues and table, and their writes land on its streams."""
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"

    # the clock
    def _now(self) -> datetime:
        return self.clock.at(_wall_time())

    @property
    def now(self) -> datetime:
        """The live clock's time (the emulated clock, at the wall clock's now)."""
        return self._now()

    def tick(self) -> None:
        """Time passes to the live clock's now: schedules, alarm minutes, agents, streams (``advance``)."""
        now = self._now().replace(microsecond=0)
        self._traveller.move_to(now, tick=True)
        if self.replay.now is not None and now <= self.replay.now:
            now = self.replay.now
        self.feed(json.dumps({"sim": {"advance": now.isoformat()}}))

    # input as it comes
    def feed(self, line: str) -> None:
        """One replay line, now: an EventBridge event or a ``{"sim": ...}`` directive (sim/README.md)."""
        self._lineno += 1
        self.replay.line(self._lineno, line)
        self.world.router.contract.raise_if_violated(f"live line {self._lineno}")

    def ingest_emf(self, line: str) -> list[dict]:
        """One line of the probe's EMF output, as CloudWatch Logs extracts it; its time mapped onto the emulated clock.
        A line that is not an EMF document is an error on stderr (and the result's errors), not metrics."""
        self._lineno += 1
        try:
            document = json.loads(line)
            stamp = document["_aws"]["Timestamp"]
            if not isinstance(stamp, int | float) or isinstance(stamp, bool):
                raise ValueError(f"`_aws.Timestamp` must be epoch milliseconds (got {stamp!r})")
            try:
                at = self.clock.at(stamp / 1000)
            except OverflowError:
                raise ValueError(f"`_aws.Timestamp` {stamp!r} is out of the emulated clock's range") from None
            with time_machine.travel(at, tick=False):
                return self.world.metrics.ingest_emf(document, at)
        except (ValueError, TypeError, KeyError) as error:
            self.replay.error(self._lineno, f"EMF line not ingested: {error}")
            return []

    def use_real_slurm(self, cluster: str, bin_dir: str, env: dict[str, str], host: str) -> None:
        """The session's own agent of ``cluster`` runs the real Slurm (SlurmWorld.use_real_slurm)."""
        self.world.slurm.use_real_slurm(cluster, bin_dir, env, host)

    # what the other processes need
    def agent_queue(self, cluster: str) -> str:
        """The stack's command queue of the cluster's agent (its AGENT_QUEUES entry)."""
        return self.world.slurm.queues[cluster]

    @property
    def table(self) -> str:
        return self.world.slurm.table

    @property
    def region(self) -> str:
        return self.world.region

    @property
    def result(self) -> ReplayResult:
        return self.replay.result

    def _emit(self, line: dict) -> None:
        self._out(line)
