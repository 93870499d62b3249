"""``medic backtest``: had this config been live, what would Medic have decided differently?

The events Medic really received (read back from the stack's EventBridge archive, or ``--events`` FILE) are
replayed in time order through ``sim`` with the candidate config, in a world rebuilt from what the live
records and the events say; each candidate decision is set against the live one (the stack's log groups, or
``--against`` FILE: a ``sim replay`` output is one).

Matching a candidate decision to a live one: by ``event_id`` and ``incident`` (what one event decided about one
incident; several records of one key, e.g. a requeue's ``deferred`` then ``executed``, count as their last
record, paged when any paged). A live record whose event id is not among the replayed events (EventBridge does
not document that a replay keeps the event id) is matched to the candidate decision of the same trigger and
incident nearest in time within ``MATCH_WINDOW``. Schedule runs (``reconcile``) carry run ids that differ
between the live stack and the replay: they match by incident within one reconciler period. A live reconcile
decision with no candidate counterpart is not counted as a difference: the sweep reads node statuses the
events do not carry, so the replay cannot know them (the output counts them).
"""

from __future__ import annotations

import argparse
import io
import json
import secrets
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError

from medic_cli import history as hist
from medic_cli.context import CliError, Context, load_config_file
from medic_cli.render import json_block, parse_time, table, when
from medic_cli.shared import FUNCTIONS

ROOT = FUNCTIONS.parent  # the repository checkout: sim/ lives next to functions/
REPLAY_PREFIX = "medic-backtest-"  # infra/components/event_archive.py: the read-back rule takes only these
MATCH_WINDOW = timedelta(minutes=5)  # a live record to its replayed event when the ids differ
RECONCILE_PERIOD = timedelta(minutes=5)  # infra/components/reconciler.py RECONCILE_EVERY
ACTING = frozenset({"executed", "dry_run"})  # the action was taken (or would have been, in dry run)
COMPARED = ("action", "outcome", "paged")  # what makes a decision differ; the reason is shown, not compared
REPLAY_POLL = 5.0  # seconds between DescribeReplay calls
REPLAY_TIMEOUT = timedelta(minutes=30)
EMPTY_RECEIVES = 3  # consecutive empty long polls that end the read-back
ARCHIVE_DELAY = timedelta(minutes=10)  # AWS: events can take a while to reach an archive; replay later ones later
INSTANCE_ID_PREFIX = "i-"


class BacktestError(Exception):
    """Input the backtest cannot use (a file, a line, the stack's archive): exit status 2."""


@dataclass
class Decision:
    key: tuple[str, str]  # (event id or run id, incident)
    records: list[dict]

    @property
    def last(self) -> dict:
        return self.records[-1]

    @property
    def paged(self) -> bool:
        return any(bool(record.get("paged")) for record in self.records)

    @property
    def at(self) -> datetime | None:
        return self.records[0].get("_at")

    @property
    def trigger(self) -> str | None:
        return self.last.get("trigger")

    @property
    def acts(self) -> bool:
        return self.last.get("action") not in (None, "none") and self.last.get("outcome") in ACTING

    def view(self) -> dict:
        return {"action": self.last.get("action"), "outcome": self.last.get("outcome"), "paged": self.paged,
                "reason": self.last.get("reason")}


@dataclass
class Pair:
    live: Decision | None
    candidate: Decision | None

    @property
    def differs(self) -> bool:
        if self.live is None or self.candidate is None:
            return True
        live, candidate = self.live.view(), self.candidate.view()
        return any(live[name] != candidate[name] for name in COMPARED)

    @property
    def either(self) -> Decision:
        return self.candidate or self.live  # type: ignore[return-value]

    def as_json(self) -> dict:
        record = self.either.last
        return {"time": self.either.at, "trigger": record.get("trigger"), "event_id": record.get("event_id"),
                "incident": record.get("incident"), "cluster": record.get("cluster"),
                "node_id": record.get("node_id"), "job": record.get("job"), "fault": _fault(self),
                "live": self.live.view() if self.live else None,
                "candidate": self.candidate.view() if self.candidate else None}


@dataclass
class Backtest:
    events: int
    first: datetime | None
    last: datetime | None
    live_records: int
    candidate_records: int
    assumptions: list[str]
    pairs: list[Pair]
    not_replayable: int  # live reconcile decisions the replay cannot reproduce
    not_replayed: int  # live decisions of events not in the input
    sim_errors: list[str] = field(default_factory=list)

    @property
    def differences(self) -> list[Pair]:
        return [pair for pair in self.pairs if pair.differs]

    def summary(self) -> dict:
        total: Counter[str] = Counter()
        by: dict[tuple[str, str], Counter[str]] = {}
        for pair in self.differences:
            live_acts = bool(pair.live and pair.live.acts)
            candidate_acts = bool(pair.candidate and pair.candidate.acts)
            live_paged = bool(pair.live and pair.live.paged)
            candidate_paged = bool(pair.candidate and pair.candidate.paged)
            changes = Counter({"actions_added": candidate_acts and not live_acts,
                               "actions_removed": live_acts and not candidate_acts,
                               "pages_added": candidate_paged and not live_paged,
                               "pages_removed": live_paged and not candidate_paged})
            changes = Counter({name: int(value) for name, value in changes.items() if value})
            total.update(changes)
            record = pair.either.last
            by.setdefault((str(record.get("cluster") or "-"), str(_fault(pair) or "-")), Counter()).update(changes)
        names = ("actions_added", "actions_removed", "pages_added", "pages_removed")
        return {**{name: total[name] for name in names},
                "by": [{"cluster": cluster, "fault": fault, **{name: counts[name] for name in names}}
                       for (cluster, fault), counts in sorted(by.items())]}


# --- the command

def command(args: argparse.Namespace, ctx: Context, out: TextIO, err: TextIO) -> int:
    """0: no decision differs; 1: some do; 2: the backtest could not run (the message says why)."""
    try:
        result = run(args, ctx, err)
    except (BacktestError, CliError) as error:
        print(f"medic backtest: {error}", file=err)
        return 2
    except ClientError as error:
        details = error.response.get("Error", {})
        print(f"medic backtest: {error.operation_name} failed: {details.get('Code')}: {details.get('Message')}",
              file=err)
        return 2
    except BotoCoreError as error:
        print(f"medic backtest: {error} (check AWS credentials and --region/--profile)", file=err)
        return 2
    print(json_block(as_json(result, args.config)) if args.json else as_text(result, args.config), file=out)
    return 1 if result.differences else 0


def run(args: argparse.Namespace, ctx: Context, err: TextIO, sleep: Callable[[float], None] = time.sleep) -> Backtest:
    if not ctx.config_path:
        raise BacktestError("--config CANDIDATE.yaml is required: the config to backtest")
    candidate = Path(ctx.config_path)
    config = load_config_file(candidate)  # a bad candidate stops here, naming the key
    if bool(args.events) != bool(args.against):
        raise BacktestError("--events and --against go together (offline: both files; else neither, to read "
                            "the stack's archive and log groups)")
    now = ctx.now()
    in_events: list[Directive] = []
    if args.events:
        since = hist.parse_since(args.since, now) if args.since else None
        until = hist.parse_since(args.until, now) if args.until else None
        events, in_events = read_events(args.events)
        live = hist.from_file(args.against, hist.Filters(since=since, until=until, cluster=args.cluster))
    else:
        since = hist.parse_since(args.since or "7d", now)
        until = hist.parse_since(args.until, now) if args.until else now
        events = read_archive(ctx, since, until, err, sleep)
        live = hist.from_logs(ctx.client("logs"), ctx.log_groups,
                              hist.Filters(since=since, until=until, cluster=args.cluster), warn=err)
        if now - until < ARCHIVE_DELAY:
            print(f"medic backtest: events of the last {int(ARCHIVE_DELAY.total_seconds() // 60)} minutes may not "
                  "have reached the archive yet (AWS: archiving lags); their live decisions may show as not "
                  "replayed", file=err)
    # An event read back from the archive carries the replay-name EventBridge added when it replayed it; the live
    # Medic received it without, and its rules and handlers never act on a replay: replay it as it was received.
    events = [as_received(event) for event in events if _in_window(event, since, until)]
    if args.cluster:
        events = [event for event in events if _cluster_of(event) in (None, args.cluster)]
    events.sort(key=lambda event: _event_time(event) or datetime.min.replace(tzinfo=UTC))
    given = [*(read_directives(args.world) if getattr(args, "world", None) else []), *in_events]
    directives, assumptions = rebuild_world(events, live, config, given)
    lines = [json.dumps(line) for line in [*directives, *_with_live_mode(events, live)]]
    replayed = replay(lines, candidate)
    candidate_records = [_as_record(line) for line in replayed.records]
    if args.cluster:
        candidate_records = [record for record in candidate_records if record.get("cluster") == args.cluster]
    return compare(events, live, candidate_records, assumptions, [*replayed.errors])


# --- reading the inputs

def read_events(path: str) -> tuple[list[dict], list[Directive]]:
    """EventBridge events, one JSON object a line (blank lines and # comments skipped), and the sim directives the
    file mixes in (a `sim replay` scenario is such a file): they move into the world (``rebuild_world``). A bad
    line stops the backtest, naming it."""
    try:
        text = Path(path).read_text() if path != "-" else sys.stdin.read()
    except OSError as error:
        raise BacktestError(f"cannot read {path}: {error.strerror}") from None
    events, directives = [], []
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{path}: line {lineno}"
        if _is_directive(stripped):
            directives.append(parse_directive(stripped, where))
        else:
            events.append(parse_event(stripped, where))
    return events, directives


def _is_directive(text: str) -> bool:
    try:
        item = json.loads(text)
    except json.JSONDecodeError:
        return False  # parse_event names the line
    return isinstance(item, dict) and "sim" in item


def parse_event(text: str, where: str) -> dict:
    try:
        event = json.loads(text)
    except json.JSONDecodeError as error:
        raise BacktestError(f"{where}: not valid JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(event, dict) or "sim" in event:
        raise BacktestError(f"{where}: expected an EventBridge event (a JSON object with id, time, source, "
                            "detail-type, detail)")
    missing = [name for name in ("id", "time", "source", "detail-type", "detail") if name not in event]
    if missing:
        raise BacktestError(f"{where}: not an EventBridge event (missing {', '.join(missing)})")
    if _event_time(event) is None:
        raise BacktestError(f"{where}: event time {event.get('time')!r} is not an ISO 8601 time")
    return event


def as_received(event: dict) -> dict:
    """The event as it reached the live rules: without the ``replay-name`` a replay from the archive adds."""
    return {key: value for key, value in event.items() if key != "replay-name"}


@dataclass(frozen=True)
class Directive:
    """A sim directive an operator gave (``--world``, or mixed into ``--events``), and the line it came from."""
    line: dict
    where: str

    @property
    def kind(self) -> str:
        return next(iter(self.line["sim"]), "")


# Directives that happen at a time (the clock moves, a result or metric arrives, an event is sent): they have no
# place in a world set up before the events, which the backtest replays each at its own time.
TIMED_DIRECTIVES = frozenset({"advance", "agent_result", "put_event", "probe", "metric", "ttl_sweep"})


def parse_directive(text: str, where: str) -> Directive:
    try:
        item = json.loads(text)
    except json.JSONDecodeError as error:
        raise BacktestError(f"{where}: not valid JSON ({error.msg})") from None
    if not isinstance(item, dict) or set(item) != {"sim"} or not isinstance(item["sim"], dict) or not item["sim"]:
        raise BacktestError(f"{where}: expected a sim directive {{\"sim\": {{...}}}}")
    return Directive(item, where)


def read_directives(path: str) -> list[Directive]:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as error:
        raise BacktestError(f"cannot read {path}: {error.strerror}") from None
    return [parse_directive(stripped, f"{path}: line {lineno}") for lineno, line in enumerate(lines, 1)
            if (stripped := line.strip()) and not stripped.startswith("#")]


def read_archive(ctx: Context, since: datetime, until: datetime, err: TextIO,
                 sleep: Callable[[float], None]) -> list[dict]:
    """The archived events of [since, until]: StartReplay to the read-back rule only (FilterArns: Medic's live
    rules never see the replay), wait for it, then drain the read-back queue of this replay's events."""
    archive, rule, queue = (ctx.outputs.get(name) for name in ("EventArchiveArn", "BacktestRuleArn",
                                                               "BacktestQueueUrl"))
    if not (archive and rule and queue):
        problem = ctx.stack_problem or f"stack {ctx.stack!r} has no EventArchiveArn/BacktestRuleArn/BacktestQueueUrl"
        raise BacktestError(f"cannot read the event archive: {problem} (deploy this version of the stack, or use "
                            "--events FILE --against FILE)")
    events_client, sqs = ctx.client("events"), ctx.client("sqs")
    bus = events_client.describe_archive(ArchiveName=archive.rsplit("/", 1)[-1])["EventSourceArn"]
    name = f"{REPLAY_PREFIX}{ctx.now():%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"
    events_client.start_replay(ReplayName=name, EventSourceArn=archive, EventStartTime=since, EventEndTime=until,
                               Destination={"Arn": bus, "FilterArns": [rule]},
                               Description="medic backtest: read back to the read-back queue only")
    print(f"medic backtest: replaying the archive {when(since)} to {when(until)} UTC as {name}", file=err)
    started = time.monotonic()
    while True:
        state = events_client.describe_replay(ReplayName=name)
        if state["State"] == "COMPLETED":
            break
        if state["State"] in ("FAILED", "CANCELLED", "CANCELLING"):
            raise BacktestError(f"replay {name} {state['State']}: {state.get('StateReason', '')}")
        if time.monotonic() - started > REPLAY_TIMEOUT.total_seconds():
            raise BacktestError(f"replay {name} not done after {REPLAY_TIMEOUT}; cancel it with "
                                f"`aws events cancel-replay --replay-name {name}`")
        sleep(REPLAY_POLL)
    return drain(sqs, queue, name)


def drain(sqs: Any, queue: str, replay_name: str) -> list[dict]:
    """This replay's events from the read-back queue (each body is the event, with ``replay-name``); others'
    messages are left for their own backtest."""
    events, empty = [], 0
    while empty < EMPTY_RECEIVES:
        messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=5,
                                       VisibilityTimeout=60).get("Messages", [])
        mine = []
        for message in messages:
            try:
                event = json.loads(message["Body"])
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("replay-name") == replay_name:
                events.append(parse_event(message["Body"], f"read-back message {message['MessageId']}"))
                mine.append(message)
        for start in range(0, len(mine), 10):
            sqs.delete_message_batch(QueueUrl=queue, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(mine[start:start + 10])])
        empty = 0 if mine else empty + 1
    return events


# --- the world the events need

def rebuild_world(events: list[dict], live: list[dict], config: Any,
                  given: Sequence[Directive] = ()) -> tuple[list[dict], list[str]]:
    """sim directives for what the records and events say, and a sentence for each thing they cannot say. The
    operator's directives (``given``) come in: their clusters first (a cluster's groups are set when it is created,
    sim's ``cluster`` directive: before any node of the rebuilt world creates it with the default groups), the
    rest after the rebuilt world (the operator's word on a node's group or status wins over the records')."""
    configured = {cluster.name: cluster for cluster in config.clusters}
    groups: dict[tuple[str, str], str] = {}
    for record in live:
        if record.get("cluster") and record.get("node_id") and record.get("instance_group"):
            groups[(record["cluster"], record["node_id"])] = record["instance_group"]
    clusters_given = [d for d in given if d.kind == "cluster"]
    timed = [d for d in given if d.kind in TIMED_DIRECTIVES]
    rest = [d for d in given if d.kind != "cluster" and d.kind not in TIMED_DIRECTIVES]
    sized = {str(d.line["sim"]["cluster"].get("name")): d.line["sim"]["cluster"]["groups"] for d in clusters_given
             if isinstance(d.line["sim"]["cluster"], dict) and isinstance(d.line["sim"]["cluster"].get("groups"),
                                                                          dict)}
    directives: list[dict] = [d.line for d in clusters_given]
    assumptions: list[str] = []
    clusters: dict[str, set[str]] = {}
    for event in events:
        cluster, node = _cluster_of(event), _node_of(event)
        if cluster is None:
            continue
        clusters.setdefault(cluster, set())
        if node:
            clusters[cluster].add(node)
    for cluster, nodes in sorted(clusters.items()):
        if cluster not in configured:
            assumptions.append(f"cluster {cluster}: not in the candidate config: its events match no rule of the "
                               "candidate")
            continue
        protected = set(configured[cluster].protected_groups)
        if cluster in sized:
            shown = " + ".join(f"{group} ×{count}" for group, count in sized[cluster].items())
            assumptions.append(f"cluster {cluster}: size from the world directives: {shown}, plus the node(s) the "
                               "events name that it does not hold")
        else:
            assumptions.append(f"cluster {cluster}: size unknown: the sim's default cluster (Slurm: controller ×1 "
                               f"+ workers ×16; EKS: workers ×16) plus the {len(nodes)} node(s) the events name; "
                               "the breaker (max_fraction_in_repair) counts against that (set sizes with --world)")
        for node in sorted(nodes):
            group = groups.get((cluster, node))
            if group is None:
                assumptions.append(f"node {node} ({cluster}): node group unknown: assumed unprotected")
                continue
            directives.append({"sim": {"node": {"cluster": cluster, "id": node, "group": group}}})
            if group in protected:
                assumptions.append(f"node {node} ({cluster}): group {group} from the live records (protected in "
                                   "the candidate)")
    directives += [d.line for d in rest]
    for directive in given:
        if directive in timed:
            assumptions.append(f"{directive.where}: directive {directive.kind!r} left out: it happens at a time, "
                               "and the backtest replays each event at its own time")
    if given and len(timed) < len(given):
        wheres = sorted({d.where.rsplit(": line", 1)[0] for d in given if d not in timed})
        assumptions.append(f"the world directives of {', '.join(wheres)}: clusters before the rebuilt world, the "
                           "rest after it")
    if any(_node_of(event) for event in events):
        assumptions.append("node status at each event: unknown: assumed Running, except what the replayed "
                           "actions themselves change")
    if any(event.get("detail-type") == "SageMaker Training Job State Change" for event in events):
        assumptions.append("training jobs: checkpoints unknown: assumed none (a restart that needs one pages)")
    if any(event.get("detail-type") == "Model Customization Job State Change" for event in events):
        assumptions.append("Bedrock customization jobs: as each event's detail describes them (a detail the service "
                           "model does not allow, as AWS's own sample, is not recreated: the restart then fails)")
    if any(event.get("detail-type") == "Batch Job State Change" for event in events):
        assumptions.append("AWS Batch jobs: as each event's detail describes them; checkpoints unknown: assumed "
                           "none (a restart that needs one pages)")
    if any(event.get("source") in ("aws.cloudwatch", "medic.operator") for event in events):
        assumptions.append("Slurm agents and jobs: unknown: assumed no agent running (a requeue pages instead)")
    assumptions.append("run-time mode: as each live record of the event says (else the candidate's mode)")
    return directives, assumptions


def _with_live_mode(events: list[dict], live: list[dict]) -> Iterable[dict]:
    """The events, each after a mode directive when the live run-time mode changed (paused, dry_run periods). The
    directive sets the mode without SSM's change event: the live change paged already, the backtest compares
    decisions."""
    modes = {record.get("event_id"): record.get("mode") for record in live
             if record.get("mode") in ("act", "dry_run", "paused")}
    current = None
    for event in events:
        mode = modes.get(event.get("id"))
        if mode and mode != current:
            yield {"sim": {"mode": {"value": mode, "event": False}}}
            current = mode
        yield event


# --- the replay

def replay(lines: list[str], config: Path) -> Any:
    """sim's own replay (sim.replay.run), the stack synthesized for the candidate (cached per config)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        from sim.cfn import SimError
        from sim.replay import run as sim_run
    except ImportError as error:
        raise BacktestError(f"cannot load the replay emulator (sim/) from {ROOT}: {error}") from None
    try:
        return sim_run(lines, config, err=io.StringIO())
    except (SimError, ValueError, OSError) as error:
        raise BacktestError(f"the replay could not run: {error}") from None


def _as_record(line: dict) -> dict:
    record = {name: line.get(name) for name in hist.RECORD_FIELDS}
    record["_at"] = parse_time(line.get("timestamp"))
    return record


# --- matching and comparing

def decisions(records: list[dict]) -> dict[tuple[str, str], Decision]:
    grouped: dict[tuple[str, str], Decision] = {}
    for record in sorted(records, key=lambda r: r.get("_at") or datetime.min.replace(tzinfo=UTC)):
        key = (str(record.get("event_id")), str(record.get("incident")))
        grouped.setdefault(key, Decision(key, [])).records.append(record)
    return grouped


def compare(events: list[dict], live_records: list[dict], candidate_records: list[dict], assumptions: list[str],
            sim_errors: list[str]) -> Backtest:
    live, candidate = decisions(live_records), decisions(candidate_records)
    pairs = [Pair(live.pop(key), candidate.pop(key)) for key in list(live) if key in candidate]
    event_ids = {str(event.get("id")) for event in events}
    not_replayed = not_replayable = 0
    for decision in sorted(live.values(), key=lambda d: d.at or datetime.min.replace(tzinfo=UTC)):
        window = RECONCILE_PERIOD if decision.trigger == "reconcile" else MATCH_WINDOW
        match = _nearest(decision, candidate.values(), window)
        if match is not None:
            pairs.append(Pair(decision, candidate.pop(match.key)))
        elif decision.trigger == "reconcile":
            not_replayable += 1
        elif decision.key[0] in event_ids or _within(decision, events):
            pairs.append(Pair(decision, None))  # the candidate decided nothing for this event and incident
        else:
            not_replayed += 1
    pairs += [Pair(None, decision) for decision in candidate.values()]
    pairs.sort(key=lambda pair: pair.either.at or datetime.min.replace(tzinfo=UTC))
    times = [moment for moment in (_event_time(event) for event in events) if moment]
    return Backtest(len(events), min(times, default=None), max(times, default=None), len(live_records),
                    len(candidate_records), assumptions, pairs, not_replayable, not_replayed, sim_errors)


def _nearest(decision: Decision, candidates: Iterable[Decision], window: timedelta) -> Decision | None:
    if decision.at is None:
        return None
    near = [other for other in candidates
            if other.trigger == decision.trigger and other.key[1] == decision.key[1] and other.at is not None
            and abs(other.at - decision.at) <= window]
    return min(near, key=lambda other: abs(other.at - decision.at), default=None)  # type: ignore[operator]


def _within(decision: Decision, events: list[dict]) -> bool:
    """Whether the events cover the time of a live decision whose event id they do not carry."""
    return False if decision.at is None else any(
        abs((_event_time(event) or decision.at) - decision.at) <= MATCH_WINDOW and _subject_of(event) in
        (decision.last.get("node_id"), decision.last.get("job")) for event in events)


# --- event fields

def _event_time(event: dict) -> datetime | None:
    value = event.get("time")
    return parse_time(value) if isinstance(value, str) else None


def _in_window(event: dict, since: datetime | None, until: datetime | None) -> bool:
    moment = _event_time(event)
    return moment is None or ((since is None or moment >= since) and (until is None or moment <= until))


def _detail(event: dict) -> dict:
    detail = event.get("detail")
    return detail if isinstance(detail, dict) else {}


def _cluster_of(event: dict) -> str | None:
    detail = _detail(event)
    details = detail.get("EventDetails") if isinstance(detail.get("EventDetails"), dict) else {}
    for value in (detail.get("ClusterName"), details.get("ClusterName"), detail.get("cluster")):
        if isinstance(value, str):
            return value
    return None


def _node_of(event: dict) -> str | None:
    detail = _detail(event)
    value = detail.get("InstanceId")
    return value if isinstance(value, str) and value.startswith(INSTANCE_ID_PREFIX) else None


def _subject_of(event: dict) -> str | None:
    detail = _detail(event)
    job = detail.get("TrainingJobName") or detail.get("jobName")  # SageMaker's; AWS Batch's and Bedrock's
    return _node_of(event) or (job if isinstance(job, str) else None)


def _fault(pair: Pair) -> str | None:
    return ((pair.candidate and pair.candidate.last.get("fault"))
            or (pair.live and pair.live.last.get("fault")) or None)


# --- output

def as_json(result: Backtest, candidate: str) -> dict:
    return {"candidate": candidate, "events": result.events, "first_event": result.first,
            "last_event": result.last, "live_records": result.live_records,
            "candidate_records": result.candidate_records, "assumptions": result.assumptions,
            "differences": [pair.as_json() for pair in result.differences], "summary": result.summary(),
            "live_not_replayable": result.not_replayable, "live_not_replayed": result.not_replayed,
            "replay_errors": result.sim_errors}


def as_text(result: Backtest, candidate: str) -> str:
    differences = result.differences
    lines = [f"Backtest of {candidate}: {result.events} event(s) from {when(result.first)} to {when(result.last)} "
             f"UTC; {result.live_records} live record(s), {result.candidate_records} candidate record(s)",
             "", "World (rebuilt from the live records and the events; what they cannot say is assumed):"]
    lines += [f"  - {text}" for text in result.assumptions]
    if result.sim_errors:
        lines += ["", "Replay notes:"] + [f"  - {text}" for text in result.sim_errors]
    lines += ["", f"Decisions that differ: {len(differences)}"]
    if differences:
        rows = []
        for pair in differences:
            record = pair.either.last
            live = pair.live.view() if pair.live else {}
            cand = pair.candidate.view() if pair.candidate else {}
            rows.append((when(pair.either.at), record.get("cluster"),
                         record.get("node_id") or record.get("job") or record.get("incident"), _fault(pair),
                         _side(live), _side(cand)))
        rendered = table(("time (UTC)", "cluster", "node/job", "fault", "live: action outcome paged",
                          "candidate: action outcome paged"), rows).splitlines()
        lines += ["  " + rendered[0], "  " + rendered[1]]
        for row, pair in zip(rendered[2:], differences, strict=True):
            lines.append("  " + row)
            lines.append(f"      live:      {pair.live.view()['reason'] if pair.live else '(no decision)'}")
            lines.append(f"      candidate: {pair.candidate.view()['reason'] if pair.candidate else '(no decision)'}")
    summary = result.summary()
    lines += ["", f"Summary: actions +{summary['actions_added']} -{summary['actions_removed']}, "
                  f"pages +{summary['pages_added']} -{summary['pages_removed']}"]
    if summary["by"]:
        lines.append("  " + "\n  ".join(table(
            ("cluster", "fault", "actions added", "actions removed", "pages added", "pages removed"),
            [(row["cluster"], row["fault"], row["actions_added"], row["actions_removed"], row["pages_added"],
              row["pages_removed"]) for row in summary["by"]]).splitlines()))
    if result.not_replayable:
        lines.append(f"  {result.not_replayable} live reconcile decision(s) not compared: the sweep reads node "
                     "statuses the events do not carry")
    if result.not_replayed:
        lines.append(f"  {result.not_replayed} live decision(s) not compared: their event is not in the input")
    return "\n".join(lines)


def _side(view: dict) -> str:
    if not view:
        return "(no decision)"
    return f"{view['action']} {view['outcome']} {'paged' if view['paged'] else 'not paged'}"
