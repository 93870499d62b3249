from __future__ import annotations

import json
import math

from aws_cdk import Aws, Duration, Stack, Tags
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.components.function import METRICS_UNSCOPED, MedicFunction
from infra.components.reconciler import RECONCILE_EVERY
from infra.components.shared import Shared
from infra.components.training_job_restarts import acknowledge_prefix_scope, training_job_arn
from infra.event_patterns import fits, rule_pattern, set_rule_pattern
from medic.config import ALARM_PREFIX, Cluster, Guardrails, Job, alarm_name

PROBE_NAMESPACE = "Medic/Training"
CLUSTER_NAMESPACE = "Medic/Cluster"  # the reconciler's gauges (medic.obs.cluster_gauges)
SERVICE = "medic"  # Powertools adds the service dimension (POWERTOOLS_SERVICE_NAME) to every EMF metric
SWEEP = RECONCILE_EVERY  # one gauge datapoint per sweep
ALARM_EVENT = "CloudWatch Alarm State Change"
MINUTE = Duration.minutes(1)
# The hang alarm's period: the probe checks every 10 s and publishes its `Stalled` verdict at high resolution
# (StorageResolution 1); "If the alarm period is 10 seconds or 30 seconds, the alarm is evaluated every 10 seconds"
# (CloudWatch User Guide, "Evaluating an alarm"; PutMetricAlarm Period: 10, 20, 30 or a multiple of 60, the short
# ones only for metrics stored at high resolution, and charged as high-resolution alarms).
HANG_PERIOD = Duration.seconds(10)


def _probe_metric(job: Job, name: str, statistic: str, period: Duration = MINUTE) -> cw.Metric:
    return cw.Metric(namespace=PROBE_NAMESPACE, metric_name=name, dimensions_map={"Job": job.name},
                     statistic=statistic, period=period)


class TrainingAlarms(Construct):
    """Alarms on the training probe's metrics (per job) and on the reconciler's failed-node gauge (per cluster).

    Each alarm's name (medic-<kind>-<subject>), description and tags say what it watches, so the
    alarm handler routes it without a lookup table. No alarm actions: Medic decides who hears of it.
    """

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared) -> None:
        super().__init__(scope, construct_id)
        config = shared.config
        self.alarms: list[cw.Alarm] = []
        self.names: list[str] = []
        for job in config.jobs:
            self._stall(job)
            self._hang(job)
            self._divergence(job)
            self._slowdown(job)
        for cluster in config.clusters:
            self._failed_nodes(cluster, config.guardrails_for(cluster))

    def _alarm(self, construct_id: str, *, kind: str, subject: str, cluster: str, job: str | None,
               description: str, metric: cw.IMetric, threshold: float,
               comparison: cw.ComparisonOperator, periods: int, missing: cw.TreatMissingData) -> cw.Alarm:
        labels = {"medic:kind": kind, "medic:cluster": cluster, **({"medic:job": job} if job else {})}
        name = alarm_name(kind, subject)
        alarm = cw.Alarm(
            self, construct_id,
            alarm_name=name,
            alarm_description=f"{description} {json.dumps(labels, separators=(',', ':'))}",
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=periods,
            datapoints_to_alarm=periods,
            treat_missing_data=missing,
        )
        for key, value in labels.items():
            Tags.of(alarm).add(key, value)
        self.alarms.append(alarm)
        self.names.append(name)
        return alarm

    def _stall(self, job: Job) -> None:
        self._alarm(
            f"Stall-{job.name}", kind="stall", subject=job.name, cluster=job.cluster, job=job.name,
            description=f"Training heartbeat for {job.name} has stopped: no step for {job.stall_minutes} minutes.",
            metric=_probe_metric(job, "Heartbeat", "Sum"),
            threshold=1, comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD, periods=job.stall_minutes,
            # a dead process publishes nothing: silence is the stall
            missing=cw.TreatMissingData.BREACHING)

    def _hang(self, job: Job) -> None:
        self._alarm(
            f"Hang-{job.name}", kind="hang", subject=job.name, cluster=job.cluster, job=job.name,
            description=(f"Training of {job.name} stopped stepping: its probe judged it stalled (no step for longer "
                         "than its own step intervals explain)."),
            metric=_probe_metric(job, "Stalled", "Maximum", HANG_PERIOD),
            threshold=1, comparison=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD, periods=1,
            # the probe publishes the verdict at every 10-second check while stalled and with every flush (once a
            # minute): the periods between hold no datapoint and keep the state. A dead process says nothing: the
            # stall alarm (missing Heartbeat) catches it; a new process's first flush (0) turns this one OK.
            missing=cw.TreatMissingData.IGNORE)

    def _divergence(self, job: Job) -> None:
        non_finite = _probe_metric(job, "NonFiniteLoss", "Sum")
        if job.loss_ceiling is None:
            metric: cw.IMetric = non_finite
            what = "a NaN or infinite loss"
        else:
            metric = cw.MathExpression(
                expression=f"IF(FILL(nonfinite, 0) > 0 OR FILL(loss, 0) > {job.loss_ceiling!r}, 1, 0)",
                using_metrics={"nonfinite": non_finite, "loss": _probe_metric(job, "Loss", "Maximum")},
                label="diverged", period=MINUTE)
            what = f"a NaN or infinite loss, or a loss above {job.loss_ceiling!r}"
        self._alarm(
            f"Divergence-{job.name}", kind="divergence", subject=job.name, cluster=job.cluster, job=job.name,
            description=f"Training of {job.name} diverged: {what}.",
            metric=metric, threshold=1, comparison=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            periods=1, missing=cw.TreatMissingData.NOT_BREACHING)

    def _slowdown(self, job: Job) -> None:
        ratio = cw.MathExpression(
            expression="IF(FILL(baseline, 0) > 0, tps / baseline, 1)",
            using_metrics={"tps": _probe_metric(job, "TokensPerSecond", "Average"),
                           "baseline": _probe_metric(job, "TokensPerSecondBaseline", "Average")},
            label="throughput / recent level", period=MINUTE)
        self._alarm(
            f"Slowdown-{job.name}", kind="slowdown", subject=job.name, cluster=job.cluster, job=job.name,
            description=(f"Training of {job.name} slowed down: throughput below {job.slowdown_fraction:.0%} of its "
                         f"recent level for {job.slowdown_minutes} minutes."),
            metric=ratio, threshold=job.slowdown_fraction, comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            periods=job.slowdown_minutes, missing=cw.TreatMissingData.NOT_BREACHING)

    def _failed_nodes(self, cluster: Cluster, guardrails: Guardrails) -> None:
        # HyperPod publishes no node metrics for Slurm clusters (/aws/sagemaker/Clusters/<name>/<id> is the health
        # agent's log group); Medic's reconciler publishes its own gauges every sweep (5 minutes), for both
        # orchestrators. One datapoint per period of one sweep: "failed for repair_minutes" is every period of
        # that span breaching. Missing data (no sweep) is not breaching: the reconciler's own alarms say why.
        periods = max(1, math.ceil(guardrails.repair_minutes / SWEEP.to_minutes()))
        failed = cw.Metric(namespace=CLUSTER_NAMESPACE, metric_name="FailedNodes",
                           dimensions_map={"Cluster": cluster.name, "service": SERVICE}, statistic="Maximum",
                           period=SWEEP)
        metric: cw.IMetric = failed
        if cluster.orchestrator == "eks" and cluster.eks_cluster_name:
            # Where Container Insights runs, its failed-node count is a second witness (EKS only).
            metric = cw.MathExpression(
                expression="MAX([failed, insights])",
                using_metrics={"failed": failed, "insights": cw.Metric(
                    namespace="ContainerInsights", metric_name="cluster_failed_node_count",
                    dimensions_map={"ClusterName": cluster.eks_cluster_name}, statistic="Maximum", period=SWEEP)},
                label="failed nodes", period=SWEEP)
        self._alarm(
            f"FailedNodes-{cluster.name}", kind="failed-nodes", subject=cluster.name, cluster=cluster.name,
            job=None,
            description=(f"Cluster {cluster.name} has had failed nodes for {guardrails.repair_minutes} minutes, "
                         "longer than a repair should take."),
            metric=metric, threshold=0, comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            periods=periods, missing=cw.TreatMissingData.NOT_BREACHING)


class AlarmResponse(Construct):
    """Medic's alarms changing state → the alarm handler; and a schedule that checks training resumed
    after each restart (proof of recovery)."""

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared, alarms: TrainingAlarms,
                 agent_queues: dict[str, str], agent_queue_arns: list[str]) -> None:
        super().__init__(scope, construct_id)
        environment = {**shared.environment(),
                       "AGENT_QUEUES": Stack.of(self).to_json_string(agent_queues)}
        self.handler = MedicFunction(
            self, "Handler", handler="medic.handlers.alarm.handler",
            description="Medic: act on training and cluster alarms (restart, page, close)",
            environment=environment, layers=list(shared.layers), key=shared.key,
            unscoped_reason=METRICS_UNSCOPED, reserved_concurrency=shared.reserved("alarm"))
        self.recovery = MedicFunction(
            self, "RecoveryCheck", handler="medic.handlers.recovery_check.handler",
            description="Medic: check that training resumed after each restart; escalate if not",
            environment=environment, layers=list(shared.layers), key=shared.key,
            unscoped_reason=METRICS_UNSCOPED, reserved_concurrency=shared.reserved("recovery_check"))
        for function in (self.handler, self.recovery):
            shared.grant_ledger_paging_mode(function.role)
            function.role.add_to_policy(iam.PolicyStatement(
                actions=["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"], resources=["*"]))
        self._read_restarted_training_jobs(shared)
        if agent_queue_arns:  # only the alarm handler requeues; the recovery check escalates by page
            self.handler.role.add_to_policy(iam.PolicyStatement(actions=["sqs:SendMessage"],
                                                                resources=agent_queue_arns))

        self.rule = events.Rule(
            self, "Rule",
            description="State changes of Medic's own alarms",
            event_pattern=events.EventPattern(
                source=["aws.cloudwatch"], detail_type=[ALARM_EVENT], account=[Aws.ACCOUNT_ID],
                detail={"alarmName": alarms.names, "state": {"value": ["ALARM", "OK"]}}),
        )
        self.handler.route(self.rule)
        pattern = rule_pattern(self.rule)
        if not fits(self, pattern):  # too many names for EventBridge's pattern quota: every Medic alarm's name
            pattern["detail"]["alarmName"] = [{"prefix": ALARM_PREFIX}]
            set_rule_pattern(self.rule, pattern)
        self.schedule = events.Rule(
            self, "RecoverySchedule",
            description="Medic: proof-of-recovery check after restarts",
            schedule=events.Schedule.rate(Duration.minutes(5)),
        )
        self.recovery.route(self.schedule, scheduled=True)

    def _read_restarted_training_jobs(self, shared: Shared) -> None:
        """The recovery check reads each clone Medic started (DescribeTrainingJob) to time its restart's incident line
        (flows/jobs/timeline): only the configured prefixes' jobs, read only."""
        prefixes = sorted({spec.prefix for spec in shared.config.training_jobs}
                          | {spec.prefix.lower() for spec in shared.config.training_jobs})
        if not prefixes:
            return
        role = self.recovery.role
        role.add_to_policy(iam.PolicyStatement(actions=["sagemaker:DescribeTrainingJob"],
                                               resources=[training_job_arn(f"{prefix}*") for prefix in prefixes]))
        acknowledge_prefix_scope(role, prefixes, "Medic's restarts are named {prefix}...-r<k>: the configured prefix "
                                                 "is the scope (read only).")
