"""Commands from Medic: parse and validate a queue message into a typed command, and build its argv.

The agent runs the kinds Medic issues: `requeue_job`, and around a node action `drain_node` / `resume_node`
and `job_states` (where the jobs the repair hit are now); around a repair HyperPod makes by itself (automatic node
recovery), `list_node_jobs` (the jobs on the node, its Slurm state untouched). Parsing is the first check, not
the last: a command that parses still runs only once the ledger confirms Medic issued it (ledger.claim).
Pure: no I/O. Every value that ends up on a command line is checked here against a strict
allowlist pattern (full match, ASCII only), and checked again when its argv is built, so an
argv is never built from an unchecked value. Nothing here goes through a shell.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from re import Pattern
from typing import Any

# Full-match, ASCII-only patterns: `$` alone would accept a trailing newline and `\d` non-ASCII digits.
JOB_ID = re.compile(r"[0-9]{1,10}", re.ASCII)
JOB_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}", re.ASCII)
COMMAND_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}", re.ASCII)
# What squeue may print for a job: a job id, or an array task `<job>_<task>`.
SQUEUE_JOB_ID = re.compile(r"[0-9]{1,10}(?:_[0-9]{1,10})?", re.ASCII)
# A Slurm node name as HyperPod names its nodes (ip-<a>-<b>-<c>-<d>): one node, never a hostlist expression
# (`ip-10-1-2-[3-9]`), `ALL` or a list.
NODE_NAME = re.compile(r"ip-(?:[0-9]{1,3}-){3}[0-9]{1,3}", re.ASCII)
# What `squeue --format=%i|%j` prints per job: the id, a bar, the name (anything printable up to the line end).
SQUEUE_JOB_LINE = re.compile(r"([0-9]{1,10}(?:_[0-9]{1,10})?)\|([\x20-\x7e]{0,200})", re.ASCII)
DRAIN_REASON = "Medic: drained before a node repair"  # fixed: nothing from a message reaches the Reason
# A node in a repair loop kept out of service (quarantine_node); fixed too. slurmctld keeps a DRAIN flag and its reason
# across the node's reboot (validate_node_specs, src/slurmctld/node_mgr.c: a node returns to service by itself only
# with the reason "Not responding"), and `scontrol update ... Reason=` replaces the reason (update_node, same file).
# It never begins `Action:`: a reason `Action:Replace` / `Action:Reboot` is how an operator asks HyperPod itself to
# replace or reboot a Slurm node (AWS, "Manually replace or reboot a node using Slurm"); a quarantine asks for nothing.
QUARANTINE_REASON = "Medic: quarantined after repeated repairs, medic release returns it"
# What `squeue --format=%i|%T` prints per job: the id, a bar, the state (Slurm's upper-case names: NODE_FAIL, ...).
SQUEUE_STATE_LINE = re.compile(r"([0-9]{1,10}(?:_[0-9]{1,10})?)\|([A-Z_]{1,32})", re.ASCII)
# job_states' squeue -O line: id|state|requeue flag|batch flag|restart count (`4211|PENDING|1|1|1`).
SQUEUE_JOB_STATE_LINE = re.compile(r"([0-9]{1,10})\|([A-Z_]{1,32})\|([01])\|([01])\|([0-9]{1,5})", re.ASCII)
# What `sacct --parsable2 --format=JobIDRaw,State` prints per job: the id, a bar, the state; a cancelled job's
# state carries who cancelled it (`CANCELLED by 1000`, sacct(1)).
SACCT_STATE_LINE = re.compile(r"([0-9]{1,10})\|([A-Z_]{1,32})(?: by [0-9]{1,10})?", re.ASCII)
# job_states: one or more job ids, comma-separated (squeue -j's list), at most MAX_JOBS_LISTED of them.
JOB_ID_LIST = re.compile(r"[0-9]{1,10}(?:,[0-9]{1,10}){0,49}", re.ASCII)
# What `squeue --format=%i|%T|%j` prints per job: the id, its state, its name (last: a name may hold a bar).
SQUEUE_NAMED_LINE = re.compile(r"([0-9]{1,10}(?:_[0-9]{1,10})?)\|([A-Z_]{1,32})\|([\x20-\x7e]{0,200})", re.ASCII)
# What Medic issues; nothing else runs.
KINDS = ("requeue_job", "drain_node", "resume_node", "list_node_jobs", "job_states", "quarantine_node", "release_node")
# The most jobs a listing may name (a node's jobs, job_states' ids) and the most names a requeue by id may allow.
MAX_JOBS_LISTED = 50
MAX_BODY_CHARS = 16_384
MAX_TEXT_CHARS = 512


@dataclass(frozen=True)
class RequeueJob:
    """Requeue one job: by id (only when squeue names it one of ``job_names``, when Medic gave them: its watched
    jobs), or the one job running under a name (``last_seen_id``, the job Medic last saw running under it, when it
    still does; else the only running job of that name). Never every job of a name: a held or pending job of that
    name is never requeued, and several running ones requeue none."""

    job_id: str | None = None
    job_name: str | None = None
    job_names: tuple[str, ...] = ()  # by id: the names the job must have
    last_seen_id: str | None = None  # by name: the job Medic last saw running under it

    @property
    def target(self) -> str:
        if self.job_id is not None:
            return f"{self.job_id}@{','.join(self.job_names)}" if self.job_names else self.job_id
        return f"name:{self.job_name}@{self.last_seen_id}" if self.last_seen_id else f"name:{self.job_name}"


@dataclass(frozen=True)
class NodeCommand:
    """A command on one Slurm node, by its name."""

    node: str

    @property
    def target(self) -> str:
        return f"node:{self.node}"


@dataclass(frozen=True)
class DrainNode(NodeCommand):
    """Drain one node in Slurm (no new work lands on it), then list the jobs still running on it."""


@dataclass(frozen=True)
class ResumeNode(NodeCommand):
    """Return one drained node to service in Slurm."""


@dataclass(frozen=True)
class QuarantineNode(NodeCommand):
    """Keep one node in a repair loop out of service: drain it with Medic's quarantine reason (unless someone else
    drained it: their drain and reason stay)."""


@dataclass(frozen=True)
class ReleaseNode(NodeCommand):
    """Return one quarantined node to service: only a node still drained with Medic's quarantine reason."""


@dataclass(frozen=True)
class ListNodeJobs(NodeCommand):
    """List the jobs running on one node, changing nothing (HyperPod repairs it by itself: AWS's Slurm guidance says
    not to change a node's state while HyperPod repairs it)."""


@dataclass(frozen=True)
class JobStates:
    """Report the Slurm state of a few jobs (those a node repair hit): read only, nothing changes."""

    job_ids: str  # comma-separated, as squeue -j takes them

    @property
    def target(self) -> str:
        return f"jobs:{self.job_ids}"


Action = RequeueJob | DrainNode | ResumeNode | ListNodeJobs | JobStates | QuarantineNode | ReleaseNode


@dataclass(frozen=True)
class Command:
    command_id: str
    cluster: str
    kind: str
    action: Action
    incident: str = ""
    issued_at: str = ""

    @property
    def target(self) -> str:
        return self.action.target


class Refused(ValueError):
    """A message the agent will not run. Carries what could be read of it, for the ledger and the log."""

    def __init__(self, reason: str, *, command_id: str | None = None, cluster: str = "", kind: str = "",
                 target: str = "", incident: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.command_id = command_id
        self.cluster = cluster
        self.kind = kind
        self.target = target
        self.incident = incident


def matches(pattern: Pattern[str], value: Any) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def shown(value: Any, limit: int = 80) -> str:
    """A value as it may appear in a reason, a log line or the ledger: printable, quoted, truncated."""
    text = value if isinstance(value, str) else json.dumps(value)
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def _text(value: Any, limit: int = MAX_TEXT_CHARS) -> str:
    return value[:limit] if isinstance(value, str) else ""


def read_body(body: str) -> dict:
    """A queue message body → its JSON object, or Refused (missing, too large, not a JSON object)."""
    if not isinstance(body, str) or len(body) > MAX_BODY_CHARS:
        raise Refused("message body is missing or too large")
    try:
        data = json.loads(body)
    except ValueError:
        raise Refused("message body is not JSON") from None
    if not isinstance(data, dict):
        raise Refused("message body is not a JSON object")
    return data


def parse(body: str, *, cluster: str) -> Command:
    """A queue message body → a command this agent may run, or Refused saying why not."""
    data = read_body(body)

    raw_id = data.get("command_id")
    command_id = raw_id if matches(COMMAND_ID, raw_id) else None
    kind = data.get("kind")
    envelope = {"command_id": command_id, "cluster": _text(data.get("cluster"), 128),
                "kind": _text(kind, 64), "incident": _text(data.get("incident")),
                "target": _raw_target(data)}
    if command_id is None:
        raise Refused(f"command_id must match {COMMAND_ID.pattern}: {shown(raw_id)}", **envelope)
    if data.get("cluster") != cluster:
        raise Refused(f"command is for cluster {shown(data.get('cluster'))}, this agent serves {cluster!r}",
                      **envelope)
    if kind not in KINDS:
        raise Refused(f"kind must be one of {', '.join(KINDS)}: {shown(kind)}", **envelope)
    action = _requeue(data, envelope) if kind == "requeue_job" else _job_states(data, envelope) \
        if kind == "job_states" else _node_action(kind, data, envelope)
    return Command(command_id=command_id, cluster=cluster, kind=kind, action=action,
                   incident=envelope["incident"], issued_at=_text(data.get("issued_at"), 64))


def _raw_target(data: dict) -> str:
    for key in ("job_id", "job_name", "node", "job_ids"):
        if key in data:
            value = data[key]
            text = value if isinstance(value, str) else json.dumps(value)
            return text[:256]
    return ""


def _requeue(data: dict, envelope: dict) -> RequeueJob:
    has_id, has_name = "job_id" in data, "job_name" in data
    if has_id == has_name:
        raise Refused("requeue_job needs exactly one of job_id or job_name", **envelope)
    if has_id:
        if "last_seen_id" in data:
            raise Refused("last_seen_id goes with job_name, not job_id", **envelope)
        if not matches(JOB_ID, data["job_id"]):
            raise Refused(f"job_id must be 1-10 digits: {shown(data['job_id'])}", **envelope)
        names = data.get("job_names", [])
        if not isinstance(names, list) or len(names) > MAX_JOBS_LISTED or len(set(map(str, names))) != len(names) \
                or not all(matches(JOB_NAME, name) for name in names):
            raise Refused(f"job_names must be a list of at most {MAX_JOBS_LISTED} distinct job names "
                          f"({JOB_NAME.pattern}): {shown(names)}", **envelope)
        return RequeueJob(job_id=data["job_id"], job_names=tuple(names))
    if "job_names" in data:
        raise Refused("job_names goes with job_id, not job_name", **envelope)
    if not matches(JOB_NAME, data["job_name"]):
        raise Refused(f"job_name must match {JOB_NAME.pattern}: {shown(data['job_name'])}", **envelope)
    seen = data.get("last_seen_id")
    if seen is not None and not matches(SQUEUE_JOB_ID, seen):
        raise Refused(f"last_seen_id must be a job id: {shown(seen)}", **envelope)
    return RequeueJob(job_name=data["job_name"], last_seen_id=seen)


def _job_states(data: dict, envelope: dict) -> JobStates:
    extra = sorted(set(data) & {"job_id", "job_name", "node"})
    if extra:
        raise Refused(f"job_states takes job_ids, not {', '.join(extra)}", **envelope)
    if not matches(JOB_ID_LIST, data.get("job_ids")):
        raise Refused(f"job_ids must be 1-50 comma-separated job ids: {shown(data.get('job_ids'))}", **envelope)
    return JobStates(data["job_ids"])


def _node_action(kind: str, data: dict, envelope: dict) -> NodeCommand:
    extra = sorted(set(data) & {"job_id", "job_name", "job_ids"})
    if extra:
        raise Refused(f"{kind} takes a node, not {', '.join(extra)}", **envelope)
    if not matches(NODE_NAME, data.get("node")):
        raise Refused(f"node must be one Slurm node name like ip-10-1-2-3: {shown(data.get('node'))}", **envelope)
    return {"drain_node": DrainNode, "list_node_jobs": ListNodeJobs, "quarantine_node": QuarantineNode,
            "release_node": ReleaseNode}.get(kind, ResumeNode)(data["node"])


# --- argv builders: each re-checks its input, so no caller can build a command line from an unchecked value.

def requeue_argv(job_id: str) -> list[str]:
    if not matches(SQUEUE_JOB_ID, job_id):
        raise ValueError(f"not a job id: {shown(job_id)}")
    return ["scontrol", "requeue", job_id]


def running_jobs_argv(job_name: str) -> list[str]:
    """The running jobs of a name (`--states=RUNNING`: a held or pending job of that name is not one), `<id>|<name>`
    per line (squeue(1): `--name` filters on the exact job name, `%i` the job id, `%j` its name)."""
    if not matches(JOB_NAME, job_name):
        raise ValueError(f"not a job name: {shown(job_name)}")
    return ["squeue", "--noheader", "--states=RUNNING", "--format=%i|%j", f"--name={job_name}"]


def job_name_argv(job_id: str) -> list[str]:
    """One job's id, state and name, whatever its state (squeue(1) `--states=all`, `-j`; an array job's tasks each
    get a line), `<id>|<state>|<name>`: the name last, since a name may hold a bar."""
    if not matches(JOB_ID, job_id):
        raise ValueError(f"not a job id: {shown(job_id)}")
    return ["squeue", "--noheader", "--states=all", "--format=%i|%T|%j", "-j", job_id]


def parse_job_name_lines(squeue_output: str) -> list[tuple[str, str, str]]:
    """squeue's `%i|%T|%j` lines → [(job id, state, name)], each id once. Strict, like parse_jobs_on_node."""
    jobs: list[tuple[str, str, str]] = []
    for line in squeue_output.splitlines():
        if not line.strip():
            continue
        found = SQUEUE_NAMED_LINE.fullmatch(line.rstrip())
        if found is None:
            raise ValueError(f"unexpected squeue line: {shown(line, 120)}")
        if found.group(1) not in [job_id for job_id, _, _ in jobs]:
            jobs.append((found.group(1), found.group(2), found.group(3)))
    return jobs


def drain_argv(node: str) -> list[str]:
    if not matches(NODE_NAME, node):
        raise ValueError(f"not a node name: {shown(node)}")
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={DRAIN_REASON}"]


def quarantine_argv(node: str) -> list[str]:
    if not matches(NODE_NAME, node):
        raise ValueError(f"not a node name: {shown(node)}")
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={QUARANTINE_REASON}"]


def resume_argv(node: str) -> list[str]:
    if not matches(NODE_NAME, node):
        raise ValueError(f"not a node name: {shown(node)}")
    return ["scontrol", "update", f"NodeName={node}", "State=RESUME"]


def show_node_argv(node: str) -> list[str]:
    """The node's state and reason, as `scontrol show node` prints them (read only), before any resume."""
    if not matches(NODE_NAME, node):
        raise ValueError(f"not a node name: {shown(node)}")
    return ["scontrol", "show", "node", node]


# `scontrol show node` (SchedMD slurm, src/api/node_info.c, slurm_sprint_node_table): one `NodeName=<name> ...` line,
# then indented lines; `State=<base>+<FLAG>+...` (node_state_string_complete: IDLE+DRAIN, DOWN+DRAIN+NOT_RESPONDING,
# ...) heads a line, and `Reason=<text> [<user>@<time>]` is a line of its own (absent when the node has none).
# Checked against slurm-wlm 22.05.8's real output in tests/agent/test_real_slurm.py.
NODE_NAME_LINE = re.compile(r"NodeName=(\S+)(?: .*)?", re.ASCII)
NODE_STATE_TOKEN = re.compile(r"State=([A-Z_+*~#$@^!%-]{1,128})(?: .*)?", re.ASCII)
NODE_REASON_LINE = re.compile(r"Reason=(.*?)(?: \[[^\]@]*@[^\]]*\])?", re.ASCII)


def parse_node_state(output: str, node: str) -> tuple[str, str]:
    """`scontrol show node <node>`'s output → (state, reason: "" when none). Strict: the output must be about this
    node and carry one State, else ValueError (the node is then not resumed: never on a guess)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    named = NODE_NAME_LINE.fullmatch(lines[0]) if lines else None
    if named is None or named.group(1) != node:
        raise ValueError(f"not scontrol's answer about {node}: {shown(lines[0] if lines else '', 120)}")
    states = [found.group(1) for line in lines if (found := NODE_STATE_TOKEN.fullmatch(line))]
    if len(states) != 1:
        raise ValueError(f"no single State= in scontrol's answer about {node}")
    reasons = [found.group(1) for line in lines if (found := NODE_REASON_LINE.fullmatch(line))]
    return states[0], reasons[0] if reasons else ""


def drained_by_medic(state: str, reason: str) -> bool:
    """The node is still drained (the DRAIN flag, whatever its base state: IDLE, DOWN) with Medic's reason: slurmctld
    keeps a reason and appends its own to it (`<reason> : Not responding` when the node stopped answering during the
    repair: src/slurmctld/node_mgr.c, set_node_reason), so Medic's reason is how it begins."""
    return "DRAIN" in state.split("+") and (reason == DRAIN_REASON or reason.startswith(f"{DRAIN_REASON} : "))


def quarantined_by_medic(state: str, reason: str) -> bool:
    """Drained with Medic's quarantine reason (slurmctld may have appended its own: `<reason> : Not responding`)."""
    return "DRAIN" in state.split("+") and (reason == QUARANTINE_REASON
                                            or reason.startswith(f"{QUARANTINE_REASON} : "))


def drained_by_someone_else(state: str, reason: str) -> bool:
    """Drained with a reason that is not one of Medic's: a person's (or HyperPod's) drain, left as it is."""
    return "DRAIN" in state.split("+") and not drained_by_medic(state, reason) \
        and not quarantined_by_medic(state, reason) and not reason.startswith("Not responding")


def jobs_on_node_argv(node: str) -> list[str]:
    if not matches(NODE_NAME, node):
        raise ValueError(f"not a node name: {shown(node)}")
    return ["squeue", "--noheader", "--format=%i|%j", "-w", node]


def parse_jobs_on_node(squeue_output: str) -> list[tuple[str, str]]:
    """squeue's `%i|%j` lines → [(job id, job name)], in squeue's order, each id once. Strict: a line that is not
    exactly `<id>|<name>` raises ValueError (the job list is then unknown, never guessed)."""
    jobs: list[tuple[str, str]] = []
    for line in squeue_output.splitlines():
        if not line.strip():
            continue
        found = SQUEUE_JOB_LINE.fullmatch(line.rstrip())
        if found is None:
            raise ValueError(f"unexpected squeue line: {shown(line, 120)}")
        if found.group(1) not in [job_id for job_id, _ in jobs]:
            jobs.append((found.group(1), found.group(2)))
    return jobs


@dataclass(frozen=True)
class JobState:
    """What Slurm says of one job: its state and, from job_states, whether slurmctld may requeue it (its requeue
    and batch flags: `scontrol requeue` refuses a job without either) and how often it was requeued."""

    job_id: str
    state: str
    requeue: bool | None = None
    batch: bool | None = None
    restarts: int | None = None

    def fields(self) -> dict[str, str]:
        """As the result item carries it: strings, the flags `1`/`0`, what is unknown left out."""
        known = {"requeue": self.requeue, "batch": self.batch, "restarts": self.restarts}
        return {"id": self.job_id, "state": self.state,
                **{key: str(int(value)) for key, value in known.items() if value is not None}}


# squeue(1) --Format: "type[:[.][size][suffix]]"; size 0 prints each value as wide as it is, the suffix `|` ends
# each field. Requeue: "whether the job will be requeued on failure"; BatchFlag; RestartCnt: "the number of
# restarts for the job". slurm-wlm 22.05.8 prints `4211|PENDING|1|1|1` (tests/agent/test_real_slurm.py).
JOB_STATES_FORMAT = "--Format=JobID:0|,State:0|,Requeue:0|,BatchFlag:0|,RestartCnt:0"


def job_states_argv(job_ids: str) -> list[str]:
    """Every state (`--states=all`: squeue's default shows only pending and running jobs), one line per job; a job
    slurmctld no longer remembers (MinJobAge after it ended) is not listed."""
    if not matches(JOB_ID_LIST, job_ids):
        raise ValueError(f"not a job id list: {shown(job_ids)}")
    return ["squeue", "--noheader", "--states=all", JOB_STATES_FORMAT, "-j", job_ids]


def parse_job_states(squeue_output: str) -> list[JobState]:
    """job_states' squeue lines → one JobState per job, each id once. Strict, like parse_jobs_on_node."""
    states: list[JobState] = []
    for line in squeue_output.splitlines():
        if not line.strip():
            continue
        found = SQUEUE_JOB_STATE_LINE.fullmatch(line.strip())
        if found is None:
            raise ValueError(f"unexpected squeue line: {shown(line, 120)}")
        job_id, state, requeue, batch, restarts = found.groups()
        if job_id not in [known.job_id for known in states]:
            states.append(JobState(job_id, state, requeue == "1", batch == "1", int(restarts)))
    return states


def named_jobs_argv(job_name: str) -> list[str]:
    """Every job of that name slurmctld still remembers, finished ones included (until MinJobAge after they ended):
    what became of a job no longer pending or running."""
    if not matches(JOB_NAME, job_name):
        raise ValueError(f"not a job name: {shown(job_name)}")
    return ["squeue", "--noheader", "--states=all", "--format=%i|%T", f"--name={job_name}"]


# How far back sacct looks for a job gone from slurmctld's memory (sacct(1) --starttime: "now-<count>days").
ACCOUNTING_WINDOW = "now-2days"


def accounted_jobs_argv(job_name: str) -> list[str]:
    """The cluster's job accounting (slurmdbd) of every job of that name in the last two days: each job id's most
    recent record (sacct(1): without --duplicates), allocations only (no steps)."""
    if not matches(JOB_NAME, job_name):
        raise ValueError(f"not a job name: {shown(job_name)}")
    return ["sacct", "--noheader", "--parsable2", "--allocations", "--format=JobIDRaw,State", f"--name={job_name}",
            f"--starttime={ACCOUNTING_WINDOW}"]


def parse_named_jobs(output: str, line_pattern: Pattern[str]) -> list[JobState]:
    """`<id>|<state>` lines (squeue's %i|%T, or sacct's JobIDRaw,State) → one JobState per job, each id once.
    Strict: any other line raises ValueError."""
    states: list[JobState] = []
    for line in output.splitlines():
        if not line.strip():
            continue
        found = line_pattern.fullmatch(line.strip())
        if found is None:
            raise ValueError(f"unexpected line: {shown(line, 120)}")
        if found.group(1) not in [known.job_id for known in states]:
            states.append(JobState(found.group(1), found.group(2)))
    return states
