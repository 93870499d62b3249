"""``medic status`` and ``medic report`` list what Medic watches (issue 33): per cluster, the runs its watch rules
cover now (from their probes' `Run` reports), with their last step and restart budget."""

from __future__ import annotations

import json

import boto3

from medic.ledger.jobs import JobStore
from tests.cli.conftest import CONFIG_YAML, REGION, Deployed, ago

WATCHING = CONFIG_YAML.replace("    protected_groups: [controller, login]\n",
                               "    protected_groups: [controller, login]\n"
                               "    watch:\n      - {job_prefix: gpt-, stall_minutes: 7}\n", 1)


def probe_reports(run: str, job_id: str, minutes_ago: list[int], step: int) -> None:
    """What the probe of a run in Slurm job ``job_id`` published (medic_probe: Run under its identity, Heartbeat and
    Step under Job, Cluster)."""
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    job = [{"Name": "Job", "Value": run}, {"Name": "Cluster", "Value": "pretrain-slurm"}]
    for index, minutes in enumerate(minutes_ago):
        at = ago(minutes=minutes)
        cloudwatch.put_metric_data(Namespace="Medic/Training", MetricData=[
            {"MetricName": "Run", "Dimensions": [*job, {"Name": "SlurmJobId", "Value": job_id}], "Value": 1,
             "Timestamp": at},
            {"MetricName": "Heartbeat", "Dimensions": job, "Value": 40, "Timestamp": at},
            {"MetricName": "Step", "Dimensions": job, "Value": step + 40 * index, "Timestamp": at}])


def test_given_a_run_a_watch_rule_covers_when_status_then_it_shows_with_its_last_step_and_budget(
        deployed: Deployed):
    # Given pretrain-slurm watches gpt-*, the run gpt-sweep-7 in Slurm job 5120 reported 3 and 2 minutes ago, and
    # Medic requeued that job once
    deployed.config_file.write_text(WATCHING)
    probe_reports("gpt-sweep-7", "5120", [3, 2], step=1200)
    JobStore(deployed.ledger()).claim_job_restarts(["slurm:pretrain-slurm:5120"], 3, ago(minutes=30), None)
    # When the operator asks for the status (and the report)
    status = deployed.cli("status", "--config", str(deployed.config_file), "--json")
    text = deployed.cli("status", "--config", str(deployed.config_file))
    report = deployed.cli("report", "--config", str(deployed.config_file), "--json")
    # Then the run is listed by its rule, with its job id, its last step and its own budget
    assert status.code == 0, status.err
    (line,) = json.loads(status.out)["watched"]
    assert (line["cluster"], line["job"], line["watched_by"], line["run"], line["state"]) == (
        "pretrain-slurm", "gpt-sweep-7", "rule gpt-", '"5120"', "stepping")
    assert (line["last_step"], line["restarts"], line["max_restarts"]) == ("1240", 1, 3)
    assert "rule gpt-" in text.out and "1/3" in text.out
    assert report.code == 0, report.err
    assert json.loads(report.out)["watched"] == [line]


def test_given_no_run_reported_when_status_then_watched_says_nothing_is_covered(deployed: Deployed):
    deployed.config_file.write_text(WATCHING)
    result = deployed.cli("status", "--config", str(deployed.config_file))
    assert result.code == 0, result.err
    assert "nothing: no jobs[] entry, and no run matches a watch rule" in result.out
