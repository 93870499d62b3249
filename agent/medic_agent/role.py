"""Which head node acts: the one whose slurmctld is in charge, as `scontrol ping` says. Pure, except `check`.

A cluster with several head nodes (SlurmctldHost listed more than once) runs one agent on each. Only the
agent on the host of the controller in charge receives and runs commands; the others heartbeat as standby.

`scontrol ping` (Slurm's src/scontrol/scontrol.c, _print_ping) prints one line per SlurmctldHost, in
slurm.conf order:
    Slurmctld(primary) at <host> is UP|DOWN        the first SlurmctldHost
    Slurmctld(backup) at <host> is UP|DOWN         the second, when there are exactly two
    Slurmctld(backup<N>) at <host> is UP|DOWN      the N-th (N = 1, 2, ...) when there are more than two
then, run as root with any controller DOWN, a three-line "RESTORE SLURMCTLD DAEMON TO SERVICE" banner.
It exits 0 when at least one controller answered, 1 when none did. UP only means the daemon answers a ping
(a backup in standby answers too); a backup takes control only once every controller before it stops
answering, and a returning primary takes control back. So the controller in charge is the first one UP in
that order, and this host acts only when that controller runs here.

Strict: any line that is not one of these, modes out of order, a repeated host, or an exit status that
contradicts the lines, and the answer is unparseable: the agent stands by and says so (never acts on a
guess). Two agents believing themselves primary for a moment (a failover in flight, a partition) cannot run
a command twice: the ledger's claim is conditional (ledger.claim).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PRIMARY, STANDBY = "primary", "standby"
PING_LINE = re.compile(r"Slurmctld\((primary|backup|backup[1-9][0-9]{0,2})\) at ([A-Za-z0-9][A-Za-z0-9._-]{0,252}) "
                       r"is (UP|DOWN)", re.ASCII)
BANNER = ("*****************************************", "** RESTORE SLURMCTLD DAEMON TO SERVICE **",
          "*****************************************")
PING_ARGV = ("scontrol", "ping")


class Unparseable(ValueError):
    """`scontrol ping` said something this parser does not know for certain."""


@dataclass(frozen=True)
class Controller:
    mode: str  # primary | backup | backup<N>
    host: str
    up: bool


@dataclass(frozen=True)
class Role:
    role: str  # primary | standby
    reason: str  # one sentence: why
    in_charge: str | None = None  # the host of the controller in charge (None: none answers, or unknown)
    controllers: tuple[Controller, ...] = field(default=())

    @property
    def acts(self) -> bool:
        return self.role == PRIMARY


def expected_mode(offset: int, count: int) -> str:
    if offset == 0:
        return "primary"
    return "backup" if count == 2 else f"backup{offset}"


def parse_ping(output: str, returncode: int | None) -> tuple[Controller, ...]:
    """`scontrol ping`'s output and exit status → the controllers in SlurmctldHost order; Unparseable if not
    exactly the shape Slurm prints."""
    if returncode not in (0, 1):
        status = "did not finish" if returncode is None else f"exited {returncode}"
        raise Unparseable(f"scontrol ping {status}: {output.strip()[:200]}")
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    banner = tuple(lines[-3:]) == BANNER
    if banner:
        lines = lines[:-3]
    controllers: list[Controller] = []
    for line in lines:
        found = PING_LINE.fullmatch(line)
        if found is None:
            raise Unparseable(f"unexpected line from scontrol ping: {line[:120]!r}")
        controllers.append(Controller(found.group(1), found.group(2).lower(), found.group(3) == "UP"))
    if not controllers:
        raise Unparseable("scontrol ping named no controller")
    modes = [controller.mode for controller in controllers]
    if modes != [expected_mode(offset, len(controllers)) for offset in range(len(controllers))]:
        raise Unparseable(f"controllers out of SlurmctldHost order: {', '.join(modes)}")
    hosts = [controller.host for controller in controllers]
    if len(set(hosts)) != len(hosts):
        raise Unparseable(f"a controller host is listed twice: {', '.join(hosts)}")
    any_up = any(controller.up for controller in controllers)
    if (returncode == 0) != any_up:
        raise Unparseable(f"scontrol ping exited {returncode} but reported {'a' if any_up else 'no'} controller UP")
    if banner and all(controller.up for controller in controllers):
        raise Unparseable("scontrol ping printed its RESTORE banner with every controller UP")
    return tuple(controllers)


def host_names(host: str) -> set[str]:
    """The names SlurmctldHost may give this host: its name and its short name (Slurm matches both)."""
    name = host.strip().lower()
    return {name, name.split(".")[0]} - {""}


def decide(output: str, returncode: int | None, host: str) -> Role:
    """This host's role from `scontrol ping`. Anything uncertain → standby, with the reason."""
    try:
        controllers = parse_ping(output, returncode)
    except Unparseable as error:
        return Role(STANDBY, f"standing by: cannot tell which controller is in charge ({error})")
    in_charge = next((controller for controller in controllers if controller.up), None)
    if in_charge is None:
        return Role(STANDBY, "standing by: no slurmctld answers scontrol ping", None, controllers)
    if in_charge.host in host_names(host):
        return Role(PRIMARY, f"slurmctld({in_charge.mode}) on this host ({in_charge.host}) is in charge",
                    in_charge.host, controllers)
    if not any(controller.host in host_names(host) for controller in controllers):
        return Role(STANDBY, f"standing by: this host ({host}) is not a SlurmctldHost; the controller in charge is "
                             f"{in_charge.host}", in_charge.host, controllers)
    return Role(STANDBY, f"standing by: the controller in charge is slurmctld({in_charge.mode}) on {in_charge.host}",
                in_charge.host, controllers)
