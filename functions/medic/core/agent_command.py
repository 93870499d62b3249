"""A command for an on-cluster agent (Slurm or EKS), as the agent queue carries it."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import NamedTuple

from medic.core.mode import Mode
from medic.core.models import Action, Trigger


class AgentCommand(NamedTuple):
    command_id: str
    cluster: str
    kind: str  # requeue_job; around a node action drain_node, resume_node, job_states (NODE_KINDS); restart_job (EKS)
    incident: str
    issued_at: datetime
    job_id: str | None = None
    job_name: str | None = None
    # requeue_job by id: the names the job must have for the agent to requeue it (Medic's watched jobs; empty: any)
    job_names: tuple[str, ...] = ()
    # requeue_job by name: the job Medic last saw running under that name (the agent requeues it when it still is)
    last_seen_id: str | None = None
    node: str | None = None  # drain_node, resume_node: one Slurm node name
    job_ids: str | None = None  # job_states: comma-separated job ids
    # restart_job: the Kubernetes object (namespace, kind; its name is job_name)
    namespace: str | None = None
    job_kind: str | None = None

    @property
    def target(self) -> str:
        """What the command acts on, as the agent names it (its claim's condition and its result's `target`)."""
        if self.kind == "restart_job":
            return f"{self.job_kind}/{self.namespace}/{self.job_name}"
        if self.node is not None:
            return f"node:{self.node}"
        if self.job_ids is not None:
            return f"jobs:{self.job_ids}"
        if self.job_id is not None:  # the agent's RequeueJob.target, exactly
            return f"{self.job_id}@{','.join(self.job_names)}" if self.job_names else self.job_id
        return f"name:{self.job_name}@{self.last_seen_id}" if self.last_seen_id else f"name:{self.job_name}"

    def body(self) -> dict:
        """The queue message, exactly as the agent parses it."""
        fields = {"command_id": self.command_id, "cluster": self.cluster, "kind": self.kind,
                  "incident": self.incident, "issued_at": self.issued_at.isoformat()}
        optional = {"job_id": self.job_id, "job_name": self.job_name, "job_names": list(self.job_names) or None,
                    "last_seen_id": self.last_seen_id, "node": self.node, "job_ids": self.job_ids,
                    "namespace": self.namespace, "job_kind": self.job_kind}
        return {**fields, **{key: value for key, value in optional.items() if value is not None}}


def command_id_for(cluster: str, incident: str, request_id: str | None) -> str:
    """The command id derives from the request (same request, same id), so a retried send cannot make the agent
    run a second command: the agent dedupes on the id."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic:{cluster}:{incident}:{request_id}")) if request_id \
        else str(uuid.uuid4())


EARLY = "early"  # CommandContext.phase of job_states asked while the node is still in repair


class CommandContext(NamedTuple):
    """What Medic issued an agent command for, kept beside it (`command#<cluster>#<id>/issued`, ledger.agents): the
    agent's claim and Medic's check of its result compare the cluster, kind, target and incident; the command's final
    record is written against the rest. None: not written for this kind of command (or not in the item read)."""

    cluster: str | None = None
    kind: str | None = None
    target: str | None = None
    incident: str | None = None
    trigger: Trigger | None = None
    event_id: str | None = None
    mode: Mode = Mode.ACT  # Medic queues a command only when it acts
    fault: str | None = None
    action: Action | None = None
    # A job's requeue or restart: the job, which of its budgeted restarts this is, what the human should know
    # if it fails (the operator's or the alarm's reason).
    job: str | None = None
    attempt: int | None = None
    details: str | None = None
    # Around a node action (NODE_KINDS): the node, its Slurm name, and "early" for job_states asked while the
    # node is still in repair.
    node_id: str | None = None
    node_name: str | None = None
    instance_group: str | None = None
    phase: str | None = None

    @property
    def early(self) -> bool:
        """job_states asked while the node is still in repair: only jobs Slurm already ended are seen to."""
        return self.phase == EARLY
