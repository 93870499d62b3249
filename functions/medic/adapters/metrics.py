"""CloudWatch metrics: what the training probe reported (progress, last checkpoint, per-node throughput)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from medic.adapters.aws import client as make_client
from medic.core.progress import Progress, RunReport

PROBE_NAMESPACE = "Medic/Training"
SESSION = "Session"  # the probe's session: one random number per process, published with every flush
RATE_MINUTES = 30  # the job's recent step rate: its last 30 minutes with steps before the window
MAX_NODES = 64  # a page lists the slowest nodes; more would not fit a page anyway
MAX_QUERIES = 500  # metric data queries in one GetMetricData call (CloudWatch API Reference, GetMetricData)
# A cluster's runs: ListMetrics' RecentlyActive takes "PT3H" only (metrics with data in the past three hours:
# CloudWatch API Reference, ListMetrics), which bounds how long a silent run stays watched (config.WATCH_RETENTION)
RECENTLY_ACTIVE = "PT3H"


class TrainingMetrics:
    def __init__(self, client: Any = None, namespace: str = PROBE_NAMESPACE) -> None:
        self._client = client
        self.namespace = namespace

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("cloudwatch")
        return self._client

    def progress(self, job: str, since: datetime, until: datetime, history: timedelta | None = None,
                 new_session: bool = False) -> Progress:
        """Steps counted (Heartbeat Sum) and the highest step reported since ``since``; with ``history``, also the
        steps counted in that span before ``since``, and the probe's latest completion marker (``Completed``) against
        its latest report: one GetMetricData call of one-minute datapoints over both, split by their timestamps.

        With ``history``, a minute's datapoints (the marker's too) count only when exactly one probe session
        published in it (the probe's `Session`: Minimum = Maximum), and with ``new_session`` (proof of recovery), a
        minute since ``since`` only when its session was not seen before ``since``: the restarted process's own. What
        does not count is reported apart (``unsessioned_steps``, ``stale_session_steps``)."""
        if history is None:
            values = self._query(since, until, [
                ("steps", self._stat(job, "Heartbeat", "Sum", since, until)),
                ("step", self._stat(job, "Step", "Maximum", since, until)),
            ])
            steps, last = values.get("steps", []), values.get("step", [])
            return Progress(steps=sum(steps), last_step=max(last) if last else None)
        start = since - history
        read = self._query_stamped(start, until, [
            ("steps", self._minutely(job, "Heartbeat", "Sum")),
            ("step", self._minutely(job, "Step", "Maximum")),
            ("first", self._minutely(job, "Step", "Minimum")),
            ("ckpt", self._minutely(job, "LastCheckpointStep", "Maximum")),
            ("done", self._minutely(job, "Completed", "Maximum")),
            ("started", self._minutely(job, "FirstStep", "Minimum")),
            ("paused", self._minutely(job, "Paused", "Maximum")),
            ("session_low", self._minutely(job, SESSION, "Minimum")),
            ("session_high", self._minutely(job, SESSION, "Maximum")),
        ])
        stamped, unsessioned, stale = _vouched(read, since, new_session)
        window = [value for at, value in stamped.get("steps", []) if at >= since]
        before = [value for at, value in stamped.get("steps", []) if at < since]
        last = [value for at, value in stamped.get("step", []) if at >= since]
        # Training resumed in the first minute that counted steps: a minute with a Step but no Heartbeat is the
        # stalled process's last flush (it reports its step before it is killed), not the restart stepping.
        stepping = {at for at, value in stamped.get("steps", []) if at >= since and value > 0}
        first = min(((at, value) for at, value in stamped.get("first", []) if at in stepping), default=None)
        checkpoints = [value for at, value in stamped.get("ckpt", []) if at < since]
        resumed_from = None
        if first is not None:
            started = dict(stamped.get("started", [])).get(first[0])
            if started is not None:
                # The probe's FirstStep: the first step its process trained, so it resumed from the one before
                # (exact at any publish period).
                resumed_from = max(0.0, started - 1)
            else:
                # A probe without FirstStep: Step is the latest step at each flush, so the first one reported less
                # the steps counted in its minute (exact only with one flush a minute, the probe's default).
                counted = sum(value for at, value in stamped.get("steps", []) if at == first[0])
                resumed_from = max(0.0, first[1] - counted)
        active = sorted((at, value) for at, value in stamped.get("steps", []) if at < since and value > 0)
        recent = active[-RATE_MINUTES:]
        steps_before = [value for at, value in stamped.get("step", []) if at < since]
        # The completion marker against the latest report. GetMetricData pairs Timestamps[x] with Values[x] (API
        # reference, MetricDataResult), one pair per minute that holds a datapoint (a Heartbeat of 0 is one: a live
        # process reported) and none for a minute without, as the window and history reads above rely on too. Were
        # an empty minute ever returned, it would count as a report after the marker: Medic would act as on a stall.
        completions = [at for at, value in stamped.get("done", []) if value >= 1]
        reports = [at for at, _ in stamped.get("steps", [])]
        return Progress(steps=sum(window), last_step=max(last) if last else None, steps_before=sum(before),
                        unsessioned_steps=unsessioned, stale_session_steps=stale,
                        first_step=resumed_from,
                        checkpoint_before=max(checkpoints) if checkpoints else None,
                        first_step_at=first[0] if first else None,
                        last_heartbeat_at=active[-1][0] if active else None,
                        last_step_before=max(steps_before) if steps_before else None,
                        steps_per_minute_before=sum(v for _, v in recent) / len(recent) if recent else None,
                        completed_at=max(completions, default=None), last_report_at=max(reports, default=None),
                        paused_at=max((at for at, value in stamped.get("paused", []) if value >= 1), default=None))

    def runs(self, cluster: str, now: datetime, window: timedelta) -> list[RunReport]:
        """The runs the cluster's probes reported in the past three hours (ListMetrics on `Run`, RecentlyActive
        PT3H), each with its first and last report and its last minute with steps: one GetMetricData of one-minute
        datapoints over ``window`` (one query a run, three a job name, at most 500 a call). The probe's hang verdict
        (`Stalled`, one-second data read by the minute's Maximum) of the run's latest minute with one says whether it
        hangs now."""
        found: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        paginator = self.client.get_paginator("list_metrics")
        for page in paginator.paginate(Namespace=self.namespace, MetricName="Run", RecentlyActive=RECENTLY_ACTIVE,
                                       Dimensions=[{"Name": "Cluster", "Value": cluster}]):
            for metric in page.get("Metrics", []):
                dims = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
                if dims.get("Cluster") == cluster and "Job" in dims and ("SlurmJobId" in dims or "Pod" in dims):
                    found[tuple(sorted(dims.items()))] = dims
        runs = list(found.values())
        if not runs:
            return []
        queries: list[tuple[str, dict]] = []
        jobs = sorted({run["Job"] for run in runs})
        for index, job in enumerate(jobs):
            queries.append((f"h{index}", {"Metric": {"Namespace": self.namespace, "MetricName": "Heartbeat",
                                                     "Dimensions": [{"Name": "Job", "Value": job},
                                                                    {"Name": "Cluster", "Value": cluster}]},
                                          "Period": 60, "Stat": "Sum"}))
            queries.append((f"s{index}", {"Metric": {"Namespace": self.namespace, "MetricName": "Step",
                                                     "Dimensions": [{"Name": "Job", "Value": job},
                                                                    {"Name": "Cluster", "Value": cluster}]},
                                          "Period": 60, "Stat": "Maximum"}))
            queries.append((f"v{index}", {"Metric": {"Namespace": self.namespace, "MetricName": "Stalled",
                                                     "Dimensions": [{"Name": "Job", "Value": job},
                                                                    {"Name": "Cluster", "Value": cluster}]},
                                          "Period": 60, "Stat": "Maximum"}))
        for index, run in enumerate(runs):
            queries.append((f"r{index}", {"Metric": {"Namespace": self.namespace, "MetricName": "Run",
                                                     "Dimensions": [{"Name": k, "Value": v} for k, v in run.items()]},
                                          "Period": 60, "Stat": "Sum"}))
        read: dict[str, list[tuple[datetime, float]]] = {}
        for start in range(0, len(queries), MAX_QUERIES):
            read.update(self._query_stamped(now - window, now, queries[start:start + MAX_QUERIES]))
        reports = []
        for index, run in enumerate(runs):
            reported = sorted(at for at, value in read.get(f"r{index}", []) if value > 0)
            first = reported[0] if reported else None
            named = jobs.index(run["Job"])
            stepped = [at for at, value in read.get(f"h{named}", []) if value > 0 and first is not None and at >= first]
            latest = max(((at, value) for at, value in read.get(f"s{named}", []) if first is not None and at >= first),
                         default=None)
            verdict = max(((at, value) for at, value in read.get(f"v{named}", []) if first is not None and at >= first),
                          default=None)
            last_stepped = max(stepped, default=None)
            hung = verdict is not None and verdict[1] >= 1 and (last_stepped is None or verdict[0] >= last_stepped)
            reports.append(RunReport(job=run["Job"], cluster=cluster, slurm_job_id=run.get("SlurmJobId"),
                                     pod=run.get("Pod"), owner=run.get("Owner"), first_report_at=first,
                                     last_report_at=reported[-1] if reported else None,
                                     last_step_at=last_stepped, last_step=latest[1] if latest else None,
                                     hung=hung))
        return reports

    def last_checkpoint_step(self, job: str, now: datetime, lookback: timedelta = timedelta(days=1)) -> float | None:
        values = self._query(now - lookback, now, [
            ("ckpt", self._stat(job, "LastCheckpointStep", "Maximum", now - lookback, now))]).get("ckpt", [])
        return max(values) if values else None

    def node_throughput(self, job: str, now: datetime,
                        window: timedelta = timedelta(minutes=15)) -> list[tuple[str, float]]:
        """Each node's mean tokens/s over the window, slowest first (the straggler heads the list)."""
        nodes: list[str] = []
        paginator = self.client.get_paginator("list_metrics")
        for page in paginator.paginate(Namespace=self.namespace, MetricName="TokensPerSecond",
                                       Dimensions=[{"Name": "Job", "Value": job}, {"Name": "Node"}]):
            for metric in page.get("Metrics", []):
                node = next((d["Value"] for d in metric.get("Dimensions", []) if d["Name"] == "Node"), None)
                if node and node not in nodes:
                    nodes.append(node)
            if len(nodes) >= MAX_NODES:
                break
        nodes = nodes[:MAX_NODES]
        if not nodes:
            return []
        queries = [(f"n{index}", {"Metric": {"Namespace": self.namespace, "MetricName": "TokensPerSecond",
                                              "Dimensions": [{"Name": "Job", "Value": job},
                                                             {"Name": "Node", "Value": node}]},
                                   "Period": int(window.total_seconds()), "Stat": "Average"})
                   for index, node in enumerate(nodes)]
        values = self._query(now - window, now, queries)
        means = [(node, values[f"n{index}"][0]) for index, node in enumerate(nodes) if values.get(f"n{index}")]
        return sorted(means, key=lambda pair: pair[1])

    def _stat(self, job: str, name: str, stat: str, since: datetime, until: datetime) -> dict:
        seconds = max(60, int((until - since).total_seconds()) // 60 * 60)
        return {"Metric": {"Namespace": self.namespace, "MetricName": name,
                           "Dimensions": [{"Name": "Job", "Value": job}]},
                "Period": min(seconds, 86400), "Stat": stat}

    def _minutely(self, job: str, name: str, stat: str) -> dict:
        return {"Metric": {"Namespace": self.namespace, "MetricName": name,
                           "Dimensions": [{"Name": "Job", "Value": job}]}, "Period": 60, "Stat": stat}

    def _query_stamped(self, start: datetime, end: datetime,
                       stats: list[tuple[str, dict]]) -> dict[str, list[tuple[datetime, float]]]:
        """Each query's (timestamp, value) pairs: GetMetricData returns Timestamps beside Values, pairwise."""
        queries = [{"Id": query_id, "MetricStat": stat, "ReturnData": True} for query_id, stat in stats]
        pairs: dict[str, list[tuple[datetime, float]]] = {}
        paginator = self.client.get_paginator("get_metric_data")
        for page in paginator.paginate(MetricDataQueries=queries, StartTime=start, EndTime=end):
            for result in page.get("MetricDataResults", []):
                stamps, values = result.get("Timestamps", []), result.get("Values", [])
                pairs.setdefault(result["Id"], []).extend(zip(stamps, values, strict=True))
        return pairs

    def _query(self, start: datetime, end: datetime, stats: list[tuple[str, dict]]) -> dict[str, list[float]]:
        queries = [{"Id": query_id, "MetricStat": stat, "ReturnData": True} for query_id, stat in stats]
        values: dict[str, list[float]] = {}
        paginator = self.client.get_paginator("get_metric_data")
        for page in paginator.paginate(MetricDataQueries=queries, StartTime=start, EndTime=end):
            for result in page.get("MetricDataResults", []):
                values.setdefault(result["Id"], []).extend(result.get("Values", []))
        return values


Stamped = dict[str, list[tuple[datetime, float]]]


def _vouched(read: Stamped, since: datetime, new_session: bool) -> tuple[Stamped, float, float]:
    """The probe's datapoints a probe session vouches for: those of minutes in which exactly one session published
    (Minimum = Maximum of `Session`), and with ``new_session``, minutes since ``since`` only when that session was not
    seen before ``since``. Also the steps left out: in minutes without exactly one session (a heartbeat anyone
    allowed PutMetricData can write, a back-dated one, a probe too old to send sessions, two processes at once), and
    (``new_session``) from a session older than ``since`` (the stalled process's own)."""
    lows, highs = dict(read.get("session_low", [])), dict(read.get("session_high", []))
    session = {at: low for at, low in lows.items() if highs.get(at) == low}
    seen_before = {value for at, value in session.items() if at < since}

    def counts(at: datetime) -> bool:
        return at in session and (not new_session or at < since or session[at] not in seen_before)

    kept = {name: [(at, value) for at, value in series if counts(at)] for name, series in read.items()
            if not name.startswith("session_")}
    steps = read.get("steps", [])
    unsessioned = sum(value for at, value in steps if at not in session)
    stale = sum(value for at, value in steps if at in session and not counts(at))
    return kept, unsessioned, stale
