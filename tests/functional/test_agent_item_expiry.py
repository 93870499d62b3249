"""Specification: every item an agent writes expires (issue 28 item 12). A compromised controller's role may write any
item under its cluster's `agent#` keys, with any `expires_at` or none; the results function, which the ledger's
stream hands every such write, gives each one DynamoDB's TTL will act on."""

from __future__ import annotations

from datetime import timedelta

import pytest

from medic.flows.agent.expiry import AGENT_ITEM_TTL
from tests.functional.conftest import CLUSTER
from tests.functional.slurm_world import SlurmWorld, streamed_slurm  # noqa: F401 - the `slurm` fixture
from tests.functional.test_agent_results import deliver

WEEK = int(AGENT_ITEM_TTL.total_seconds())


def forge(slurm: SlurmWorld, sk: str, pk: str | None = None, **attributes: dict) -> dict:
    """An item written with the agent's own role (its partition), as a compromised controller may write it."""
    item = {"pk": {"S": pk or f"agent#{CLUSTER}"}, "sk": {"S": sk}, "junk": {"S": "x" * 300}, **attributes}
    slurm.dynamodb.put_item(TableName="medic-ledger", Item=item)
    return item


def expiry(slurm: SlurmWorld, pk: str, sk: str) -> dict | None:
    return (slurm.item(pk, sk) or {}).get("expires_at")


@pytest.mark.parametrize("attributes", [
    {},  # no TTL attribute: DynamoDB's TTL ignores the item
    {"expires_at": {"S": "1796428800"}},  # a string: ignored too
    {"expires_at": {"N": "32503680000"}},  # the year 3000
    {"expires_at": {"N": "1000000000"}},  # 2001: more than five years past, never deleted
], ids=["none", "string", "year-3000", "year-2001"])
def test_an_agent_item_without_a_bounded_expiry_gets_one_from_medic(slurm, attributes):
    # Given an item under the agent's own keys whose expiry DynamoDB would never act on
    forge(slurm, "junk#1", **attributes)
    written = int(slurm.medic.clock[0].timestamp())
    # When its write reaches the results function
    response, records = deliver(slurm, slurm.stream_event())
    # Then Medic gives it one: when DynamoDB wrote it plus a week; nothing is recorded or paged
    assert response == {"batchItemFailures": []} and records == []
    assert expiry(slurm, f"agent#{CLUSTER}", "junk#1") == {"N": str(written + WEEK)}
    assert slurm.medic.pages() == []


def test_a_forged_command_partition_item_expires_too(slurm):
    # Given a made-up command's claim with no expiry (a compromised agent can write any id under its cluster)
    pk = f"agent#{CLUSTER}#command#0b9e4d2c-5a8f-4e71-b3c6-000000000001"
    forge(slurm, "claim", pk=pk)
    deliver(slurm, slurm.stream_event())
    assert expiry(slurm, pk, "claim") == {"N": str(int(slurm.medic.clock[0].timestamp()) + WEEK)}


def test_an_honest_agents_items_are_left_as_written(slurm):
    # Given the real agent's heartbeat (a day) and a claim and result of a command it ran (a week)
    slurm.heartbeat()
    slurm.put_result("6f1c2a7e-9b3d-4c1a-8e5f-2d7b9a0c4e13", "executed", "Requeued.")
    heartbeat = expiry(slurm, f"agent#{CLUSTER}", "heartbeat")
    result = expiry(slurm, f"agent#{CLUSTER}#command#6f1c2a7e-9b3d-4c1a-8e5f-2d7b9a0c4e13", "result")
    updates = []
    client = slurm.medic.deps.table.client
    client.meta.events.register("before-call.dynamodb.UpdateItem", lambda **kwargs: updates.append(kwargs))
    # When their writes reach the function
    deliver(slurm, slurm.stream_event())
    # Then Medic writes nothing under `agent#`
    assert updates == []
    assert expiry(slurm, f"agent#{CLUSTER}", "heartbeat") == heartbeat
    assert expiry(slurm, f"agent#{CLUSTER}#command#6f1c2a7e-9b3d-4c1a-8e5f-2d7b9a0c4e13", "result") == result


def test_an_item_deleted_before_its_write_arrives_is_not_created_again(slurm):
    # Given an item the agent wrote without an expiry and deleted again before the stream delivered its write
    forge(slurm, "junk#2")
    event = slurm.stream_event()
    slurm.dynamodb.delete_item(TableName="medic-ledger", Key={"pk": {"S": f"agent#{CLUSTER}"}, "sk": {"S": "junk#2"}})
    # When the write arrives
    response, _ = deliver(slurm, event)
    # Then Medic does not bring it back
    assert response == {"batchItemFailures": []}
    assert slurm.item(f"agent#{CLUSTER}", "junk#2") is None


def test_medics_own_expiry_write_is_taken_as_bounded_when_the_stream_delivers_it(slurm):
    # Given Medic bounded an item's expiry (a MODIFY on the stream, with the agent's other attributes)
    forge(slurm, "junk#3")
    deliver(slurm, slurm.stream_event())
    slurm.medic.clock[0] += timedelta(seconds=1)
    # When that write reaches the function in turn
    updates = []
    slurm.medic.deps.table.client.meta.events.register("before-call.dynamodb.UpdateItem",
                                                      lambda **kwargs: updates.append(kwargs))
    deliver(slurm, slurm.stream_event())
    # Then it is within the bound: no second write, no loop
    assert updates == []
