"""The metrics a replay produces, as CloudWatch would hold them, and its alarms' minute-by-minute evaluation.

Sources of datapoints:
- PutMetricData from the probe and ``metric`` directives (``World.metrics.published``);
- Medic's EMF lines, extracted as CloudWatch Logs does (``emf``): "Embedded metric format specification",
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
  (``_aws.Timestamp`` in epoch ms; one metric per dimension set of each directive; a value or an array);
- ``AWS/Lambda`` Invocations, Errors and Duration (ms) per function for each invocation attempt, dimension
  ``FunctionName`` (https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html: Errors counts
  "invocations that result in a function error"); Throttles never happen in the replay;
- ``AWS/SQS`` ApproximateNumberOfMessagesVisible, dimension ``QueueName``, sampled each minute for every queue
  an alarm watches ("automatically collected and pushed to CloudWatch at one-minute intervals",
  https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html).
  An event Lambda gives up on is sent to the function's dead-letter queue (``dead_letter``), as Lambda does.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sim.alarms import AlarmBook, Transition, metric_key
from sim.cfn import SimError
from sim.iam import Authorization

MINUTE = timedelta(minutes=1)
# "If the alarm period is 10 seconds or 30 seconds, the alarm is evaluated every 10 seconds" (CloudWatch User Guide,
# "Evaluating an alarm", https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html).
HIGH_RESOLUTION_TICK = timedelta(seconds=10)
MAX_EVALUATIONS = 7 * 24 * 60  # minutes evaluated between two clock lines: a week, as the schedules' MAX_TICKS


class EmulatedCloudWatch:
    def __init__(self, world: Any) -> None:
        self.world = world
        self.book = AlarmBook(world.template)
        self.store = self.book.store
        self._published_seen = 0
        self.next_evaluation: datetime | None = None
        self.last_evaluation: datetime | None = None
        self.skipped = 0  # minutes never evaluated: the clock moved further than MAX_EVALUATIONS at once
        template = world.template
        self.queue_urls = {physical.attrs["QueueName"]: physical.ref for physical in template.physical.values()
                           if "QueueName" in physical.attrs}
        self.watched_queues = sorted({value for alarm in self.book.alarms for query in alarm.queries
                                      if query.namespace == "AWS/SQS" for name, value in query.dimensions
                                      if name == "QueueName"})
        unknown = [name for name in self.watched_queues if name not in self.queue_urls]
        if unknown:
            raise SimError(f"template: alarms watch queues the replay does not create: {', '.join(unknown)}")
        self.dead_letter_queues: dict[str, str] = {}  # function logical id -> its DLQ's URL
        self.dead_letter_arns: dict[str, str] = {}  # function logical id -> its DLQ's ARN
        # When each message went to a DLQ: a handler's retries run ahead of the minutes CloudWatch has evaluated
        # (they are evaluated when the clock next moves), and a sample must not see a message sent later.
        self._sent: dict[str, list[datetime]] = {}
        by_arn = {physical.attrs.get("Arn"): physical.ref for physical in template.physical.values()
                  if "QueueUrl" in physical.attrs}
        for lid in world.functions:
            target = template.properties(lid).get("DeadLetterConfig", {}).get("TargetArn")
            if target is not None:
                self.dead_letter_arns[lid] = template.resolve(target)
                self.dead_letter_queues[lid] = by_arn[self.dead_letter_arns[lid]]

    # the sources
    def emf(self, document: dict) -> None:
        """One EMF log line, as CloudWatch Logs turns it into metrics."""
        aws = document.get("_aws")
        if not isinstance(aws, dict) or not isinstance(aws.get("Timestamp"), int | float):
            return
        at = datetime.fromtimestamp(aws["Timestamp"] / 1000, UTC)
        for directive in aws.get("CloudWatchMetrics") or []:
            namespace = directive.get("Namespace")
            for dimension_set in directive.get("Dimensions") or [[]]:
                dimensions = {name: str(document.get(name)) for name in dimension_set}
                for metric in directive.get("Metrics") or []:
                    raw = document.get(metric.get("Name"))
                    for value in raw if isinstance(raw, list) else [raw]:
                        if isinstance(value, int | float) and not isinstance(value, bool):
                            self.store.put_value(metric_key(namespace, metric["Name"], dimensions), at, float(value))

    def invoked(self, function: Any, at: datetime, raised: bool, duration_ms: float) -> None:
        dimensions = {"FunctionName": function.name}
        for name, value in (("Invocations", 1.0), ("Errors", float(raised)), ("Duration", duration_ms)):
            self.store.put_value(metric_key("AWS/Lambda", name, dimensions), at, value)

    def dead_letter(self, function: Any, event: dict, error: str) -> None:
        """Lambda sends an async event that failed every attempt to the function's dead-letter queue."""
        url = self.dead_letter_queues.get(function.logical_id)
        if url is None:
            return
        # Lambda sends it with the function's execution role, which needs sqs:SendMessage on the queue (AWS SAM,
        # "DeadLetterQueue": SAM adds "sqs:SendMessage ... to your Lambda function execution role to give Lambda
        # service access to the resource"; Lambda Developer Guide, "Dead-letter queues"): denied, the event is lost
        # and the replay stops (sim/iam.py)
        if not self.world.permissions.on_behalf_of(function.name, function.logical_id, Authorization(
                "sqs:SendMessage", self.dead_letter_arns[function.logical_id], {}, frozenset())):
            return
        self._sent.setdefault(url, []).append(datetime.now(UTC))
        self.world.client("sqs").send_message(QueueUrl=url, MessageBody=json.dumps(event), MessageAttributes={
            "ErrorCode": {"DataType": "String", "StringValue": "200"},
            "ErrorMessage": {"DataType": "String", "StringValue": error[:256]}})

    # the clock
    def due(self, start: datetime, until: datetime, limit: int = MAX_EVALUATIONS) -> list[datetime]:
        """The whole minutes after ``start`` up to ``until`` not yet evaluated: "If you choose one minute as
        the period, the alarm evaluates the metric once per minute" (longer periods too are evaluated each
        minute, over a window that ends at the evaluation time). At most the last ``limit`` of them: a clock
        moved further ahead skips the older minutes (``skipped`` counts them), as the schedules skip runs.

        While a probe with hang detection lives (``Metrics.watching``), every 10 seconds instead: its stall checks
        run then, and the template's high-resolution alarms (a 10- or 30-second period) are evaluated every 10
        seconds. Otherwise nothing publishes high-resolution data, and the replay skips those ticks (an emulator's
        saving: a high-resolution alarm with no new datapoint keeps its verdict or, with missing data, its
        treatment's, which the next whole minute's evaluation gives as well)."""
        step = HIGH_RESOLUTION_TICK if self.world.metrics.watching else MINUTE
        if self.next_evaluation is None:
            self.next_evaluation = start.replace(second=0, microsecond=0) + MINUTE
        elif step == MINUTE and self.next_evaluation.second:  # back to whole minutes
            self.next_evaluation = self.next_evaluation.replace(second=0) + MINUTE
        elif step == HIGH_RESOLUTION_TICK and self.last_evaluation is not None:  # a probe began watching: 10 s on
            self.next_evaluation = min(self.next_evaluation, self.last_evaluation + step)
        if self.next_evaluation <= until:
            pending = (until - self.next_evaluation) // step + 1
            most = limit * (MINUTE // step)
            if pending > most:
                self.skipped += (pending - most) * step // MINUTE
                self.next_evaluation += (pending - most) * step
        ticks = []
        while self.next_evaluation <= until:
            ticks.append(self.next_evaluation)
            self.next_evaluation += step
        if ticks:
            self.last_evaluation = ticks[-1]
        return ticks

    def evaluate(self, at: datetime) -> list[Transition]:
        if self.world.metrics.watching:
            self.world.metrics.watch(at)  # the live probes' stall checks, at this tick
        whole_minute = at.second == 0 and at.microsecond == 0
        published = self.world.metrics.published
        for datum in published[self._published_seen:]:
            self.store.put_datum(datum["namespace"], datum)
        self._published_seen = len(published)
        # moto's queue itself (what GetQueueAttributes' ApproximateNumberOfMessages reads): through the SQS API
        # each sample costs ~17 ms, and every replay minute samples each watched queue.
        from moto.sqs.models import sqs_backends

        queues = sqs_backends[self.world.account][self.world.region].queues
        for name in self.watched_queues if whole_minute else ():
            visible = queues[name].approximate_number_of_messages
            later = sum(sent > at for sent in self._sent.get(self.queue_urls[name], []))
            self.store.put_value(metric_key("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": name}),
                                 at, float(max(0, visible - later)))
        return self.book.evaluate(at)

    def notify(self, change: Transition) -> list[str]:
        """The alarm's actions for its new state: each SNS topic gets CloudWatch's notification, if the topic's
        and its key's policies let CloudWatch publish (else the replay fails: SimError)."""
        world = self.world
        topics = change.alarm.actions.get(change.state, [])
        for topic in topics:
            self.book.check_publish(change, topic, world.account)
            subject, message = self.book.notification(change, world.account, world.region)
            world.client("sns").publish(TopicArn=topic, Subject=subject, Message=message)
            world.harness_publishes += 1
        return topics

    def event(self, change: Transition) -> dict:
        return self.book.event(change, self.world.account, self.world.region)
