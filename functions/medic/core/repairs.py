"""Node repairs as the ledger keeps them: a claim's pending outcomes, a claim, a repair a sweep watches, and
what Medic told the scheduler before a node action. Shared by the node flow, the agent flow and the ledger."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

# Ledger node-state outcomes besides the record outcomes: a claim whose call has not answered yet.
IN_FLIGHT = "in_flight"  # claimed; the call is being made (or the run died before finishing)


RESULT_UNKNOWN = "unknown"  # the call was sent and its answer lost (timeout): it may have gone through


# Claimed, and the call waits for the agent's drain of the node in Slurm (or its deadline): nothing reached HyperPod
# yet. Not a pending outcome: the reconciler never re-checks or retries it (flows/node/drain_first calls it once).
AWAITING_DRAIN = "awaiting_drain"


PENDING_OUTCOMES = frozenset({IN_FLIGHT, RESULT_UNKNOWN})


class PendingClaim(NamedTuple):
    """A node claim as the ledger holds it, with how often an unconfirmed call was retried."""

    node_id: str
    fault: str
    action: str
    outcome: str
    acted_at: datetime
    attempt: int
    version: int
    retries: int = 0
    # The incident's timeline: the health event's time (a sweep's for a node it found failed), Medic's receipt
    fault_at: datetime | None = None
    detected_at: datetime | None = None

    @property
    def pending(self) -> bool:
        return self.outcome in PENDING_OUTCOMES


class RepairWatch(NamedTuple):
    """A node a sweep found in repair: since when (Medic's action, or first seen), and whether it paged."""

    node_id: str
    status: str
    since: datetime
    reported: bool = False
    medics: bool = False  # Medic's own action started it (else HyperPod, or a person)
    origin: str | None = None  # the instance Medic acted on (a replacement's old id): its claim holds the timeline
    slurm_node: str | None = None  # its Slurm name (ListClusterNodes' PrivateDnsHostname), when it has one


class DrainNote(NamedTuple):
    """What Medic told Slurm before a node action: said in the record's reason; `page`: the jobs on the node are
    unknown and a human should look (one page, apart from the node's own)."""

    text: str
    node_name: str | None = None
    page: bool = False
    queued: bool = False  # the drain went to the agent (and the repair is remembered for after it)
    command_id: str | None = None  # the drain_node command, when queued


class AwaitedCall(NamedTuple):
    """A node action claimed and waiting for the agent's drain of the node in Slurm (AWAITING_DRAIN): what the call
    needs when the drain's result comes, or its deadline passes (flows/node/drain_first)."""

    cluster: str
    node_id: str
    fault: str
    action: str
    attempt: int
    version: int
    trigger: str  # the decision's record: its trigger and event id (the call's record is its final one)
    event_id: str
    incident: str
    drain_command: str
    node_name: str
    call_by: datetime  # the drain's deadline: past it, the call goes ahead without the drain
    instance_group: str | None = None
    health_reason: str = ""  # for the node's page, should the call fail
