"""Specification: `medic history --job` and `medic report` cover AWS Batch jobs as they cover SageMaker training
jobs: a lineage's root names its restarts' records and incidents (incident `batch-job:<root>`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from medic_cli import history, report

START = datetime(2026, 11, 22, tzinfo=UTC)


def test_history_job_filter_takes_a_batch_lineages_restarts_locally_and_in_the_logs_pattern():
    filters = history.Filters(job="pt-llama-0007")
    restart = {"job": "pt-llama-0007-r1", "incident": "batch-job:pt-llama-0007", "outcome": "executed"}
    other = {"job": "pt-llama-0099", "incident": "batch-job:pt-llama-0099", "outcome": "executed"}
    assert filters.matches(restart) and not filters.matches(other)
    assert '$.incident = "batch-job:pt-llama-0007"' in filters.log_pattern()
    assert '$.incident = "job:pt-llama-0007"' in filters.log_pattern()


def test_report_counts_a_batch_jobs_incidents_under_its_lineage():
    fault = START + timedelta(hours=3)
    incident = {"incident": "batch-job:pt-llama-0007", "kind": "batch_job", "job": None, "fault": "job_retryable",
                "fault_at": fault.isoformat(), "resolved_at": None, "total_s": None,
                "_at": fault + timedelta(minutes=1), "_fault": fault}
    assert report.Filters(job="pt-llama-0007").matches(incident)
    result = report.report([incident], START, START + timedelta(days=1))
    assert [row["job"] for row in result["jobs"]] == ["pt-llama-0007"]


def test_report_times_a_batch_and_a_bedrock_recovery_from_the_line_written_when_the_restart_ran():
    import json

    from medic.core.timeline import job_timeline

    # Given the incident lines Medic writes when each restart runs (flows/jobs/managed.clone_running)
    fault = START + timedelta(hours=3)
    lines = [json.dumps({"message": "incident", **job_timeline(
        incident=f"{prefix}{root}", job=root, fault="job_retryable", fault_at=fault,
        detected_at=fault + timedelta(seconds=5), restarted_at=fault + timedelta(seconds=6),
        resumed_at=fault + timedelta(minutes=minutes), kind=kind)})
        for prefix, root, kind, minutes in (("batch-job:", "pt-llama-0007", "batch_job", 10),
                                            ("bedrock-job:", "cpt-llama-0003", "bedrock_job", 2))]
    incidents = [report.parse_line(line) for line in lines]
    result = report.report(incidents, START, START + timedelta(days=1))
    # Then each service's recovery is timed, fault to running again (resolved)
    kinds = {row["kind"]: row for row in result["kinds"]}
    assert kinds["batch_job"]["lost_s"] == 600 and kinds["bedrock_job"]["lost_s"] == 120
    assert kinds["batch_job"]["unresolved"] == kinds["bedrock_job"]["unresolved"] == 0
