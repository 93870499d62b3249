"""Specification: the emulated EventBridge follows EventBridge where Medic's safety depends on it: a replay from the
archive reaches the rules as EventBridge sends it (replay-name at the top level, the event's own time), and a
pattern over the "Event pattern size" quota is refused as AWS refuses it."""

from __future__ import annotations

import copy
import json

import pytest

from sim.cfn import SimError
from sim.replay import run
from sim.scenario import DEMO_CONFIG, SCENARIOS
from sim.synth import load_config
from tests.e2e.conftest import node_action_calls, outcomes, sample
from tests.e2e.template_fixture import NODE_HEALTH_PATTERN, template

REBOOT = "sagemaker:BatchRebootClusterNodes"


def test_zx_a_replay_of_the_morning_to_every_rule_makes_medic_act_on_nothing(replay):
    # Given a requeue request and a reboot-class fault acted on at 08:14-08:15, then, two hours later, the same
    # events replayed from the archive to every rule (StartReplay without FilterArns): new ids, old times
    result = replay(SCENARIOS / "zx-archive-replay-never-acts.jsonl")
    # Then the live events acted once each (the reboot once the agent reported the drain: issue 27) ...
    assert [(r["trigger"], r["action"], r["outcome"]) for r in result.records] == [
        ("operator", "requeue_job", "deferred"), ("operator", "requeue_job", "executed"),
        ("node_health", "reboot_node", "deferred"), ("node_repair", "drain_node", "executed"),
        ("node_health", "reboot_node", "executed"), ("node_repair", "resume_node", "executed")]
    # ... and the replays reached no handler: no second requeue, no escalation to a replace, no record, no page
    assert [c["argv"] for c in result.lines if c["kind"] == "slurm_command" and c["argv"][1] == "requeue"] == [
        ["scontrol", "requeue", "4211"]]
    assert node_action_calls(result) == {REBOOT: 1}
    assert all(r["timestamp"] < "2026-11-20T10" for r in result.records)
    assert result.pages == []


def test_a_replay_that_reaches_a_handler_anyway_is_rejected_there(tmp_path):
    # Given a rule written by hand without the replay exclusion (the stack's own rules have it)
    config = load_config(DEMO_CONFIG)
    stack = template(config)
    assert "replay-name" not in NODE_HEALTH_PATTERN
    replayed = {**sample("hyperpod-node-health-unhealthy"), "account": "123456789012",
                "id": "0f9e8d7c-6b5a-4938-8271-605f4e3d2c1b", "replay-name": "ops-investigation-20261120"}
    # When a replayed node health event reaches its handler
    result = run([json.dumps(replayed)], DEMO_CONFIG, template=stack)
    # Then the handler rejects it, naming the field, and no node is touched
    assert outcomes(result) == [("none", "rejected")]
    assert "replay-name" in result.records[0]["reason"]
    assert node_action_calls(result) == {}


def test_a_replayed_event_is_routed_with_its_replay_name(tmp_path):
    # The same event, live: the hand-written rule takes it (the replay's routing differs only by replay-name)
    config = load_config(DEMO_CONFIG)
    stack = template(config)
    stack["Resources"]["NodeRuleABC"]["Properties"]["EventPattern"] = {
        **NODE_HEALTH_PATTERN, "replay-name": [{"exists": False}]}
    live = {**sample("hyperpod-node-health-unhealthy"), "account": "123456789012"}
    replayed = {**live, "id": "0f9e8d7c-6b5a-4938-8271-605f4e3d2c1b", "replay-name": "ops-investigation-20261120"}
    result = run([json.dumps(replayed), json.dumps(live)], DEMO_CONFIG, template=stack)
    assert [r["event_id"] for r in result.records] == [live["id"]]


@pytest.mark.parametrize("resource", ["rule", "archive"])
def test_a_pattern_over_eventbridges_quota_is_refused_as_aws_refuses_it(resource):
    # Given a template whose rule or archive has a 2,049-character pattern (compact JSON, account resolved)
    config = load_config(DEMO_CONFIG)
    stack = template(config)
    pattern = copy.deepcopy(NODE_HEALTH_PATTERN)
    pattern["detail"] = {"ClusterName": ["x"]}
    pattern["detail"]["ClusterName"][0] = "x" * (2049 - len(json.dumps(pattern, separators=(",", ":"))) + 1)
    assert len(json.dumps(pattern, separators=(",", ":"))) == 2049
    if resource == "rule":
        stack["Resources"]["NodeRuleABC"]["Properties"]["EventPattern"] = pattern
    else:
        stack["Resources"]["ArchiveABC"] = {"Type": "AWS::Events::Archive", "Properties": {
            "SourceArn": "arn:aws:events:us-west-2:123456789012:event-bus/default", "EventPattern": pattern}}
    # Then the replay stops before any event, naming the resource and EventBridge's quota
    with pytest.raises(SimError, match=r'its EventPattern is 2,049 characters, over EventBridge\'s "Event pattern '
                                       r'size" quota of 2,048'):
        run([], DEMO_CONFIG, template=stack)


def test_a_pattern_of_exactly_the_quota_is_accepted():
    config = load_config(DEMO_CONFIG)
    stack = template(config)
    pattern = {**NODE_HEALTH_PATTERN, "detail": {"ClusterName": ["x"]}}
    pattern["detail"]["ClusterName"][0] = "x" * (2048 - len(json.dumps(pattern, separators=(",", ":"))) + 1)
    stack["Resources"]["NodeRuleABC"]["Properties"]["EventPattern"] = pattern
    assert run([], DEMO_CONFIG, template=stack).errors == []
