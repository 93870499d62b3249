"""Can a replacement be served? (issue 32) Before a replace Medic looks at what would serve it: the instance group's
training plan (DescribeCluster's InstanceGroups[].TrainingPlanArn, then DescribeTrainingPlan's
AvailableInstanceCount), else a replacement in the same group that failed for capacity within the last hour (HyperPod's
cluster event, kept in ledger.capacity). The answer always says which signal it used: the record carries it.
The policy (flows/node/policy.decide_node) decides what to do with it: a reboot when the fault's catalog allows one,
else no call, one page, and a retry at a later sweep once capacity is back (sweep_capacity)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import NamedTuple

from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.core.text import quoted
from medic.deps import Deps
from medic.ledger.capacity import CapacityFailure, CapacityStore
from medic.ledger.table import Table

# "a replacement of the same group that failed for capacity within the last hour" (issue 32)
CAPACITY_FAILURE_WINDOW = timedelta(hours=1)


class Capacity(NamedTuple):
    short: bool  # a replace would fail for capacity
    said: str  # the signal used, in words


def replacement_capacity(deps: Deps, table: Table, cluster: str, group: str,
                         last_failure: Callable[[], CapacityFailure | None] | None = None) -> Capacity:
    """What would serve a replacement in the group. An unreadable signal is said, and reads as not short (the
    replace is tried: HyperPod's own answer then tells). ``last_failure``: the group's last capacity failure from an
    item already read (the node path's BatchGetItem); by default it is read (GetItem)."""
    try:
        plan = deps.hyperpod.training_plan_of(cluster, group)
    except (ClientError, BotoCoreError) as error:
        return Capacity(False, f"capacity unknown: DescribeCluster failed ({error_code(error)})")
    if plan:
        try:
            name, status, available = deps.hyperpod.training_plan_capacity(plan)
        except (ClientError, BotoCoreError) as error:
            return Capacity(False, f"instance group {group} runs on training plan {plan}, unreadable "
                                   f"(DescribeTrainingPlan: {error_code(error)})")
        if available == 0:
            return Capacity(True, f"instance group {group} runs on training plan {name} ({status}), which has no "
                                  "available instance (DescribeTrainingPlan AvailableInstanceCount 0)")
        shown = "an unknown number of" if available is None else str(available)
        return Capacity(False, f"training plan {name} ({status}) has {shown} available instance(s)")
    failure = last_failure() if last_failure is not None else CapacityStore(table).last_failure(cluster, group)
    now = deps.now()
    if failure is not None and now - failure.at <= CAPACITY_FAILURE_WINDOW:
        return Capacity(True, f"a replacement in instance group {group} failed for capacity at "
                              f"{failure.at:%H:%M} UTC (HyperPod: {quoted(failure.said, 200)})")
    return Capacity(False, f"no training plan on instance group {group} and no capacity failure in it in the last "
                           "hour")
