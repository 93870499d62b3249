"""Specification: Medic never silently blind (issue 29, items 1, 2, 6), end to end through the synthesized stack's
rules, schedules and alarms: a silent agent pages once, a cluster id that is not the cluster's pages once a day, a
canary that stops coming back pages once."""

from __future__ import annotations

from sim.scenario import SCENARIOS


def test_zzj_an_agent_that_goes_silent_pages_once_and_once_more_when_it_is_back(replay):
    # Given pretrain-slurm's agent reporting from 08:00 to 08:05, silent until 08:55
    result = replay(SCENARIOS / "zzj-agent-goes-silent.jsonl")
    # Then the 08:25 sweep records it silent and pages; no later sweep repeats it; the 09:00 sweep records its return
    assert [(r["timestamp"][11:16], r["fault"], r["outcome"], r["paged"]) for r in result.records] == [
        ("08:25", "agent_silent", "failed", True), ("09:00", "agent_back", "ignored", True)]
    assert result.records[0]["incident"] == "agent:pretrain-slurm:silent"
    assert "by DynamoDB's clock" in result.records[0]["reason"]
    assert [page["subject"] for page in result.pages] == [
        "[Medic] pretrain-slurm: its agent is silent", "[Medic] RESOLVED pretrain-slurm: its agent reports again"]
    assert 'host "ip-10-1-0-10"' in result.pages[0]["message"]


def test_zzk_a_cluster_id_that_is_not_the_clusters_pages_once_a_day_and_every_event_stays_rejected(replay):
    # Given pretrain-slurm's node events naming cluster id q8w4e6r2t0yz in the stack's account and region
    result = replay(SCENARIOS / "zzk-cluster-id-mismatch.jsonl")
    # Then each is rejected, nothing is called, and one page names the id to set; the one after midnight is held
    assert {(r["outcome"], r["action"]) for r in result.records} == {("rejected", "none")}
    assert [r["paged"] for r in result.records] == [True, False, False, False]
    assert not any(call.startswith("sagemaker:Batch") for call in result.calls)
    [page] = result.pages
    assert page["subject"] == "[Medic] pretrain-slurm: clusters[].id in medic.yaml is not the cluster's id"
    assert "Set id: q8w4e6r2t0yz for cluster pretrain-slurm" in page["message"]
    assert "until 2026-11-21 23:50 UTC" in page["message"]


def test_zzl_a_canary_that_stops_coming_back_pages_once_through_the_topic_and_clears(replay):
    # Given the reconciler's PutEvents refused from 08:05 to 08:20 (four canaries never put)
    result = replay(SCENARIOS / "zzl-canary-late.jsonl")
    # Then no record is written; the CanaryLate alarm goes ALARM at 08:26 and OK at 08:31, each one notification
    assert result.records == []
    late = [(a["timestamp"][11:16], a["from"], a["to"]) for a in result.alarms if "CanaryLate" in a["alarm"]]
    assert late == [("08:26", "OK", "ALARM"), ("08:31", "ALARM", "OK")]
    assert [page["subject"].split(":")[0] for page in result.pages] == ["ALARM", "OK"]
    # And the canaries that were put came back through their rule to the node remediation function
    delivered = [event for event in result.put_events if event["source"] == "medic.canary"]
    assert len(delivered) == 3 and all(event["functions"] for event in delivered)


def test_every_reconciler_run_sends_a_canary_that_its_rule_delivers(replay):
    # Given any replay long enough for the reconciler to run (zzj: 13 runs)
    result = replay(SCENARIOS / "zzj-agent-goes-silent.jsonl")
    canaries = [event for event in result.put_events if event["source"] == "medic.canary"]
    # Then each run's canary reached the node remediation function, and the CanaryLate alarm never fired
    assert len(canaries) == sum(count for rule, count in result.schedule_runs.items() if "Reconciler" in rule) == 13
    assert all(any("NodeRemediation" in name for name in event["functions"]) for event in canaries)
    assert not [a for a in result.alarms if "CanaryLate" in a["alarm"]]
