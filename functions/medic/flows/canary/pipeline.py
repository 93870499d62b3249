"""The canary (issue 29, item 6): proof that an event still travels EventBridge → rule → handler → ledger, end to end.

Each reconciler run (every 5 minutes) first publishes how long ago the last canary arrived, `Medic` `CanaryAgeSeconds`
(dimension service; since the first canary was sent when none ever arrived), then puts the next one on the default
bus: source `medic.canary`, detail-type `Medic Canary`, detail `{"stack": <stack name>, "ledger": <table>, "canary":
<id>, "sent_at": <time>}` (a customer event's source may be anything that does not begin with `aws.`: EventBridge's
event structure, `source`). The stack's canary rule takes its own stack's canaries (detail.stack) to the node
remediation function, the one HyperPod's node events reach, which notes the arrival in the ledger (`canary#pipeline`,
one conditional write: only the canary Medic sent last counts, so an event anyone else puts cannot make a broken
pipeline look alive) and logs one `"message": "canary"` line with the delivery time, `CanaryLatencySeconds`. It acts
on nothing and pages nobody; the alarm `CanaryLate` pages when `CanaryAgeSeconds` passes CANARY_LATE (three runs
without a canary: a reconciler that cannot put events, a rule that is gone or disabled, a handler that fails, a ledger
it cannot write).

The arrival (its event model, the ledger note) is flows/canary/arrival.py: the reconciler, which only sends, never
builds the model.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from botocore.exceptions import BotoCoreError, ClientError

from medic.adapters.aws import error_code
from medic.adapters.events import EventBus, EventNotPut
from medic.config_core import CANARY_DETAIL_TYPE, CANARY_SOURCE
from medic.core.text import short
from medic.deps import Deps
from medic.ledger.canary import CanaryState, CanaryStore
from medic.obs import NAMESPACE, SERVICE, count, logger


def canary_age(state: CanaryState, now: datetime) -> timedelta:
    """How long the pipeline has gone without a canary arriving: since the last arrival, else since the first canary
    was sent (one that never arrived), else nothing yet (no canary sent: the first run)."""
    since = state.arrived_at or state.first_sent_at
    return max(now - since, timedelta(0)) if since else timedelta(0)


def send_canary(deps: Deps, bus: EventBus | None = None) -> dict:
    """The reconciler's part, once per run: the age gauge, then the next canary. Errors are logged and counted, never
    raised (the run's other sweeps go on; the age grows and the alarm pages)."""
    store, now = CanaryStore(deps.table), deps.now()
    try:
        age = canary_age(store.load(), now)
        seconds_gauge("CanaryAgeSeconds", age.total_seconds())
        canary_id = str(uuid.uuid4())
        store.sent(canary_id, now)  # first: a canary that arrives before this write would not count
        (bus or EventBus()).put(CANARY_SOURCE, CANARY_DETAIL_TYPE,
                                {"stack": deps.stack, "ledger": deps.table.name, "canary": canary_id,
                                 "sent_at": now.isoformat()}, now)
    except (ClientError, BotoCoreError, EventNotPut) as error:
        code = error_code(error) if isinstance(error, (ClientError, BotoCoreError)) else short(str(error), 200)
        logger.warning("canary not sent", extra={"error_code": code})
        count("CanaryErrors")
        return {"sent": False, "error": code}
    return {"sent": True, "canary": canary_id, "age_s": int(age.total_seconds())}


def seconds_gauge(name: str, seconds: float) -> None:
    with single_metric(name=name, unit=MetricUnit.Seconds, value=seconds, namespace=NAMESPACE,
                       default_dimensions={"service": SERVICE}):
        pass
