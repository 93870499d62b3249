"""Specification: a watched job that finished cleanly is not restarted. Its probe's completion marker (`Completed`,
published on a clean close) is read back with the heartbeat: the stall alarm that follows the finish is `ignored`
with the completion time, the recovery check concludes a restart whose job finished instead of paging `no_progress`,
and a later run under the same Job name is watched as any other. Against moto's CloudWatch, DynamoDB, SQS and SNS."""

from __future__ import annotations

from datetime import datetime, timedelta

import boto3
from botocore.stub import Stubber

from medic.adapters.metrics import TrainingMetrics
from medic.flows.recovery.check import check_recoveries
from medic.flows.stall.response import respond_to_alarm
from medic.ledger.incidents import IncidentStore
from tests.functional.conftest import REGION
from tests.functional.test_alarm_handler import ALARM_AT, INCIDENT, alarm, medic, probe_reports, slurm  # noqa: F401
from tests.functional.test_alarm_timelines import incident_lines

TRAINED_UNTIL = datetime.fromisoformat(ALARM_AT) - timedelta(minutes=20)  # the slurm fixture's last report: 02:50


def test_a_stall_alarm_after_the_probes_completion_marker_records_the_finished_job_and_restarts_nothing(slurm):  # noqa: F811
    # Given the job's last flush at 02:50 carried its final step (1180) and the completion marker, and a live agent
    probe_reports("Completed", 1, TRAINED_UNTIL)
    slurm.heartbeat()
    reads: list[str] = []
    slurm.medic.deps.metrics.client.meta.events.register(
        "before-call.cloudwatch.GetMetricData", lambda **kwargs: reads.append("GetMetricData"))
    # When the stall alarm fires at 03:10 (the finished job's silence breaches it)
    record = respond_to_alarm(alarm(), slurm.medic.deps)
    # Then the one read-back found the marker as the job's latest report: ignored, nothing queued, watched or paged
    assert reads == ["GetMetricData"]
    assert (record["fault"], record["action"], record["outcome"], record["paged"]) == (
        "completed", "none", "ignored", False)
    assert "completion marker (a clean close) at 2026-11-21 02:50 UTC at step 1180" in record["reason"]
    assert slurm.depth() == 0 and slurm.medic.pages() == []
    assert IncidentStore(slurm.medic.deps.table).recoveries() == []
    # And no incident was opened: when a later run steps, its OK closes nothing
    ok = respond_to_alarm(alarm(state="OK", at="2026-11-21T04:00:00.000+0000"), slurm.medic.deps)
    assert (ok["outcome"], ok["reason"]) == ("ignored", "Alarm medic-stall-llama3-70b is OK; no open incident.")


def test_an_earlier_runs_completion_marker_does_not_hide_a_later_runs_stall(slurm):  # noqa: F811
    # Given a run under the same Job name finished at 02:20, and the next one reported until 02:50 (the fixture)
    probe_reports("Completed", 1, TRAINED_UNTIL - timedelta(minutes=30))
    slurm.heartbeat()
    # When the stall alarm fires at 03:10
    record = respond_to_alarm(alarm(), slurm.medic.deps)
    # Then the stall is the later run's: requeued as any stall
    assert (record["fault"], record["action"], record["outcome"]) == ("stalled", "requeue_job", "deferred")
    assert slurm.depth() == 1


def test_a_restarted_job_that_finishes_without_a_step_concludes_at_the_next_check_without_a_page(slurm):  # noqa: F811
    # Given Medic requeued the stalled job at 03:10 (no marker then: it had stalled)
    slurm.heartbeat()
    respond_to_alarm(alarm(), slurm.medic.deps)
    # And the requeued run found nothing left to train (resumed from its final checkpoint) and closed cleanly at
    # 03:13: the marker, no step
    probe_reports("Completed", 1, datetime.fromisoformat("2026-11-21T03:13:00+00:00"))
    # When the recovery check runs at 03:15, and again
    slurm.medic.at("2026-11-21T03:15:00+00:00")
    records: list[dict] = []
    lines = incident_lines(lambda: records.extend(check_recoveries({"id": "run-1"}, slurm.medic.deps)))
    assert check_recoveries({"id": "run-2"}, slurm.medic.deps) == []
    # Then the job finished: one record, no page, the watch ended; the incident resolved with no resume
    [record] = records
    assert (record["fault"], record["outcome"], record["paged"], record["trigger"], record["incident"]) == (
        "completed", "ignored", False, "reconcile", INCIDENT)
    assert "Training finished after Medic's restart at 03:10 UTC" in record["reason"]
    assert "completion marker (a clean close) at 03:13 UTC" in record["reason"]
    assert slurm.medic.pages() == [] and IncidentStore(slurm.medic.deps.table).recoveries() == []
    [line] = lines
    assert (line["kind"], line["resumed_at"], line["resolved_at"]) == (
        "stall", None, "2026-11-21T03:15:00+00:00")


def test_a_job_that_had_finished_before_medics_restart_concludes_at_the_deadline_without_a_page(slurm):  # noqa: F811
    # Given the job finished at 02:50, but Medic requeued it at 03:10: the alarm handler could not read the metrics
    # back (denied), so it acted on the alarm alone
    probe_reports("Completed", 1, TRAINED_UNTIL)
    slurm.heartbeat()
    metrics = slurm.medic.deps.metrics
    denied = boto3.client("cloudwatch", region_name=REGION)
    slurm.medic.deps.metrics = TrainingMetrics(denied)
    with Stubber(denied) as stub:
        stub.add_client_error("get_metric_data", "AccessDenied", "not allowed", 400)
        requeued = respond_to_alarm(alarm(), slurm.medic.deps)
    assert (requeued["action"], requeued["outcome"]) == ("requeue_job", "deferred")
    slurm.medic.deps.metrics = metrics
    # When the recovery check runs before the deadline, the restarted run may still report: Medic waits
    slurm.medic.at("2026-11-21T03:20:00+00:00")
    assert check_recoveries({"id": "run-1"}, slurm.medic.deps) == []
    # Then at the deadline, nothing reported since the marker: the job had finished; no no_progress page
    slurm.medic.at("2026-11-21T03:31:00+00:00")
    [record] = check_recoveries({"id": "run-2"}, slurm.medic.deps)
    assert (record["fault"], record["outcome"], record["paged"]) == ("completed", "ignored", False)
    assert "had finished before Medic's restart at 03:10 UTC" in record["reason"]
    assert "2026-11-21 02:50 UTC at step 1180" in record["reason"]
    assert slurm.medic.pages() == []
