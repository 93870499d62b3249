"""The EKS agent's loop and command line: leader check → heartbeat → node report → long-poll → claim → act →
result, with the Slurm agent's protocol and integrity rules (medic_agent.main has the full story):

  parse + validate ── refused (not a command Medic could have sent) → log, delete; no result
  seen in the local state? ── yes → duplicate (or finish reporting) → delete
  claim in the ledger (ConditionCheck on Medic's `command#<cluster>#<id>/issued`: cluster, kind, target, incident)
        ├── not issued by Medic → log, delete; no result
        ├── already claimed → duplicate → delete
        │ claimed
  restart through the Kubernetes API (restart.py) → result in the ledger (with `pods`, `force_deleted`; a restart
  the job's own rules say would end it is `refused` with a `refusal` code, policy.py) → delete; a quarantine_node /
  release_node cordons / uncordons a node (cordon.py: `held` / `resumed`)

Only the replica holding the Lease (lease.py) receives; others heartbeat under `standby#<pod>` and wait. The
leader writes, with each heartbeat, the node report `agent#<cluster>/nodes` (restart.node_report).
The local state file lives on an emptyDir: it survives a container restart, not a pod's replacement; the
ledger's claim still keeps a command from running twice.
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
import time
from datetime import datetime
from typing import Any, Callable

from medic_agent import __version__, logs
from medic_agent.eks.commands import Command, HoldNode, WatchedJob, load_watched, parse
from medic_agent.eks.cordon import hold_or_release
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
from medic_agent.handling import (
    CommandHandling,
    StopPolling,
    add_agent_options,
    aws_queue_and_ledger,
    env,
    require,
    utcnow,
)
from medic_agent.ledger import HEARTBEAT_TTL, Ledger, epoch
from medic_agent.queue import Queue
from medic_agent.role import PRIMARY, STANDBY
from medic_agent.state import State

log = logging.getLogger("medic_agent.eks")

INTERRUPTED = ("the agent stopped while this command was being claimed or run; it is not run again: "
               "check the job's pods for its effect")


class EksAgent(CommandHandling):
    def __init__(self, *, cluster: str, queue: Queue, ledger: Ledger, kube: Kube, state: State,
                 watched: tuple[WatchedJob, ...], identity: str, lease_namespace: str,
                 terminating_grace_seconds: float = DEFAULT_TERMINATING_GRACE_SECONDS,
                 heartbeat_seconds: float = 60.0, standby_seconds: float | None = None,
                 lease_name: str = LEASE_NAME, clock: Callable[[], datetime] = utcnow,
                 seconds: Callable[[], float] = time.monotonic) -> None:
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
        self.seconds = seconds  # what times the heartbeat interval (a replay runs it on its clock)
        self.log = log
        self.interrupted = INTERRUPTED
        self.elector = LeaseElector(kube, lease_namespace, identity, lambda: self.clock(), name=lease_name)
        self.leadership: Leadership | None = None
        self.stopping = False
        self._receiving = False
        self._last_heartbeat: float | None = None

    @property
    def host(self) -> str:
        return self.identity

    # --- the loop

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
            raise StopPolling()

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
        now = self.seconds()
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
            nodes = node_report(self.kube, self.watched)
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

    # --- one message (medic_agent.handling): what the EKS agent does its own way

    def parse_command(self, body: str) -> Command:
        return parse(body, cluster=self.cluster)

    def run_command(self, command: Command) -> Result:
        if isinstance(command.action, HoldNode):
            return hold_or_release(self.kube, command.action, self.clock())
        return restart(self.kube, command.action, watched=self.watched, now=self.clock(),
                       terminating_grace_seconds=self.terminating_grace_seconds)

    def failed(self, message: str) -> Result:
        return Result(FAILED, message)

    def result_fields(self, result: Result) -> dict[str, Any]:
        fields: dict[str, Any] = {"pods": list(result.pods), "force_deleted": list(result.force_deleted)}
        if result.refusal:
            fields["refusal"] = result.refusal
        if result.held is not None:
            fields["held"] = "true" if result.held else "false"
        if result.resumed is not None:
            fields["resumed"] = "true" if result.resumed else "false"
        return fields

    def started_fields(self) -> dict[str, Any]:
        return {"watched_jobs": [job.target for job in self.watched]}


# --- command line

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m medic_agent.eks",
        description="Restarts the Kubernetes training jobs Medic issues restart_job commands for (each checked "
                    "against Medic's ledger first), and reports nodes HyperPod marks unhealthy. Options also "
                    "come from the environment variable in brackets.")
    add_agent_options(parser)
    parser.add_argument("--watched-jobs", default=env("MEDIC_WATCHED_JOBS"),
                        help="JSON file: the jobs this agent may restart, [{namespace, kind, name}] "
                             "[MEDIC_WATCHED_JOBS]")
    parser.add_argument("--terminating-grace-seconds", type=float,
                        default=float(env("MEDIC_TERMINATING_GRACE_SECONDS") or DEFAULT_TERMINATING_GRACE_SECONDS),
                        help="a job's pod still Terminating this long after its grace period ended, on a NotReady "
                             "or unschedulable node, is force-deleted by a restart (default 300)")
    parser.add_argument("--namespace", default=env("MEDIC_NAMESPACE", "POD_NAMESPACE") or "medic-agent",
                        help="the namespace of the leader-election Lease (default: the pod's, medic-agent)")
    parser.add_argument("--identity", default=env("POD_NAME"), help="this replica's name (default: POD_NAME, "
                                                                     "the hostname)")
    parser.add_argument("--kube-host", default=env("MEDIC_KUBE_HOST"),
                        help="an API server URL instead of the in-cluster config (tests) [MEDIC_KUBE_HOST]")
    parser.add_argument("--kube-token-file", default=env("MEDIC_KUBE_TOKEN_FILE"))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    require(parser, args, "watched_jobs")
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

    queue, ledger = aws_queue_and_ledger(args)
    agent = EksAgent(
        cluster=args.cluster, queue=queue, ledger=ledger,
        kube=kube, state=State(args.state_file), watched=watched, identity=identity,
        lease_namespace=args.namespace, terminating_grace_seconds=args.terminating_grace_seconds,
        heartbeat_seconds=args.heartbeat_seconds,
    )
    signal.signal(signal.SIGTERM, agent.request_stop)
    signal.signal(signal.SIGINT, agent.request_stop)
    return agent.run(once=args.once)


if __name__ == "__main__":
    sys.exit(main())
