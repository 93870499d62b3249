"""Slurm clusters in the emulated world: the real Medic agent (agent/medic_agent) on each cluster's
controller, against the emulated command queue and ledger, with a fake Slurm behind it.

The agent runs exactly as on a controller node — parse and validate the message, claim it in the
ledger, run ``scontrol``/``squeue`` as an argv through its own ``Slurm`` class, write the result and
its heartbeat — except that its subprocess runner is replaced by ``FakeSlurm``: a small model of
the cluster's jobs that answers ``scontrol requeue <id>``, ``squeue --states=RUNNING --name=<name>``
(the running jobs of a name), ``squeue --states=all --format=%i|%T|%j -j <id>`` (a job's name),
``squeue --states=all --format=%i|%T --name=<name>`` and ``sacct`` (what became of the jobs of a name), and
around a node action ``scontrol update NodeName=<node> State=DRAIN|RESUME``, ``squeue -w <node>`` and
``squeue --states=all -j <ids>`` (nothing is executed; the stub programs in a temporary directory exist only so the
agent finds its binaries).

Jobs follow slurmctld (SchedMD slurm, src/slurmctld/job_mgr.c, 22.05 to current; checked against slurm-wlm
22.05.8 in tests/agent/test_real_slurm.py): a batch job with the requeue flag (JobRequeue=1, Slurm's default, or
`sbatch --requeue`) whose node goes down is requeued by slurmctld itself and held (BeginTime) for cred_expire + 1 s
before it may start again, at the next scheduling pass, on nodes that can take it; a job without the flag
(`--no-requeue`) ends NODE_FAIL, and `scontrol requeue` refuses it. Finished jobs leave slurmctld's memory
MinJobAge after they ended. Every rule is cited where it is modelled, and in sim/README.md.

A cluster has one head node by default; the `slurm` directive gives it several (`controllers`), one agent on
each, and says which slurmctld is in charge (`primary`, 1-based: the ones before it are DOWN, the rest UP,
0: none answers). The fake Slurm answers each agent's `scontrol ping` as Slurm prints it, so each agent works
out its own role exactly as on a head node; the pings are not reported as `slurm_command` lines.

A live session (sim/live.py) may point a cluster's agent at a real Slurm instead (`SlurmWorld.use_real_slurm`,
`RealSlurm`): then Slurm answers, and nothing here models it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from sim.synth import ROOT

# squeue lists jobs still in the queue; finished jobs have left it.
ACTIVE = ("PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUED", "RESIZING")
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY")
STATES = (*ACTIVE, *FINISHED)
# What `scontrol requeue` accepts: a running, suspended or finished batch job (not one still pending).
REQUEUEABLE = frozenset(STATES) - {"PENDING", "REQUEUED", "CONFIGURING"}
# slurm.conf(5) AuthInfo cred_expire: "This also controls how long a requeued job must wait before starting
# again. The default value is 120 seconds" (src/common/slurm_cred.c 22.05, src/interfaces/cred.h today:
# DEFAULT_EXPIRATION_WINDOW 120). A module value, so that a run (bench/recovery.py) can set it.
CRED_EXPIRE = timedelta(seconds=120)
# slurm.conf(5) SchedulerParameters sched_interval: "How frequently, in seconds, the main scheduling loop will
# execute and test all pending jobs. The default value is 60 seconds." The emulator runs it on the replay's whole
# minutes (an assumption: when slurmctld's loop runs within the minute is not documented).
SCHED_INTERVAL = timedelta(seconds=60)
# slurm.conf(5) MinJobAge: "The minimum age of a completed job before its record is cleared from the list of jobs
# slurmctld keeps in memory ... The default value is 300 seconds."
MIN_JOB_AGE = timedelta(seconds=300)
# slurm_errno.c: ESLURM_DISABLED, ESLURM_JOB_PENDING, ESLURM_INVALID_JOB_ID, as `scontrol requeue <id>` prints them
# (" for job <id>" appended by scontrol; slurm-wlm 22.05.8's real output in tests/agent/test_real_slurm.py).
DISABLED = "Requested operation is presently disabled"
PENDING_EXECUTION = "Job is pending execution"
INVALID_JOB = "Invalid job id specified"
JOB_NAME = re.compile(r"^[^\s\x00]{1,200}$")
JOB_STATES_FORMAT = "--Format=JobID:0|,State:0|,Requeue:0|,BatchFlag:0|,RestartCnt:0"  # the agent's job_states
AGENT_HOST = "ip-10-1-0-10"  # the emulated (first) controller node's hostname
MAX_CONTROLLERS = 3


def controller_host(number: int) -> str:
    """The hostname of head node ``number`` (1-based): ip-10-1-0-10, ip-10-1-0-11, ..."""
    return f"ip-10-1-0-{9 + number}"


def import_agent() -> Any:
    """The agent package, from agent/ (it is installed on controllers, not in this venv)."""
    path = str(ROOT / "agent")
    if path not in sys.path:
        sys.path.insert(0, path)
    import medic_agent.main

    return medic_agent.main


@dataclass
class SlurmJob:
    job_id: str
    name: str
    state: str = "RUNNING"
    requeues: int = 0  # slurmctld's restart_cnt (`scontrol show job` Restarts, squeue's RestartCnt)
    nodes: list[str] = field(default_factory=list)  # the instance ids it runs (or last ran) on
    auto_resume: bool = False  # launched with `srun --auto-resume=1`: HyperPod restarts it after a node repair
    # The job's requeue flag (job_details.requeue): JobRequeue=1 (slurm.conf's default) or `sbatch --requeue` set
    # it, `sbatch --no-requeue` clears it. Every emulated job is a batch job (BatchFlag=1).
    requeue: bool = True
    begin_at: datetime | None = None  # a requeued job's BeginTime: it may not start before
    ended_at: datetime | None = None  # when it reached a finished state (MinJobAge counts from here)
    started_at: datetime | None = None  # when it last started running

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def end(self, state: str, at: datetime) -> None:
        self.state, self.ended_at, self.begin_at = state, at, None

    def requeued(self, at: datetime) -> None:
        """Requeued (by `scontrol requeue`, or by slurmctld when its node went down): pending, held until its
        BeginTime. job_mgr.c batch_requeue_fini: "The time stamp on the new batch launch credential must be larger
        than the time stamp on the revoke request" → `begin_time = now + cred_lifetime + 1` (22.05; today
        `now + _requeue_delay() + 1`, requeue_delay defaulting to cred_expire); restart_cnt++ (_job_requeue_op,
        kill_running_job_by_node_name)."""
        self.state, self.requeues, self.ended_at = "PENDING", self.requeues + 1, None
        self.begin_at = at + CRED_EXPIRE + timedelta(seconds=1)


@dataclass
class SlurmNode:
    """What slurmctld keeps of one node (src/slurmctld/node_mgr.c): its base state, the DRAIN flag and the reason.
    The base state of a node that is up is IDLE or ALLOCATED, from its running jobs."""

    down: bool = False
    drain: bool = False
    reason: str = ""
    reason_at: str = ""  # when the reason was set (`scontrol show node` prints it)

    def set_reason(self, message: str, at: str) -> None:
        """set_node_reason (node_mgr.c): slurmctld appends its own message to a reason a person (or Medic) set."""
        if not self.reason:
            self.reason = message
        elif f" : {message}" not in self.reason:
            self.reason += f" : {message}"
        self.reason_at = at


@dataclass
class SlurmCluster:
    name: str
    jobs: dict[str, SlurmJob] = field(default_factory=dict)
    controllers: int = 1  # head nodes, each with a slurmctld (SlurmctldHost order) and an agent
    primary: int = 1  # the slurmctld in charge (1-based): those before it are DOWN, the rest UP; 0: all DOWN
    nodes: dict[str, SlurmNode] = field(default_factory=dict)  # by Slurm node name; absent: up, not drained
    # ASSUMPTION (no AWS source says what HyperPod's BatchRebootClusterNodes / BatchReplaceClusterNodes do to the node
    # in Slurm): by default HyperPod leaves the node's Slurm state to slurmctld; with `repair_resumes` it returns the
    # repaired node to service itself when it is back (State=RESUME: drain and reason cleared). sim/README.md.
    repair_resumes: bool = False
    # instance id -> Slurm node name of every node of the cluster (set by the world: DescribeClusterNode's hostname)
    node_names: Any = None
    seen_names: dict[str, str] = field(default_factory=dict)  # every instance's name ever seen (a replaced one too)
    # instance id -> HyperPod status of every compute node (set by the world): where a pending job may start
    compute_nodes: Any = None
    # slurmdbd keeps the cluster's job accounting (`sacct` answers); off: "Slurm accounting storage is disabled"
    accounting: bool = False
    forgotten: dict[str, SlurmJob] = field(default_factory=dict)  # purged after MinJobAge: only sacct knows them
    passed: datetime | None = None  # the last scheduling pass run

    @property
    def drained(self) -> set[str]:
        """The Slurm nodes out of service (drained, or down): no job starts on them."""
        return {name for name, state in self.nodes.items() if state.drain or state.down}

    def names(self) -> dict[str, str]:
        """instance id -> Slurm node name, for the cluster's nodes and those it had (a replaced instance keeps the
        name it had in Slurm's records)."""
        if self.node_names:
            self.seen_names.update(self.node_names())
        return self.seen_names

    @property
    def hosts(self) -> list[str]:
        return [controller_host(number) for number in range(1, self.controllers + 1)]

    def catch_up(self, now: datetime) -> None:
        """slurmctld's own work up to ``now``: each scheduling pass due (whole minutes), then the purge of jobs
        that ended MinJobAge ago."""
        if self.passed is None:
            self.passed = now.replace(second=0, microsecond=0)
        moment = self.passed + SCHED_INTERVAL
        while moment <= now:
            self.scheduling_pass(moment)
            self.passed = moment
            moment += SCHED_INTERVAL
        for job_id, job in list(self.jobs.items()):
            if job.finished and job.ended_at is not None and now - job.ended_at >= MIN_JOB_AGE:
                # job_mgr.c purge_old_job / _list_find_job_old: a finished job older than MinJobAge is dropped
                self.forgotten[job_id] = self.jobs.pop(job_id)

    def scheduling_pass(self, at: datetime) -> None:
        """The main scheduling loop (sched_interval): each pending job past its BeginTime starts when as many
        nodes as it ran on can take it (a job placed on no node starts as soon as it may). A node can take a job
        when HyperPod has it Running, Slurm has it in service (not drained) and no running job holds it; the job
        prefers the nodes it ran on. A job HyperPod's auto-resume holds waits for its node instead (node_back)."""
        names = self.names()
        for job in sorted(self.jobs.values(), key=lambda job: int(job.job_id)):
            if job.state != "PENDING" or job.auto_resume or job.begin_at is None or job.begin_at > at:
                continue
            if job.nodes:
                free = self.free_nodes(names)
                ordered = [node for node in job.nodes if node in free] + [node for node in free
                                                                          if node not in job.nodes]
                if len(ordered) < len(job.nodes):
                    continue  # Reason=Resources: it waits
                job.nodes = ordered[:len(job.nodes)]
            job.state, job.begin_at, job.started_at = "RUNNING", None, at

    def free_nodes(self, names: dict[str, str]) -> list[str]:
        statuses = self.compute_nodes() if self.compute_nodes else {}
        busy = {node for job in self.jobs.values() if job.state in ACTIVE and job.state != "PENDING"
                for node in job.nodes}
        return [node for node, status in statuses.items()
                if status == "Running" and names.get(node, node) not in self.drained and node not in busy]

    def ping(self) -> tuple[int, str]:
        """`scontrol ping` as Slurm prints it (as root): exit status and output.

        SchedMD slurm, src/scontrol/scontrol.c (`_print_ping`): one line per SlurmctldHost in slurm.conf order,
        "Slurmctld(primary|backup|backup<N>) at <host> is UP|DOWN" (`backup` when there are exactly two), the
        "RESTORE SLURMCTLD DAEMON TO SERVICE" banner only for root and only when one is DOWN, exit status 1
        only when none answers. Checked against slurm-wlm 22.05.8's real output in tests/agent/test_real_slurm.py.
        """
        lines, up_any = [], False
        for number, host in enumerate(self.hosts, start=1):
            up = self.primary != 0 and number >= self.primary
            up_any = up_any or up
            mode = "primary" if number == 1 else "backup" if self.controllers == 2 else f"backup{number - 1}"
            lines.append(f"Slurmctld({mode}) at {host} is {'UP' if up else 'DOWN'}")
        if self.primary != 1:
            lines += ["*" * 41, "** RESTORE SLURMCTLD DAEMON TO SERVICE **", "*" * 41]
        return (0 if up_any else 1), "".join(f"{line}\n" for line in lines)


class FakeSlurm:
    """subprocess.run for the agent's Slurm class: answers from the cluster model, records every run."""

    def __init__(self, cluster: SlurmCluster, runs: list[dict], host: str = AGENT_HOST) -> None:
        self.cluster = cluster
        self.runs = runs
        self.host = host  # the head node whose agent runs this

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        program = Path(argv[0]).name
        args = list(argv[1:])
        self.cluster.catch_up(datetime.now(UTC))  # the replay's clock
        if program == "scontrol" and args == ["ping"]:  # every agent's role check, every cycle: not reported
            returncode, stdout = self.cluster.ping()
            return subprocess.CompletedProcess(argv, returncode, stdout, "")
        returncode, stdout, stderr = self._answer(program, args)
        self.runs.append({"cluster": self.cluster.name, "host": self.host, "argv": [program, *args],
                          "exit": returncode,
                          "output": "\n".join(part for part in (stdout.strip(), stderr.strip()) if part)})
        return subprocess.CompletedProcess(argv, returncode, stdout, stderr)

    def _answer(self, program: str, args: list[str]) -> tuple[int, str, str]:
        jobs = self.cluster.jobs
        if program == "scontrol" and len(args) == 2 and args[0] == "requeue":
            return self._requeue(args[1])
        if program == "squeue" and args[:3] == ["--noheader", "--states=RUNNING", "--format=%i|%j"] \
                and len(args) == 4 and args[3].startswith("--name="):
            # squeue(1): --states filters on the job state (a held job is PENDING), --name on the exact job name
            name = args[3].removeprefix("--name=")
            running = [job for job in jobs.values() if job.name == name and job.state == "RUNNING"]
            return 0, "".join(f"{job.job_id}|{job.name}\n" for job in running), ""
        if program == "squeue" and args[:4] == ["--noheader", "--states=all", "--format=%i|%T|%j", "-j"] \
                and len(args) == 5:
            job = jobs.get(args[4])
            if job is None:  # slurmctld's error for a job id it does not know, or forgot (as for `-j` below)
                return 1, "", f"slurm_load_jobs error: {INVALID_JOB}"
            return 0, f"{job.job_id}|{job.state}|{job.name}\n", ""
        if program == "squeue" and args[:3] == ["--noheader", "--states=all", "--format=%i|%T"] and len(args) == 4 \
                and args[3].startswith("--name="):  # every job slurmctld still remembers by that name (MinJobAge)
            name = args[3].removeprefix("--name=")
            return 0, "".join(f"{job.job_id}|{job.state}\n" for job in jobs.values() if job.name == name), ""
        if program == "sacct":
            return self._sacct(args)
        node_update = self._node_update(program, args)
        if node_update is not None:
            return node_update
        if program == "scontrol" and len(args) == 3 and args[:2] == ["show", "node"]:
            return self._show_node(args[2])
        if program == "squeue" and args[:2] == ["--noheader", "--format=%i|%j"] and len(args) == 4 and args[2] == "-w":
            on = [job for job in jobs.values() if job.state in ACTIVE and args[3] in self._names(job)]
            return 0, "".join(f"{job.job_id}|{job.name}\n" for job in on), ""
        if program == "squeue" and args[:2] == ["--noheader", "--states=all"] and len(args) == 5 and args[3] == "-j" \
                and args[2] in (JOB_STATES_FORMAT, "--format=%i|%T"):
            ids = args[4].split(",")
            known = [jobs[job_id] for job_id in ids if job_id in jobs]
            if not known and len(ids) == 1:  # squeue(1) loads one job by id: slurmctld's error for an unknown one
                return 1, "", f"slurm_load_jobs error: {INVALID_JOB}"
            if args[2] == "--format=%i|%T":
                return 0, "".join(f"{job.job_id}|{job.state}\n" for job in known), ""
            # squeue -O JobID:0|,State:0|,Requeue:0|,BatchFlag:0|,RestartCnt:0 (squeue(1) --Format; size 0: as
            # wide as the value, the suffix `|` after each): `4211|PENDING|1|1|1`, as slurm-wlm 22.05.8 prints it
            return 0, "".join(f"{job.job_id}|{job.state}|{int(job.requeue)}|1|{job.requeues}\n" for job in known), ""
        return 1, "", f"{program}: error: the replay's fake Slurm does not know `{' '.join(args)}`"

    def _requeue(self, target: str) -> tuple[int, str, str]:
        """`scontrol requeue <id>` as job_mgr.c _job_requeue_op answers it: an unknown (or forgotten) id is
        ESLURM_INVALID_JOB_ID; a job without the requeue flag is ESLURM_DISABLED whatever its state (checked before
        anything else: "if the job doesn't want to be requeued don't"); a pending one ESLURM_JOB_PENDING; any other
        (running, suspended, or finished, COMPLETED included: "we support requeue of done/exit/exiting jobs") is
        requeued and held (SlurmJob.requeued)."""
        job = self.cluster.jobs.get(target.split("_")[0])
        if job is None:
            return 1, "", f"{INVALID_JOB} for job {target}"
        if not job.requeue:
            return 1, "", f"{DISABLED} for job {target}"
        if job.state not in REQUEUEABLE:
            return 1, "", f"{PENDING_EXECUTION} for job {target}"
        job.requeued(datetime.now(UTC))
        return 0, "", ""

    def _sacct(self, args: list[str]) -> tuple[int, str, str]:
        """`sacct --noheader --parsable2 --allocations --format=JobIDRaw,State --name=<name> --starttime=<t>`: the
        cluster's accounting of every job of that name, those slurmctld forgot included (each job id's most recent
        record: sacct(1) without --duplicates). Without slurmdbd, sacct's own words (slurm-wlm 22.05.8 with
        AccountingStorageType=accounting_storage/none)."""
        if len(args) != 6 or args[:4] != ["--noheader", "--parsable2", "--allocations", "--format=JobIDRaw,State"] \
                or not args[4].startswith("--name=") or not args[5].startswith("--starttime="):
            return 1, "", f"sacct: error: the replay's fake Slurm does not know `{' '.join(args)}`"
        if not self.cluster.accounting:
            return 1, "", "Slurm accounting storage is disabled"
        name = args[4].removeprefix("--name=")
        every = {**self.cluster.forgotten, **self.cluster.jobs}
        listed = sorted((job for job in every.values() if job.name == name), key=lambda job: int(job.job_id))
        return 0, "".join(f"{job.job_id}|{job.state}\n" for job in listed), ""

    def _names(self, job: SlurmJob) -> set[str]:
        names = self.cluster.names()
        return {names.get(node_id, node_id) for node_id in job.nodes}

    def _node_update(self, program: str, args: list[str]) -> tuple[int, str, str] | None:
        """`scontrol update NodeName=<name> State=DRAIN Reason=<text>` and `... State=RESUME` (scontrol(1)): an unknown
        name is slurmctld's "Invalid node name specified"; resuming a node that is not drained (or down) is
        "Invalid node state specified" (slurmctld's ESLURM_INVALID_NODE_STATE). Checked against real Slurm in
        tests/agent/test_real_slurm.py."""
        if program != "scontrol" or len(args) < 3 or args[0] != "update" or not args[1].startswith("NodeName="):
            return None
        node = args[1].removeprefix("NodeName=")
        names = set(self.cluster.names().values())
        if node not in names:
            return 1, "", "slurm_update error: Invalid node name specified"
        state = self.cluster.nodes.setdefault(node, SlurmNode())
        if args[2] == "State=DRAIN" and len(args) == 4 and args[3].startswith("Reason="):
            # update_node (node_mgr.c): the reason given replaces the node's reason
            state.drain, state.reason, state.reason_at = True, args[3].removeprefix("Reason="), _now()
            return 0, "", ""
        if args[2] == "State=RESUME" and len(args) == 3:
            if not (state.drain or state.down):
                return 1, "", "slurm_update error: Invalid node state specified"
            self.cluster.nodes[node] = SlurmNode()  # back in service: DRAIN and DOWN cleared, no reason
            return 0, "", ""
        return None

    def _show_node(self, node: str) -> tuple[int, str, str]:
        """`scontrol show node <name>` as slurm_sprint_node_table prints it (src/api/node_info.c), the lines Medic's
        agent reads: `NodeName=`, `State=<base>+<FLAGS>` (node_state_string_complete) and `Reason=<text>
        [<user>@<time>]`. An unknown name: "Node <name> not found", exit 1 (checked against slurm-wlm 22.05.8)."""
        if node not in set(self.cluster.names().values()):
            return 1, f"Node {node} not found\n", ""
        state = self.cluster.nodes.get(node, SlurmNode())
        running = any(job.state == "RUNNING" and node in self._names(job) for job in self.cluster.jobs.values())
        base = "DOWN" if state.down else "ALLOCATED" if running else "IDLE"
        shown = "+".join([base, *(["DRAIN"] if state.drain else []), *(["NOT_RESPONDING"] if state.down else [])])
        lines = [f"NodeName={node} Arch=x86_64 CoresPerSocket=48 ",
                 f"   NodeAddr={node} NodeHostName={node} Version=22.05.8",
                 f"   State={shown} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
                 "   Partitions=dev "]
        if state.reason:
            lines.append(f"   Reason={state.reason} [root@{state.reason_at}]")
        return 0, "\n".join(lines) + "\n\n", ""


class RealSlurm:
    """subprocess.run for the agent's Slurm class on a real Slurm (a live session, sim/live.py): runs the real
    program with the cluster's environment (SLURM_CONF), and records every run but the role checks, as FakeSlurm
    does. The answers, the job states and the requeue hold are Slurm's own: nothing here models them."""

    def __init__(self, cluster: str, env: dict[str, str], runs: list[dict], host: str) -> None:
        self.cluster = cluster
        self.env = env
        self.runs = runs
        self.host = host

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        completed = subprocess.run(argv, **{**kwargs, "env": self.env})  # noqa: S603 - the agent's own argv
        program, args = Path(argv[0]).name, list(argv[1:])
        if not (program == "scontrol" and args == ["ping"]):
            self.runs.append({"cluster": self.cluster, "host": self.host, "argv": [program, *args],
                              "exit": completed.returncode,
                              "output": "\n".join(part for part in ((completed.stdout or "").strip(),
                                                                    (completed.stderr or "").strip()) if part)})
        return completed


@dataclass
class AgentHandle:
    cluster: str
    queue_url: str
    agent: Any  # medic_agent.main.Agent
    running: bool = False
    host: str = AGENT_HOST


class SlurmWorld:
    def __init__(self, client: Callable[[str], Any]) -> None:
        self.client = client  # the harness's own clients: the agent's calls are not the handlers'
        # the agent of a cluster as the identity of the harness clients' calls while it runs (World: sim/iam.py)
        self.acting: Callable[[str], contextlib.AbstractContextManager[None]] = lambda cluster: contextlib.nullcontext()
        self.clusters: dict[str, SlurmCluster] = {}
        self.agents: dict[tuple[str, str], AgentHandle] = {}  # (cluster, head node) -> its agent
        self.runs: list[dict] = []  # every fake scontrol/squeue run, in order
        self.queues: dict[str, str] = {}  # cluster -> agent queue URL (the stack's AGENT_QUEUES)
        self.table = ""
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._undrained = 0
        self.node_names: Callable[[str], dict[str, str]] | None = None  # cluster -> {instance id: Slurm node name}
        self.compute_nodes: Callable[[str], dict[str, str]] | None = None  # cluster -> {compute instance id: status}
        # cluster -> (bin dir, environment, head node's hostname) of a real Slurm
        self.real: dict[str, tuple[str, dict[str, str], str]] = {}

    def use_real_slurm(self, cluster: str, bin_dir: str, env: dict[str, str], host: str) -> None:
        """The cluster's agent runs ``bin_dir``'s scontrol/squeue/sacct with ``env`` (its SLURM_CONF) against a real
        slurmctld instead of the fake (sim/live.py), as head node ``host`` (the SlurmctldHost `scontrol ping` names:
        the agent works out its role from the real answer). Call before the cluster's first agent is made."""
        if any(key[0] == cluster for key in self.agents):
            raise ValueError(f"the agents of {cluster!r} already run against the fake Slurm")
        self.real[cluster] = (bin_dir, dict(env), host)

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def cluster(self, name: str) -> SlurmCluster:
        if name not in self.clusters:
            names, compute = self.node_names, self.compute_nodes
            self.clusters[name] = SlurmCluster(name, node_names=(lambda: names(name)) if names else None,
                                               compute_nodes=(lambda: compute(name)) if compute else None)
        return self.clusters[name]

    def put_job(self, cluster: str, job_id: str, name: str, state: str = "RUNNING", nodes: list[str] | None = None,
                auto_resume: bool = False, requeue: bool = True, now: datetime | None = None) -> None:
        model = self.cluster(cluster)
        job = SlurmJob(job_id, name, state, nodes=list(nodes or []), auto_resume=auto_resume, requeue=requeue)
        if job.finished:
            job.ended_at = now or datetime.now(UTC)  # it ended as the directive says: MinJobAge counts from now
        model.jobs[job_id] = job
        model.forgotten.pop(job_id, None)
        model.names()  # the names its nodes have now

    def set_accounting(self, cluster: str, accounting: bool) -> None:
        self.cluster(cluster).accounting = accounting

    def catch_up(self, now: datetime) -> None:
        """Every cluster's slurmctld up to the replay's clock (scheduling passes, MinJobAge)."""
        for model in self.clusters.values():
            model.catch_up(now)

    def node_repaired(self, cluster: str, node_id: str, new_id: str, verb: str, at: datetime) -> None:
        """A node under a running job went down for a reboot or replacement at ``at``. slurmctld
        (job_mgr.c kill_running_job_by_node_name, 22.05; kill_running_job_by_node_ptr today) requeues a running
        batch job with the requeue flag itself ("requeue job %pJ due to failure of node %s": restart_cnt++, pending,
        held until its BeginTime) and ends any other NODE_FAIL ("Killing %pJ on failed node %s"). A job launched
        with `srun --auto-resume=1` is HyperPod's: it waits PENDING until the node is back (an assumption: AWS
        documents that auto-resume "restarts the job after the faulty nodes are replaced", not its Slurm states).
        Not modelled: a multi-node job submitted with --no-kill (kill_on_node_fail 0) keeps running on its other
        nodes. The node itself stops answering slurmctld, which marks it DOWN, "Not responding" appended to any reason
        it had (src/slurmctld/ping_nodes.c → set_node_down_ptr → set_node_reason; after SlurmdTimeout, 300 s by
        default, at once here)."""
        model = self.cluster(cluster)
        model.catch_up(at)
        name = model.names().get(node_id)
        if name is not None:
            state = model.nodes.setdefault(name, SlurmNode())
            state.down = True
            state.set_reason("Not responding", _now())
        for job in model.jobs.values():
            if node_id not in job.nodes:
                continue
            job.nodes = [new_id if node == node_id else node for node in job.nodes]
            if job.state not in ("RUNNING", "SUSPENDED"):
                continue
            if job.auto_resume:
                job.state = "PENDING"
            elif job.requeue:
                job.requeued(at)
            else:
                job.end("NODE_FAIL", at)

    def node_back(self, cluster: str, node_id: str) -> None:
        """The repaired node is Running again: its slurmd registers, and an auto-resumed job on it runs again (from
        its checkpoint); a job Slurm requeued starts at a scheduling pass once the node can take it
        (SlurmCluster.scheduling_pass). slurmctld returns a DOWN node to service on registration only when its reason
        is exactly "Not responding" (ReturnToService=1, Slurm's default: validate_node_specs in
        src/slurmctld/node_mgr.c); one with a reason someone set (Medic's drain) stays DOWN+DRAIN until `scontrol
        update State=RESUME`. With the `repair_resumes` assumption HyperPod returns it to service itself."""
        model = self.cluster(cluster)
        name = model.names().get(node_id)
        state = model.nodes.get(name) if name is not None else None
        if state is not None and (model.repair_resumes or (state.down and state.reason == "Not responding"
                                                           and not state.drain)):
            model.nodes[name] = SlurmNode()
        for job in model.jobs.values():
            if node_id in job.nodes and job.auto_resume and job.state == "PENDING":
                job.state, job.started_at = "RUNNING", datetime.now(UTC)

    # the agent
    def _dir(self) -> Path:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="medic-sim-slurm-")
            bin_dir = Path(self._tmp.name) / "bin"
            bin_dir.mkdir()
            for program in ("scontrol", "squeue", "sacct"):
                stub = bin_dir / program
                stub.write_text("#!/bin/sh\necho 'the replay answers this in-process' >&2\nexit 97\n")
                stub.chmod(0o755)
        return Path(self._tmp.name)

    def set_repair_resumes(self, cluster: str, resumes: bool) -> None:
        self.cluster(cluster).repair_resumes = resumes

    def set_controllers(self, cluster: str, controllers: int | None, primary: int | None) -> None:
        """Head nodes and the slurmctld in charge. New head nodes' agents start as the others are (running or not)."""
        model = self.cluster(cluster)
        if primary is not None and not 0 <= primary <= (controllers or model.controllers):
            raise ValueError(f"'primary' must be 0..{controllers or model.controllers} (got {primary})")
        if controllers is not None:
            if controllers < model.controllers:
                raise ValueError(f"a cluster's head nodes cannot be taken away ({cluster} has {model.controllers})")
            before = self.cluster_agents(cluster)
            running = any(handle.running for handle in before)
            model.controllers = controllers
            for handle in self.cluster_agents(cluster):
                if handle not in before:
                    handle.running = running
        if primary is not None:
            model.primary = primary

    def cluster_agents(self, cluster: str, controller: int | None = None) -> list[AgentHandle]:
        """The agents on the cluster's head nodes (all of them, or head node ``controller``), created stopped."""
        if cluster in self.real:  # a real Slurm: its one head node is this machine
            return [self.agent(cluster, self.real[cluster][2])]
        model = self.cluster(cluster)
        if controller is not None and not 1 <= controller <= model.controllers:
            raise ValueError(f"'controller' must be 1..{model.controllers} for {cluster} (got {controller})")
        hosts = model.hosts if controller is None else [controller_host(controller)]
        return [self.agent(cluster, host) for host in hosts]

    def agent(self, cluster: str, host: str = AGENT_HOST) -> AgentHandle:
        """The agent on head node ``host`` of the cluster (created stopped); ValueError when the stack has no agent
        queue for the cluster."""
        if (cluster, host) in self.agents:
            return self.agents[(cluster, host)]
        if cluster not in self.queues:
            known = ", ".join(sorted(self.queues)) or "none"
            raise ValueError(f"the stack has no agent queue for cluster {cluster!r} (AGENT_QUEUES: {known})")
        agent_main = import_agent()
        from medic_agent.ledger import Ledger
        from medic_agent.queue import Queue
        from medic_agent.slurm import Slurm
        from medic_agent.state import State

        work = self._dir()
        if cluster in self.real:
            bin_dir, env, _ = self.real[cluster]
            slurm = Slurm(bin_dir=bin_dir, timeout=30, runner=RealSlurm(cluster, env, self.runs, host))
        else:
            slurm = Slurm(bin_dir=str(work / "bin"), timeout=30,
                          runner=FakeSlurm(self.cluster(cluster), self.runs, host))
        agent = agent_main.Agent(
            cluster=cluster,
            queue=Queue(self.queues[cluster], lambda: self.client("sqs"), wait_seconds=0, visibility_timeout=120),
            ledger=Ledger(self.table, lambda: self.client("dynamodb")),
            slurm=slurm,
            state=State(str(work / f"state-{cluster}-{host}.json")),
            # The agent heartbeats every 60 s of the replay's clock, at the cycles the replay runs (event and schedule
            # times), as on a head node it does every 60 s (its own default: --heartbeat-seconds 60,
            # agent/medic_agent/handling.py); not at each of a settle's rounds, where each new heartbeat kept the
            # settle going to SETTLE_ROUNDS (scenario (m): 510 of 530 invocations were heartbeats).
            heartbeat_seconds=60, seconds=_replay_seconds,
            standby_seconds=0,  # a standby's cycle returns at once (it waits 20 s between checks on a head node)
            host=host,
        )
        self.agents[(cluster, host)] = AgentHandle(cluster, self.queues[cluster], agent, host=host)
        return self.agents[(cluster, host)]

    def cycle(self, out: TextIO) -> bool:
        """One receive cycle of every running agent (heartbeat included); True when one handled a message."""
        running = [handle for handle in self.agents.values() if handle.running]
        if not running:
            return False
        handled = 0
        with _agent_logs(out):
            for handle in running:
                with self.acting(handle.cluster):  # its own policy: sim/iam.py
                    handled += handle.agent.poll()
        return handled > 0

    def set_clock_ahead(self, handle: AgentHandle, ahead: Any) -> None:
        """The agent's clock (what it writes as its heartbeat's `at`) runs ``ahead`` of the replay's."""
        from datetime import UTC, datetime

        handle.agent.clock = lambda: datetime.now(UTC) + ahead

    def heartbeat_at(self, handle: AgentHandle, out: TextIO) -> None:
        """The agent's own heartbeat write (as primary or standby, as `scontrol ping` says), at the current
        (replay) time."""
        from medic_agent import __version__

        with _agent_logs(out), self.acting(handle.cluster):
            role = handle.agent.check_role()
            handle.agent.ledger.heartbeat(handle.cluster, handle.agent.clock(), handle.agent.host, __version__,
                                          role=role.role, reason="" if role.acts else role.reason,
                                          in_charge=role.in_charge)

    def latest_command(self) -> dict[str, str]:
        """Medic's `command#<cluster>#<id>/issued` item most recently written (what a forger would have seen queued)."""
        dynamodb = self.client("dynamodb")
        items: list[dict] = []
        for page in dynamodb.get_paginator("scan").paginate(
                TableName=self.table, FilterExpression="sk = :issued AND begins_with(pk, :command)",
                ExpressionAttributeValues={":issued": {"S": "issued"}, ":command": {"S": "command#"}}):
            items.extend(page.get("Items", []))
        if not items:
            raise ValueError("Medic has issued no agent command yet")
        latest = max(items, key=lambda item: item.get("issued_at", {}).get("S", ""))
        return {key: value["S"] for key, value in latest.items() if "S" in value}

    def forge_result(self, cluster: str, command_id: str, fields: dict[str, str], now: Any) -> None:
        """A result written exactly as the agent of ``cluster`` writes one (its own key), for any command: what
        a compromised controller can do with its instance role."""
        from medic_agent.ledger import Ledger

        import_agent()
        with self.acting(cluster):  # the controller's own role: what its policy lets it write
            Ledger(self.table, lambda: self.client("dynamodb")).put_result(
                {"command_id": command_id, "host": AGENT_HOST, "agent_version": "forged", **fields,
                 "cluster": cluster}, now)

    def drain_runs(self) -> list[dict]:
        new = self.runs[self._undrained:]
        self._undrained = len(self.runs)
        return new


def _now() -> str:
    """The replay clock, as `scontrol show node` prints a reason's time."""
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _replay_seconds() -> float:
    """The replay clock in seconds (time_machine moves it), for the agent's intervals."""
    return datetime.now(UTC).timestamp()


@contextlib.contextmanager
def _agent_logs(out: TextIO) -> Iterator[None]:
    """The agent's JSON log lines go where the handlers' do, never to stdout."""
    import_agent()  # the agents' package, also when no agent has been started yet
    from medic_agent.logs import JsonFormatter

    logger = logging.getLogger("medic_agent")
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter({"source": "medic-agent"}))
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
