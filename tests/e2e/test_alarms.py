"""Specification: Medic's alarms end to end — the synthesized alarms evaluated by the replay on what the probe
and the handlers really published (no alarm event written by hand, except AWS's documented sample in (p)),
each state change through the synthesized rule to the alarm handler, the requeue through the Slurm agent,
the proof-of-recovery schedule, and the health alarms paging through the topic."""

from __future__ import annotations

import copy
import json

import pytest

from sim.cfn import SimError
from sim.replay import run
from sim.scenario import DEMO_CONFIG, SCENARIOS, read_scenario
from sim.scenarios.generate import T_ALARM, alarm
from sim.synth import stack_template
from tests.e2e.conftest import outcomes

SEND = "sqs:SendMessage"
INCIDENT = "job:slurm:pretrain-slurm:llama3-70b"
REQUEUED = [("requeue_job", "deferred"), ("requeue_job", "executed")]
AGENT_RAN = [["squeue", "--noheader", "--states=RUNNING", "--format=%i|%j", "--name=llama3-70b"],
             ["scontrol", "requeue", "4211"]]
STALL = "medic-stall-llama3-70b"


def recovery_runs(result) -> int:
    return sum(count for rule, count in result.schedule_runs.items() if "RecoverySchedule" in rule)


def transitions(result) -> list[tuple[str, str, str, str]]:
    return [(line["alarm"], line["from"], line["to"], line["timestamp"][11:19]) for line in result.alarms]


def no_hand_written_alarm_event(path) -> bool:
    return all("CloudWatch Alarm State Change" not in line for line in read_scenario(path).lines)


def test_m_a_probe_gone_silent_fires_the_stall_alarm_medic_requeues_and_the_resumed_probe_turns_it_ok(replay):
    # Given llama3-70b training (40 steps a minute, 03:00-03:05), then its probe silent; no alarm event in the file
    path = SCENARIOS / "m-stall-recovered.jsonl"
    assert no_hand_written_alarm_event(path)
    result = replay(path)
    # Then the stall alarm (Heartbeat Sum < 1 for 10 of 10 minutes, missing = breaching) enters ALARM at 03:18:
    # the 03:05 minute closes at 03:06; its healthy datapoint stays in the 12-minute evaluation range (N + 2)
    # until 03:18, so the alarm fires stall_minutes + 2 minutes after the last healthy minute closed
    assert transitions(result) == [(STALL, "OK", "ALARM", "03:18:00"), (STALL, "ALARM", "OK", "03:25:00")]
    # ... Medic requeues the job through the agent, the 03:25 check sees the resumed steps, and OK closes, quietly
    assert outcomes(result) == [*REQUEUED, ("none", "ignored"), ("none", "ignored")]
    assert [run["argv"] for run in result.slurm_commands] == AGENT_RAN and result.calls[SEND] == 1
    deferred, executed, recovered, closed = result.records
    assert {r["incident"] for r in result.records} == {INCIDENT}
    assert (deferred["trigger"], deferred["fault"], deferred["timestamp"][11:19]) == ("alarm", "stalled", "03:18:00")
    assert result.alarms[0]["reason"] == (  # AWS's own wording
        "Threshold Crossed: no datapoints were received for 10 periods and 10 missing datapoints were treated as "
        "[Breaching].")
    assert (recovered["fault"], recovered["trigger"], recovered["timestamp"][11:19]) == (
        "recovered", "reconcile", "03:25:00")
    assert "incident closed" in closed["reason"] and closed["timestamp"][11:19] == "03:25:00"
    assert result.pages == [] and not any(r["paged"] for r in result.records)
    # ... and one incident line: the last heartbeat 03:05, the alarm and requeue 03:18, the first step after the
    # restart 03:24, the recovery check 03:25; the 240 steps since the checkpoint (1440 - 1200) at 40 a minute
    [incident] = result.incidents
    assert (incident["incident"], incident["incident_kind"], incident["fault"]) == (INCIDENT, "stall", "stalled")
    assert (incident["fault_at"], incident["detected_at"], incident["resumed_at"]) == (
        "2026-11-21T03:05:00+00:00", "2026-11-21T03:18:00+00:00", "2026-11-21T03:24:00+00:00")
    assert (incident["time_to_detect_s"], incident["time_to_act_s"], incident["time_to_resume_s"],
            incident["total_s"]) == (13 * 60, 13 * 60, 19 * 60, 20 * 60)
    assert (incident["lost_steps"], incident["lost_minutes"]) == (1440 - 1200, 6)
    assert incident["repaired_at"] is None and incident["time_to_repair_s"] is None


def test_zf_a_requeued_job_that_resumes_below_its_last_checkpoint_pages_once_with_both_numbers(replay):
    # Given the same stall (checkpoint at step 1200), but the requeued job starts over: its first flush reports step
    # 25 with 25 steps counted, so it resumed from step 0
    path = SCENARIOS / "zf-stall-resumed-from-scratch.jsonl"
    assert no_hand_written_alarm_event(path)
    result = replay(path)
    # Then the requeue goes as in (m), but the 03:25 recovery check finds the resume point below the checkpoint:
    # failed, one page with both numbers and the loss; the alarm's OK then pages nothing more
    assert transitions(result) == [(STALL, "OK", "ALARM", "03:18:00"), (STALL, "ALARM", "OK", "03:25:00")]
    assert outcomes(result) == [*REQUEUED, ("none", "failed"), ("none", "ignored")]
    behind = result.records[2]
    assert (behind["fault"], behind["paged"], behind["timestamp"][11:19]) == ("resumed_behind", True, "03:25:00")
    assert "from step 0 while the last checkpoint was step 1200: 1200 steps lost" in behind["reason"]
    assert "1200 steps lost behind it, 1440 in all from step 1440 before the stall" in behind["reason"]
    [page] = result.pages
    assert "Resumed from:    step 0" in page["message"] and "Last checkpoint: step 1200" in page["message"]
    # ... and its incident line counts the steps really lost: all 1440 since step 0 (at 40 a minute, 36 minutes),
    # not the 240 a resume from the checkpoint would have redone
    [incident] = result.incidents
    assert (incident["lost_steps"], incident["lost_minutes"]) == (1440, 36)


def test_n_no_progress_after_the_requeue_pages_once_and_the_alarm_still_in_alarm_restarts_nothing(replay):
    # Given the same stall, but the requeued job never reports a step
    path = SCENARIOS / "n-stall-no-progress.jsonl"
    assert no_hand_written_alarm_event(path)
    result = replay(path)
    # Then one ALARM (it stays there: no second event, no second requeue) and one no_progress page at the first
    # check past the 20-minute deadline
    assert transitions(result) == [(STALL, "OK", "ALARM", "03:18:00")]
    assert outcomes(result) == [*REQUEUED, ("none", "failed")]
    no_progress = result.records[2]
    assert (no_progress["fault"], no_progress["paged"], no_progress["timestamp"][11:19]) == (
        "no_progress", True, "03:40:00")
    assert len(result.pages) == 1 and result.pages[0]["record"]["fault"] == "no_progress"
    assert result.calls[SEND] == 1 and [run["argv"] for run in result.slurm_commands] == AGENT_RAN
    assert recovery_runs(result) == 12


def test_zn_a_stalled_job_slurm_says_completed_is_not_requeued_nor_paged(replay):
    # Given llama3-70b stepping until 03:05, then COMPLETED in Slurm at 03:05:30 (its probe not closed), on a cluster
    # whose accounting slurmdbd keeps
    result = replay(SCENARIOS / "zn-stall-job-completed.jsonl")
    # When the stall alarm fires at 03:18 and Medic queues a requeue by name
    assert [(line["to"], line["timestamp"][11:16]) for line in result.alarms if line["alarm"] == STALL] == [
        ("ALARM", "03:18")]
    # Then the agent finds no such job running; slurmctld forgot it (MinJobAge 300 s after it ended)
    # and sacct says COMPLETED: nothing is requeued
    ran = [run["argv"] for run in result.slurm_commands]
    assert ran == [["squeue", "--noheader", "--states=RUNNING", "--format=%i|%j", "--name=llama3-70b"],
                   ["squeue", "--noheader", "--states=all", "--format=%i|%T", "--name=llama3-70b"],
                   ["sacct", "--noheader", "--parsable2", "--allocations", "--format=JobIDRaw,State",
                    "--name=llama3-70b", "--starttime=now-2days"]]
    assert [run["output"] for run in result.slurm_commands] == ["", "", "4211|COMPLETED"]
    # And the requeue is ignored (the job completed), with no page then or at the recovery deadline
    assert outcomes(result) == [("requeue_job", "deferred"), ("none", "ignored")]
    assert "llama3-70b completed" in result.records[-1]["reason"] and result.records[-1]["fault"] == "completed"
    assert all(record["incident"] == INCIDENT for record in result.records)
    assert result.pages == []


def test_o_a_nan_loss_fires_the_divergence_alarm_which_pages_once_with_the_last_checkpoint(replay):
    # Given the loss turning NaN from 03:02 (NonFiniteLoss 60 a minute) after a checkpoint at step 1200
    path = SCENARIOS / "o-divergence.jsonl"
    assert no_hand_written_alarm_event(path)
    result = replay(path)
    # Then the divergence alarm enters ALARM when the 03:02 minute is evaluated, and stays there
    assert transitions(result) == [("medic-divergence-llama3-70b", "OK", "ALARM", "03:03:00")]
    assert outcomes(result) == [("none", "deferred")]
    assert (result.records[0]["fault"], result.records[0]["paged"]) == ("diverged", True)
    assert len(result.pages) == 1 and "Last checkpoint:  step 1200" in result.pages[0]["message"]
    assert result.slurm_commands == [] and result.training_jobs == []
    assert SEND not in result.calls and "sagemaker:CreateTrainingJob" not in result.calls


def test_p_awss_documented_alarm_event_delivered_three_times_acts_once(replay):
    # Given AWS's sample "State change for a single-metric alarm" (names and region changed), twice as is and once under
    # another event id, while the evaluated stall alarm itself stays OK (the probe is healthy)
    result = replay(SCENARIOS / "p-alarm-repeat-delivery.jsonl")
    # Then the first delivery reads the heartbeat back (one GetMetricData), finds the job stepping and does
    # nothing; the repeats are duplicates; nothing goes to the agent
    assert outcomes(result) == [("none", "ignored"), ("none", "duplicate"), ("none", "duplicate")]
    assert "making progress" in result.records[0]["reason"]
    assert len({r["event_id"] for r in result.records}) == 2
    assert SEND not in result.calls and result.slurm_commands == []
    assert result.pages == [] and result.alarms == []


def test_t_a_handler_failing_every_retry_pages_for_its_errors_and_once_for_its_dead_letter_queue(replay):
    # Given DynamoDB failing the node handler's ledger read on every attempt (12 = 3 invocations x 4 attempts)
    result = replay(SCENARIOS / "za-handler-fails-every-retry.jsonl")
    # Then Lambda gives up after its two retries and the event waits in the function's DLQ
    assert [d["function"] for d in result.dropped] == ["Medic-NodeRemediationHandlerFunction6E8FE773"]
    assert result.records == []
    # ... the Errors alarm (08:14:05 in the 08:14 minute) pages; the canary (issue 29, item 6) invokes the same function
    # at 08:16:05 and succeeds, a real Errors datapoint of 0 that is the most recent at 08:17 (OK, no action), and the
    # last retry at 08:17:05 makes it page again at 08:18 (CloudWatch evaluates the most recent real datapoints:
    # sim/alarms.py [MISSING]); the DLQ's depth alarm (the message sent at 08:17:05, sampled at 08:18, in the 5-minute
    # window evaluated at 08:19) publishes one notification through the topic
    errors = "Medic-OperationsErrorsMedicNodeRemediationHandler8A61EF08"
    dead_letters = "Medic-OperationsDeadLettersNodeRemediationHandler3BB7951E"
    assert transitions(result) == [(errors, "OK", "ALARM", "08:15:00"), (errors, "ALARM", "OK", "08:17:00"),
                                   (errors, "OK", "ALARM", "08:18:00"), (dead_letters, "OK", "ALARM", "08:19:00"),
                                   (errors, "ALARM", "OK", "08:21:00")]
    assert [page["subject"] for page in result.pages] == [
        f'ALARM: "{errors}" in US West (Oregon)', f'ALARM: "{errors}" in US West (Oregon)',
        f'ALARM: "{dead_letters}" in US West (Oregon)']
    notification = json.loads(result.pages[2]["message"])
    assert (notification["NewStateValue"], notification["OldStateValue"], notification["Trigger"]["MetricName"]) == (
        "ALARM", "OK", "ApproximateNumberOfMessagesVisible")
    assert all(page["topic"].endswith(":Medic-PagingTopicF7F4870D") for page in result.pages)


def test_u_a_node_left_in_failure_past_repair_minutes_fires_the_failed_node_alarm_and_medic_pages(replay):
    # Given a Slurm worker in Failure from 08:10 that no health event explains, and nobody repairing it
    result = replay(SCENARIOS / "zb-failed-node-alarm.jsonl")
    # Then the reconciler's first sweep pages the node once, and its FailedNodes gauge (1 in every 5-minute sweep)
    # keeps the failed-node alarm breaching: after 6 sweeps (repair_minutes 30) it fires, and Medic pages
    assert transitions(result) == [("medic-failed-nodes-pretrain-slurm", "OK", "ALARM", "08:41:00")]
    found, lasting = result.records
    assert (found["trigger"], found["paged"]) == ("reconcile", True)
    assert (lasting["trigger"], lasting["fault"], lasting["outcome"], lasting["paged"]) == (
        "alarm", "failed_nodes", "deferred", True)
    # the cluster's second node page within the hour: it goes out as the node window's summary (issue 28, item 9)
    assert [page["subject"] for page in result.pages][-1] == (
        "[Medic] [held until 09:15 UTC] cluster pretrain-slurm: failed_nodes")


def test_node_scenarios_see_no_alarm_transitions(replay):
    # The evaluator runs in every replay: nothing in a node scenario moves an alarm
    for name in ("c-escalation.jsonl", "d-storm.jsonl", "e-protected-node.jsonl"):
        assert replay(SCENARIOS / name).alarms == [], name


def test_only_medic_alarms_entering_alarm_or_ok_reach_the_handler(replay):
    # Given an INSUFFICIENT_DATA transition and another team's alarm under Medic's prefix
    result = replay([alarm("stall", "INSUFFICIENT_DATA", T_ALARM),
                     alarm("stall", "ALARM", T_ALARM, job="someone-elses-job")])
    # Then the rule delivers neither: no handler runs
    assert result.lines == [] and result.invocations == {}


def test_a_topic_policy_that_denies_cloudwatch_fails_the_replay_loudly():
    # Given the synthesized template with the topic policy as it was: only the Deny-without-TLS statement
    template = copy.deepcopy(stack_template(DEMO_CONFIG))
    [policy] = [r for r in template["Resources"].values() if r["Type"] == "AWS::SNS::TopicPolicy"]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    statements[:] = [s for s in statements if s.get("Effect") == "Deny"]
    scenario = read_scenario(SCENARIOS / "za-handler-fails-every-retry.jsonl")
    # When the Errors alarm fires and CloudWatch publishes its notification, then the replay stops, saying why
    with pytest.raises(SimError, match="may not publish to topic .*implicit deny"):
        run(scenario.lines, DEMO_CONFIG, scenario.faults, template=template)
