"""Specification: Medic's alarms drive remediation — a stalled Slurm job is requeued through the agent
and watched until training resumes; divergence, slowdown and lasting failed nodes page; OK closes.
Against moto (DynamoDB, SQS, SNS, SSM, CloudWatch) with the real agent's parser and ledger code."""

from __future__ import annotations

import copy
import json
import uuid
from datetime import datetime, timedelta

import boto3
import pytest

from medic.adapters.metrics import TrainingMetrics
from medic.config import parse_config
from medic.flows.recovery.check import check_recoveries
from medic.flows.stall.response import respond_to_alarm
from medic.ledger.incidents import IncidentStore
from tests.functional.conftest import CLUSTER, CONFIG, REGION, medic_world
from tests.functional.slurm_world import SlurmWorld, agent_parse
from tests.helpers import load_event

JOB = "llama3-70b"
INCIDENT = f"job:slurm:{CLUSTER}:{JOB}"
ALARM_AT = "2026-11-21T03:10:00+00:00"
JOBS_CONFIG = {**CONFIG, "jobs": [{"name": JOB, "cluster": CLUSTER, "stall_minutes": 5, "recovery_minutes": 20},
                                  {"name": "mistral-ft", "cluster": "finetune-eks"}]}


@pytest.fixture
def medic(aws):
    yield from medic_world(parse_config(JOBS_CONFIG), aws)


@pytest.fixture
def slurm(medic, tmp_path) -> SlurmWorld:
    """A Slurm cluster whose watched job trained (the probe counted steps) until 02:50, then went silent."""
    medic.at(ALARM_AT)
    medic.deps.metrics = TrainingMetrics(boto3.client("cloudwatch", region_name=REGION))
    trained_until = datetime.fromisoformat(ALARM_AT) - timedelta(minutes=20)
    probe_reports("Heartbeat", 20, trained_until)
    probe_reports("Step", 1180, trained_until)
    return SlurmWorld(medic, tmp_path)


def alarm(name: str = f"medic-stall-{JOB}", state: str = "ALARM", at: str = "2026-11-21T03:10:00.000+0000",
          event_id: str | None = None) -> dict:
    event = copy.deepcopy(load_event("cloudwatch-alarm-state-change"))
    event["detail"]["alarmName"] = name
    event["resources"] = [f"arn:aws:cloudwatch:{REGION}:123456789012:alarm:{name}"]
    event["detail"]["state"].update(value=state, timestamp=at)
    event["detail"]["previousState"]["value"] = "OK" if state == "ALARM" else "ALARM"
    # each transition is its own EventBridge event (a redelivery repeats the id)
    event["id"] = event_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}/{state}/{at}"))
    return event


def probe_reports(name: str, value: float, at: datetime, job: str = JOB, **dimensions: str) -> None:
    dims = [{"Name": "Job", "Value": job}, *({"Name": k, "Value": v} for k, v in dimensions.items())]
    boto3.client("cloudwatch", region_name=REGION).put_metric_data(Namespace="Medic/Training", MetricData=[
        {"MetricName": name, "Dimensions": dims, "Value": value, "Timestamp": at}])


def test_the_sample_stall_alarm_requeues_the_job_through_the_agent(slurm):
    # Given a live agent on the controller
    slurm.heartbeat()
    # When the sample stall alarm of llama3-70b fires
    record = respond_to_alarm(load_event("cloudwatch-alarm-state-change"), slurm.medic.deps)
    # Then one requeue-by-name command is queued for the agent, recorded against the job's incident
    [body] = slurm.queued()
    assert agent_parse(json.dumps(body), cluster=CLUSTER).action.job_name == JOB
    assert (record["trigger"], record["fault"], record["action"], record["outcome"]) == (
        "alarm", "stalled", "requeue_job", "deferred")
    assert (record["incident"], record["job"], record["paged"]) == (INCIDENT, JOB, False)
    # And Medic now watches for proof that training resumed
    assert [watch.incident for watch in IncidentStore(slurm.medic.deps.table).recoveries()] == [INCIDENT]


def test_repeated_alarm_deliveries_take_one_action(slurm):
    slurm.heartbeat()
    first = respond_to_alarm(alarm(event_id="a1"), slurm.medic.deps)
    again = respond_to_alarm(alarm(event_id="a2"), slurm.medic.deps)  # same transition, delivered twice
    assert (first["outcome"], again["outcome"]) == ("deferred", "duplicate")
    assert slurm.depth() == 1


def test_training_that_resumes_after_the_requeue_closes_the_watch_quietly(slurm):
    # Given Medic requeued the stalled job at 03:10
    slurm.heartbeat()
    respond_to_alarm(alarm(), slurm.medic.deps)
    restarted = slurm.medic.clock[0]
    # And the probe reports steps again from 03:16
    for minute in range(6, 9):
        probe_reports("Heartbeat", 20, restarted + timedelta(minutes=minute))
        probe_reports("Step", 1200 + 20 * minute, restarted + timedelta(minutes=minute))
    # When the recovery check runs at 03:20
    slurm.medic.at("2026-11-21T03:20:00+00:00")
    [record] = check_recoveries({"id": "run-1"}, slurm.medic.deps)
    # Then training counts as resumed, with no page, and the watch ends
    assert (record["fault"], record["outcome"], record["paged"], record["trigger"]) == (
        "recovered", "ignored", False, "reconcile")
    assert "60 steps" in record["reason"] and "step 1360" in record["reason"]
    assert slurm.medic.pages() == []
    assert IncidentStore(slurm.medic.deps.table).recoveries() == []


@pytest.mark.parametrize(("resumed_at_step", "outcome"), [(1200, "recovered"), (0, "resumed_behind")])
def test_the_resume_point_after_the_requeue_is_checked_against_the_last_checkpoint(slurm, resumed_at_step, outcome):
    # Given the probe reported a checkpoint at step 1200 before the stall, and Medic requeued the job at 03:10
    probe_reports("LastCheckpointStep", 1200, datetime.fromisoformat(ALARM_AT) - timedelta(minutes=20))
    slurm.heartbeat()
    respond_to_alarm(alarm(), slurm.medic.deps)
    restarted = slurm.medic.clock[0]
    # And the job steps again from 03:16, from step ``resumed_at_step`` (20 steps a minute: the probe's first flush
    # reports step resumed_at_step + 20 and 20 steps counted)
    for minute in range(6, 9):
        probe_reports("Heartbeat", 20, restarted + timedelta(minutes=minute))
        probe_reports("Step", resumed_at_step + 20 * (minute - 5), restarted + timedelta(minutes=minute))
    # When the recovery check runs at 03:20, twice
    slurm.medic.at("2026-11-21T03:20:00+00:00")
    [record] = check_recoveries({"id": "run-1"}, slurm.medic.deps)
    assert check_recoveries({"id": "run-2"}, slurm.medic.deps) == []
    # Then from the checkpoint: recovered quietly; from below it: failed, one page with both numbers and the loss
    assert IncidentStore(slurm.medic.deps.table).recoveries() == []
    if outcome == "recovered":
        assert (record["fault"], record["outcome"], record["paged"]) == ("recovered", "ignored", False)
        assert slurm.medic.pages() == []
        return
    assert (record["fault"], record["outcome"], record["paged"]) == ("resumed_behind", "failed", True)
    assert "from step 0 while the last checkpoint was step 1200: 1200 steps lost" in record["reason"]
    [page] = slurm.medic.pages()
    assert "Resumed from:    step 0" in page["Message"] and "Last checkpoint: step 1200" in page["Message"]


def test_a_stall_alarm_going_ok_after_a_restart_from_scratch_pages_the_loss(slurm):
    # Given a checkpoint at step 1200, Medic's requeue at 03:10, and the job stepping again from step 1 at 03:16
    probe_reports("LastCheckpointStep", 1200, datetime.fromisoformat(ALARM_AT) - timedelta(minutes=20))
    slurm.heartbeat()
    respond_to_alarm(alarm(), slurm.medic.deps)
    restarted = slurm.medic.clock[0]
    probe_reports("Heartbeat", 20, restarted + timedelta(minutes=6))
    probe_reports("Step", 21, restarted + timedelta(minutes=6))
    # When the stall alarm goes OK at 03:18
    slurm.medic.at("2026-11-21T03:18:00+00:00")
    respond_to_alarm(alarm(state="OK", at="2026-11-21T03:18:00.000+0000"), slurm.medic.deps)
    # Then the OK is no all-clear: one page says training restarted from step 1, not from the checkpoint
    [page] = slurm.medic.pages()
    assert "Resumed from:    step 1" in page["Message"] and "Last checkpoint: step 1200" in page["Message"]
    assert IncidentStore(slurm.medic.deps.table).recoveries() == []


def test_before_the_deadline_without_progress_medic_keeps_waiting(slurm):
    slurm.heartbeat()
    respond_to_alarm(alarm(), slurm.medic.deps)
    slurm.medic.at("2026-11-21T03:20:00+00:00")
    assert check_recoveries({"id": "run-1"}, slurm.medic.deps) == []
    assert len(IncidentStore(slurm.medic.deps.table).recoveries()) == 1


def test_no_progress_after_the_restart_escalates_once_and_blocks_blind_restarts(slurm):
    # Given Medic requeued the job at 03:10 and the probe stayed silent
    slurm.heartbeat()
    respond_to_alarm(alarm(), slurm.medic.deps)
    # When the recovery check runs after the 20-minute deadline, twice
    slurm.medic.at("2026-11-21T03:31:00+00:00")
    [record] = check_recoveries({"id": "run-1"}, slurm.medic.deps)
    assert check_recoveries({"id": "run-2"}, slurm.medic.deps) == []
    # Then one escalation page, recorded as failed
    assert (record["fault"], record["outcome"], record["paged"]) == ("no_progress", "failed", True)
    [page] = slurm.medic.pages()
    assert JOB in page["Subject"] and "not restarting again blindly" in page["Message"]
    # And when the stall alarm fires again (a new transition), Medic does not requeue blindly
    slurm.heartbeat()
    slurm.queued()
    depth_before = slurm.depth()
    again = respond_to_alarm(alarm(at="2026-11-21T03:40:00.000+0000"), slurm.medic.deps)
    assert (again["outcome"], again["paged"]) == ("suppressed", False)
    assert slurm.depth() == depth_before


def test_ok_after_the_stall_closes_the_incident_and_allows_the_next_restart(slurm):
    slurm.heartbeat()
    respond_to_alarm(alarm(), slurm.medic.deps)
    slurm.medic.at("2026-11-21T03:31:00+00:00")
    check_recoveries({"id": "run-1"}, slurm.medic.deps)  # escalated
    slurm.medic.pages()
    ok = respond_to_alarm(alarm(state="OK", at="2026-11-21T03:35:00.000+0000"), slurm.medic.deps)
    assert (ok["outcome"], ok["action"]) == ("ignored", "none")
    assert "back to OK" in ok["reason"]
    slurm.heartbeat()
    slurm.medic.at("2026-11-21T05:00:00+00:00")
    slurm.heartbeat()
    next_stall = respond_to_alarm(alarm(at="2026-11-21T05:00:00.000+0000"), slurm.medic.deps)
    assert next_stall["outcome"] == "deferred"


def test_divergence_pages_with_the_last_checkpoint_and_restarts_nothing(slurm):
    # Given the probe reported a checkpoint at step 1200
    slurm.heartbeat()
    probe_reports("LastCheckpointStep", 1200, slurm.medic.clock[0] - timedelta(minutes=30))
    # When the divergence alarm fires
    record = respond_to_alarm(alarm(f"medic-divergence-{JOB}"), slurm.medic.deps)
    # Then a human is paged with the step to roll back to, and nothing is queued
    assert (record["fault"], record["action"], record["outcome"], record["paged"]) == (
        "diverged", "none", "deferred", True)
    [page] = slurm.medic.pages()
    assert "step 1200" in page["Message"]
    assert slurm.depth() == 0
    # And OK afterwards closes the incident with an all-clear page, since it had paged
    ok = respond_to_alarm(alarm(f"medic-divergence-{JOB}", state="OK", at="2026-11-21T04:00:00.000+0000"),
                          slurm.medic.deps)
    assert (ok["outcome"], ok["paged"]) == ("ignored", True)
    [all_clear] = slurm.medic.pages()
    assert "resolved" in all_clear["Subject"]


def test_slowdown_pages_with_the_slowest_node_first(slurm):
    at = slurm.medic.clock[0] - timedelta(minutes=5)
    for node, value in (("ip-10-1-2-3", 1000.0), ("ip-10-1-2-4", 310.0), ("ip-10-1-2-5", 990.0)):
        probe_reports("TokensPerSecond", value, at, Node=node)
    record = respond_to_alarm(alarm(f"medic-slowdown-{JOB}"), slurm.medic.deps)
    assert (record["fault"], record["paged"]) == ("slowed", True)
    [page] = slurm.medic.pages()
    # (each node as the Node dimension names it, which any PutMetricData caller writes: quoted)
    lines = [line for line in page["Message"].splitlines() if line.strip().startswith('"ip-')]
    assert lines[0].split()[0] == '"ip-10-1-2-4"' and "31% of the fastest" in lines[0]


def test_a_node_name_written_into_the_metrics_is_quoted_on_its_line(slurm):
    # Given someone allowed PutMetricData on Medic/Training wrote a Node dimension that looks like Medic's lines
    at = slurm.medic.clock[0] - timedelta(minutes=5)
    hostile = "ip-10-1-2-9\nWhat to do:     Nothing, Medic drained it"
    for node, value in (("ip-10-1-2-3", 1000.0), (hostile, 310.0)):
        probe_reports("TokensPerSecond", value, at, Node=node)
    respond_to_alarm(alarm(f"medic-slowdown-{JOB}"), slurm.medic.deps)
    [page] = slurm.medic.pages()
    lines = page["Message"].splitlines()
    # Then Medic's "What to do:" is the only one, and the name is quoted on the node's own line
    assert len([line for line in lines if line.startswith("What to do:")]) == 1
    assert any(line.strip().startswith('"ip-10-1-2-9 What to do: Nothing, Medic drained it"') for line in lines)


def test_failed_nodes_page_only_when_medic_is_not_already_repairing_them(slurm):
    record = respond_to_alarm(alarm(f"medic-failed-nodes-{CLUSTER}"), slurm.medic.deps)
    assert (record["fault"], record["outcome"], record["paged"]) == ("failed_nodes", "deferred", True)


def test_dry_run_decides_without_queueing_or_watching(slurm):
    slurm.heartbeat()
    slurm.medic.set_mode("dry_run")
    record = respond_to_alarm(alarm(), slurm.medic.deps)
    assert record["outcome"] == "dry_run"
    assert slurm.depth() == 0
    assert IncidentStore(slurm.medic.deps.table).recoveries() == []


def test_an_alarm_medic_does_not_own_is_ignored_without_any_call(slurm):
    record = respond_to_alarm(alarm("cpu-high-on-login-node"), slurm.medic.deps)
    assert (record["outcome"], record["action"]) == ("ignored", "none")
    assert slurm.depth() == 0 and slurm.medic.pages() == []


@pytest.mark.parametrize("change", [
    {"alarmName": "medic-stall-llama3-70b; rm -rf /"},
    {"alarmName": 42},
    {"state": {"value": "EXPLODED", "timestamp": "2026-11-21T03:10:00.000+0000"}},
    {"state": None},
])
def test_a_malformed_alarm_event_is_rejected_and_nothing_is_done(slurm, change):
    event = alarm()
    event["detail"].update(change)
    record = respond_to_alarm(event, slurm.medic.deps)
    assert (record["outcome"], record["action"]) == ("rejected", "none")
    assert slurm.depth() == 0 and slurm.medic.pages() == []


def test_an_ok_with_steps_since_the_restart_is_the_proof_of_recovery(slurm):
    # Given Medic requeued the stalled job at 03:10, and the probe counted steps from 03:12
    slurm.heartbeat()
    respond_to_alarm(alarm(), slurm.medic.deps)
    restarted = slurm.medic.clock[0]
    for minute in (2, 3):
        probe_reports("Heartbeat", 20, restarted + timedelta(minutes=minute))
        probe_reports("Step", 1200 + 20 * minute, restarted + timedelta(minutes=minute))
    # When the stall alarm goes OK at 03:14, before the next recovery check
    slurm.medic.at("2026-11-21T03:14:00+00:00")
    respond_to_alarm(alarm(state="OK", at="2026-11-21T03:14:00.000+0000"), slurm.medic.deps)
    # Then training is recorded as recovered, with the numbers, and nothing is left to check
    [recovered] = [line for line in slurm.medic.log.lines if line["fault"] == "recovered"]
    assert (recovered["incident"], recovered["outcome"], recovered["trigger"]) == (INCIDENT, "ignored", "alarm")
    assert "40 steps since" in recovered["reason"] and "step 1260" in recovered["reason"]
    assert IncidentStore(slurm.medic.deps.table).recoveries() == []


def test_an_ok_without_steps_since_the_restart_is_not_proof_of_recovery(slurm):
    """An alarm that treats missing data as not breaching goes OK when the restarted job never publishes."""
    # Given Medic requeued the stalled job at 03:10, and the probe has been silent since
    slurm.heartbeat()
    respond_to_alarm(alarm(), slurm.medic.deps)
    # When the stall alarm goes OK at 03:14
    slurm.medic.at("2026-11-21T03:14:00+00:00")
    ok = respond_to_alarm(alarm(state="OK", at="2026-11-21T03:14:00.000+0000"), slurm.medic.deps)
    # Then nothing counts as recovered: the watch stays, and the OK says why
    assert (ok["outcome"], ok["action"], ok["paged"]) == ("ignored", "none", False)
    assert "not proof of recovery" in ok["reason"]
    assert not [line for line in slurm.medic.log.lines if line["fault"] == "recovered"]
    assert [watch.incident for watch in IncidentStore(slurm.medic.deps.table).recoveries()] == [INCIDENT]
    # And past the deadline the recovery check still escalates, once
    slurm.medic.at("2026-11-21T03:31:00+00:00")
    [record] = check_recoveries({"id": "run-1"}, slurm.medic.deps)
    assert (record["fault"], record["outcome"], record["paged"]) == ("no_progress", "failed", True)


def test_a_stall_alarm_while_the_heartbeat_counts_steps_requeues_nothing_and_records_the_numbers(slurm):
    # Given a live agent, and a probe that counted steps at 03:07-03:09 (a late datapoint tripped the alarm)
    slurm.heartbeat()
    for minute in (7, 8, 9):
        at = datetime.fromisoformat("2026-11-21T03:00:00+00:00") + timedelta(minutes=minute)
        probe_reports("Heartbeat", 20, at)
        probe_reports("Step", 1300 + 20 * minute, at)
    reads: list[str] = []
    slurm.medic.deps.metrics.client.meta.events.register(
        "before-call.cloudwatch.GetMetricData", lambda **kwargs: reads.append("GetMetricData"))
    # When the stall alarm fires at 03:10
    record = respond_to_alarm(alarm(), slurm.medic.deps)
    # Then Medic read the heartbeat back once, found progress, and did nothing
    assert reads == ["GetMetricData"]
    assert (record["fault"], record["action"], record["outcome"], record["paged"]) == (
        "stalled", "none", "ignored", False)
    assert "60 steps in the last 5 min" in record["reason"] and "step 1480" in record["reason"]
    assert slurm.depth() == 0 and slurm.medic.pages() == []
    assert IncidentStore(slurm.medic.deps.table).recoveries() == []


def test_a_stall_alarm_is_still_acted_on_when_the_heartbeat_cannot_be_read(slurm):
    from botocore.stub import Stubber

    slurm.heartbeat()
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    slurm.medic.deps.metrics = TrainingMetrics(cloudwatch)
    with Stubber(cloudwatch) as stub:
        stub.add_client_error("get_metric_data", "AccessDenied", "not allowed", 400)
        record = respond_to_alarm(alarm(), slurm.medic.deps)
    assert (record["action"], record["outcome"]) == ("requeue_job", "deferred")
    assert slurm.depth() == 1


def test_the_escalation_page_carries_the_incident_of_its_record(slurm):
    slurm.heartbeat()
    respond_to_alarm(alarm(), slurm.medic.deps)
    slurm.medic.at("2026-11-21T03:31:00+00:00")
    [record] = check_recoveries({"id": "run-1"}, slurm.medic.deps)
    [page] = slurm.medic.pages()
    attached = json.loads(page["MessageAttributes"]["record"]["Value"])
    assert attached["incident"] == record["incident"] == INCIDENT


def test_a_stall_alarm_of_a_job_that_never_reported_requeues_nothing(medic, tmp_path):
    # Given a watched job whose probe has reported nothing in the last day (not started yet: a new deploy, a job
    # configured before its launch), and a live agent
    medic.at(ALARM_AT)
    medic.deps.metrics = TrainingMetrics(boto3.client("cloudwatch", region_name=REGION))
    world = SlurmWorld(medic, tmp_path)
    world.heartbeat()
    # When its stall alarm enters ALARM (silence is breaching for a stall alarm, also before the first step)
    record = respond_to_alarm(alarm(), medic.deps)
    # Then nothing is queued, spent or watched, and nobody is paged: silence before any step is no stall
    assert (record["action"], record["outcome"], record["paged"]) == ("none", "ignored", False)
    assert "no step for llama3-70b in the 24 h before the stall window" in record["reason"]
    assert world.depth() == 0 and IncidentStore(medic.deps.table).recoveries() == []


def test_a_stall_alarm_reads_the_window_and_the_day_before_it_in_one_call(slurm):
    # Given the job trained until 02:50 and a live agent
    slurm.heartbeat()
    calls = []
    slurm.medic.deps.metrics.client.meta.events.register(
        "provide-client-params.cloudwatch.GetMetricData", lambda params, **_: calls.append(dict(params)))
    # When its stall alarm fires at 03:10
    record = respond_to_alarm(alarm(), slurm.medic.deps)
    # Then one GetMetricData covered the day before the stall window and the window, and the job was requeued
    [params] = calls
    assert params["EndTime"] - params["StartTime"] == timedelta(hours=24, minutes=5)
    assert record["outcome"] == "deferred"



def test_training_resumes_at_the_first_minute_that_counts_steps_not_at_the_stalled_processs_last_flush(slurm):
    # Given the hung process's last flush after the restart at 03:10 (its step, no steps counted: Heartbeat 0)
    # at 03:11, and the restarted job stepping from 03:14 (25 steps, resumed from 1200)
    restart = datetime.fromisoformat(ALARM_AT)
    probe_reports("Heartbeat", 0, restart + timedelta(minutes=1))
    probe_reports("Step", 1240, restart + timedelta(minutes=1))
    probe_reports("Heartbeat", 25, restart + timedelta(minutes=4))
    probe_reports("Step", 1225, restart + timedelta(minutes=4))
    # When Medic reads the progress since the restart
    progress = slurm.medic.deps.metrics.progress(JOB, restart, restart + timedelta(minutes=6),
                                                 history=timedelta(hours=1))
    # Then training resumed at 03:14, from step 1200: the 03:11 flush is not the restart stepping
    assert progress.first_step_at == restart + timedelta(minutes=4)
    assert progress.first_step == 1200
