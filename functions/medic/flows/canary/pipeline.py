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
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, Literal

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from medic.adapters.aws import error_code
from medic.adapters.events import EventBus, EventNotPut
from medic.config_core import CANARY_DETAIL_TYPE, CANARY_SOURCE
from medic.core.models import MedicEvent
from medic.core.text import short, validation_problems
from medic.deps import Deps
from medic.ledger.canary import CanaryState, CanaryStore
from medic.obs import NAMESPACE, SERVICE, count, logger

CANARY_MESSAGE = "canary"


class CanaryDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stack: str = Field(min_length=1, max_length=128)
    ledger: str = Field(min_length=3, max_length=255, pattern=r"^[A-Za-z0-9_.-]+$")
    canary: str = Field(pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
    sent_at: datetime


class CanaryEvent(MedicEvent):
    source: Literal["medic.canary"]
    detail_type: Literal["Medic Canary"] = Field(alias="detail-type")
    detail: CanaryDetail


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
        _gauge("CanaryAgeSeconds", age.total_seconds())
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


def record_canary(raw: Any, deps: Deps) -> dict:
    """The canary rule's target: note the canary's arrival (the ledger), log it, measure its trip. Acts on nothing."""
    try:
        event = CanaryEvent.model_validate(raw, context=deps.edge())
    except ValidationError as error:
        logger.warning("canary rejected", extra={"problems": validation_problems(error)})
        count("CanaryRejected")
        return {"canary": None, "arrived": False}
    detail, now = event.detail, deps.now()
    if detail.ledger != deps.table.name or not CanaryStore(deps.table).arrived(detail.canary, now):
        # another stack's, an older one, or one Medic never sent: said, never counted as the pipeline working
        logger.warning("canary not Medic's latest", extra={"canary": detail.canary, "event_id": event.id})
        count("CanaryRejected")
        return {"canary": detail.canary, "arrived": False}
    latency = max((now - detail.sent_at).total_seconds(), 0.0)
    logger.info(CANARY_MESSAGE, extra={"canary": detail.canary, "event_id": event.id,
                                       "sent_at": detail.sent_at.isoformat(), "arrived_at": now.isoformat(),
                                       "latency_s": round(latency, 3)})
    _gauge("CanaryLatencySeconds", latency)
    return {"canary": detail.canary, "arrived": True, "latency_s": latency}


def _gauge(name: str, seconds: float) -> None:
    with single_metric(name=name, unit=MetricUnit.Seconds, value=seconds, namespace=NAMESPACE,
                       default_dimensions={"service": SERVICE}):
        pass
