"""The Slurm agents' heartbeats, timed by Medic's side: from the ledger's stream (handlers/agent_results.py).

An agent writes `agent#<cluster>/heartbeat` every minute with its own clock's `at`. Medic does not trust that
clock (it may run ahead, and a dead agent's last `at` may lie in the future): it records when DynamoDB wrote
the item, the stream record's `ApproximateCreationDateTime` (DynamoDB Streams API reference, StreamRecord:
"the approximate date and time when the stream record was created, in UNIX epoch time format and rounded down
to the closest second"), under a key no agent may write (`agentseen#<cluster>/heartbeat`). The requeue path
judges the agent alive from that item alone. Cost: one stream record to this function per heartbeat, so one
invocation per cluster per minute at most (about 44,000 a month per cluster). On a Slurm cluster each heartbeat also
checks (one GetItem, and a BatchGetItem of the cluster's recent node actions when there are any) for a node call
that waited for the agent's drain past its deadline, and makes it (flows/node/drain_first); and (one Query of the
cluster's repairs, and a ListClusterNodes while a drained repair may be back) resumes a node Medic drained for its
repair as soon as HyperPod reports it Running (flows/agent/slurm_node.resume_repaired_nodes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from medic.deps import Deps
from medic.flows.agent.commands import parse_agent_heartbeat_pk
from medic.ledger.agents import HEARTBEAT_SAID, AgentStore
from medic.obs import logger

if TYPE_CHECKING:  # the stream model costs cold-start time; only the stream handler needs it
    from medic.flows.agent.stream import StreamRecord


def heartbeat_cluster(record: StreamRecord) -> str | None:
    """The cluster whose agent wrote this heartbeat; None when the stream record is not an agent heartbeat."""
    keys = record.dynamodb.Keys
    if record.eventName not in ("INSERT", "MODIFY") or keys.get("sk") != "heartbeat":
        return None
    return parse_agent_heartbeat_pk(keys.get("pk"))


def record_heartbeat(record: StreamRecord, cluster: str, deps: Deps) -> None:
    """Medic's own note that the cluster's agent reported, timed by DynamoDB. No remediation record: a
    heartbeat is not a decision. AWS errors propagate (the stream retries the record)."""
    seen_at = record.dynamodb.ApproximateCreationDateTime or deps.now()
    image = record.dynamodb.NewImage or {}
    reported = image.get("at")
    said = {name: image[name] for name in HEARTBEAT_SAID if isinstance(image.get(name), str)}  # the agent's word
    AgentStore(deps.table).record_heartbeat_seen(cluster, seen_at, reported if isinstance(reported, str) else "",
                                                 said)
    logger.debug("agent heartbeat seen", extra={"cluster": cluster, "seen_at": seen_at.isoformat()})
    configured = deps.config.cluster(cluster)
    if configured is not None and configured.orchestrator == "slurm":
        # A node call waiting for this agent's drain past its deadline goes ahead now (each minute while the agent
        # heartbeats; the reconciler's sweep is the backstop when it stops): flows/node/drain_first.
        from medic.flows.agent.slurm_node import resume_repaired_nodes
        from medic.flows.node.drain_first import call_overdue_drains

        call_overdue_drains(deps, configured)
        # A node Medic drained for a repair and HyperPod reports Running again is resumed now, not at the next sweep.
        resume_repaired_nodes(deps, configured, f"heartbeat:{cluster}:{int(seen_at.timestamp())}")
