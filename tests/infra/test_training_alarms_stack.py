"""Specification: alarms on the training probe's metrics for each configured job, the reconciler's failed-node
gauge per cluster, and the rule that routes only Medic's own alarms to the alarm handler."""

from __future__ import annotations

import json

import pytest

from infra.components.training_alarms import CLUSTER_NAMESPACE
from tests.helpers import load_event
from tests.infra.conftest import ROOT, one, resources, synthesize
from tests.infra.test_node_remediation_stack import matches

TWO_JOBS = """
notify: {emails: [oncall@example.com]}
clusters:
  - {name: pretrain-slurm, id: k3v9q2w8x1za, orchestrator: slurm}
  - {name: finetune-eks, id: p7r2m4x9c1qa, orchestrator: eks, eks_cluster_name: ft-eks}
jobs:
  - {name: llama3-70b, cluster: pretrain-slurm, stall_minutes: 10, loss_ceiling: 12.5}
  - {name: mistral-ft, cluster: finetune-eks, stall_minutes: 7, slowdown_fraction: 0.5, slowdown_minutes: 15}
"""


@pytest.fixture(scope="module")
def two_jobs(tmp_path_factory) -> dict:
    directory = tmp_path_factory.mktemp("two-jobs")
    config = directory / "medic.yaml"
    config.write_text(TWO_JOBS)
    _, template_path = synthesize(config, directory / "cdk.out")
    return json.loads(template_path.read_text())


def alarms(raw: dict) -> dict[str, dict]:
    """Medic's training and cluster alarms (its health alarms are unnamed and page directly)."""
    found = resources(raw, "AWS::CloudWatch::Alarm").values()
    return {res["Properties"]["AlarmName"]: res["Properties"] for res in found if "AlarmName" in res["Properties"]}


def tags(alarm: dict) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in alarm["Tags"]}


def test_each_job_gets_a_stall_a_hang_a_divergence_and_a_slowdown_alarm_and_each_cluster_a_failed_node_alarm(
        two_jobs):
    assert sorted(alarms(two_jobs)) == sorted([
        "medic-stall-llama3-70b", "medic-hang-llama3-70b", "medic-divergence-llama3-70b", "medic-slowdown-llama3-70b",
        "medic-stall-mistral-ft", "medic-hang-mistral-ft", "medic-divergence-mistral-ft", "medic-slowdown-mistral-ft",
        "medic-failed-nodes-pretrain-slurm", "medic-failed-nodes-finetune-eks"])


@pytest.mark.parametrize("job", ["llama3-70b", "mistral-ft"])
def test_a_hang_is_the_probes_own_stalled_verdict_at_a_10_second_period_with_missing_data_keeping_the_state(
        two_jobs, job):
    alarm = alarms(two_jobs)[f"medic-hang-{job}"]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"], alarm["Period"]) == (
        "Medic/Training", "Stalled", "Maximum", 10)
    assert alarm["Dimensions"] == [{"Name": "Job", "Value": job}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (1, 1)
    assert alarm["TreatMissingData"] == "ignore"
    assert tags(alarm)["medic:kind"] == "hang" and tags(alarm)["medic:job"] == job


@pytest.mark.parametrize("job,minutes", [("llama3-70b", 10), ("mistral-ft", 7)])
def test_a_stall_is_a_heartbeat_missing_for_stall_minutes_with_missing_data_breaching(two_jobs, job, minutes):
    alarm = alarms(two_jobs)[f"medic-stall-{job}"]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"], alarm["Period"]) == (
        "Medic/Training", "Heartbeat", "Sum", 60)
    assert alarm["Dimensions"] == [{"Name": "Job", "Value": job}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("LessThanThreshold", 1)
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (minutes, minutes)
    assert alarm["TreatMissingData"] == "breaching"
    assert tags(alarm)["medic:kind"] == "stall" and tags(alarm)["medic:job"] == job


def test_divergence_is_a_non_finite_loss_or_a_loss_above_the_ceiling(two_jobs):
    with_ceiling = alarms(two_jobs)["medic-divergence-llama3-70b"]
    expression = next(m["Expression"] for m in with_ceiling["Metrics"] if "Expression" in m)
    assert "nonfinite" in expression and "> 12.5" in expression
    names = {m["MetricStat"]["Metric"]["MetricName"] for m in with_ceiling["Metrics"] if "MetricStat" in m}
    assert names == {"NonFiniteLoss", "Loss"}
    assert (with_ceiling["ComparisonOperator"], with_ceiling["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)
    assert with_ceiling["TreatMissingData"] == "notBreaching"
    plain = alarms(two_jobs)["medic-divergence-mistral-ft"]
    assert (plain["MetricName"], plain["Statistic"], plain["Threshold"]) == ("NonFiniteLoss", "Sum", 1)


def test_slowdown_compares_throughput_with_its_recent_level(two_jobs):
    alarm = alarms(two_jobs)["medic-slowdown-mistral-ft"]
    expression = next(m["Expression"] for m in alarm["Metrics"] if "Expression" in m)
    assert "tps / baseline" in expression
    names = {m["MetricStat"]["Metric"]["MetricName"] for m in alarm["Metrics"] if "MetricStat" in m}
    assert names == {"TokensPerSecond", "TokensPerSecondBaseline"}
    assert (alarm["ComparisonOperator"], alarm["Threshold"], alarm["EvaluationPeriods"]) == (
        "LessThanThreshold", 0.5, 15)
    assert alarm["TreatMissingData"] == "notBreaching"


def test_failed_node_alarms_watch_medics_own_gauge_for_longer_than_a_repair(two_jobs):
    # HyperPod publishes no CloudWatch node metric for Slurm: the reconciler's gauge is what the alarm watches
    slurm = alarms(two_jobs)["medic-failed-nodes-pretrain-slurm"]
    assert (slurm["Namespace"], slurm["MetricName"], slurm["Statistic"]) == (CLUSTER_NAMESPACE, "FailedNodes",
                                                                           "Maximum")
    assert sorted((d["Name"], d["Value"]) for d in slurm["Dimensions"]) == [("Cluster", "pretrain-slurm"),
                                                                           ("service", "medic")]
    # one datapoint per 5-minute sweep; repair_minutes (30) of failed sweeps
    assert (slurm["Period"], slurm["EvaluationPeriods"], slurm["DatapointsToAlarm"]) == (300, 6, 6)
    assert (slurm["ComparisonOperator"], slurm["Threshold"], slurm["TreatMissingData"]) == (
        "GreaterThanThreshold", 0, "notBreaching")
    # EKS with Container Insights: its failed-node count is a second witness next to Medic's gauge
    eks = alarms(two_jobs)["medic-failed-nodes-finetune-eks"]
    expression = next(m["Expression"] for m in eks["Metrics"] if "Expression" in m)
    stats = {m["Id"]: m["MetricStat"] for m in eks["Metrics"] if "MetricStat" in m}
    assert expression == "MAX([failed, insights])"
    assert (stats["failed"]["Metric"]["Namespace"], stats["failed"]["Metric"]["MetricName"]) == (
        CLUSTER_NAMESPACE, "FailedNodes")
    assert (stats["insights"]["Metric"]["Namespace"], stats["insights"]["Metric"]["Dimensions"]) == (
        "ContainerInsights", [{"Name": "ClusterName", "Value": "ft-eks"}])


def test_no_alarm_watches_the_health_agents_log_group_prefix_as_a_metric_namespace(two_jobs, raw):
    # /aws/sagemaker/Clusters is where HyperPod's health agent writes logs; no metric is published there
    for template in (two_jobs, raw):
        for alarm in resources(template, "AWS::CloudWatch::Alarm").values():
            properties = alarm["Properties"]
            namespaces = [properties.get("Namespace")] + [
                m["MetricStat"]["Metric"]["Namespace"] for m in properties.get("Metrics", []) if "MetricStat" in m]
            assert "/aws/sagemaker/Clusters" not in namespaces


def test_the_gauge_namespace_is_the_one_the_reconciler_publishes():
    from medic.obs import CLUSTER_NAMESPACE as PUBLISHED
    from medic.obs import SERVICE

    assert (PUBLISHED, SERVICE) == (CLUSTER_NAMESPACE, "medic")


def test_alarms_carry_job_cluster_and_kind_in_description_and_tags_and_page_nobody_directly(two_jobs):
    for name, alarm in alarms(two_jobs).items():
        labels = json.loads(alarm["AlarmDescription"][alarm["AlarmDescription"].index("{"):])
        assert labels == tags(alarm)
        assert name.startswith(f"medic-{labels['medic:kind']}-")
        assert "AlarmActions" not in alarm and "OKActions" not in alarm


def test_the_alarm_rule_takes_the_sample_alarm_event_and_not_alarms_medic_does_not_own(raw):
    pattern = one(raw, "AWS::Events::Rule", "AlarmResponseRule")["Properties"]["EventPattern"]
    event = load_event("cloudwatch-alarm-state-change")
    assert matches(pattern, event)
    for other in ("cpu-high", "medic-stall-someone-elses-job"):
        foreign = json.loads(json.dumps(event))
        foreign["detail"]["alarmName"] = other
        assert not matches(pattern, foreign)


def test_the_alarm_handler_may_requeue_only_through_the_agent_queues(raw):
    policy = one(raw, "AWS::IAM::Policy", "AlarmResponseHandlerRole")["Properties"]["PolicyDocument"]
    send = next(s for s in policy["Statement"] if s["Action"] == "sqs:SendMessage")
    queues = send["Resource"] if isinstance(send["Resource"], list) else [send["Resource"]]
    assert any(q["Fn::GetAtt"][0].startswith("SlurmJobRequeueAgentpretrainslurmQueue") for q in queues)


def test_proof_of_recovery_runs_on_a_schedule_with_a_dead_letter_queue(raw):
    rule = one(raw, "AWS::Events::Rule", "AlarmResponseRecoverySchedule")["Properties"]
    assert rule["ScheduleExpression"] == "rate(5 minutes)"
    assert "DeadLetterConfig" in rule["Targets"][0]


def test_every_function_runs_a_handler_that_exists(raw):
    import importlib

    for function in resources(raw, "AWS::Lambda::Function").values():
        module, name = function["Properties"]["Handler"].rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), name)), module
    assert (ROOT / "functions" / "medic").is_dir()
