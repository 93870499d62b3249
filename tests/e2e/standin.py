"""A stand-in Lambda handler for harness specs: it writes to stdout, logs one remediation record
through the ``medic`` logger, and fails while ``detail.fail_times`` says so."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

calls: list[datetime] = []
logging.getLogger("medic").setLevel(logging.INFO)  # as Powertools' Logger does


def handler(event: dict, context: object) -> dict:
    calls.append(datetime.now(UTC))
    print('{"_aws": "an EMF metric line the harness must keep off its stdout"}')
    if len(calls) <= event["detail"].get("fail_times", 0):
        raise RuntimeError("stand-in failure")
    record = {"incident": f"node:{event['detail']['ClusterName']}:x", "trigger": "node_health",
              "event_id": event["id"], "outcome": "executed", "attempt": len(calls),
              "function": getattr(context, "function_name", None)}
    logging.getLogger("medic").info("remediation", extra=record)
    logging.getLogger("medic").info("not a record")
    return record
