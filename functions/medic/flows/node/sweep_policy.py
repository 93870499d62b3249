"""The reconciler's policy: pure decisions for what a sweep of the cluster finds. No I/O here.

Events are best effort, so every few minutes Medic compares what HyperPod says about each node
(ListClusterNodes) with what its ledger says, and settles the differences:

1. **Failed nodes nobody covers.** A node whose ``InstanceStatus`` is ``Failure`` with no open
   incident (no Medic action inside the node cooldown, no page sent, not reported by an earlier
   sweep inside the cooldown) goes down the event handler's own decision path with trigger
   ``reconcile`` and fault ``unknown``. The status says *that* the node failed, not *why*: the
   health reason that picks reboot or replace is missing. Replacing wipes the node's volumes and a
   reboot does not fix a bad lifecycle script or dead hardware, and either one repeated every
   cooldown turns a systemic fault into a replacement loop. So, as for any fault Medic cannot name,
   it takes no action and pages once per incident (``deferred``, ``paged``); with HyperPod's
   automatic node recovery it defers to HyperPod without a page. A health event that arrives later
   still acts on the node under the usual guardrails, since the page claim does not block actions.

2. **Claims never finished.** The event path claims a node action in the ledger as ``in_flight``
   before calling HyperPod and writes the final outcome after the call, except for an accepted
   replacement: that claim stays ``in_flight`` (one write fewer on the hot path) and a sweep settles
   it. A claim still ``in_flight`` after ``STALE_CLAIM`` (well beyond the 60 s a run may last) is such
   a replacement or belongs to a run that died midway; a claim ``unknown`` belongs to a call whose
   answer was lost (see 3). Either way the call may or may not have reached HyperPod, so before
   anything else the node is re-checked with DescribeClusterNode:
   - gone from the cluster, or in a repair status → the call went through: the claim becomes
     ``executed`` and nothing is called again; one record confirms it, except for an in-flight
     replacement (``settles_quietly``), whose run already recorded it ``executed`` (a log line
     ``replacement confirmed`` and the ``ClaimsConfirmed`` metric instead);
   - no sign of a repair yet, less than ``SETTLE`` after the claim → wait for the next sweep;
   - still ``Failure`` after ``SETTLE`` → the call did not take: retry the same action once
     (``MAX_PENDING_RETRIES``), claimed again conditionally so a racing event cannot double it;
   - ``Running`` after ``SETTLE`` → a reboot may have completed or never started, and nothing tells
     the two apart: Medic does not repeat it blindly; the claim becomes ``failed`` and a human is
     paged once. So is a claim out of retries, or one found while Medic is paused.
   A claim `awaiting_drain` (on Slurm, the call waits for the agent's drain: flows/node/drain_first) is no such
   claim: nothing reached HyperPod, so it is never re-checked or retried here; past its drain deadline the sweep
   makes the call, without the drain.
   A claim that nobody settles blocks the node only for the node cooldown (the event path treats
   the same fault inside the cooldown as a duplicate); after that it has expired: the event path
   acts on the node as on any other (after its own DescribeClusterNode), the reconciler no longer
   re-checks it and treats a failed node as uncovered, and the ledger item itself goes after
   ``NODE_STATE_DAYS`` (TTL).

3. **Ambiguous results.** A read timeout or a dropped connection after the request was sent
   (botocore ``HTTPClientError``: ``ReadTimeoutError``, ``ConnectionClosedError``) may hide an
   accepted call. The adapter stops botocore from retrying those for the node actions (throttling,
   5xx and connection failures before sending are still retried by the standard retry mode), the
   event records ``deferred`` (the reconciler owns it now; nobody is paged for a result that is
   usually fine) and the ledger keeps the claim as ``unknown`` for 2. The next event for the same
   fault inside the cooldown is a duplicate and calls nothing.

4. **Repairs that take too long.** A node in ``Pending``, ``SystemUpdating`` or ``ShuttingDown``
   (and, with automatic node recovery, ``Failure``: HyperPod owns the repair) for longer than
   ``guardrails.repair_minutes`` pages once. The clock starts at Medic's own action when Medic
   started the repair, else when a sweep first saw the node in that state (kept in the ledger).
   ``DeepHealthCheckInProgress`` is not timed: deep health checks legitimately run for hours.

Pages for one cluster in one sweep are sent one per incident when few, and as one summary page
(each incident still claimed, so none pages twice) when more than ``SUMMARY_AFTER`` come at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from enum import StrEnum
from typing import NamedTuple

from medic.core.mode import Mode
from medic.core.models import Action, NodeInfo, Outcome, Why
from medic.core.pages import PageText, console_link
from medic.core.record import Record
from medic.core.repairs import IN_FLIGHT, RESULT_UNKNOWN, PendingClaim
from medic.core.text import MedicText, quoted
from medic.flows.node.policy import IN_REPAIR_STATUSES

STALE_CLAIM = timedelta(minutes=2)  # a run lasts at most 60 s: an in-flight claim this old lost its run
SETTLE = timedelta(minutes=3)  # HyperPod shows an accepted reboot/replace in the node's status by then
MAX_PENDING_RETRIES = 1  # an unconfirmed call is repeated at most once, and only on a node still in Failure

FAILURE = "Failure"
# After a guardrail (storm) page, the cluster's failed nodes are that page's for this long: the sweep
# counts them in its report instead of paging them one by one, and the failed-node alarm does not page.
STORM_HOLD = timedelta(hours=6)
LONG_REPAIR_STATUSES = frozenset({"Pending", "SystemUpdating", "ShuttingDown"})
SUMMARY_AFTER = 3  # more pages than this for one cluster in one sweep: one summary page instead

# Work per run, so a run stays well inside its 60 s timeout whatever the cluster's size.
MAX_NODE_DECISIONS_PER_CLUSTER = 10  # failed or unfinished nodes taken down the node path per run
MAX_REPAIR_WATCHES_PER_CLUSTER = 100  # ledger writes for repairs first seen, per run
RESERVE_SECONDS = 20  # no new cluster or node once less than this is left of the run

FAILURE_WITHOUT_REASON = ("Node status is Failure and no health event explains it: without a fault reason "
                          "Medic neither reboots nor replaces blindly; a human decides.")
NO_HEALTH_REASON = MedicText("(none: found by Medic's reconciler, InstanceStatus Failure)")


class Resolution(StrEnum):
    WAIT = "wait"  # too early to tell: look again next sweep
    CONFIRMED = "confirmed"  # the call went through: the claim is executed
    RETRY = "retry"  # the call did not take and the node is still failed: call once more
    GIVE_UP = "give_up"  # cannot tell, or out of retries: a human decides


class PendingDecision(NamedTuple):
    resolution: Resolution
    outcome: Outcome  # the record's outcome (RETRY: EXECUTED means "claim again and execute")
    reason: str
    ledger_outcome: str | None  # what the claim becomes (None: leave it as it is)
    page: bool = False
    why: Why | None = None  # the record's sub-reason (None: the outcome's only one)


def needs_recheck(claim: PendingClaim, now: datetime, cooldown: timedelta) -> bool:
    """True for a claim whose call may or may not have reached HyperPod, whose run is over, and which
    has not expired (past the node cooldown the node is free again, for the event path too)."""
    if now - claim.acted_at >= cooldown:
        return False
    if claim.outcome == RESULT_UNKNOWN:
        return True
    return claim.outcome == IN_FLIGHT and now - claim.acted_at >= STALE_CLAIM


def decide_pending(claim: PendingClaim, node: NodeInfo | None, now: datetime, mode: Mode) -> PendingDecision:
    """What to do with an unfinished claim, from the node's status right now (DescribeClusterNode)."""
    verb = claim.action
    if claim.outcome == RESULT_UNKNOWN:
        what = f"The {verb} call at {_hhmm(claim.acted_at)} timed out with its result unknown"
    elif settles_quietly(claim):
        what = (f"The {verb} claimed at {_hhmm(claim.acted_at)} is unconfirmed (its run did not finish, or HyperPod "
                "has not started it)")
    else:
        what = f"The run that claimed {verb} at {_hhmm(claim.acted_at)} did not finish"
    if node is None or node.gone:  # a replaced instance is gone; its replacement has a new instance id
        return PendingDecision(Resolution.CONFIRMED, Outcome.EXECUTED,
                               f"{what}; the node is no longer in the cluster, so the {verb} took effect "
                               "(or the node was removed). Nothing is called again.", "executed")
    if node.status in IN_REPAIR_STATUSES:
        return PendingDecision(Resolution.CONFIRMED, Outcome.EXECUTED,
                               f"{what}; the node is {node.status}, so the call went through. "
                               "Nothing is called again.", "executed")
    waited = now - claim.acted_at
    if waited < SETTLE:
        return PendingDecision(Resolution.WAIT, Outcome.DEFERRED,
                               f"{what}; the node is {node.status} with no sign of a repair yet. Medic "
                               "re-checks it before any new call.", None, why=Why.RETRY_LATER)
    minutes = int(waited.total_seconds() // 60)
    if node.status != FAILURE:
        return PendingDecision(Resolution.GIVE_UP, Outcome.FAILED,
                               f"{what}; {minutes} min later the node is {node.status} with no sign of the "
                               f"{verb}: it may have finished already or never started. Medic does not repeat "
                               "it blindly; check the node.", Outcome.FAILED.value, page=True)
    if claim.retries >= MAX_PENDING_RETRIES:
        return PendingDecision(Resolution.GIVE_UP, Outcome.FAILED,
                               f"{what}; the node is still in Failure {minutes} min later and the {verb} was "
                               f"already retried {claim.retries} time(s). Medic gives up on it.",
                               Outcome.FAILED.value, page=True)
    if mode is Mode.PAUSED:
        return PendingDecision(Resolution.GIVE_UP, Outcome.SUPPRESSED,
                               f"{what}; the node is still in Failure and Medic is paused: it would retry the "
                               f"{verb} once.", Outcome.SUPPRESSED.value, page=True, why=Why.PAUSED)
    if mode is Mode.DRY_RUN:
        return PendingDecision(Resolution.WAIT, Outcome.DRY_RUN,
                               f"{what}; dry run: would retry the {verb} once.", None)
    return PendingDecision(Resolution.RETRY, Outcome.EXECUTED,
                           f"{what}; the node is still in Failure {minutes} min later with no sign of the {verb}: "
                           "retrying it once.", None)


def settles_quietly(claim: PendingClaim) -> bool:
    """An in-flight replacement: its run recorded it and, the call accepted, left the claim for a sweep to settle
    (no write after the call). Confirmed by the node's status, it is settled without a second record."""
    return claim.outcome == IN_FLIGHT and claim.action == Action.REPLACE_NODE.value


def covered(claim: PendingClaim | None, now: datetime, cooldown: timedelta) -> bool:
    """A node Medic acted on inside the cooldown (its claim finished or not) has its incident open."""
    return claim is not None and now - claim.acted_at < cooldown


def repair_statuses(node_recovery: str) -> frozenset[str]:
    """The statuses a repair is timed in; with automatic recovery (the cluster's DescribeCluster NodeRecovery),
    HyperPod owns a failed node's repair."""
    return (LONG_REPAIR_STATUSES | {FAILURE}) if node_recovery == "automatic" else LONG_REPAIR_STATUSES


def repair_since(first_seen: datetime | None, medic_acted_at: datetime | None, now: datetime) -> datetime:
    """When the repair began as far as Medic knows: its own action, else when a sweep first saw it."""
    known = [moment for moment in (first_seen, medic_acted_at) if moment is not None]
    return min(known) if known else now


def repair_overdue(since: datetime, now: datetime, repair_minutes: int) -> bool:
    return now - since > timedelta(minutes=repair_minutes)


def latest_actions(actions: Iterable[tuple[str | None, datetime]]) -> dict[str, datetime]:
    """Each node's (or NodeLogicalId's) latest action time from the cluster's recent actions."""
    latest: dict[str, datetime] = {}
    for node_id, at in actions:
        if node_id is None:
            continue
        if node_id not in latest or at > latest[node_id]:
            latest[node_id] = at
    return latest


def slow_repair_reason(node: NodeInfo, since: datetime, now: datetime, repair_minutes: int, medics: bool) -> str:
    minutes = int((now - since).total_seconds() // 60)
    whose = "Medic's" if medics else "HyperPod's"
    says = f" HyperPod says: {quoted(node.status_message, 200)}." if node.status_message else ""
    return (f"Node has been {node.status} for {minutes} min since {whose} repair began at {_hhmm(since)}, longer "
            f"than the {repair_minutes}-minute repair window.{says}")


def slow_repair_page(record: Record, region: str) -> PageText:
    subject = f"[Medic] {record['cluster']} {record['node_id']}: repair taking too long"
    lines = [
        f"Cluster:        {record['cluster']}",
        f"Node:           {record['node_id']} (instance group {record['instance_group'] or 'unknown'})",
        f"What happened:  {record['reason']}",
        "",
        "What Medic did: nothing (the repair is HyperPod's to finish)",
        "What to do:     Open the node in the console: check its status message and the cluster events; "
        "replace it by hand if it is stuck.",
        f"Console:        {console_link(region, record['cluster'])}",
        f"Incident:       {record['incident']} (reconcile run {record['event_id']}, mode {record['mode']})",
    ]
    return PageText(subject[:100], lines)


def summary_page(cluster: str, records: list[Record], region: str) -> PageText:
    """One page for many findings in one cluster in one sweep; every record is in the remediation log."""
    subject = f"[Medic] {cluster}: {len(records)} nodes need a human"
    lines = [f"  {r['node_id']} ({r['instance_group'] or '-'}): {r['fault']}, {r['outcome']} - {r['reason']}"
             for r in records[:20]]
    if len(records) > 20:
        lines.append(f"  ... and {len(records) - 20} more")
    body = [
        f"Cluster:        {cluster}",
        f"Found by:       Medic's reconciler (run {records[0]['event_id']}, mode {records[0]['mode']})",
        "Nodes:",
        *lines,
        "",
        "Many nodes at once usually share a cause (bad AMI or lifecycle script, capacity, network).",
        "Each node's record is in the remediation log:",
        f"  filter message = 'remediation' and cluster = '{cluster}' and trigger = 'reconcile'",
        f"Console:        {console_link(region, cluster)}",
    ]
    return PageText(subject[:100], body)


def describe_claim(action: str) -> Action:
    """The claim's action as an Action (an unknown value reads as none: nothing is called)."""
    try:
        return Action(action)
    except ValueError:
        return Action.NONE


def _hhmm(moment: datetime) -> str:
    return moment.strftime("%H:%M UTC")
