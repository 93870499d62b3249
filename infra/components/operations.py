from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.function import REDRIVE_RUNBOOK, MedicFunction
from medic.config import CANARY_LATE

CANARY_LATE_MINUTES = int(CANARY_LATE.total_seconds() // 60)

FIVE_MINUTES = Duration.minutes(5)
# Alarms on sparse metrics (a datapoint only when something happens) use one-minute periods: CloudWatch
# evaluates every minute, and "might repeatedly re-evaluate the last set of data points for a period of time
# after the metric has stopped flowing ... To mitigate this behavior, use shorter periods" (CloudWatch user guide,
# "How alarm state is evaluated when data is missing"). With 5 minutes, one failed event paged three times.
SPARSE_PERIOD = Duration.minutes(1)
RECORDS = 'filter message = "remediation"'
RECORD_FIELDS = "fields @timestamp, cluster, instance_group, node_id, job, trigger, fault, action, outcome, why, " \
                "needs_human, paged, reason, jobs.0.id, incident"
INCIDENTS_NAMESPACE = "Medic/Incidents"
INCIDENTS = 'filter message = "incident"'
INCIDENT_DURATIONS = {"time_to_detect_s": "time to detect", "time_to_repair_s": "time to repair",
                      "total_s": "time to resolve"}
INCIDENT_FIELDS = ("fields @timestamp, kind, cluster, job, node_id, fault, time_to_detect_s, time_to_act_s, "
                   "time_to_repair_s, time_to_resume_s, total_s, lost_steps, lost_minutes, incident")
# The managed job services side by side (SageMaker training jobs, AWS Batch, Amazon Bedrock): a managed job's incident
# names its service (job:, batch-job:, bedrock-job:), its incident line's kind too (training_job, batch_job,
# bedrock_job). Saved queries and dashboard widgets both.
MANAGED_JOB_FAILURES = (f'{RECORD_FIELDS}\n| {RECORDS}\n| filter trigger = "job_state"\n'
                        "| parse incident /^(?<service>[a-z-]+):/\n"
                        "| stats count(*) as failures by service, outcome, why")
MANAGED_JOB_RECOVERIES = (f"{INCIDENT_FIELDS}\n| {INCIDENTS}"
                          ' and kind in ["training_job", "batch_job", "bedrock_job"]\n'
                          "| stats count(*) as incidents, count(resumed_at) as resumed, "
                          "pct(time_to_resume_s, 50) as p50_resume_s, max(time_to_resume_s) as max_resume_s by kind")
QUERIES = {
    "All decisions (last 24 h: set the time range)": f"{RECORD_FIELDS}\n| {RECORDS}\n| sort @timestamp desc\n"
                                                     "| limit 10000",
    "Failed and suppressed": f'{RECORD_FIELDS}\n| {RECORDS}\n| filter outcome in ["failed", "suppressed"]\n'
                             "| sort @timestamp desc",
    "One node or job (edit the filter)": f'{RECORD_FIELDS}\n| {RECORDS}\n'
                                         '| filter node_id = "i-0123456789abcdef0" or job = "llama3-70b"\n'
                                         "| sort @timestamp asc",
    "Time from event to action per cluster": "filter ispresent(EventToActionSeconds)\n"
                                             "| stats avg(EventToActionSeconds) as mean_s, "
                                             "pct(EventToActionSeconds, 50) as p50_s, "
                                             "pct(EventToActionSeconds, 99) as p99_s, count(*) as actions by cluster",
    # last: a query's construct id is its index (Query<n>), and the deployed ones keep theirs
    "Needs a human (medic history --needs-human)": f"{RECORD_FIELDS}\n| {RECORDS}\n| filter needs_human = 1\n"
                                                   "| sort @timestamp desc",
    "Managed job failures by service and outcome": MANAGED_JOB_FAILURES,
    # a restart's line is written when its clone runs (Batch RUNNING, Bedrock InProgress, SageMaker Training)
    "Managed job restarts: fault to running again by service": MANAGED_JOB_RECOVERIES,
}


class Operations(Construct):
    """What operators look at and what wakes them when Medic itself is unwell: health alarms on every
    function and dead-letter queue (paging through Medic's topic), the dashboard, saved queries."""

    def __init__(self, scope: Construct, construct_id: str, *, topic: sns.ITopic, mode_parameter: str,
                 functions: list[MedicFunction], dead_letter_queues: dict[str, sqs.IQueue],
                 jobs: Sequence[str] = (), runbooks: dict[str, str] | None = None) -> None:
        super().__init__(scope, construct_id)
        page = actions.SnsAction(topic)
        runbooks = runbooks or {}  # a dead-letter queue's own runbook, by name, where it is not the redrive
        self.health_alarms: list[cw.Alarm] = []
        for function in functions:
            self._function_alarms(function, page)
        for name, queue in dead_letter_queues.items():
            alarm = queue.metric_approximate_number_of_messages_visible(
                period=FIVE_MINUTES, statistic="Maximum").create_alarm(
                self, f"DeadLetters-{name}",
                alarm_description=(f"Medic: events wait in the dead-letter queue {name}. They failed every retry: "
                                   f"see {runbooks.get(name, REDRIVE_RUNBOOK)}."),
                threshold=0, comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1, treat_missing_data=cw.TreatMissingData.NOT_BREACHING)
            alarm.add_alarm_action(page)
            self.health_alarms.append(alarm)

        page_failures = _medic_metric("PageFailures", period=SPARSE_PERIOD).create_alarm(
            self, "PageFailures",
            alarm_description=("Medic could not publish a page (SNS). The decision is in the remediation log; "
                               "check the topic, its KMS key and subscriptions."),
            threshold=0, comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD, evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING)
        page_failures.add_alarm_action(page)  # SNS may be back by then; the alarm shows in the console either way
        self.health_alarms.append(page_failures)
        mode_unreadable = _medic_metric("ModeReadFailures", period=SPARSE_PERIOD).create_alarm(
            self, "ModeReadFailures",
            alarm_description=(f"Medic could not read its mode parameter {mode_parameter}; each function keeps the "
                               "last mode known (fail closed). Check the parameter exists and the functions may read "
                               "it (ssm:GetParameter); medic status shows the mode."),
            threshold=0, comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD, evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING)
        mode_unreadable.add_alarm_action(page)
        self.health_alarms.append(mode_unreadable)
        # The canary (flows/canary): the reconciler's gauge of how long ago its last canary came back through the
        # canary rule. One datapoint per reconciler run (5 minutes): one period each, as the failed-node gauges.
        # Missing data (no run) is not breaching: the reconciler's own Errors alarm says why it did not run.
        canary_late = cw.Metric(namespace="Medic", metric_name="CanaryAgeSeconds", dimensions_map={"service": "medic"},
                                statistic="Maximum", period=FIVE_MINUTES).create_alarm(
            self, "CanaryLate",
            alarm_description=(f"Medic's canary has not come back for more than {CANARY_LATE_MINUTES} minutes: an "
                               "event no longer travels EventBridge -> rule -> function -> ledger (the reconciler "
                               "cannot put events, the canary rule is gone or disabled, the node remediation function "
                               "fails or cannot write its ledger). Medic may be blind to HyperPod's node events: see "
                               "docs/operator-runbook.md 'The canary is late'."),
            threshold=CANARY_LATE.total_seconds(), comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1, treat_missing_data=cw.TreatMissingData.NOT_BREACHING)
        canary_late.add_alarm_action(page)
        canary_late.add_ok_action(page)  # its all-clear: the pipeline works again
        self.health_alarms.append(canary_late)
        self._let_alarms_publish(topic)

        log_groups = [function.log_group for function in functions]
        for index, (title, query) in enumerate(QUERIES.items()):
            # L1: the saved query reads exactly as written here
            logs.CfnQueryDefinition(self, f"Query{index}", name=f"Medic/{title}", query_string=query,
                                    log_group_names=[group.log_group_name for group in log_groups])
        self.dashboard = self._dashboard(functions, dead_letter_queues, log_groups, mode_parameter)
        self._incident_widgets(self.dashboard, log_groups, jobs)

    def _let_alarms_publish(self, topic: sns.ITopic) -> None:
        """The topic's policy replaces SNS's default one (enforce_ssl writes a Deny-only policy), so CloudWatch
        may publish only because this statement says so: for exactly these alarms of this account (SNS Developer
        Guide, "Amazon SNS access policy"; CloudWatch User Guide, "Confused deputy prevention": aws:SourceArn is
        the alarm's ARN, aws:SourceAccount its account). Medic's functions publish through their own roles."""
        topic.add_to_resource_policy(iam.PolicyStatement(
            sid="AllowMedicHealthAlarmsToPublish",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                        "ArnEquals": {"aws:SourceArn": [alarm.alarm_arn for alarm in self.health_alarms]}},
        ))

    def _function_alarms(self, function: MedicFunction, page: actions.SnsAction) -> None:
        handler = function.function
        name = function.node.path.replace("/", "-")
        timeout_ms = function.timeout_seconds * 1000
        for kind, metric, threshold, what in (
            ("Errors", handler.metric_errors(period=SPARSE_PERIOD, statistic="Sum"), 0,
             "raised errors (the events are retried, then kept in its dead-letter queue)"),
            ("Throttles", handler.metric_throttles(period=SPARSE_PERIOD, statistic="Sum"), 0,
             "was throttled (its reserved concurrency, or the account's, is in use: a flood of events, which wait in "
             "Lambda's queue and are retried for up to 6 hours)"),
            ("Duration", handler.metric_duration(period=SPARSE_PERIOD, statistic="Maximum"), 0.8 * timeout_ms,
             f"ran for more than 80% of its {function.timeout_seconds} s timeout"),
        ):
            alarm = metric.create_alarm(
                self, f"{kind}-{name}",
                alarm_description=f"Medic's function {name} {what}. Its log group says why.",
                threshold=threshold, comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1, treat_missing_data=cw.TreatMissingData.NOT_BREACHING)
            alarm.add_alarm_action(page)
            self.health_alarms.append(alarm)

    def _dashboard(self, functions: list[MedicFunction], dead_letter_queues: dict[str, sqs.IQueue],
                   log_groups: list[logs.ILogGroup], mode_parameter: str) -> cw.Dashboard:
        names = [group.log_group_name for group in log_groups]

        def records(title: str, query: str, width: int = 12, view: cw.LogQueryVisualizationType =
                    cw.LogQueryVisualizationType.TABLE) -> cw.LogQueryWidget:
            return cw.LogQueryWidget(title=title, log_group_names=names, query_string=query, width=width,
                                     height=6, view=view)

        dashboard = cw.Dashboard(self, "Dashboard", default_interval=Duration.days(1))
        dashboard.add_widgets(
            cw.TextWidget(markdown=(
                "# Medic\nEvery decision is a remediation record. Mode parameter: "
                f"`{mode_parameter}` (act | dry_run | paused): `medic status`, `medic pause --reason ...`."),
                width=24, height=2),
            records("Actions and outcomes per cluster (hourly)",
                    f"{RECORDS} | stats count(*) as decisions by bin(1h), cluster, action, outcome",
                    width=12, view=cw.LogQueryVisualizationType.BAR),
            cw.GraphWidget(
                title="Suppressed, failed, pages (held: after a page window's summary)", width=12, height=6,
                left=[_search("Remediations", "outcome", "suppressed"), _search("Remediations", "outcome", "failed"),
                      _medic_metric("Pages"), _medic_metric("PageFailures"), _medic_metric("PagesHeld")]),
        )
        dashboard.add_widgets(
            records("Open incidents (latest decision per incident, not closed)",
                    f"{RECORDS} | stats latest(outcome) as outcome, latest(fault) as fault, "
                    "latest(@timestamp) as last by incident, cluster"
                    ' | filter fault not in ["healthy", "recovered"] and outcome not in ["ignored"]'
                    " | sort last desc | limit 50"),
            cw.GraphWidget(
                title="Time from event to action (s)", width=12, height=6,
                left=[cw.MathExpression(
                    expression=f"SEARCH('{{Medic,action,service}} MetricName=\"EventToActionSeconds\"', '{stat}', 300)",
                    label=stat, period=FIVE_MINUTES) for stat in ("p50", "p99")]),
        )
        dashboard.add_widgets(
            cw.GraphWidget(title="Dead-letter queues (messages waiting)", width=12, height=6,
                           left=[queue.metric_approximate_number_of_messages_visible(
                               period=FIVE_MINUTES, statistic="Maximum", label=name)
                               for name, queue in dead_letter_queues.items()]),
            records("Mode at the latest decisions", f"{RECORDS} | stats latest(mode) as mode, "
                                                    "latest(@timestamp) as at by bin(1h) | sort at desc | limit 24"),
        )
        dashboard.add_widgets(
            cw.GraphWidget(title="Medic functions: errors and throttles", width=12, height=6,
                           left=[metric for function in functions for metric in (
                               function.function.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
                               function.function.metric_throttles(period=FIVE_MINUTES, statistic="Sum"))]),
            records("Latest remediation records", f"{RECORD_FIELDS} | {RECORDS} | sort @timestamp desc | limit 50"),
        )
        # Medic's dead-man's switches (issue 29): each cluster's agent heartbeat age, the canary's
        dashboard.add_widgets(
            cw.GraphWidget(
                title="Agents: seconds since each cluster's agent heartbeat (DynamoDB's clock)", width=12, height=6,
                left=[cw.MathExpression(
                    expression="SEARCH('{Medic/Cluster,Cluster,service} MetricName=\"AgentHeartbeatAgeSeconds\"', "
                               "'Maximum', 300)", label="agent heartbeat age", period=FIVE_MINUTES)]),
            cw.GraphWidget(
                title="Canary: seconds since the last one came back (CanaryLate pages past 900)", width=12, height=6,
                left=[_medic_metric("CanaryAgeSeconds").with_(statistic="Maximum")]),
        )
        return dashboard


    @staticmethod
    def _incident_widgets(dashboard: cw.Dashboard, log_groups: list[logs.ILogGroup], jobs: Sequence[str]) -> None:
        """The incident timelines: each duration's p50/p99 (EMF, Medic/Incidents), the latest closed incidents, and a
        goodput widget per watched job (``jobs:`` in the config) from its incident lines, as `medic report` counts it
        without the probe: a day less each incident's downtime (to resumed, repaired or resolved; a slowdown costs
        none) and its re-done work."""
        names = [group.log_group_name for group in log_groups]
        dashboard.add_widgets(*[
            cw.GraphWidget(title=f"Incidents: {title} (s, p50 and p99)", width=8, height=6,
                           left=[cw.MathExpression(
                               expression=f"SEARCH('{{{INCIDENTS_NAMESPACE},cluster,kind,service}} "
                                          f"MetricName=\"{metric}\"', '{stat}', 3600)",
                               label=f"{stat}", period=Duration.hours(1)) for stat in ("p50", "p99")])
            for metric, title in INCIDENT_DURATIONS.items()])
        dashboard.add_widgets(cw.LogQueryWidget(
            title="Closed incidents (timeline: seconds from the fault)", log_group_names=names, width=24, height=6,
            query_string=f"{INCIDENT_FIELDS} | {INCIDENTS} | sort @timestamp desc | limit 50"))
        dashboard.add_widgets(
            cw.LogQueryWidget(title="Managed jobs (SageMaker, AWS Batch, Bedrock): failures by service and outcome",
                              log_group_names=names, width=12, height=6, query_string=MANAGED_JOB_FAILURES),
            cw.LogQueryWidget(title="Managed job restarts: fault to running again (s), by service",
                              log_group_names=names, width=12, height=6, query_string=MANAGED_JOB_RECOVERIES))
        widgets = [cw.LogQueryWidget(
            title=f"Goodput of {job} (daily, % of the day; from its incidents)", log_group_names=names, width=12,
            height=6, view=cw.LogQueryVisualizationType.LINE, query_string=goodput_query(job)) for job in jobs]
        for start in range(0, len(widgets), 2):
            dashboard.add_widgets(*widgets[start:start + 2])




def goodput_query(job: str) -> str:
    """A day's goodput of one job from its incident lines: 100% less the downtime (fault to resumed, else repaired,
    else resolved; a slowdown costs none) and the re-done work, per day (an incident counts on its closing day)."""
    return (f'{INCIDENTS} and (job = "{job}" or incident = "job:{job}") and kind != "slowdown"'
            " | fields coalesce(time_to_resume_s, time_to_repair_s, total_s, 0) + coalesce(lost_minutes, 0) * 60"
            " as lost_s"
            " | stats 100 - sum(lost_s) / 864 as goodput_pct, sum(lost_s) / 60 as lost_min, count(*) as incidents"
            " by bin(1d)")


def _medic_metric(name: str, period: Duration = FIVE_MINUTES) -> cw.Metric:
    """Medic's own counters carry Powertools' service dimension (POWERTOOLS_SERVICE_NAME=medic)."""
    return cw.Metric(namespace="Medic", metric_name=name, dimensions_map={"service": "medic"}, statistic="Sum",
                     period=period)


def _search(metric: str, dimension: str, value: str) -> cw.MathExpression:
    return cw.MathExpression(
        expression=f"SUM(SEARCH('{{Medic,action,outcome,service,trigger}} MetricName=\"{metric}\" "
                   f"{dimension}=\"{value}\"', "
                   "'Sum', 300))",
        label=value, period=FIVE_MINUTES)

