"""The node call and its answer: reboot or replace, with what the claim keeps of the outcome.

HyperPod answers a node action with HTTP 200 and a per-node failure list, or with an error that may hide
an accepted call (a lost answer); each is turned into a decision here, and the claim's outcome written.
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.adapters.hyperpod import AMBIGUOUS_ERRORS, INVALID_INSTANCE_STATUS
from medic.core.models import Action, Outcome, Why
from medic.core.pages import Page
from medic.core.repairs import RESULT_UNKNOWN
from medic.core.text import short
from medic.deps import Deps
from medic.flows.node.policy import IN_REPAIR_STATUSES, NodeDecision
from medic.ledger.nodes import NodeStore
from medic.ledger.table import Table


def act_on_claim(decision: NodeDecision, deps: Deps, table: Table, cluster: str, node_id: str) -> NodeDecision:
    """Make the claimed call and write what came of it into the claim (the reconciler's retry too).

    An accepted replacement leaves its claim in flight: no write after the call. The replaced instance
    leaves the cluster (or shows a repair status) and the reconciler, which re-checks every in-flight
    claim against DescribeClusterNode anyway, settles it as executed. A reboot's claim is settled here:
    a rebooted node comes back Running under the same id, which the reconciler cannot tell from a
    reboot that never happened."""
    decision, outcome = _execute(decision, deps, cluster, node_id)
    if not (outcome == Outcome.EXECUTED.value and decision.action is Action.REPLACE_NODE):
        NodeStore(table).set_outcome(cluster, node_id, outcome)
    return decision


def _execute(decision: NodeDecision, deps: Deps, cluster: str, node_id: str) -> tuple[NodeDecision, str]:
    """The call; with the outcome its claim keeps in the ledger (unknown when the answer was lost)."""
    try:
        decided = _call(decision, deps, cluster, node_id)
    except AMBIGUOUS_ERRORS as error:
        # The request may have reached HyperPod: not repeated, not paged; the claim stays unknown and
        # the next attempt (or the reconciler) re-checks the node before any new call.
        unknown = decision._replace(outcome=Outcome.DEFERRED, why=Why.RESULT_UNKNOWN,
                          reason=f"Result unknown: the {decision.action.value} call was sent but its answer was "
                                 f"lost ({error_code(error)}); it may have gone through. Medic re-checks the node "
                                 "(DescribeClusterNode) before any new call and never repeats it blindly.")
        return unknown, RESULT_UNKNOWN
    return decided, decided.outcome.value


def _call(decision: NodeDecision, deps: Deps, cluster: str, node_id: str) -> NodeDecision:
    verb = decision.action.value
    try:
        result = deps.hyperpod.act(decision.action, cluster, node_id)
    except AMBIGUOUS_ERRORS:
        raise  # the caller records these as unknown
    except (ClientError, BotoCoreError) as error:
        return decision._replace(outcome=Outcome.FAILED, page=Page.INCIDENT, why=None,
                       reason=f"{verb} call failed ({error_code(error)}): {short(str(error))}")
    if result.accepted:
        if result.retried:
            return decision._replace(reason=f"{decision.reason} (accepted on the one retry after a per-node "
                                            "InternalServerError)")
        return decision
    if result.repair_in_progress:
        return decision._replace(outcome=Outcome.DEFERRED, why=Why.HYPERPOD_REPAIRING,
                       reason=f"HyperPod reports a repair already running ({result.error_code}): "
                              f"{short(result.message or '')}")
    if result.error_code == INVALID_INSTANCE_STATUS:
        return _recheck_after_invalid_status(decision, deps, cluster, node_id, result.message or "")
    again = " (asked twice: once more after a pause, never again)" if result.retried else ""
    return decision._replace(outcome=Outcome.FAILED, page=Page.INCIDENT, why=None,
                   reason=f"{verb} was refused ({result.error_code}){again}: {short(result.message or '')}")


def _recheck_after_invalid_status(decision: NodeDecision, deps: Deps, cluster: str, node_id: str,
                                  message: str) -> NodeDecision:
    """InvalidInstanceStatus means "a state that does not allow" the action, not that a repair runs: the
    node's status (DescribeClusterNode) says which."""
    verb, said = decision.action.value, short(message)
    try:
        node = deps.hyperpod.describe_node(cluster, node_id)
    except (ClientError, BotoCoreError) as error:
        return decision._replace(outcome=Outcome.FAILED, page=Page.INCIDENT, why=None,
                       reason=f"{verb} was refused (InvalidInstanceStatus: {said}) and the node could not be "
                              f"re-checked (DescribeClusterNode: {error_code(error)}).")
    if node is None or node.gone:
        return decision._replace(outcome=Outcome.IGNORED, why=None,
                       reason=f"{verb} was refused (InvalidInstanceStatus) and the node is no longer in the cluster: "
                              "nothing to do.")
    if node.status in IN_REPAIR_STATUSES:
        return decision._replace(outcome=Outcome.DEFERRED, why=Why.HYPERPOD_REPAIRING,
                       reason=f"{verb} was refused (InvalidInstanceStatus) and the node is {node.status}: a repair "
                              "is already in progress.")
    return decision._replace(outcome=Outcome.FAILED, page=Page.INCIDENT, why=None,
                   reason=f"{verb} was refused (InvalidInstanceStatus: {said}) and the node is {node.status}, not "
                          "in repair: a human should look at it.")
