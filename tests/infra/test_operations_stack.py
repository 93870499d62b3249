"""Specification: what operators get from the stack — health alarms that page, a dashboard, saved
Logs Insights queries — and the Serverless checks passing with the AwsSolutions ones."""

from __future__ import annotations

import json

from tests.infra.conftest import resources


def health_alarms(raw: dict) -> list[dict]:
    return [res["Properties"] for res in resources(raw, "AWS::CloudWatch::Alarm").values()
            if "AlarmName" not in res["Properties"]]


def test_every_function_has_error_throttle_and_duration_alarms_that_page(raw):
    functions = [lid for lid in resources(raw, "AWS::Lambda::Function")]
    alarms = health_alarms(raw)
    for metric in ("Errors", "Throttles", "Duration"):
        watched = [a for a in alarms if a.get("MetricName") == metric]
        assert len(watched) == len(functions), metric
        for alarm in watched:
            assert alarm["AlarmActions"] == [{"Ref": next(iter(resources(raw, "AWS::SNS::Topic")))}]
    duration = next(a for a in alarms if a.get("MetricName") == "Duration")
    assert (duration["Statistic"], duration["Threshold"]) == ("Maximum", 48000)  # 80% of 60 s


def test_every_dead_letter_queue_pages_when_it_holds_messages(raw):
    queues = resources(raw, "AWS::SQS::Queue")
    dead_letter_queues = {lid for lid in queues if "DeadLetters" in lid or "Undelivered" in lid}
    watched = {a["Dimensions"][0]["Value"]["Fn::GetAtt"][0] for a in health_alarms(raw)
               if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"}
    assert watched == dead_letter_queues and len(watched) >= 6
    for alarm in health_alarms(raw):
        if alarm.get("MetricName") == "ApproximateNumberOfMessagesVisible":
            assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
            assert "AlarmActions" in alarm


def test_pages_that_cannot_be_delivered_wait_in_a_queue(raw):
    for subscription in resources(raw, "AWS::SNS::Subscription").values():
        target = subscription["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
        assert "Undelivered" in target


def test_the_saved_queries_cover_the_log_groups_of_every_function(raw):
    queries = {q["Properties"]["Name"]: q["Properties"] for q in resources(raw, "AWS::Logs::QueryDefinition").values()}
    assert set(queries) == {"Medic/All decisions (last 24 h: set the time range)", "Medic/Failed and suppressed",
                            "Medic/One node or job (edit the filter)", "Medic/Time from event to action per cluster",
                            "Medic/Needs a human (medic history --needs-human)",
                            "Medic/Managed job failures by service and outcome",
                            "Medic/Managed job restarts: fault to running again by service"}
    log_groups = {lid for lid in resources(raw, "AWS::Logs::LogGroup")}
    for query in queries.values():
        assert {ref["Ref"] for ref in query["LogGroupNames"]} == log_groups
    assert 'filter outcome in ["failed", "suppressed"]' in queries["Medic/Failed and suppressed"]["QueryString"]
    assert "pct(EventToActionSeconds, 99)" in queries["Medic/Time from event to action per cluster"]["QueryString"]
    # Logs Insights reads a JSON true as 1 (a record's needs_human); every record query shows why and needs_human
    needs = queries["Medic/Needs a human (medic history --needs-human)"]["QueryString"]
    assert "filter needs_human = 1" in needs and "why, needs_human" in needs
    # SageMaker training jobs and AWS Batch jobs side by side: the service is the incident's prefix
    managed = queries["Medic/Managed job failures by service and outcome"]["QueryString"]
    assert 'filter trigger = "job_state"' in managed and "(?<service>" in managed and "by service, outcome" in managed
    # ... and their restarts' time to running again, from the incident lines (written when the clone runs)
    restarts = queries["Medic/Managed job restarts: fault to running again by service"]["QueryString"]
    assert 'kind in ["training_job", "batch_job", "bedrock_job"]' in restarts
    assert "pct(time_to_resume_s, 50)" in restarts and "by kind" in restarts


def test_the_dashboard_shows_outcomes_pages_incidents_latency_queues_mode_and_records(raw):
    (dashboard,) = resources(raw, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for title in ("Actions and outcomes per cluster", "Suppressed, failed, pages", "Open incidents",
                  "Time from event to action", "Dead-letter queues", "Mode at the latest decisions",
                  "Latest remediation records", "errors and throttles", "Agents: seconds since each cluster's agent",
                  "Canary: seconds since the last one came back",
                  "Managed jobs (SageMaker, AWS Batch, Bedrock): failures by service and outcome",
                  "Managed job restarts: fault to running again (s), by service"):
        assert title in body, title


def test_the_dashboard_shows_incident_durations_p50_p99_closed_incidents_and_goodput_per_watched_job(raw):
    # Given the stack synthesized from medic.yaml, which watches the job llama3-70b
    (dashboard,) = resources(raw, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    # Then each incident duration is graphed as p50 and p99 from the EMF metrics (namespace Medic/Incidents)
    for metric in ("time_to_detect_s", "time_to_repair_s", "total_s"):
        assert f'{{Medic/Incidents,cluster,kind,service}} MetricName=\\\\\\"{metric}\\\\\\"' in body, metric
    assert "'p50', 3600" in body and "'p99', 3600" in body
    # ... the closed incidents' timelines are a table of the incident lines
    assert "Closed incidents (timeline: seconds from the fault)" in body
    assert 'filter message = \\\\\\"incident\\\\\\"' in body
    # ... and the watched job has a goodput widget over its incidents' downtime and re-done work
    assert "Goodput of llama3-70b (daily, % of the day; from its incidents)" in body
    assert "coalesce(time_to_resume_s, time_to_repair_s, total_s, 0) + coalesce(lost_minutes, 0) * 60" in body
    assert "100 - sum(lost_s) / 864 as goodput_pct" in body


def test_the_canary_late_alarm_pages_when_no_canary_came_back_for_fifteen_minutes(raw):
    # Given the CanaryLate alarm (issue 29, item 6) on the reconciler's CanaryAgeSeconds gauge
    [alarm] = [res["Properties"] for lid, res in resources(raw, "AWS::CloudWatch::Alarm").items()
               if lid.startswith("OperationsCanaryLate")]
    # Then one 5-minute period (one reconciler run) over 900 s pages through the topic, and its OK clears it
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"], alarm["Period"]) == (
        "Medic", "CanaryAgeSeconds", "Maximum", 300)
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["EvaluationPeriods"]) == (
        900, "GreaterThanThreshold", 1)
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == alarm["OKActions"] and len(alarm["AlarmActions"]) == 1
