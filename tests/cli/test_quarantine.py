"""``medic status`` lists the nodes Medic quarantined per cluster (since when, why); ``medic release NODE --cluster
C`` sends one "Medic Release Node" request naming the caller, and nothing for an unknown cluster or node, or a node
released already (issue 32, item 3)."""

from __future__ import annotations

import json
from datetime import timedelta

import boto3
import pytest

from medic.ledger.quarantine import Quarantine, QuarantineStore
from tests.cli.conftest import CALLER, CLUSTER, NOW, REGION, Deployed

NODE = "ip-10-1-37-73"
POSITION = "node-75e2a56cdb953f843b2a"


REQUESTS = "operator-requests"  # where the test's rule puts what `medic release` sends, as the requeue rule takes it


@pytest.fixture
def quarantined(deployed: Deployed) -> Deployed:
    """Medic quarantined a node of pretrain-slurm two hours ago (as the node flow holds it); operator requests on the
    default bus land in a queue, as the requeue function's rule would take them."""
    assert QuarantineStore(deployed.ledger()).hold(Quarantine(
        cluster=CLUSTER, position=POSITION, node_id="i-0ec750d3a09b8e4de", node_name=NODE,
        since=NOW - timedelta(hours=2), why="Repaired 4 times in 7 days (repair_loop_count 3): gpu_reboot ..."))
    sqs, events = boto3.client("sqs", region_name=REGION), boto3.client("events", region_name=REGION)
    url = sqs.create_queue(QueueName=REQUESTS)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="requests", EventPattern=json.dumps({"source": ["medic.operator"]}))
    events.put_targets(Rule="requests", Targets=[{"Id": "q", "Arn": arn}])
    return deployed


def sent(deployed: Deployed) -> list[dict]:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.get_queue_url(QueueName=REQUESTS)["QueueUrl"]
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(message["Body"]) for message in messages]


def test_status_lists_the_quarantined_node_of_each_cluster_with_since_and_why(quarantined: Deployed):
    result = quarantined.cli("status", "--config", str(quarantined.config_file))
    assert result.code == 0, result.err
    section = result.out.split("Quarantined nodes")[1].split("\n\n")[0]
    assert f"{CLUSTER}  {NODE}  (position {POSITION}, instance i-0ec750d3a09b8e4de) since " \
           f"{NOW - timedelta(hours=2):%Y-%m-%d %H:%M} UTC: Repaired 4 times" in section
    as_json = json.loads(quarantined.cli("status", "--json", "--config", str(quarantined.config_file)).out)
    assert [(one["cluster"], one["node"], one["position"]) for one in as_json["quarantined"]] == [
        (CLUSTER, NODE, POSITION)]


def test_release_sends_one_request_naming_the_caller(quarantined: Deployed):
    result = quarantined.cli("release", NODE, "--cluster", CLUSTER, "--reason", "PSU swapped",
                             "--config", str(quarantined.config_file))
    assert result.code == 0, result.err
    assert f"Release of {NODE} ({POSITION}) on {CLUSTER}" in result.out
    [event] = sent(quarantined)
    assert (event["source"], event["detail-type"]) == ("medic.operator", "Medic Release Node")
    assert event["detail"] == {"cluster": CLUSTER, "node": NODE, "requested_by": CALLER, "reason": "PSU swapped"}


def test_release_by_instance_id_or_position_names_the_node(quarantined: Deployed):
    for name in ("i-0ec750d3a09b8e4de", POSITION):
        assert quarantined.cli("release", name, "--cluster", CLUSTER).code == 0
    assert [event["detail"]["node"] for event in sent(quarantined)] == [NODE, NODE]


def test_an_unknown_node_or_cluster_is_an_error_and_nothing_is_sent(quarantined: Deployed):
    unknown = quarantined.cli("release", "ip-10-1-99-99", "--cluster", CLUSTER, "--config",
                              str(quarantined.config_file))
    assert unknown.code == 1
    assert "unknown node 'ip-10-1-99-99': Medic has not quarantined it on pretrain-slurm (quarantined there: " \
           f"{NODE} ({POSITION}))" in unknown.err
    cluster = quarantined.cli("release", NODE, "--cluster", "pretrain-slrum", "--config", str(quarantined.config_file))
    assert cluster.code == 1 and "unknown cluster 'pretrain-slrum'" in cluster.err
    assert sent(quarantined) == []


def test_a_node_released_already_is_not_quarantined_and_nothing_is_sent(quarantined: Deployed):
    # Given Medic released it (the request handler's conditional update)
    assert QuarantineStore(quarantined.ledger()).release(CLUSTER, POSITION, CALLER, "cmd-1", NOW - timedelta(minutes=5))
    result = quarantined.cli("release", NODE, "--cluster", CLUSTER)
    assert result.code == 0
    assert f"{NODE} ({POSITION}) on {CLUSTER} is not quarantined: released" in result.out
    assert sent(quarantined) == []
    status = quarantined.cli("status", "--config", str(quarantined.config_file))
    assert status.out.split("Quarantined nodes")[1].split("\n\n")[0].rstrip().endswith("none")
