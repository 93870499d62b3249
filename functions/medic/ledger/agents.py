"""Agent memory: the commands Medic issued to the on-cluster agents, their final records, heartbeats.

Command items are not prefixed in dry runs: a dry run never queues a command. Medic writes its command items under
`command#<cluster>#<id>`; each agent writes only under `agent#<its cluster>` (IAM's dynamodb:LeadingKeys), so
nothing an agent writes can pass for something Medic wrote; and an agent may check only its own cluster's commands
(ConditionCheckItem on `command#<its cluster>#*`), so it cannot probe another cluster's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import NamedTuple, TypeVar

from medic.config_core import DEDUPE_DAYS
from medic.core.agent_command import CommandContext
from medic.core.mode import Mode
from medic.core.models import Action, Trigger
from medic.ledger.table import Key, Table, epoch, expires

OPEN_COMMANDS = "recovery#command"  # issued commands waiting for their result (one item each, deleted when closed)


class CommandRef(NamedTuple):
    """Where one command's items are: `command#<cluster>#<id>` (cluster names never contain `#`, so one cluster's
    prefix never matches another's). ``legacy``: a command issued before commands were keyed by cluster, under
    `command#<id>`; read (and closed) where it was written. Such a command is closed by the sweep within
    COMMAND_DEADLINE of its issue, so the legacy reads matter only for the commands in flight when the stack is
    upgraded (ledger/README.md)."""

    cluster: str
    command_id: str
    legacy: bool = False

    @property
    def pk(self) -> str:
        return f"command#{self.command_id}" if self.legacy else f"command#{self.cluster}#{self.command_id}"

    def key(self, sk: str) -> Key:
        return {"pk": {"S": self.pk}, "sk": {"S": sk}}


def command_key(cluster: str, command_id: str, sk: str) -> Key:
    return CommandRef(cluster, command_id).key(sk)


def agent_claim_key(cluster: str, command_id: str) -> Key:
    """The agent's claim of a command (written by the agent only: Medic reads and checks it)."""
    return {"pk": {"S": f"agent#{cluster}#command#{command_id}"}, "sk": {"S": "claim"}}


def seen_key(cluster: str) -> Key:
    """When DynamoDB wrote the cluster's agent's last heartbeat: Medic's own item (no agent may write it)."""
    return {"pk": {"S": f"agentseen#{cluster}"}, "sk": {"S": "heartbeat"}}


def heartbeat_seen_at(item: dict | None) -> datetime | None:
    """When DynamoDB wrote the heartbeat whose `agentseen#` item this is (None: none, or unreadable: as good as no
    heartbeat). The node path reads the item with its other ledger items in one round trip (ledger/node_event)."""
    try:
        return datetime.fromtimestamp(int(item["seen_epoch"]["N"]), UTC) if item else None
    except (KeyError, TypeError, ValueError, OverflowError):
        return None


def watch_key(cluster: str) -> Key:
    """The reconciler's watch on the cluster's agent: Medic's own item (never under `agent#`)."""
    return {"pk": {"S": f"agentwatch#{cluster}"}, "sk": {"S": "silence"}}


# What an agent's heartbeat says of itself, kept with Medic's note of it (the agent's word: shown quoted).
HEARTBEAT_SAID = ("host", "version", "role")


class AgentWatch(NamedTuple):
    watching_since: datetime  # the first sweep that looked for the cluster's agent
    last_seen: datetime | None  # the newest heartbeat DynamoDB wrote, as far as Medic knows
    reported: str  # the silence last reported (its key), '' when none is open


def _epoch_of(value: dict | None) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(value["N"]), UTC) if value else None
    except (KeyError, TypeError, ValueError, OverflowError):
        return None


def _iso_of(value: dict | None) -> datetime | None:
    try:
        return datetime.fromisoformat(value["S"]) if value else None
    except (KeyError, TypeError, ValueError):
        return None


class OpenCommand(NamedTuple):
    command_id: str
    cluster: str
    issued_at: datetime
    legacy: bool = False  # issued under `command#<id>` (CommandRef)

    @property
    def ref(self) -> CommandRef:
        return CommandRef(self.cluster, self.command_id, self.legacy)


class AgentStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def agent_heartbeat(self, cluster: str) -> datetime | None:
        """When DynamoDB wrote the cluster's agent's last heartbeat (Medic's clock; dry runs read the real one)."""
        return heartbeat_seen_at(self.table.get(seen_key(cluster)))

    def record_heartbeat_seen(self, cluster: str, seen_at: datetime, reported_at: str,
                              said: dict[str, str] | None = None) -> bool:
        """The agent's heartbeat as Medic saw it arrive (``seen_at``: the stream record's creation time); the
        agent's own ``reported_at`` and what it ``said`` of itself (host, version, role: HEARTBEAT_SAID) are kept
        for display only (`medic status`, the silence page: the agent's word). Never moves back: False for an
        older one."""
        seen = epoch(seen_at)
        words = {name: {"S": value[:128]} for name, value in (said or {}).items() if name in HEARTBEAT_SAID and value}
        return self.table.put_if(
            {**seen_key(cluster), "seen_epoch": {"N": str(seen)}, "seen_at": {"S": seen_at.isoformat()},
             "agent_at": {"S": reported_at[:64]}, **words, "expires_at": expires(seen_at, days=1)},
            "attribute_not_exists(pk) OR seen_epoch < :seen", {":seen": {"N": str(seen)}})

    def heartbeat_said(self, cluster: str) -> dict[str, str]:
        """What the agent's last counted heartbeat said of itself (host, version, role; the agent's word)."""
        item = self.table.get(seen_key(cluster)) or {}
        return {name: item[name]["S"] for name in HEARTBEAT_SAID if "S" in item.get(name, {})}

    # --- the reconciler's watch on each cluster's agent (flows/agent/silence.py)

    def watch_agent(self, cluster: str, seen: datetime | None, now: datetime) -> AgentWatch:
        """The cluster's agent watch, brought up to date: since when Medic watches (its first sweep of the cluster),
        the newest heartbeat it ever saw (kept past `agentseen#`'s one-day TTL), the silence it last reported."""
        item = self.table.get(watch_key(cluster)) or {}
        known = _epoch_of(item.get("last_seen_epoch"))
        last_seen = max((moment for moment in (seen, known) if moment is not None), default=None)
        since = _iso_of(item.get("watching_since")) or now
        values: dict[str, dict[str, str]] = {":since": {"S": since.isoformat()}, ":expires": expires(now, days=30)}
        update = "SET watching_since = if_not_exists(watching_since, :since), expires_at = :expires"
        if last_seen is not None:
            update += ", last_seen_epoch = :seen"
            values[":seen"] = {"N": str(epoch(last_seen))}
        self.table.update(watch_key(cluster), update, values)
        return AgentWatch(since, last_seen, item.get("reported", {}).get("S", ""))

    def read_watch(self, cluster: str) -> AgentWatch | None:
        """The cluster's agent watch as the last sweep left it (None: no sweep looked yet); `medic status`."""
        item = self.table.get(watch_key(cluster))
        since = _iso_of(item.get("watching_since")) if item else None
        if item is None or since is None:
            return None
        return AgentWatch(since, _epoch_of(item.get("last_seen_epoch")), item.get("reported", {}).get("S", ""))

    def standbys(self, cluster: str) -> list[dict[str, str]]:
        """The standby agents' own reports (`agent#<cluster>/standby#<host>`: their word, their clock), as text."""
        return [{name: value["S"] for name, value in item.items() if "S" in value}
                for item in self.table.partition(f"agent#{cluster}") if item["sk"]["S"].startswith("standby#")]

    def claim_silence_report(self, cluster: str, silence: str, now: datetime) -> bool:
        """True once per silence (``silence``: its key): the one record and page of it."""
        return self.table.update_if(
            watch_key(cluster), "SET reported = :silence, reported_at = :now",
            "attribute_not_exists(reported) OR reported <> :silence",
            {":silence": {"S": silence}, ":now": {"S": now.isoformat()}}) is not None

    def clear_silence_report(self, cluster: str, silence: str) -> bool:
        """True once when the agent reported after the silence ``silence``: the one record of its return."""
        return self.table.update_if(watch_key(cluster), "REMOVE reported, reported_at", "reported = :silence",
                                    {":silence": {"S": silence}}) is not None

    def record_command(self, command_id: str, context: CommandContext, now: datetime) -> None:
        """What a queued agent command is for, so its result can be checked and recorded against the same
        incident; and the command open until then (the reconciler closes it as failed after its deadline)."""
        if not context.cluster:
            raise ValueError(f"command {command_id}: a command is issued to a cluster")
        ref = CommandRef(context.cluster, command_id)
        self.table.put({**ref.key("issued"), **_context_attributes(context),
                        "issued_at": {"S": now.isoformat()}, "expires_at": expires(now, days=DEDUPE_DAYS)})
        self.table.put({**self.table.key(OPEN_COMMANDS, command_id), "cluster": {"S": context.cluster},
                        "keyed": {"S": "cluster"}, "issued_epoch": {"N": str(epoch(now))},
                        "expires_at": expires(now)})

    def open_commands(self) -> list[OpenCommand]:
        """The commands Medic issued whose result is not recorded yet (bounded by the commands in flight)."""
        found = []
        for item in self.table.partition(OPEN_COMMANDS):
            try:
                found.append(OpenCommand(item["sk"]["S"], item["cluster"]["S"],
                                         datetime.fromtimestamp(int(item["issued_epoch"]["N"]), UTC),
                                         legacy="keyed" not in item))
            except (KeyError, TypeError, ValueError, OverflowError):
                continue
        return found

    def bound_agent_item(self, pk: str, sk: str, expires_at: datetime) -> bool:
        """Set the TTL of an item an agent wrote (under `agent#`; flows/agent/expiry.py): only `expires_at`, and
        only while the item exists (never re-creating one the agent or TTL deleted). True when set."""
        return self.table.update_if({"pk": {"S": pk}, "sk": {"S": sk}}, "SET expires_at = :expires",
                                    "attribute_exists(pk)", {":expires": {"N": str(epoch(expires_at))}}) is not None

    def close_command(self, command_id: str) -> None:
        self.table.delete(self.table.key(OPEN_COMMANDS, command_id))

    def withdraw_command(self, ref: CommandRef, now: datetime) -> bool:
        """Withdraw a command its agent has not claimed, in one transaction (so it can never run late: the
        agent's claim checks `withdrawn_at` is absent). True when withdrawn; False when the agent claimed it."""
        return self.table.transact([
            {"ConditionCheck": {"TableName": self.table.name, "Key": agent_claim_key(ref.cluster, ref.command_id),
                                "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Update": {"TableName": self.table.name, "Key": ref.key("issued"),
                        "UpdateExpression": "SET withdrawn_at = :now, expires_at = if_not_exists(expires_at, :expires)",
                        "ExpressionAttributeValues": {":now": {"S": now.isoformat()}, ":expires": expires(now)}}},
        ])

    def find_command(self, cluster: str, command_id: str) -> tuple[CommandRef, CommandContext | None]:
        """Where the command's items are, and what record_command wrote for it (None: Medic has no record of issuing
        it to that cluster). A command issued before commands were keyed by cluster is found at its old key (its
        context names its cluster, which the caller compares)."""
        ref = CommandRef(cluster, command_id)
        item = self.table.get(ref.key("issued"))
        if item is None:
            legacy = CommandRef(cluster, command_id, legacy=True)
            item = self.table.get(legacy.key("issued"))
            if item is not None:
                ref = legacy
        return ref, (_read_context(item) if item else None)

    def command_context(self, ref: CommandRef) -> CommandContext | None:
        """What record_command wrote for the command; None when Medic has no record of issuing it."""
        item = self.table.get(ref.key("issued"))
        return _read_context(item) if item else None

    def claim_command_record(self, ref: CommandRef, now: datetime) -> bool:
        """True for the first delivery of a command's result: its final record is written once (kept as long as
        the stream or a redrive of its batch can deliver the result again: DEDUPE_DAYS)."""
        return self.table.put_if(
            {**ref.key("recorded"), "recorded_at": {"S": now.isoformat()},
             "expires_at": expires(now, days=DEDUPE_DAYS)},
            "attribute_not_exists(pk)")

    def claim_rejected_result(self, ref: CommandRef, now: datetime) -> bool:
        """True for the first delivery of a result Medic rejects. Kept apart from `recorded`: a result forged
        by another cluster's agent must not stop the real result of the command from being recorded."""
        return self.table.put_if(
            {**ref.key(f"rejected#{ref.cluster}"), "recorded_at": {"S": now.isoformat()},
             "expires_at": expires(now, days=DEDUPE_DAYS)},
            "attribute_not_exists(pk)")


# Every context field is one string attribute of the `issued` item, named as the field: one not given is not
# written; one absent reads as not given (the mode as "act", the one Medic queues commands in).
_CONTEXT_FIELDS = CommandContext._fields
Member = TypeVar("Member", bound=StrEnum)


def _context_attributes(context: CommandContext) -> dict[str, dict[str, str]]:
    values = ((name, getattr(context, name)) for name in _CONTEXT_FIELDS)
    return {name: {"S": str(value)} for name, value in values if value is not None}


def _read_context(item: dict) -> CommandContext:
    text = {name: item[name]["S"] for name in _CONTEXT_FIELDS if "S" in item.get(name, {})}
    attempt = text.get("attempt", "")
    return CommandContext(**{**text, "trigger": _member(Trigger, text.get("trigger")),
                             "action": _member(Action, text.get("action")),
                             "mode": Mode.of(text.get("mode") or Mode.ACT),
                             "attempt": int(attempt) if attempt.isdigit() else None})


def _member(enum: type[Member], value: str | None) -> Member | None:
    try:
        return enum(value)
    except ValueError:  # absent (or not a value Medic writes)
        return None


def node_report_key(cluster: str) -> Key:
    """The EKS agent's node report (written by the agent only: the agent's word, validated when read)."""
    return {"pk": {"S": f"agent#{cluster}"}, "sk": {"S": "nodes"}}


class NodeReportStore:
    """The EKS agents' node reports, and which reported node state Medic has already recorded."""

    # A node absent from the reports this long, then reported again, is a new episode (recorded again).
    EPISODE_GAP_MINUTES = 30

    def __init__(self, table: Table) -> None:
        self.table = table

    def report(self, cluster: str) -> dict | None:
        return self.table.get(node_report_key(cluster))

    def note_state(self, cluster: str, node: str, state: str, now: datetime) -> bool:
        """Remember the node's reported state; True when it is news: first seen, changed, or seen again after a
        gap (one record per episode, not one per sweep)."""
        key = self.table.key(f"eksnode#{cluster}#{node}", "state")
        gap = epoch(now) - self.EPISODE_GAP_MINUTES * 60
        news = self.table.put_if(
            {**key, "state": {"S": state}, "seen_epoch": {"N": str(epoch(now))}, "expires_at": expires(now, days=1)},
            "attribute_not_exists(pk) OR #state <> :state OR seen_epoch < :gap",
            {":state": {"S": state}, ":gap": {"N": str(gap)}}, {"#state": "state"})
        if not news:  # still the same episode: keep it alive
            self.table.update(key, "SET seen_epoch = :now", {":now": {"N": str(epoch(now))}})
        return news

    # --- a watched job on a failing EKS node: brought back by its operator within recovery_minutes, or restarted

    def _job_watch_key(self, cluster: str, job: str) -> Key:
        return self.table.key(f"eksjobwatch#{cluster}", job)

    def watch_job(self, cluster: str, job: str, node: str, since: datetime, deadline: datetime) -> bool:
        """Start watching the job (one watch per job at a time); False when it is already watched."""
        return self.table.put_if(
            {**self._job_watch_key(cluster, job), "node": {"S": node}, "since": {"S": since.isoformat()},
             "deadline": {"S": deadline.isoformat()}, "expires_at": expires(deadline, days=1)},
            "attribute_not_exists(pk)")

    def job_watches(self, cluster: str) -> list[tuple[str, str, datetime, datetime]]:
        """(job, node, since, deadline) of every open watch on the cluster."""
        return [(item["sk"]["S"], item["node"]["S"], datetime.fromisoformat(item["since"]["S"]),
                 datetime.fromisoformat(item["deadline"]["S"]))
                for item in self.table.partition(f"eksjobwatch#{cluster}")]

    def end_job_watch(self, cluster: str, job: str) -> None:
        self.table.delete(self._job_watch_key(cluster, job))
