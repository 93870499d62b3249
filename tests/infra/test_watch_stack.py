"""Watch by pattern (issue 33): no alarm per run. With watch rules (medic.example.yaml), the reconciler reads the
clusters' runs (ListMetrics, GetMetricData: no resource-level permissions) and restarts a stalled one through the
agent queues it already sends to; without (medic.yaml), it reads no metric. cdk-nag passes on both (the synth fails
on any unacknowledged finding)."""

from __future__ import annotations

import json

from tests.infra.conftest import resources
from tests.infra.test_iam import actions_of, statements

READS = {"cloudwatch:GetMetricData", "cloudwatch:ListMetrics"}


def test_with_watch_rules_the_reconciler_reads_metrics_on_star_and_nothing_more(example_raw):
    grants = [s for s in statements(example_raw, "ReconcilerHandler") if actions_of(s) & READS]
    on_star = set().union(*(actions_of(s) for s in statements(example_raw, "ReconcilerHandler")
                            if s["Resource"] == "*"))
    assert all(s["Resource"] == "*" for s in grants)
    assert on_star == READS | {"xray:PutTelemetryRecords", "xray:PutTraceSegments"}  # X-Ray: every function's
    sends = [s for s in statements(example_raw, "ReconcilerHandler") if "sqs:SendMessage" in actions_of(s)]
    # exactly the agent queues (the ones it already sends node commands to) and its own DLQ, never "*"
    queues = sorted(lid for lid in resources(example_raw, "AWS::SQS::Queue")
                    if lid.startswith("SlurmJobRequeueAgent") and "DeadLetters" not in lid)
    named = sorted(ref["Fn::GetAtt"][0] for s in sends for ref in
                   (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]))
    assert queues and named == sorted([*queues, next(lid for lid in resources(example_raw, "AWS::SQS::Queue")
                                              if lid.startswith("ReconcilerHandlerDeadLetters"))])  # + its DLQ


def test_without_watch_rules_the_reconciler_reads_no_metric(raw):
    assert not [s for s in statements(raw, "ReconcilerHandler") if actions_of(s) & READS]


def test_no_alarm_watches_a_run(example_raw):
    alarms = resources(example_raw, "AWS::CloudWatch::Alarm").values()
    text = [json.dumps(alarm["Properties"]) for alarm in alarms]
    assert alarms and not [one for one in text if '"Run"' in one or "medic-watch" in one]
