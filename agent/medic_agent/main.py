"""The agent's loop: role, heartbeat, long-poll the queue, claim, run, report, delete. And its command line.

Every iteration starts with `scontrol ping` (role.py): only the agent on the host of the slurmctld in charge
is primary; it heartbeats under `heartbeat` and receives. Any other agent (another head node, or an answer it
cannot parse) is standby: it heartbeats under `standby#<host>` and neither receives nor runs anything. The
role is checked again after each long-poll and before each message: a role lost meanwhile releases the
messages it holds (visible again at once, for the new primary). A failover needs no operator step.

Each message goes through medic_agent.handling (shared with the EKS agent): parse and validate, the local state,
the ledger's claim (a transaction that checks Medic issued the command), run through Slurm, the result, delete.
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
from medic_agent.actions import FAILED, Result, execute
from medic_agent.commands import Command, parse
from medic_agent.handling import (
    CommandHandling,
    StopPolling,
    add_agent_options,
    aws_queue_and_ledger,
    env,
    require,
    utcnow,
)
from medic_agent.ledger import Ledger
from medic_agent.queue import Queue
from medic_agent.role import PING_ARGV, Role, decide
from medic_agent.slurm import Slurm, SlurmNotFound
from medic_agent.state import State

log = logging.getLogger("medic_agent")

# After a long poll that brought messages, ping again before the first; within the batch, again before a
# message when the last check is older than this. Not before every message: with a controller unreachable each
# ping waits out Slurm's MessageTimeout (10 s by default), and a batch must finish inside the queue's visibility
# timeout. Acting on a role up to 30 s old is safe: scontrol reaches the controller in charge from any head node,
# and the ledger's claim runs a command once.
ROLE_RECHECK_SECONDS = 30.0
INTERRUPTED = ("the agent stopped while this command was being claimed or run; it is not run again: "
               "check Slurm for its effect")


class Agent(CommandHandling):
    def __init__(self, *, cluster: str, queue: Queue, ledger: Ledger, slurm: Slurm, state: State,
                 heartbeat_seconds: float = 60.0, standby_seconds: float | None = None,
                 host: str | None = None, clock: Callable[[], datetime] = utcnow,
                 seconds: Callable[[], float] = time.monotonic) -> None:
        self.cluster = cluster
        self.queue = queue
        self.ledger = ledger
        self.slurm = slurm
        self.state = state
        self.heartbeat_seconds = heartbeat_seconds
        self.host = host or socket.gethostname()
        self.clock = clock
        self.seconds = seconds  # what times the heartbeat and role-check intervals (a replay runs them on its clock)
        self.log = log
        self.interrupted = INTERRUPTED
        self.stopping = False
        self._receiving = False
        self._last_heartbeat: float | None = None
        # how long a standby waits between role checks (default: the long-poll's wait)
        self.standby_seconds = float(queue.wait_seconds) if standby_seconds is None else standby_seconds
        self.role: Role | None = None
        self._role_checked: float | None = None

    # --- the loop

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
            raise StopPolling()

    def check_role(self) -> Role:
        """Ask `scontrol ping` which controller is in charge; log (and heartbeat at once) when the role changes."""
        run = self.slurm.run(PING_ARGV)
        role = decide(run.output, run.returncode, self.host)
        self._role_checked = self.seconds()
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
        if self._role_checked is not None and self.seconds() - self._role_checked < ROLE_RECHECK_SECONDS:
            return self.role is not None and self.role.acts
        acts = self.check_role().acts
        if not acts:
            self.heartbeat_if_due()
        return acts

    def heartbeat_if_due(self) -> None:
        now = self.seconds()
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

    # --- one message (medic_agent.handling): what the Slurm agent does its own way

    def parse_command(self, body: str) -> Command:
        return parse(body, cluster=self.cluster)

    def run_command(self, command: Command) -> Result:
        return execute(command, self.slurm)

    def failed(self, message: str) -> Result:
        return Result(FAILED, message)

    def result_fields(self, result: Result) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if result.job_ids:
            fields["job_ids"] = list(result.job_ids)
        if result.jobs is not None:  # drain_node: the jobs on the node ([] none); absent: unknown
            fields["jobs"] = [{"id": job_id, "name": name} for job_id, name in result.jobs]
        if result.job_states is not None:  # job_states: what Slurm still knows ([] none)
            fields["job_states"] = [job.fields() for job in result.job_states]
        if result.node_state is not None:  # resume_node, release_node: what the node was, whether it was resumed
            fields.update(node_state=result.node_state, node_reason=result.node_reason or "",
                          resumed="true" if result.resumed else "false")
        if result.held is not None:  # quarantine_node: whether Medic's quarantine holds the node
            fields["held"] = "true" if result.held else "false"
        if result.refusal:  # refused: why (Medic records not_watched as rejected)
            fields["refusal"] = result.refusal
        return fields

    def started_fields(self) -> dict[str, Any]:
        return {"state_file": self.state.path}


# --- command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="medic-agent",
        description="Runs the Slurm commands Medic issues (job requeues, node drains and resumes; each checked "
                    "against Medic's ledger before it runs) from an SQS queue, and reports each result to the "
                    "ledger. Every option can also come from the environment variable in brackets.")
    add_agent_options(parser)
    parser.add_argument("--slurm-bin", default=env("MEDIC_SLURM_BIN"),
                        help="directory holding scontrol and squeue, and sacct where the cluster has it (default: "
                             "PATH, then /opt/slurm/bin) [MEDIC_SLURM_BIN]")
    parser.add_argument("--host", default=env("MEDIC_HOST"),
                        help="this head node's name as SlurmctldHost lists it (default: the hostname); the agent acts "
                             "only when `scontrol ping` says the slurmctld in charge runs here [MEDIC_HOST]")
    parser.add_argument("--command-timeout", type=float, default=float(env("MEDIC_COMMAND_TIMEOUT") or 30))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    require(parser, args)
    host = args.host or socket.gethostname()
    logs.setup(args.log_level, cluster=args.cluster, host=host, version=__version__)
    slurm = Slurm(bin_dir=args.slurm_bin, timeout=args.command_timeout)
    try:
        programs = slurm.check()
    except SlurmNotFound as error:
        log.error("Slurm client commands not found", extra={"fields": {"error": str(error)}})
        return 2

    queue, ledger = aws_queue_and_ledger(args)
    agent = Agent(
        cluster=args.cluster,
        queue=queue,
        ledger=ledger,
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
