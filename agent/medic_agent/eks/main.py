"""The EKS agent's loop and command line: leader check → heartbeat → node report → long-poll → claim → act →
result, with the Slurm agent's protocol and integrity rules (medic_agent.main has the full story):

  parse + validate ── refused (not a restart_job Medic could have sent) → log, delete; no result
  seen in the local state? ── yes → duplicate (or finish reporting) → delete
  claim in the ledger (ConditionCheck on Medic's `command#<id>/issued`: cluster, kind, target, incident)
        ├── not issued by Medic → log, delete; no result
        ├── already claimed → duplicate → delete
        │ claimed
  restart through the Kubernetes API (restart.py) → result in the ledger (with `pods`, `force_deleted`) → delete

Only the replica holding the Lease (lease.py) receives; others heartbeat under `standby#<pod>` and wait. The
leader writes, with each heartbeat, the node report `agent#<cluster>/nodes` (restart.node_report).
The local state file lives on an emptyDir: it survives a container restart, not a pod's replacement; the
ledger's claim still keeps a command from running twice.
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
from medic_agent.commands import Refused
from medic_agent.eks.commands import Command, WatchedJob, load_watched, parse
from medic_agent.eks.kube import Kube
from medic_agent.eks.lease import LEASE_NAME, Leadership, LeaseElector
from medic_agent.eks.restart import (
    DEFAULT_TERMINATING_GRACE_SECONDS,
    FAILED,
    Result,
    encode_nodes,
    node_report,
    restart,
)
from medic_agent.ledger import ALREADY_CLAIMED, HEARTBEAT_TTL, NOT_ISSUED, Ledger, epoch
from medic_agent.queue import Message, Queue
from medic_agent.role import PRIMARY, STANDBY
from medic_agent.state import State

log = logging.getLogger("medic_agent.eks")

DEFAULT_STATE_FILE = "/var/lib/medic-agent/state.json"
REFUSED = "refused"
INTERRUPTED = ("the agent stopped while this command was being claimed or run; it is not run again: "
               "check the job's pods for its effect")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class _StopPolling(BaseException):  # noqa: N818 - control flow
    pass


class EksAgent:
    def __init__(self, *, cluster: str, queue: Queue, ledger: Ledger, kube: Kube, state: State,
                 watched: tuple[WatchedJob, ...], identity: str, lease_namespace: str,
                 terminating_grace_seconds: float = DEFAULT_TERMINATING_GRACE_SECONDS,
                 heartbeat_seconds: float = 60.0, standby_seconds: float | None = None,
                 lease_name: str = LEASE_NAME, clock: Callable[[], datetime] = utcnow) -> None:
        self.cluster = cluster
        self.queue = queue
        self.ledger = ledger
        self.kube = kube
        self.state = state
        self.watched = watched
        self.identity = identity
        self.terminating_grace_seconds = terminating_grace_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.standby_seconds = float(queue.wait_seconds) if standby_seconds is None else standby_seconds
        self.clock = clock
        self.elector = LeaseElector(kube, lease_namespace, identity, lambda: self.clock(), name=lease_name)
        self.leadership: Leadership | None = None
        self.stopping = False
        self._receiving = False
        self._last_heartbeat: float | None = None

    @property
    def host(self) -> str:
        return self.identity

    # --- the loop

    def run(self, once: bool = False) -> int:
        log.info("agent started", extra={"fields": {"queue_url": self.queue.url, "table": self.ledger.table,
                                                    "watched_jobs": [job.target for job in self.watched]}})
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
        log.info("agent stopped")
        return 0

    def poll(self) -> int:
        leadership = self.check_leader()
        self.heartbeat_if_due()
        if not leadership.leader:
            self._sleep(self.standby_seconds)
            return 0
        self._receiving = True
        try:
            if self.stopping:
                return 0
            messages = self.queue.receive()
        finally:
            self._receiving = False
        handled = 0
        if messages and not self.check_leader().leader:  # the long poll may have taken 20 s: still leader?
            for message in messages:
                self._release(message)
            return 0
        for message in messages:
            if self.stopping:
                self._release(message)
                continue
            try:
                self.handle(message)
                handled += 1
            except Exception:
                log.exception("message not handled; it will be delivered again",
                              extra={"fields": {"message_id": message.message_id}})
        return handled

    def request_stop(self, signum: int = signal.SIGTERM, frame: Any = None) -> None:
        self.stopping = True
        if self._receiving:
            raise _StopPolling()

    def check_leader(self) -> Leadership:
        leadership = self.elector.check()
        previous, self.leadership = self.leadership, leadership
        if previous is None or previous.leader != leadership.leader:
            log.info("role: %s", PRIMARY if leadership.leader else STANDBY,
                     extra={"fields": {"role": PRIMARY if leadership.leader else STANDBY,
                                       "reason": leadership.reason, "in_charge": leadership.holder}})
            if previous is not None:
                self._last_heartbeat = None  # a new leader must be seen alive at once
        return leadership

    def heartbeat_if_due(self) -> None:
        now = time.monotonic()
        if self._last_heartbeat is not None and now - self._last_heartbeat < self.heartbeat_seconds:
            return
        leadership = self.leadership or self.check_leader()
        role = PRIMARY if leadership.leader else STANDBY
        try:
            self.ledger.heartbeat(self.cluster, self.clock(), self.identity, __version__, role=role,
                                  reason="" if leadership.leader else leadership.reason,
                                  in_charge=leadership.holder)
            self._last_heartbeat = now
        except Exception:
            log.exception("heartbeat failed")
            return
        if leadership.leader:
            self.report_nodes()

    def report_nodes(self) -> None:
        """`agent#<cluster>/nodes`: the nodes in trouble with the training pods on them (leader only)."""
        try:
            nodes = node_report(self.kube, {job.namespace for job in self.watched})
        except Exception:
            log.exception("node report failed")
            return
        text, truncated = encode_nodes(nodes)
        now = self.clock()
        item = {"pk": {"S": f"agent#{self.cluster}"}, "sk": {"S": "nodes"}, "at": {"S": now.isoformat()},
                "host": {"S": self.identity}, "version": {"S": __version__}, "nodes": {"S": text},
                "expires_at": {"N": str(epoch(now + HEARTBEAT_TTL))}}
        if truncated:
            item["truncated"] = {"BOOL": True}
        try:
            self.ledger.client.put_item(TableName=self.ledger.table, Item=item)
        except Exception:
            log.exception("node report not written")
            return
        if nodes:
            log.info("nodes in trouble", extra={"fields": {"nodes": [node["name"] for node in nodes],
                                                           "truncated": truncated}})

    # --- one message

    def handle(self, message: Message) -> str:
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
            claimed = self.ledger.claim(command, now, self.identity)  # type: ignore[arg-type]  # duck-typed
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
            return restart(self.kube, command.action, watched=self.watched, now=self.clock(),
                           terminating_grace_seconds=self.terminating_grace_seconds)
        except Exception as error:  # a bug must not leave the command "running" forever
            log.exception("command raised", extra={"fields": {"command_id": command.command_id}})
            return Result(FAILED, f"agent error: {type(error).__name__}: {error}")

    def _finish(self, message: Message, command_id: str, record: dict[str, Any], result: Result,
                fields: dict[str, Any]) -> str:
        record = {**record, "status": result.status, "message": result.message,
                  "finished_at": self.clock().isoformat(), "pods": list(result.pods),
                  "force_deleted": list(result.force_deleted)}
        self.state.put(command_id, self.clock(), status="done", result=record, reported=False)
        log.log(logging.WARNING if result.status != "executed" else logging.INFO, "command %s", result.status,
                extra={"fields": {**fields, "status": result.status, "result": result.message[:1000],
                                  "pods": list(result.pods), "force_deleted": list(result.force_deleted)}})
        self._report(message, command_id, record, fields)
        return result.status

    def _seen_before(self, message: Message, command_id: str, entry: dict[str, Any], record: dict[str, Any],
                     fields: dict[str, Any]) -> str:
        if entry.get("status") == "running":
            return self._finish(message, command_id, record, Result(FAILED, INTERRUPTED), fields)
        if entry.get("result") and not entry.get("reported"):
            self._report(message, command_id, entry["result"], fields)
            return str(entry["result"].get("status"))
        log.info("command already handled; not run again", extra={"fields": {**fields, "status": "duplicate"}})
        self._delete(message)
        return "duplicate"

    def _report(self, message: Message, command_id: str, record: dict[str, Any], fields: dict[str, Any]) -> None:
        try:
            self.ledger.put_result(record, self.clock())
        except Exception:
            log.exception("could not write the result; written when the message comes back",
                          extra={"fields": fields})
            return
        self.state.put(command_id, self.clock(), reported=True)
        self._delete(message)

    def _record(self, command: Command) -> dict[str, Any]:
        return {"command_id": command.command_id, "cluster": self.cluster, "kind": command.kind,
                "target": command.target, "incident": command.incident, "issued_at": command.issued_at,
                "host": self.identity, "agent_version": __version__}

    def _delete(self, message: Message) -> None:
        try:
            self.queue.delete(message)
        except Exception:
            log.exception("could not delete the message", extra={"fields": {"message_id": message.message_id}})

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
        prog="python -m medic_agent.eks",
        description="Restarts the Kubernetes training jobs Medic issues restart_job commands for (each checked "
                    "against Medic's ledger first), and reports nodes HyperPod marks unhealthy. Options also "
                    "come from the environment variable in brackets.")
    parser.add_argument("--cluster", default=_env("MEDIC_CLUSTER"), help="the HyperPod cluster's name [MEDIC_CLUSTER]")
    parser.add_argument("--queue-url", default=_env("MEDIC_QUEUE_URL"), help="the command queue [MEDIC_QUEUE_URL]")
    parser.add_argument("--table", default=_env("MEDIC_TABLE"), help="the ledger table [MEDIC_TABLE]")
    parser.add_argument("--region", default=_env("MEDIC_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"))
    parser.add_argument("--watched-jobs", default=_env("MEDIC_WATCHED_JOBS"),
                        help="JSON file: the jobs this agent may restart, [{namespace, kind, name}] "
                             "[MEDIC_WATCHED_JOBS]")
    parser.add_argument("--terminating-grace-seconds", type=float,
                        default=float(_env("MEDIC_TERMINATING_GRACE_SECONDS") or DEFAULT_TERMINATING_GRACE_SECONDS),
                        help="a job's pod still Terminating this long after its grace period ended, on a NotReady "
                             "or unschedulable node, is force-deleted by a restart (default 300)")
    parser.add_argument("--namespace", default=_env("MEDIC_NAMESPACE", "POD_NAMESPACE") or "medic-agent",
                        help="the namespace of the leader-election Lease (default: the pod's, medic-agent)")
    parser.add_argument("--identity", default=_env("POD_NAME"), help="this replica's name (default: POD_NAME, "
                                                                     "the hostname)")
    parser.add_argument("--state-file", default=_env("MEDIC_STATE_FILE") or DEFAULT_STATE_FILE)
    parser.add_argument("--heartbeat-seconds", type=float, default=float(_env("MEDIC_HEARTBEAT_SECONDS") or 60))
    parser.add_argument("--wait-seconds", type=int, default=20, choices=range(0, 21), metavar="0..20")
    parser.add_argument("--visibility-timeout", type=int, default=120)
    parser.add_argument("--kube-host", default=_env("MEDIC_KUBE_HOST"),
                        help="an API server URL instead of the in-cluster config (tests) [MEDIC_KUBE_HOST]")
    parser.add_argument("--kube-token-file", default=_env("MEDIC_KUBE_TOKEN_FILE"))
    parser.add_argument("--once", action="store_true", help="one cycle, then exit")
    parser.add_argument("--log-level", default=_env("MEDIC_LOG_LEVEL") or "INFO")
    parser.add_argument("--version", action="version", version=f"medic-agent {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    missing = [name for name in ("cluster", "queue_url", "table", "region", "watched_jobs")
               if not getattr(args, name)]
    if missing:
        parser.error("missing " + ", ".join("--" + name.replace("_", "-") for name in missing))
    identity = args.identity or socket.gethostname()
    logs.setup(args.log_level, cluster=args.cluster, host=identity, version=__version__)
    try:
        with open(args.watched_jobs, encoding="utf-8") as handle:
            watched = load_watched(handle.read())
    except (OSError, ValueError) as error:
        log.error("watched jobs unreadable", extra={"fields": {"path": args.watched_jobs, "error": str(error)}})
        return 2
    if args.kube_host:
        with open(args.kube_token_file or "/dev/null", encoding="utf-8") as handle:
            kube = Kube.for_server(args.kube_host, handle.read().strip())
    else:
        kube = Kube.in_cluster()

    import boto3
    from botocore.config import Config

    session = boto3.Session(region_name=args.region)
    config = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5,
                    read_timeout=args.wait_seconds + 15)
    agent = EksAgent(
        cluster=args.cluster,
        queue=Queue(args.queue_url, lambda: session.client("sqs", config=config), wait_seconds=args.wait_seconds,
                    visibility_timeout=args.visibility_timeout),
        ledger=Ledger(args.table, lambda: session.client("dynamodb", config=config)),
        kube=kube, state=State(args.state_file), watched=watched, identity=identity,
        lease_namespace=args.namespace, terminating_grace_seconds=args.terminating_grace_seconds,
        heartbeat_seconds=args.heartbeat_seconds,
    )
    signal.signal(signal.SIGTERM, agent.request_stop)
    signal.signal(signal.SIGINT, agent.request_stop)
    return agent.run(once=args.once)


if __name__ == "__main__":
    sys.exit(main())
