"""Every item an agent writes expires (issue 28 item 12): Medic bounds what the agent's own `expires_at` says.

An agent writes under `agent#<its cluster>` with its instance role (or Pod Identity role): IAM's
dynamodb:LeadingKeys scopes the partition key, but no IAM condition can require an attribute or bound its value, so
a compromised controller could write items that never expire (no `expires_at`, a string, a date in 3000 or more
than five years past: DynamoDB's TTL process ignores each of these, "Using DynamoDB Time to Live (TTL)", DynamoDB
developer guide) and grow the ledger without bound. The ledger's stream hands the results function every item
written under `agent#` (infra/components/agent_channel.py); each one whose expiry is not within AGENT_ITEM_TTL of
when DynamoDB wrote it (the stream record's ApproximateCreationDateTime, never the agent's clock) gets one from
Medic: that time plus AGENT_ITEM_TTL. An honest agent's items are never touched (agent/medic_agent/ledger.py: 7
days for claims and results, 1 day for heartbeats and node reports). Expiry is then DynamoDB's, "typically within
two days" (UpdateTimeToLive, DynamoDB API reference); nothing Medic decides reads an agent item without checking its
own times (a heartbeat's age, a command's issue). Cost: besides the results and primary heartbeats it recorded
before, the function now also sees each claim (one per command), each standby head node's heartbeat and each EKS
node report (about one a minute each): a read of the record, no AWS call unless the expiry needs bounding.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

from medic.deps import Deps
from medic.ledger.agents import AgentStore
from medic.obs import logger

if TYPE_CHECKING:  # the stream model costs cold-start time; only the stream handler needs it
    from medic.flows.agent.stream import StreamRecord

AGENT_ITEM_TTL = timedelta(days=7)  # the longest an agent keeps an item (agent/medic_agent/ledger.py RESULT_TTL)
# An agent's clock may run ahead of DynamoDB's (its expires_at is its now + TTL) or its item be written a little
# before the stream's stamp: an expiry within this of the bounds is the agent's to keep.
CLOCK_SLACK = timedelta(hours=1)


def unbounded_expiry(image: dict, written_at: datetime) -> bool:
    """True when the item's `expires_at` (as the stream's NewImage deserializes it) would not expire the item
    within AGENT_ITEM_TTL of ``written_at``: absent, not a number, later than that, or earlier than it by more
    than a day (an expiry five years past is never acted on by DynamoDB)."""
    value = image.get("expires_at")
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        return True
    try:
        moment = float(value)
    except (ValueError, OverflowError):
        return True
    earliest = (written_at - timedelta(days=1)).timestamp()
    latest = (written_at + AGENT_ITEM_TTL + CLOCK_SLACK).timestamp()
    return not earliest <= moment <= latest


def bound_agent_item(record: StreamRecord, deps: Deps) -> bool:
    """Give an agent-written item an expiry when its own does not bound it; True when Medic set one. Only items an
    agent can write (pk `agent#...`), only as they are written (INSERT, MODIFY). AWS errors propagate (the stream
    retries the record)."""
    keys = record.dynamodb.Keys or {}
    pk, sk = keys.get("pk"), keys.get("sk")
    if record.eventName not in ("INSERT", "MODIFY") or not isinstance(pk, str) or not isinstance(sk, str) \
            or not pk.startswith("agent#"):
        return False
    written_at = record.dynamodb.ApproximateCreationDateTime or deps.now()
    if not unbounded_expiry(record.dynamodb.NewImage or {}, written_at):
        return False
    expires = written_at + AGENT_ITEM_TTL
    bounded = AgentStore(deps.table).bound_agent_item(pk, sk, expires)
    logger.warning("agent item without a bounded expiry: Medic set one",
                   extra={"pk": pk[:200], "sk": sk[:200], "expires_at": expires.isoformat(), "set": bounded})
    return bounded
