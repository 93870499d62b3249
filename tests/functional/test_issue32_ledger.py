"""Specification: the ledger items of issue 32 act once (moto's DynamoDB): a followed HyperPod repair ends once, a
repair is counted once in its position's history and a loop pages once per window, a held replace and a backoff's
restart are taken once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from medic.ledger.backoffs import BackoffStore, DueRestart
from medic.ledger.capacity import CapacityStore, CapacityWait
from medic.ledger.follows import FollowedRepair, FollowStore
from medic.ledger.loops import LoopStore, Repair
from medic.ledger.table import Table
from tests.functional.conftest import TABLE

NOW = datetime(2026, 11, 20, 8, 14, 5, tzinfo=UTC)
WEEK = timedelta(days=7)


def table(aws) -> Table:
    aws.deploy("act")
    return Table(TABLE, aws.dynamodb)


def repair(incident: str, started: datetime) -> Repair:
    return Repair(incident=incident, fault="gpu_reboot", action="reboot", by="hyperpod", ended_at=started.isoformat(),
                  minutes=15, node_id=incident.rsplit(":", 1)[-1], started_at=started.isoformat())


def test_a_followed_repair_starts_with_the_first_fault_and_ends_once(aws):
    store = FollowStore(table(aws))
    first = FollowedRepair(cluster="c", position="node-7", incident="node:c:i-1", node_id="i-1", fault="gpu_fatal",
                           fault_at=NOW, detected_at=NOW, logical_id="node-7")
    assert store.follow(first)
    assert not store.follow(first._replace(fault="gpu_reboot"))  # the first fault stays
    # a replacement's new instance finds it by the position
    assert store.find("c", "i-2", "node-7").fault == "gpu_fatal"
    store.repair_seen("c", "node-7", NOW + timedelta(minutes=5))
    store.repair_seen("c", "node-7", NOW + timedelta(minutes=10))  # the first sighting is kept
    assert store.followed("c")[0].repair_seen_at == NOW + timedelta(minutes=5)
    assert store.end("c", "node-7") and not store.end("c", "node-7")


def test_a_repair_counts_once_and_a_loop_pages_once_per_window(aws):
    store = LoopStore(table(aws))
    one, two = repair("node:c:i-1", NOW), repair("node:c:i-1", NOW + timedelta(hours=1))  # same instance, twice
    assert len(store.add("c", "node-7", one, NOW, WEEK).repairs) == 1
    assert store.add("c", "node-7", one, NOW, WEEK) is None  # noted already (another path saw the same end)
    assert len(store.add("c", "node-7", two, NOW + timedelta(hours=1), WEEK).repairs) == 2
    # a repair older than the window drops out
    later = NOW + timedelta(days=7, minutes=30)
    assert [r.started_at for r in store.add("c", "node-7", repair("node:c:i-2", later), later, WEEK).repairs] == [
        two.started_at, later.isoformat()]
    assert store.claim_page("c", "node-7", NOW, WEEK)
    assert not store.claim_page("c", "node-7", NOW + timedelta(days=1), WEEK)
    assert store.claim_page("c", "node-7", NOW + timedelta(days=8), WEEK)  # a new window


def test_a_held_replace_and_a_due_restart_are_taken_once(aws):
    ledger = table(aws)
    capacity = CapacityStore(ledger)
    assert capacity.wait("c", CapacityWait("i-1", "gpu_fatal", "HMA ...", NOW, "plan p5: none available"))
    assert not capacity.wait("c", CapacityWait("i-1", "gpu_fatal", "HMA ...", NOW, "again"))
    capacity.replacement_failed("c", "workers", NOW, "InsufficientInstanceCapacity")
    assert capacity.last_failure("c", "workers").said == "InsufficientInstanceCapacity"
    assert [wait.node_id for wait in capacity.waits("c")] == ["i-1"]  # the failure item is not a wait
    assert capacity.end_wait("c", "i-1") and not capacity.end_wait("c", "i-1")
    backoffs = BackoffStore(ledger)
    backoffs.wait(DueRestart(job="ft-x", incident="job:ft-x", failure_reason="CapacityError: ...",
                             due_at=NOW + timedelta(minutes=5), detected_at=NOW, fault_at=NOW))
    assert backoffs.waiting()[0].due_at == NOW + timedelta(minutes=5)
    assert backoffs.take("ft-x") and not backoffs.take("ft-x")
