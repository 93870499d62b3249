"""The agent's loop: role, heartbeat, long-poll the queue, claim, run, report, delete. And its command line.

Every iteration starts with `scontrol ping` (role.py): only the agent on the host of the slurmctld in charge
is primary; it heartbeats under `heartbeat` and receives. Any other agent (another head node, or an answer it
cannot parse) is standby: it heartbeats under `standby#<host>` and neither receives nor runs anything. The
role is checked again after each long-poll and before each message: a role lost meanwhile releases the
messages it holds (visible again at once, for the new primary). A failover needs no operator step.

For each message:
  parse + validate ── refused (not a command Medic could have sent) → log, delete; no result
        │ ok
  seen in the local state? ── yes → duplicate (or finish reporting what it ran) → delete
        │ no
  remember "claiming" locally, then claim in the ledger: one transaction that checks Medic's
  `command#<id>/issued` names this cluster, kind, target and incident, and writes the claim
        ├── not issued by Medic → log, delete; no result (a forged message must not spend a page)
        ├── already claimed → duplicate → delete
        │   (ledger unreachable → forget, leave the message for later)
        │ claimed
  remember "running" locally → run through Slurm
  remember the result locally → put it in the ledger → delete the message
A result that could not be written stays in the local state and is written when the message comes back.
A command found "running" after a restart is reported failed (interrupted), never run twice; one found
"claiming" is claimed again (a claim that landed makes it a duplicate: never run twice either).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import time
from datetime import datetime, timezone
from typing import Any, Callable

from medic_agent import __version__, logs
from medic_agent.actions import FAILED, REFUSED, Result, execute
from medic_agent.commands import Command, Refused, parse
from medic_agent.ledger import ALREADY_CLAIMED, NOT_ISSUED, Ledger
from medic_agent.queue import Message, Queue
from medic_agent.role import PING_ARGV, Role, decide
from medic_agent.slurm import Slurm, SlurmNotFound
from medic_agent.state import State

log = logging.getLogger("medic_agent")

DEFAULT_STATE_FILE = "/var/lib/medic-agent/state.json"
# After a long poll that brought messages, ping again before the first; within the batch, again before a
# message when the last check is older than this. Not before every message: with a controller unreachable each
# ping waits out Slurm's MessageTimeout (10 s by default), and a batch must finish inside the queue's visibility
# timeout. Acting on a role up to 30 s old is safe: scontrol reaches the controller in charge from any head node,
# and the ledger's claim runs a command once.
ROLE_RECHECK_SECONDS = 30.0
INTERRUPTED = ("the agent stopped while this command was being claimed or run; it is not run again: "
               "check Slurm for its effect")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class _StopPolling(BaseException):  # noqa: N818 - control flow, not an error
    """Raised by the signal handler to cut a long-poll short. A BaseException, like KeyboardInterrupt, so
    botocore's and urllib3's `except Exception` (which retry) let it through."""


class Agent:
    def __init__(self, *, cluster: str, queue: Queue, ledger: Ledger, slurm: Slurm, state: State,
                 heartbeat_seconds: float = 60.0, standby_seconds: float | None = None,
                 host: str | None = None, clock: Callable[[], datetime] = utcnow) -> None:
        self.cluster = cluster
        self.queue = queue
        self.ledger = ledger
        self.slurm = slurm
        self.state = state
        self.heartbeat_seconds = heartbeat_seconds
        self.host = host or socket.gethostname()
        self.clock = clock
        self.stopping = False
        self._receiving = False
        self._last_heartbeat: float | None = None
        # how long a standby waits between role checks (default: the long-poll's wait)
        self.standby_seconds = float(queue.wait_seconds) if standby_seconds is None else standby_seconds
        self.role: Role | None = None
        self._role_checked: float | None = None

    # --- the loop

    def run(self, once: bool = False) -> int:
        log.info("agent started", extra={"fields": {"queue_url": self.queue.url, "table": self.ledger.table,
                                                    "state_file": self.state.path, "once": once}})
        failures = 0
        while not self.stopping:
            try:
                self.poll()
                failures = 0
            except _StopPolling:
                break
            except Exception:
                failures += 1
                log.exception("poll failed; continuing", extra={"fields": {"consecutive_failures": failures}})
                if not once:
                    self._sleep(min(60.0, 2.0 ** min(failures, 6)))
            if once:
                break
        log.info("agent stopped", extra={"fields": {"reason": "signal" if self.stopping else "once"}})
        return 0

    def poll(self) -> int:
        """One cycle: role, heartbeat if due, one long-poll (primary only), handle what it brought. Returns
        messages handled. A standby waits ``standby_seconds`` instead and receives nothing."""
        role = self.check_role()
        self.heartbeat_if_due()
        if not role.acts:
            self._sleep(self.standby_seconds)
            return 0
        self._receiving = True  # from here a stop signal interrupts: set before the check, so none slips between
        try:
            if self.stopping:
                return 0
            messages = self.queue.receive()
        finally:
            self._receiving = False
        handled = 0
        if messages:
            self._role_checked = None  # the long poll may have taken 20 s: still in charge? (_still_primary)
        for message in messages:
            if self.stopping or not self._still_primary():
                self._release(message)
                continue
            try:
                self.handle(message)
                handled += 1
            except Exception:
                log.exception("message not handled; it will be delivered again",
                              extra={"fields": {"message_id": message.message_id}})
            self.heartbeat_if_due()
        return handled

    def request_stop(self, signum: int = signal.SIGTERM, frame: Any = None) -> None:
        """Signal handler: finish the current command, then exit. A long-poll in progress is cut short."""
        self.stopping = True
        if self._receiving:
            raise _StopPolling()

    def check_role(self) -> Role:
        """Ask `scontrol ping` which controller is in charge; log (and heartbeat at once) when the role changes."""
        run = self.slurm.run(PING_ARGV)
        role = decide(run.output, run.returncode, self.host)
        self._role_checked = time.monotonic()
        previous, self.role = self.role, role
        if previous is None or previous.role != role.role or previous.reason != role.reason:
            level = logging.INFO if role.acts or previous is None or previous.acts else logging.DEBUG
            log.log(logging.WARNING if "cannot tell" in role.reason else level, "role: %s", role.role,
                    extra={"fields": {"role": role.role, "reason": role.reason, "in_charge": role.in_charge,
                                      "previous_role": previous.role if previous else None,
                                      "ping": run.output[:500]}})
            if previous is not None and previous.role != role.role:
                self._last_heartbeat = None  # say so now: a new primary must be seen alive at once
        return role

    def _still_primary(self) -> bool:
        if self._role_checked is not None and time.monotonic() - self._role_checked < ROLE_RECHECK_SECONDS:
            return self.role is not None and self.role.acts
        acts = self.check_role().acts
        if not acts:
            self.heartbeat_if_due()
        return acts

    def heartbeat_if_due(self) -> None:
        now = time.monotonic()
        if self._last_heartbeat is not None and now - self._last_heartbeat < self.heartbeat_seconds:
            return
        role = self.role or self.check_role()
        try:
            self.ledger.heartbeat(self.cluster, self.clock(), self.host, __version__, role=role.role,
                                  reason="" if role.acts else role.reason, in_charge=role.in_charge)
            self._last_heartbeat = now
            log.debug("heartbeat")
        except Exception:
            log.exception("heartbeat failed")

    # --- one message

    def handle(self, message: Message) -> str:
        """Returns what became of the message: executed | failed | refused | not_issued | duplicate | deferred."""
        fields: dict[str, Any] = {"message_id": message.message_id, "receive_count": message.receive_count}
        try:
            command = parse(message.body, cluster=self.cluster)
        except Refused as refusal:
            fields.update({"command_id": refusal.command_id, "kind": refusal.kind, "target": refusal.target,
                           "incident": refusal.incident, "claimed_cluster": refusal.cluster})
            log.warning("command refused; not run, no result written",
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
            log.exception("could not claim the command in the ledger; left on the queue", extra={"fields": fields})
            self.state.forget(command_id, self.clock())
            return "deferred"
        if claimed == NOT_ISSUED:
            self.state.put(command_id, self.clock(), status=NOT_ISSUED, reported=True)
            log.warning("command not issued by Medic (no matching command in the ledger); not run, no result "
                        "written", extra={"fields": {**fields, "status": NOT_ISSUED}})
            self._delete(message)
            return NOT_ISSUED
        if claimed == ALREADY_CLAIMED:
            self.state.put(command_id, self.clock(), status="duplicate", reported=True)
            log.info("command already claimed; not run again", extra={"fields": {**fields, "status": "duplicate"}})
            self._delete(message)
            return "duplicate"

        self.state.put(command_id, self.clock(), status="running")
        return self._finish(message, command_id, record, self._execute(command), fields)

    def _execute(self, command: Command) -> Result:
        try:
            return execute(command, self.slurm)
        except Exception as error:  # a bug must not leave the command "running" forever
            log.exception("command raised", extra={"fields": {"command_id": command.command_id}})
            return Result(FAILED, f"agent error: {type(error).__name__}: {error}")

    def _finish(self, message: Message, command_id: str, record: dict[str, Any], result: Result,
                fields: dict[str, Any]) -> str:
        record = {**record, "status": result.status, "message": result.message,
                  "finished_at": self.clock().isoformat()}
        if result.job_ids:
            record["job_ids"] = list(result.job_ids)
        if result.jobs is not None:  # drain_node: the jobs on the node ([] none); absent: unknown
            record["jobs"] = [{"id": job_id, "name": name} for job_id, name in result.jobs]
        if result.job_states is not None:  # job_states: what Slurm still knows ([] none)
            record["job_states"] = [{"id": job_id, "state": state} for job_id, state in result.job_states]
        self.state.put(command_id, self.clock(), status="done", result=record, reported=False)
        level = logging.WARNING if result.status != "executed" else logging.INFO
        log.log(level, "command %s", result.status,
                extra={"fields": {**fields, "status": result.status, "result": result.message[:1000]}})
        self._report(message, command_id, record, fields)
        return result.status

    def _seen_before(self, message: Message, command_id: str, entry: dict[str, Any], record: dict[str, Any],
                     fields: dict[str, Any]) -> str:
        if entry.get("status") == "running":
            # Killed (or crashed) between taking the command on and recording its result: never run it twice.
            return self._finish(message, command_id, record, Result(FAILED, INTERRUPTED), fields)
        if entry.get("result") and not entry.get("reported"):
            log.info("reporting an earlier result", extra={"fields": fields})
            self._report(message, command_id, entry["result"], fields)
            return str(entry["result"].get("status"))
        log.info("command already handled; not run again",
                 extra={"fields": {**fields, "status": "duplicate", "first_status": entry.get("status")}})
        self._delete(message)
        return "duplicate"

    def _report(self, message: Message, command_id: str, record: dict[str, Any], fields: dict[str, Any]) -> None:
        try:
            self.ledger.put_result(record, self.clock())
        except Exception:
            log.exception("could not write the result; the message stays queued and the result is written "
                          "when it comes back", extra={"fields": fields})
            return
        self.state.put(command_id, self.clock(), reported=True)
        self._delete(message)

    def _record(self, command: Command) -> dict[str, Any]:
        return {"command_id": command.command_id, "cluster": self.cluster, "kind": command.kind,
                "target": command.target, "incident": command.incident, "issued_at": command.issued_at,
                "host": self.host, "agent_version": __version__}

    def _delete(self, message: Message) -> None:
        try:
            self.queue.delete(message)
        except Exception:
            log.exception("could not delete the message; it will come back and be recognised",
                          extra={"fields": {"message_id": message.message_id}})

    def _release(self, message: Message) -> None:
        try:
            self.queue.release(message)
        except Exception:
            log.exception("could not release the message", extra={"fields": {"message_id": message.message_id}})

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < deadline:
            time.sleep(min(1.0, deadline - time.monotonic()))


# --- command line


def _env(*names: str) -> str | None:
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="medic-agent",
        description="Runs the Slurm commands Medic issues (job requeues, node drains and resumes; each checked "
                    "against Medic's ledger before it runs) from an SQS queue, and reports each result to the "
                    "ledger. Every option can also come from the environment variable in brackets.")
    parser.add_argument("--cluster", default=_env("MEDIC_CLUSTER"), help="this cluster's name [MEDIC_CLUSTER]")
    parser.add_argument("--queue-url", default=_env("MEDIC_QUEUE_URL"), help="the command queue [MEDIC_QUEUE_URL]")
    parser.add_argument("--table", default=_env("MEDIC_TABLE"), help="the ledger table [MEDIC_TABLE]")
    parser.add_argument("--region", default=_env("MEDIC_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"),
                        help="AWS region [MEDIC_REGION, AWS_REGION]")
    parser.add_argument("--state-file", default=_env("MEDIC_STATE_FILE") or DEFAULT_STATE_FILE,
                        help=f"local record of commands taken on [MEDIC_STATE_FILE] (default {DEFAULT_STATE_FILE})")
    parser.add_argument("--slurm-bin", default=_env("MEDIC_SLURM_BIN"),
                        help="directory holding scontrol and squeue (default: PATH, then /opt/slurm/bin) "
                             "[MEDIC_SLURM_BIN]")
    parser.add_argument("--host", default=_env("MEDIC_HOST"),
                        help="this head node's name as SlurmctldHost lists it (default: the hostname); the agent acts "
                             "only when `scontrol ping` says the slurmctld in charge runs here [MEDIC_HOST]")
    parser.add_argument("--heartbeat-seconds", type=float, default=float(_env("MEDIC_HEARTBEAT_SECONDS") or 60))
    parser.add_argument("--command-timeout", type=float, default=float(_env("MEDIC_COMMAND_TIMEOUT") or 30))
    parser.add_argument("--wait-seconds", type=int, default=20, choices=range(0, 21), metavar="0..20",
                        help="SQS long-poll wait (default 20)")
    parser.add_argument("--visibility-timeout", type=int, default=120)
    parser.add_argument("--once", action="store_true", help="one receive cycle, then exit")
    parser.add_argument("--log-level", default=_env("MEDIC_LOG_LEVEL") or "INFO")
    parser.add_argument("--version", action="version", version=f"medic-agent {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    missing = [name for name in ("cluster", "queue_url", "table", "region") if not getattr(args, name)]
    if missing:
        parser.error("missing " + ", ".join("--" + name.replace("_", "-") for name in missing))
    host = args.host or socket.gethostname()
    logs.setup(args.log_level, cluster=args.cluster, host=host, version=__version__)
    slurm = Slurm(bin_dir=args.slurm_bin, timeout=args.command_timeout)
    try:
        programs = slurm.check()
    except SlurmNotFound as error:
        log.error("Slurm client commands not found", extra={"fields": {"error": str(error)}})
        return 2

    import boto3  # deferred: the CLI's --help and argument errors do not need it
    from botocore.config import Config

    session = boto3.Session(region_name=args.region)
    config = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5,
                    read_timeout=args.wait_seconds + 15)
    agent = Agent(
        cluster=args.cluster,
        queue=Queue(args.queue_url, lambda: session.client("sqs", config=config), wait_seconds=args.wait_seconds,
                    visibility_timeout=args.visibility_timeout),
        ledger=Ledger(args.table, lambda: session.client("dynamodb", config=config)),
        slurm=slurm,
        state=State(args.state_file),
        heartbeat_seconds=args.heartbeat_seconds,
        host=host,
    )
    log.info("slurm commands", extra={"fields": programs})
    signal.signal(signal.SIGTERM, agent.request_stop)
    signal.signal(signal.SIGINT, agent.request_stop)
    return agent.run(once=args.once)


if __name__ == "__main__":
    sys.exit(main())
