"""The reconciler's part of the training-job flow (issue 32): each restart whose capacity backoff is over is made now,
by the same path as the event's (budget, checkpoint, mode, guardrails), once (the ledger item is taken conditionally). A
restart whose clone fails for capacity again waits a longer backoff, from its own failure event.

The reconciler runs this every 5 minutes; the training flow's restart path (its event models, the SageMaker adapter,
the job sections of the config) is imported only when a restart is due, not at the reconciler's cold start.
"""

from __future__ import annotations

from medic.deps import Deps
from medic.ledger.backoffs import BackoffStore


def restart_due(deps: Deps, run_id: str) -> list[dict]:
    store, now, records = BackoffStore(deps.table), deps.now(), []
    for due in store.waiting():
        if due.due_at > now or not store.take(due.job):
            continue
        from medic.flows.jobs.restart import restart_after_backoff  # a due restart: rare, the flow is loaded for it

        records.append(restart_after_backoff(due, deps, run_id))
    return records
