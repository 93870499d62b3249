"""The canary's arrival at the node remediation function (flows/canary/pipeline.py says what the canary proves): the
event checked, its arrival noted in the ledger when it is the canary Medic sent last, its trip measured."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from medic.core.models import MedicEvent
from medic.core.text import validation_problems
from medic.deps import Deps
from medic.flows.canary.pipeline import seconds_gauge
from medic.ledger.canary import CanaryStore
from medic.obs import count, logger

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
    seconds_gauge("CanaryLatencySeconds", latency)
    return {"canary": detail.canary, "arrived": True, "latency_s": latency}
