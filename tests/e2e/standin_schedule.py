"""A stand-in scheduled handler for harness specs: it keeps each event it is given with the clock's time,
logs one remediation record per run, and raises while ``fail`` says so."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

runs: list[tuple[datetime, dict]] = []
fail = False
logging.getLogger("medic").setLevel(logging.INFO)  # as Powertools' Logger does


def handler(event: dict, context: object) -> dict:
    now = datetime.now(UTC)
    runs.append((now, event))
    if fail:
        raise RuntimeError("stand-in failure")
    logging.getLogger("medic").info("remediation", extra={
        "incident": f"schedule:{now:%H:%M:%S}", "trigger": "reconcile", "event_id": str(event.get("id")),
        "action": "none", "outcome": "ignored"})
    return {"ran": len(runs)}
