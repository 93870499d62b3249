"""CloudWatch metric alarms of the synthesized template, evaluated as CloudWatch evaluates them.

The pure parts (one evaluation of a datapoint window, statistics, metric math) follow the CloudWatch user
guide, cited at each rule:

- [EVAL] "Evaluating an alarm", https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html#alarm-evaluation
- [MISSING] "Configuring how CloudWatch alarms treat missing data" and "How alarm state is evaluated when data
  is missing" (same page, #alarms-and-missing-data, #alarms-evaluating-missing-data), with its two tables
- [PREMATURE] "Avoiding premature transitions to alarm state" (same page)
- [MATH] "Metric math syntax and functions",
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html#metric-math-syntax
- [STATS] "CloudWatch statistics definitions",
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Statistics-definitions.html
- [EVENT] "Alarm events and EventBridge",
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-and-eventbridge.html

:class:`AlarmBook` holds the alarms of a template and the metrics the replay produced, and evaluates them on
the replay clock; sim.replay drives it.
"""

from __future__ import annotations

import bisect
import json
import math
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sim.cfn import SimError, Template
from sim.policy import Request, decide

OK, ALARM, INSUFFICIENT = "OK", "ALARM", "INSUFFICIENT_DATA"
TREATMENTS = ("breaching", "notBreaching", "ignore", "missing")
# [EVAL]: "CloudWatch attempts to retrieve a higher number of data points than specified by Evaluation Periods
# ... The exact number ... depends on the length of the alarm period": AWS does not publish the rule; its
# documented example retrieves 5 datapoints for 3 evaluation periods. The replay retrieves N + 2.
EXTRA_PERIODS = 2
COMPARISONS: dict[str, tuple[Callable[[float, float], bool], str]] = {
    "GreaterThanOrEqualToThreshold": (lambda v, t: v >= t, "greater than or equal to"),
    "GreaterThanThreshold": (lambda v, t: v > t, "greater than"),
    "LessThanThreshold": (lambda v, t: v < t, "less than"),
    "LessThanOrEqualToThreshold": (lambda v, t: v <= t, "less than or equal to"),
}


# --- one evaluation of a window of datapoints


@dataclass(frozen=True)
class Verdict:
    state: str
    evaluated: tuple[int, ...]  # indexes (into the window) of the real datapoints evaluated
    filled: int  # missing datapoints filled in with the treatment


def evaluate_window(points: Sequence[float | None], *, periods: int, to_alarm: int, breaches: Callable[[float], bool],
                    treat: str, current: str) -> Verdict:
    """The alarm's state from its evaluation range (oldest first; None = missing), CloudWatch's rules:

    [MISSING] "If no data points in the evaluation range are missing ... the most recent data points" and "If
    some ... are missing, but the total number of existing data points ... is equal to or more than the
    alarm's Evaluation Periods, CloudWatch evaluates the alarm state based on the most recent real data
    points": the treatment is not needed. Else "CloudWatch fills in the missing data points with the result
    you specified for how to treat missing data ... all real data points in the evaluation range are included
    ... CloudWatch uses missing data points only as few times as possible." [EVAL] M out of N: at least
    Datapoints to Alarm of the Evaluation Periods breaching is ALARM, else OK.
    """
    if treat not in TREATMENTS:
        raise SimError(f"alarm: TreatMissingData {treat!r} is not one of {', '.join(TREATMENTS)}")
    real = [i for i, value in enumerate(points) if value is not None]
    if len(real) >= periods:
        used = real[-periods:]
        count = sum(breaches(points[i]) for i in used)  # type: ignore[arg-type]
        return Verdict(ALARM if count >= to_alarm else OK, tuple(used), 0)
    fill = periods - len(real)
    count = sum(breaches(points[i]) for i in real)  # type: ignore[arg-type]
    if treat == "breaching":
        return Verdict(ALARM if count + fill >= to_alarm else OK, tuple(real), fill)
    if treat == "notBreaching":
        return Verdict(ALARM if count >= to_alarm else OK, tuple(real), fill)
    # missing / ignore: the real datapoints decide when they can
    if real and count >= to_alarm:
        return Verdict(ALARM, tuple(real), 0)
    if len(real) > count:  # a real datapoint is not breaching: not enough breaching ones for ALARM
        return Verdict(OK, tuple(real), 0)
    if not real:
        # [MISSING] table row "- - - - -": missing -> INSUFFICIENT_DATA, ignore -> "Retain current state"
        return Verdict(INSUFFICIENT if treat == "missing" else current, (), 0)
    # [PREMATURE] only breaching real datapoints, fewer than M: "alarms are designed to always go into ALARM
    # state when the oldest available breaching datapoint during the Evaluation Periods number of data points
    # is at least as old as the value of Datapoints to Alarm, and all other more recent data points are
    # breaching or missing" (missing: ALARM; ignore: the tables' "Retain current state"). The same section
    # says "at least as old as ... Evaluation Periods" for M out of N, which its own 2-of-3 table contradicts
    # ("- - - X -" is ALARM): the replay follows the tables.
    recent = [i for i in real if i >= len(points) - periods]
    oldest_age = len(points) - recent[0] if recent else 0
    if treat == "missing":
        return Verdict(ALARM if oldest_age >= to_alarm else INSUFFICIENT, tuple(real), 0)
    return Verdict(current, tuple(real), 0)


# --- the metrics


@dataclass(frozen=True)
class Sample:
    """One datapoint as CloudWatch stores it: a value, values with counts, or a statistic set."""

    at: datetime
    count: float
    total: float
    low: float
    high: float
    values: tuple[float, ...] | None  # the raw values, when known (percentiles need them)


MetricKey = tuple[str, str, frozenset]


def metric_key(namespace: str, name: str, dimensions: dict[str, str]) -> MetricKey:
    """A metric is its namespace, name and exact dimension set (a different set is a different metric)."""
    return (namespace, name, frozenset((str(k), str(v)) for k, v in dimensions.items()))


class MetricStore:
    def __init__(self) -> None:
        self._samples: dict[MetricKey, list[Sample]] = {}
        self._times: dict[MetricKey, list[datetime]] = {}

    def put(self, key: MetricKey, sample: Sample) -> None:
        times = self._times.setdefault(key, [])
        index = bisect.bisect_right(times, sample.at)
        times.insert(index, sample.at)
        self._samples.setdefault(key, []).insert(index, sample)

    def put_value(self, key: MetricKey, at: datetime, value: float) -> None:
        self.put(key, Sample(at, 1, value, value, value, (value,)))

    def put_datum(self, namespace: str, datum: dict) -> None:
        """A PutMetricData MetricDatum (Value, Values/Counts or StatisticValues)."""
        dimensions = {d["Name"]: d["Value"] for d in datum.get("Dimensions", [])}
        key = metric_key(namespace, datum["MetricName"], dimensions)
        at = _aware(datum["Timestamp"])
        if "StatisticValues" in datum:
            stats = datum["StatisticValues"]
            self.put(key, Sample(at, float(stats["SampleCount"]), float(stats["Sum"]), float(stats["Minimum"]),
                                 float(stats["Maximum"]), None))
        elif "Values" in datum:
            counts = datum.get("Counts") or [1.0] * len(datum["Values"])
            values = tuple(v for v, c in zip(datum["Values"], counts, strict=True) for _ in range(int(c)))
            if values:
                self.put(key, Sample(at, float(sum(counts)), sum(v * c for v, c in zip(datum["Values"], counts,
                                                                                      strict=True)),
                                     min(datum["Values"]), max(datum["Values"]), values))
        else:
            self.put_value(key, at, float(datum["Value"]))

    def statistic(self, key: MetricKey, start: datetime, end: datetime, stat: str) -> float | None:
        """The statistic over [start, end); None when the period has no datapoint (missing)."""
        times = self._times.get(key)
        if not times:
            return None
        samples = self._samples[key][bisect.bisect_left(times, start):bisect.bisect_left(times, end)]
        if not samples:
            return None
        return aggregate(samples, stat)


def aggregate(samples: Sequence[Sample], stat: str) -> float:
    """[STATS] Sum, SampleCount, Average (Sum / SampleCount), Minimum, Maximum; pNN from the raw values."""
    count = sum(s.count for s in samples)
    if stat == "Sum":
        return sum(s.total for s in samples)
    if stat == "SampleCount":
        return count
    if stat == "Average":
        return sum(s.total for s in samples) / count
    if stat == "Minimum":
        return min(s.low for s in samples)
    if stat == "Maximum":
        return max(s.high for s in samples)
    match = re.fullmatch(r"p(\d{1,2}(?:\.\d+)?|100)", stat)
    if match:
        if any(s.values is None for s in samples):
            raise SimError(f"alarm: percentile {stat} over statistic sets (PutMetricData StatisticValues) cannot be "
                           "computed; CloudWatch needs the values")
        values = sorted(v for s in samples for v in s.values or ())
        # nearest rank (CloudWatch's percentiles are approximations of this)
        rank = max(1, math.ceil(float(match.group(1)) / 100 * len(values)))
        return values[rank - 1]
    raise SimError(f"alarm: statistic {stat!r} is not emulated (Sum, SampleCount, Average, Minimum, Maximum, pNN)")


# --- metric math


Series = dict[int, float]  # period index (0 = oldest of the range) -> value
Value = float | Series | list[Series]
_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|([A-Za-z_][A-Za-z0-9_]*)"
                    r"|(&&|\|\||==|!=|<=|>=|[-+*/^()<>,\[\]]))")


def _tokens(expression: str) -> list[str]:
    tokens, position = [], 0
    while position < len(expression.rstrip()):
        match = _TOKEN.match(expression, position)
        if match is None:
            raise SimError(f"metric math: cannot read {expression[position:]!r} in {expression!r}")
        tokens.append(match.group(0).strip())
        position = match.end()
    return tokens


class MathExpression:
    """[MATH] the operators and functions the template's alarms use; anything else fails loudly.

    Arithmetic: "Missing values in a time series are treated as 0. If ... divide by zero, the data point is
    dropped." Comparison/logical: "only one of the time series has a value for a particular time stamp, the
    function treats the missing value in the other time series as 0". IF: "Using IF expressions" (each case
    below). FILL(TS, S): the missing values of the range filled with S. MAX(TS[]): a single time series.
    """

    FUNCTIONS = ("IF", "FILL", "MAX")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self._tokens = _tokens(expression)
        self._at = 0
        self.tree = self._or()
        if self._at != len(self._tokens):
            raise SimError(f"metric math: unexpected {self._tokens[self._at]!r} in {expression!r}")

    # parsing (precedence: OR < AND < comparison < + - < * / < ^ < unary)
    def _peek(self) -> str | None:
        return self._tokens[self._at] if self._at < len(self._tokens) else None

    def _take(self, expected: str | None = None) -> str:
        token = self._peek()
        if token is None or (expected is not None and token != expected):
            raise SimError(f"metric math: expected {expected or 'more'} in {self.expression!r}")
        self._at += 1
        return token

    def _binary(self, operators: tuple[str, ...], lower: Callable[[], Any]) -> Any:
        node = lower()
        while self._peek() in operators:
            operator = self._take()
            node = ("op", {"&&": "AND", "||": "OR"}.get(operator, operator), node, lower())
        return node

    def _or(self) -> Any:
        return self._binary(("OR", "||"), self._and)

    def _and(self) -> Any:
        return self._binary(("AND", "&&"), self._compare)

    def _compare(self) -> Any:
        return self._binary(("==", "!=", "<=", ">=", "<", ">"), self._sum)

    def _sum(self) -> Any:
        return self._binary(("+", "-"), self._product)

    def _product(self) -> Any:
        return self._binary(("*", "/"), self._power)

    def _power(self) -> Any:
        return self._binary(("^",), self._unary)

    def _unary(self) -> Any:
        if self._peek() == "-":
            self._take()
            return ("neg", self._unary())
        return self._atom()

    def _atom(self) -> Any:
        token = self._take()
        if token == "(":  # noqa: S105 - a parenthesis, not a password
            node = self._or()
            self._take(")")
            return node
        if token == "[":  # noqa: S105
            items = [self._or()]
            while self._peek() == ",":
                self._take()
                items.append(self._or())
            self._take("]")
            return ("array", items)
        if re.fullmatch(r"\d.*", token):
            return ("number", float(token))
        if self._peek() == "(":
            if token not in self.FUNCTIONS:
                raise SimError(f"metric math: function {token} is not emulated by the replay "
                               f"(known: {', '.join(self.FUNCTIONS)}) in {self.expression!r}")
            self._take("(")
            args = [self._or()]
            while self._peek() == ",":
                self._take()
                args.append(self._or())
            self._take(")")
            return ("call", token, args)
        return ("id", token)

    # evaluation over the periods of the range
    def evaluate(self, series: dict[str, Series], size: int) -> Series:
        result = self._eval(self.tree, series, size)
        if not isinstance(result, dict):
            raise SimError(f"metric math: {self.expression!r} must result in a single time series")
        return result

    def _eval(self, node: Any, series: dict[str, Series], size: int) -> Value:
        kind = node[0]
        if kind == "number":
            return node[1]
        if kind == "id":
            if node[1] not in series:
                raise SimError(f"metric math: {self.expression!r} names {node[1]!r}, not an id of the alarm's metrics")
            return series[node[1]]
        if kind == "array":
            return [self._series(self._eval(item, series, size)) for item in node[1]]
        if kind == "neg":
            return _apply(lambda a, b: -a, self._eval(node[1], series, size), 0.0)
        if kind == "op":
            return _apply(_OPERATORS[node[1]], self._eval(node[2], series, size), self._eval(node[3], series, size))
        name, args = node[1], [self._eval(arg, series, size) for arg in node[2]]
        if name == "FILL":
            if len(args) != 2 or not isinstance(args[1], float):
                raise SimError("metric math: FILL is emulated with a number as its filler (not REPEAT/LINEAR)")
            ts = self._series(args[0])
            return {i: ts.get(i, args[1]) for i in range(size)}
        if name == "MAX":
            if len(args) != 1 or not isinstance(args[0], list):
                raise SimError("metric math: MAX is emulated over an array of time series ([a, b])")
            indexes = sorted(set().union(*args[0]))
            return {i: max(ts[i] for ts in args[0] if i in ts) for i in indexes}
        return self._if(args)

    def _if(self, args: list[Value]) -> Series:
        if len(args) not in (2, 3):
            raise SimError("metric math: IF(condition, trueValue[, falseValue])")
        condition, when_true = args[0], args[1]
        when_false = args[2] if len(args) == 3 else None
        if isinstance(condition, float):  # IF(S, TS, TS): the whole series
            chosen = when_true if condition else when_false
            return {} if chosen is None else self._series(chosen)
        out: Series = {}
        for i, flag in self._series(condition).items():
            if flag:
                # "has the value of 0, if ... TRUE and the corresponding data point does not exist in metric2"
                out[i] = when_true if isinstance(when_true, float) else self._series(when_true).get(i, 0.0)
            elif isinstance(when_false, float):
                out[i] = when_false
            elif isinstance(when_false, dict) and i in when_false:
                out[i] = when_false[i]
            # else: "is dropped, if ... FALSE and the corresponding data point does not exist in metric3"
        return out

    def _series(self, value: Value) -> Series:
        if not isinstance(value, dict):
            raise SimError(f"metric math: a time series is needed here in {self.expression!r}")
        return value


_OPERATORS: dict[str, Callable[[float, float], float]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "^": lambda a, b: a ** b,
    "==": lambda a, b: float(a == b), "!=": lambda a, b: float(a != b), "<": lambda a, b: float(a < b),
    ">": lambda a, b: float(a > b), "<=": lambda a, b: float(a <= b), ">=": lambda a, b: float(a >= b),
    "AND": lambda a, b: float(bool(a) and bool(b)), "OR": lambda a, b: float(bool(a) or bool(b)),
}


def _apply(operator: Callable[[float, float], float], left: Value, right: Value) -> Value:
    if isinstance(left, list) or isinstance(right, list):
        raise SimError("metric math: operators on arrays of time series are not emulated")

    def safe(a: float, b: float) -> float | None:
        try:
            return operator(a, b)
        except ZeroDivisionError:
            return None  # "the data point is dropped"

    if isinstance(left, float) and isinstance(right, float):
        result = safe(left, right)
        if result is None:
            raise SimError("metric math: division of two scalars by zero")
        return result
    if isinstance(left, float) or isinstance(right, float):
        ts = right if isinstance(left, float) else left
        assert isinstance(ts, dict)
        pairs = {i: (left, v) if isinstance(left, float) else (v, right) for i, v in ts.items()}
    else:
        pairs = {i: (left.get(i, 0.0), right.get(i, 0.0)) for i in sorted(set(left) | set(right))}
    out: Series = {}
    for i, (a, b) in pairs.items():
        value = safe(a, b)  # type: ignore[arg-type]
        if value is not None:
            out[i] = value
    return out


# --- an alarm of the template


@dataclass(frozen=True)
class MetricQuery:
    id: str
    namespace: str = ""
    name: str = ""
    dimensions: tuple[tuple[str, str], ...] = ()
    period: int = 60
    stat: str = ""
    expression: MathExpression | None = None
    label: str | None = None
    return_data: bool = True

    @property
    def key(self) -> MetricKey:
        return metric_key(self.namespace, self.name, dict(self.dimensions))


@dataclass
class Alarm:
    logical_id: str
    name: str
    arn: str
    description: str | None
    queries: list[MetricQuery]  # one metric, or metric math (the returned expression and its metrics)
    period: int
    periods: int  # EvaluationPeriods (N)
    to_alarm: int  # DatapointsToAlarm (M)
    threshold: float
    comparison: str
    treat: str
    actions: dict[str, list[str]]  # state -> the ARNs notified when the alarm enters it
    single: bool  # a single-metric alarm (Namespace/MetricName/Statistic), not Metrics[]
    state: str = INSUFFICIENT
    reason: str = "Unchecked: Initial alarm creation"
    reason_data: str | None = None
    changed_at: datetime | None = None

    def breaches(self, value: float) -> bool:
        return COMPARISONS[self.comparison][0](value, self.threshold)

    def window(self, store: MetricStore, at: datetime) -> list[float | None]:
        """The evaluation range at ``at`` (oldest first): [EVAL] each period closes before it counts, so the
        newest datapoint is the period that ended at ``at``."""
        size = self.periods + EXTRA_PERIODS
        step = timedelta(seconds=self.period)
        starts = [at - (size - i) * step for i in range(size)]
        values: dict[str, Series] = {}
        for query in self.queries:
            if query.expression is None:
                values[query.id] = {i: v for i, start in enumerate(starts)
                                    if (v := store.statistic(query.key, start, start + step, query.stat)) is not None}
        returned = next(q for q in self.queries if q.return_data)
        result = values[returned.id] if returned.expression is None else returned.expression.evaluate(values, size)
        return [result.get(i) for i in range(size)]


def parse_alarm(template: Template, logical_id: str) -> Alarm:
    """An ``AWS::CloudWatch::Alarm`` of the template, its references resolved; unknown settings fail loudly."""
    props = template.resolve(template.properties(logical_id))
    known = {"AlarmName", "AlarmDescription", "ActionsEnabled", "AlarmActions", "OKActions", "InsufficientDataActions",
             "ComparisonOperator", "DatapointsToAlarm", "EvaluationPeriods", "Threshold", "TreatMissingData",
             "Namespace", "MetricName", "Dimensions", "Period", "Statistic", "ExtendedStatistic", "Metrics", "Tags"}
    unknown = sorted(set(props) - known)
    if unknown:
        raise SimError(f"template: alarm {logical_id}: {', '.join(unknown)} not emulated by the alarm evaluator")
    name = props.get("AlarmName") or template.ref(logical_id)  # the same name Ref and Fn::GetAtt give
    comparison = props["ComparisonOperator"]
    if comparison not in COMPARISONS:
        raise SimError(f"template: alarm {logical_id}: ComparisonOperator {comparison} is not emulated")
    single = "Metrics" not in props
    if single:
        stat = props.get("Statistic") or props.get("ExtendedStatistic")
        queries = [MetricQuery("m1", props["Namespace"], props["MetricName"],
                               tuple((d["Name"], str(d["Value"])) for d in props.get("Dimensions", [])),
                               int(props["Period"]), stat)]
        period = int(props["Period"])
    else:
        queries = []
        for spec in props["Metrics"]:
            if "Expression" in spec:
                queries.append(MetricQuery(spec["Id"], expression=MathExpression(spec["Expression"]),
                                           label=spec.get("Label"), return_data=spec.get("ReturnData", True),
                                           period=int(spec.get("Period", 60))))
                continue
            stat, metric = spec["MetricStat"], spec["MetricStat"]["Metric"]
            if "Unit" in stat:
                raise SimError(f"template: alarm {logical_id}: MetricStat Unit is not emulated")
            queries.append(MetricQuery(spec["Id"], metric["Namespace"], metric["MetricName"],
                                       tuple((d["Name"], str(d["Value"])) for d in metric.get("Dimensions", [])),
                                       int(stat["Period"]), stat["Stat"], label=spec.get("Label"),
                                       return_data=spec.get("ReturnData", True)))
        returned = [q for q in queries if q.return_data]
        if len(returned) != 1:
            raise SimError(f"template: alarm {logical_id}: exactly one of Metrics must return data")
        periods_used = {q.period for q in queries if q.expression is None}
        if len(periods_used) != 1:  # [EVAL] "Each metric must be using the same period"
            raise SimError(f"template: alarm {logical_id}: its metrics use different periods {sorted(periods_used)}")
        period = periods_used.pop()
    enabled = props.get("ActionsEnabled", True) not in (False, "false")
    keys = ((ALARM, "AlarmActions"), (OK, "OKActions"), (INSUFFICIENT, "InsufficientDataActions"))
    actions = {state: list(props.get(key, [])) if enabled else [] for state, key in keys}
    periods = int(props["EvaluationPeriods"])
    return Alarm(logical_id, name, template.arn("cloudwatch", f"alarm:{name}"), props.get("AlarmDescription"),
                 queries, period, periods, int(props.get("DatapointsToAlarm", periods)), float(props["Threshold"]),
                 comparison, props.get("TreatMissingData", "missing"), actions, single)


# --- the alarms of a replay


@dataclass(frozen=True)
class Transition:
    alarm: Alarm
    previous: str
    previous_reason: str
    previous_reason_data: str | None
    previous_at: datetime | None
    state: str
    reason: str
    reason_data: str
    at: datetime


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}+0000"


class AlarmBook:
    """The template's alarms and the metrics the replay produced; :meth:`evaluate` is one CloudWatch minute, or one
    10-second tick of the high-resolution alarms ([EVAL]: "If the alarm period is 10 seconds or 30 seconds, the alarm
    is evaluated every 10 seconds")."""

    def __init__(self, template: Template) -> None:
        self.template = template
        self.store = MetricStore()
        self.alarms = [parse_alarm(template, lid) for lid, _ in template.of_type("AWS::CloudWatch::Alarm")]
        self.started = False

    def evaluate(self, at: datetime) -> list[Transition]:
        """Every alarm evaluated at ``at``; the state changes. The first evaluation of a replay only sets each
        alarm's state (the stack was deployed before the replay began): no transition."""
        changes = []
        whole_minute = at.second == 0 and at.microsecond == 0
        for alarm in self.alarms:
            if alarm.period >= 60 and not whole_minute:  # [EVAL] a period of a minute or more: once a minute
                continue
            points = alarm.window(self.store, at)
            verdict = evaluate_window(points, periods=alarm.periods, to_alarm=alarm.to_alarm,
                                      breaches=alarm.breaches, treat=alarm.treat, current=alarm.state)
            if verdict.state == alarm.state and self.started:
                continue
            reason, reason_data = self._reason(alarm, points, verdict, at)
            if self.started:
                changes.append(Transition(alarm, alarm.state, alarm.reason, alarm.reason_data, alarm.changed_at,
                                          verdict.state, reason, reason_data, at))
            alarm.state, alarm.reason, alarm.reason_data, alarm.changed_at = verdict.state, reason, reason_data, at
        self.started = True
        return changes

    def _reason(self, alarm: Alarm, points: list[float | None], verdict: Verdict, at: datetime) -> tuple[str, str]:
        """The state's reason and reasonData, in CloudWatch's wording ([EVENT] samples)."""
        step = timedelta(seconds=alarm.period)
        start_of = lambda i: at - (len(points) - i) * step  # noqa: E731 - the period start of window index i
        recent = [points[i] for i in verdict.evaluated]
        data: dict[str, Any] = {"version": "1.0", "queryDate": _stamp(at),
                                "startDate": _stamp(start_of(verdict.evaluated[0]) if verdict.evaluated else at - step)}
        if alarm.single:
            data["statistic"] = alarm.queries[0].stat
        data.update(period=alarm.period, recentDatapoints=recent, threshold=alarm.threshold)
        phrase = COMPARISONS[alarm.comparison][1]
        if not verdict.evaluated and verdict.filled:
            treated = "Breaching" if alarm.treat == "breaching" else "NonBreaching"
            reason = (f"Threshold Crossed: no datapoints were received for {verdict.filled} periods and "
                      f"{verdict.filled} missing datapoints were treated as [{treated}].")
        elif not verdict.evaluated:
            reason = f"Insufficient Data: {len(points)} datapoints were unknown."
        else:
            listed = ", ".join(f"{points[i]!r} ({start_of(i).strftime('%d/%m/%y %H:%M:%S')})"
                               for i in reversed(verdict.evaluated))
            count = len(verdict.evaluated)
            crossed = verdict.state == ALARM
            reason = (f"Threshold Crossed: {count} out of the last {count + verdict.filled} datapoints [{listed}] "
                      f"{'was' if crossed else 'was not'} {phrase} the threshold ({alarm.threshold!r})"
                      + (f" and {verdict.filled} missing datapoints were treated as [{alarm.treat}]"
                         if verdict.filled else "")
                      + f" (minimum {alarm.to_alarm if crossed else 1} datapoint"
                        f"{'s' if crossed and alarm.to_alarm > 1 else ''} for "
                        f"{'OK -> ALARM' if crossed else 'ALARM -> OK'} transition).")
        return reason, json.dumps(data, separators=(",", ":"))

    # the state change as AWS delivers it
    def event(self, change: Transition, account: str, region: str) -> dict:
        """[EVENT] "State change for a single-metric alarm" / "... for a metric math alarm"."""
        alarm = change.alarm
        configuration: dict[str, Any] = {}
        if alarm.description is not None:
            configuration["description"] = alarm.description
        configuration["metrics"] = [self._metric(alarm, query) for query in alarm.queries]
        previous: dict[str, Any] = {"reason": change.previous_reason}
        if change.previous_reason_data is not None:
            previous["reasonData"] = change.previous_reason_data
        previous.update(timestamp=_stamp(change.previous_at or change.at), value=change.previous)
        return {
            "version": "0",
            "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/{alarm.arn}/{change.state}/{_stamp(change.at)}")),
            "detail-type": "CloudWatch Alarm State Change",
            "source": "aws.cloudwatch",
            "account": account,
            "time": change.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": region,
            "resources": [alarm.arn],
            "detail": {"alarmName": alarm.name, "configuration": configuration, "previousState": previous,
                       "state": {"reason": change.reason, "reasonData": change.reason_data,
                                 "timestamp": _stamp(change.at), "value": change.state}},
        }

    @staticmethod
    def _metric(alarm: Alarm, query: MetricQuery) -> dict:
        if query.expression is not None:
            spec: dict[str, Any] = {"expression": query.expression.expression, "id": query.id}
            if query.label is not None:
                spec["label"] = query.label
            return {**spec, "returnData": query.return_data}
        # A single-metric alarm's metric gets a generated id in AWS's sample; a stable one here.
        query_id = str(uuid.uuid5(uuid.NAMESPACE_URL, alarm.arn)) if alarm.single else query.id
        return {"id": query_id, "metricStat": {
            "metric": {"dimensions": dict(query.dimensions), "name": query.name, "namespace": query.namespace},
            "period": query.period, "stat": query.stat}, "returnData": query.return_data}

    def notification(self, change: Transition, account: str, region: str) -> tuple[str, str]:
        """(subject, message) of the SNS notification an alarm action publishes."""
        alarm = change.alarm
        trigger: dict[str, Any]
        if alarm.single:
            query = alarm.queries[0]
            trigger = {"MetricName": query.name, "Namespace": query.namespace, "StatisticType": "Statistic",
                       "Statistic": query.stat.upper(), "Unit": None,
                       "Dimensions": [{"value": v, "name": k} for k, v in query.dimensions], "Period": alarm.period}
        else:
            trigger = {"Metrics": [self._metric(alarm, query) for query in alarm.queries]}
        trigger.update(EvaluationPeriods=alarm.periods, DatapointsToAlarm=alarm.to_alarm,
                       ComparisonOperator=alarm.comparison, Threshold=alarm.threshold,
                       TreatMissingData=alarm.treat, EvaluateLowSampleCountPercentile="")
        message = {"AlarmName": alarm.name, "AlarmDescription": alarm.description, "AWSAccountId": account,
                   "NewStateValue": change.state, "NewStateReason": change.reason,
                   "StateChangeTime": _stamp(change.at), "Region": REGION_NAMES.get(region, region),
                   "AlarmArn": alarm.arn, "OldStateValue": change.previous, "OKActions": alarm.actions[OK],
                   "AlarmActions": alarm.actions[ALARM], "InsufficientDataActions": alarm.actions[INSUFFICIENT],
                   "Trigger": trigger}
        subject = f'{change.state}: "{alarm.name}" in {REGION_NAMES.get(region, region)}'
        return subject[:100], json.dumps(message)

    # who may publish an alarm's notification
    def check_publish(self, change: Transition, topic_arn: str, account: str) -> None:
        """The topic policy and the topic key's policy must let CloudWatch publish this alarm's notification
        (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html: CloudWatch needs kms:Decrypt and
        kms:GenerateDataKey* on the key). A policy that blocks fails the replay."""
        context = {"aws:SourceAccount": account, "aws:SourceOwner": account, "aws:SourceArn": change.alarm.arn,
                   "aws:SecureTransport": "true"}
        topic_id, topic = self._topic(topic_arn)
        policies = [self.template.resolve(props["PolicyDocument"]) for _, props in self._resources(
            "AWS::SNS::TopicPolicy") if topic_arn in self.template.resolve(props.get("Topics", []))]
        if not policies:  # SNS's default topic policy: the owner account's principals
            policies = [{"Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "SNS:Publish",
                                        "Resource": topic_arn, "Condition": {"StringEquals": {
                                            "AWS:SourceOwner": account}}}]}]
        allowed, why = decide(policies, Request("cloudwatch.amazonaws.com", "sns:Publish", topic_arn, context))
        if not allowed:
            raise SimError(f"alarm {change.alarm.name}: CloudWatch may not publish to topic {topic_id}: the topic "
                           f"policy {why}; the alarm's notification would be lost")
        key_ref = topic.get("KmsMasterKeyId")
        if key_ref is None:
            return
        key_id, key = self._key(self.template.resolve(key_ref))
        key_arn = self.template.resolve({"Fn::GetAtt": [key_id, "Arn"]})
        for action in ("kms:GenerateDataKey", "kms:Decrypt"):
            allowed, why = decide([self.template.resolve(key["KeyPolicy"])],
                                  Request("cloudwatch.amazonaws.com", action, key_arn, context))
            if not allowed:
                raise SimError(f"alarm {change.alarm.name}: CloudWatch may not use the key {key_id} of topic "
                               f"{topic_id} ({action}): the key policy {why}; the notification would be lost")

    def _resources(self, kind: str) -> list[tuple[str, dict]]:
        return [(lid, self.template.properties(lid)) for lid, _ in self.template.of_type(kind)]

    def _topic(self, arn: str) -> tuple[str, dict]:
        for lid, props in self._resources("AWS::SNS::Topic"):
            if self.template.resolve({"Ref": lid}) == arn:
                return lid, props
        raise SimError(f"alarm action {arn!r} is not a topic of the template (only SNS actions are emulated)")

    def _key(self, reference: str) -> tuple[str, dict]:
        for lid, props in self._resources("AWS::KMS::Key"):
            physical = self.template.physical.get(lid)
            if physical is not None and reference in (physical.ref, *physical.attrs.values()):
                return lid, props
        raise SimError(f"template: topic key {reference!r} is not a key of the template")


REGION_NAMES = {"us-west-2": "US West (Oregon)", "us-east-1": "US East (N. Virginia)"}


def _aware(at: Any) -> datetime:
    if isinstance(at, datetime):
        return at if at.tzinfo else at.replace(tzinfo=UTC)
    if isinstance(at, int | float):
        return datetime.fromtimestamp(at, UTC)
    raise SimError(f"metric: timestamp {at!r} is not a time")
