"""What every Medic agent does with one command message, whichever cluster it serves (a Slurm controller's agent,
medic_agent.main; an EKS cluster's, medic_agent.eks.main), and its run loop:

  parse + validate ── refused (not a command Medic could have sent) → log, delete; no result
        │ ok
  seen in the local state? ── yes → duplicate (or finish reporting what it ran) → delete
        │ no
  remember "claiming" locally, then claim in the ledger: one transaction that checks Medic's
  `command#<cluster>#<id>/issued` names this cluster, kind, target and incident, and writes the claim
        ├── not issued by Medic → log, delete; no result (a forged message must not spend a page)
        ├── already claimed → duplicate → delete
        │   (ledger unreachable → forget, leave the message for later)
        │ claimed
  remember "running" locally → run it (the agent's own run_command)
  remember the result locally → put it in the ledger → delete the message
A result that could not be written stays in the local state and is written when the message comes back.
A command found "running" after a restart is reported failed (interrupted), never run twice; one found
"claiming" is claimed again (a claim that landed makes it a duplicate: never run twice either).
"""

from __future__ import annotations

import logging
import os
import time
from abc import ABC, abstractmethod
from datetime import datetime, timezone
from typing import Any, Callable

from medic_agent import __version__
from medic_agent.commands import Refused
from medic_agent.ledger import ALREADY_CLAIMED, NOT_ISSUED, Ledger
from medic_agent.queue import Message, Queue
from medic_agent.state import State

FAILED, REFUSED = "failed", "refused"
DEFAULT_STATE_FILE = "/var/lib/medic-agent/state.json"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class StopPolling(BaseException):  # noqa: N818 - control flow, not an error
    """Raised by the signal handler to cut a long-poll short. A BaseException, like KeyboardInterrupt, so
    botocore's and urllib3's `except Exception` (which retry) let it through."""


def env(*names: str) -> str | None:
    """The first of these environment variables that is set (the command lines' defaults)."""
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    return None


class CommandHandling(ABC):
    """The message protocol and the run loop, shared by the agents. An agent provides: ``cluster``, ``queue``,
    ``ledger``, ``state``, ``clock``, ``host`` (its name in claims and results), ``stopping``, ``log``,
    ``interrupted`` (what a command cut short by a restart reports), and the abstract methods below."""

    cluster: str
    queue: Queue
    ledger: Ledger
    state: State
    clock: Callable[[], datetime]
    host: str
    stopping: bool
    log: logging.Logger
    interrupted: str

    # --- what each agent does its own way

    @abstractmethod
    def parse_command(self, body: str) -> Any:
        """The message body → the command, or Refused."""

    @abstractmethod
    def run_command(self, command: Any) -> Any:
        """Carry the command out → its Result (status, message, and the agent's own fields)."""

    @abstractmethod
    def failed(self, message: str) -> Any:
        """A failed Result of this agent's kind."""

    def result_fields(self, result: Any) -> dict[str, Any]:
        """What the result adds to the ledger's result item beyond status and message."""
        return {}

    def started_fields(self) -> dict[str, Any]:
        return {}

    @abstractmethod
    def poll(self) -> int:
        """One cycle: returns the messages handled."""

    # --- the loop

    def run(self, once: bool = False) -> int:
        self.log.info("agent started", extra={"fields": {"queue_url": self.queue.url, "table": self.ledger.table,
                                                         "once": once, **self.started_fields()}})
        failures = 0
        while not self.stopping:
            try:
                self.poll()
                failures = 0
            except StopPolling:
                break
            except Exception:
                failures += 1
                self.log.exception("poll failed; continuing", extra={"fields": {"consecutive_failures": failures}})
                if not once:
                    self._sleep(min(60.0, 2.0 ** min(failures, 6)))
            if once:
                break
        self.log.info("agent stopped", extra={"fields": {"reason": "signal" if self.stopping else "once"}})
        return 0

    # --- one message

    def handle(self, message: Message) -> str:
        """Returns what became of the message: executed | failed | refused | not_issued | duplicate | deferred."""
        fields: dict[str, Any] = {"message_id": message.message_id, "receive_count": message.receive_count}
        try:
            command = self.parse_command(message.body)
        except Refused as refusal:
            fields.update({"command_id": refusal.command_id, "kind": refusal.kind, "target": refusal.target,
                           "incident": refusal.incident, "claimed_cluster": refusal.cluster})
            self.log.warning("command refused; not run, no result written",
                             extra={"fields": {**fields, "status": REFUSED, "reason": refusal.reason}})
            self._delete(message)
            return REFUSED
        record = self._record(command)
        fields.update({key: record[key] for key in ("command_id", "kind", "target", "incident")})
        command_id = command.command_id

        entry = self.state.get(command_id)
        if entry is not None and entry.get("status") != "claiming":
            return self._seen_before(message, command_id, entry, record, fields)

        now = self.clock()
        self.state.put(command_id, now, status="claiming", message_id=message.message_id)
        self.state.remember_message(message.message_id, command_id, now)
        try:
            claimed = self.ledger.claim(command, now, self.host)
        except Exception:
            self.log.exception("could not claim the command in the ledger; left on the queue",
                               extra={"fields": fields})
            self.state.forget(command_id, self.clock())
            return "deferred"
        if claimed == NOT_ISSUED:
            self.state.put(command_id, self.clock(), status=NOT_ISSUED, reported=True)
            self.log.warning("command not issued by Medic (no matching command in the ledger); not run, no result "
                             "written", extra={"fields": {**fields, "status": NOT_ISSUED}})
            self._delete(message)
            return NOT_ISSUED
        if claimed == ALREADY_CLAIMED:
            self.state.put(command_id, self.clock(), status="duplicate", reported=True)
            self.log.info("command already claimed; not run again",
                          extra={"fields": {**fields, "status": "duplicate"}})
            self._delete(message)
            return "duplicate"

        self.state.put(command_id, self.clock(), status="running")
        return self._finish(message, command_id, record, self._execute(command), fields)

    def _execute(self, command: Any) -> Any:
        try:
            return self.run_command(command)
        except Exception as error:  # a bug must not leave the command "running" forever
            self.log.exception("command raised", extra={"fields": {"command_id": command.command_id}})
            return self.failed(f"agent error: {type(error).__name__}: {error}")

    def _finish(self, message: Message, command_id: str, record: dict[str, Any], result: Any,
                fields: dict[str, Any]) -> str:
        extra = self.result_fields(result)
        record = {**record, "status": result.status, "message": result.message,
                  "finished_at": self.clock().isoformat(), **extra}
        self.state.put(command_id, self.clock(), status="done", result=record, reported=False)
        level = logging.WARNING if result.status != "executed" else logging.INFO
        self.log.log(level, "command %s", result.status,
                     extra={"fields": {**fields, "status": result.status, "result": result.message[:1000], **extra}})
        self._report(message, command_id, record, fields)
        return str(result.status)

    def _seen_before(self, message: Message, command_id: str, entry: dict[str, Any], record: dict[str, Any],
                     fields: dict[str, Any]) -> str:
        if entry.get("status") == "running":
            # Killed (or crashed) between taking the command on and recording its result: never run it twice.
            return self._finish(message, command_id, record, self.failed(self.interrupted), fields)
        if entry.get("result") and not entry.get("reported"):
            self.log.info("reporting an earlier result", extra={"fields": fields})
            self._report(message, command_id, entry["result"], fields)
            return str(entry["result"].get("status"))
        self.log.info("command already handled; not run again",
                      extra={"fields": {**fields, "status": "duplicate", "first_status": entry.get("status")}})
        self._delete(message)
        return "duplicate"

    def _report(self, message: Message, command_id: str, record: dict[str, Any], fields: dict[str, Any]) -> None:
        try:
            self.ledger.put_result(record, self.clock())
        except Exception:
            self.log.exception("could not write the result; the message stays queued and the result is written "
                               "when it comes back", extra={"fields": fields})
            return
        self.state.put(command_id, self.clock(), reported=True)
        self._delete(message)

    def _record(self, command: Any) -> dict[str, Any]:
        return {"command_id": command.command_id, "cluster": self.cluster, "kind": command.kind,
                "target": command.target, "incident": command.incident, "issued_at": command.issued_at,
                "host": self.host, "agent_version": __version__}

    def _delete(self, message: Message) -> None:
        try:
            self.queue.delete(message)
        except Exception:
            self.log.exception("could not delete the message; it will come back and be recognised",
                               extra={"fields": {"message_id": message.message_id}})

    def _release(self, message: Message) -> None:
        try:
            self.queue.release(message)
        except Exception:
            self.log.exception("could not release the message", extra={"fields": {"message_id": message.message_id}})

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < deadline:
            time.sleep(min(1.0, deadline - time.monotonic()))


# --- the agents' command lines: what both take and do the same way

def add_agent_options(parser: Any) -> None:
    """The options every agent takes (an argparse parser); each adds its own."""
    parser.add_argument("--cluster", default=env("MEDIC_CLUSTER"), help="this cluster's name [MEDIC_CLUSTER]")
    parser.add_argument("--queue-url", default=env("MEDIC_QUEUE_URL"), help="the command queue [MEDIC_QUEUE_URL]")
    parser.add_argument("--table", default=env("MEDIC_TABLE"), help="the ledger table [MEDIC_TABLE]")
    parser.add_argument("--region", default=env("MEDIC_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"),
                        help="AWS region [MEDIC_REGION, AWS_REGION]")
    parser.add_argument("--state-file", default=env("MEDIC_STATE_FILE") or DEFAULT_STATE_FILE,
                        help=f"local record of commands taken on [MEDIC_STATE_FILE] (default {DEFAULT_STATE_FILE})")
    parser.add_argument("--heartbeat-seconds", type=float, default=float(env("MEDIC_HEARTBEAT_SECONDS") or 60))
    parser.add_argument("--wait-seconds", type=int, default=20, choices=range(0, 21), metavar="0..20",
                        help="SQS long-poll wait (default 20)")
    parser.add_argument("--visibility-timeout", type=int, default=120)
    parser.add_argument("--once", action="store_true", help="one cycle, then exit")
    parser.add_argument("--log-level", default=env("MEDIC_LOG_LEVEL") or "INFO")
    parser.add_argument("--version", action="version", version=f"medic-agent {__version__}")


def require(parser: Any, args: Any, *names: str) -> None:
    """Exit with argparse's usage error naming every missing required option."""
    missing = [name for name in ("cluster", "queue_url", "table", "region", *names) if not getattr(args, name)]
    if missing:
        parser.error("missing " + ", ".join("--" + name.replace("_", "-") for name in missing))


def aws_queue_and_ledger(args: Any) -> tuple[Queue, Ledger]:
    """The agent's queue and ledger on its own boto3 session (imported here: --help and usage errors need none)."""
    import boto3
    from botocore.config import Config

    session = boto3.Session(region_name=args.region)
    config = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5,
                    read_timeout=args.wait_seconds + 15)
    queue = Queue(args.queue_url, lambda: session.client("sqs", config=config), wait_seconds=args.wait_seconds,
                  visibility_timeout=args.visibility_timeout)
    return queue, Ledger(args.table, lambda: session.client("dynamodb", config=config))
