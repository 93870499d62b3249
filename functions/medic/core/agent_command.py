"""A command for an on-cluster agent (Slurm or EKS), as the agent queue carries it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class AgentCommand:
    command_id: str
    cluster: str
    kind: str  # requeue_job; around a node action drain_node, resume_node, job_states (NODE_KINDS); restart_job (EKS)
    incident: str
    issued_at: datetime
    job_id: str | None = None
    job_name: str | None = None
    max_jobs: int | None = None  # requeue by name: the most jobs the agent may requeue
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
        return self.job_id if self.job_id is not None else f"name:{self.job_name}"

    def body(self) -> dict:
        """The queue message, exactly as the agent parses it."""
        fields = {"command_id": self.command_id, "cluster": self.cluster, "kind": self.kind,
                  "incident": self.incident, "issued_at": self.issued_at.isoformat()}
        optional = {"job_id": self.job_id, "job_name": self.job_name, "max_jobs": self.max_jobs, "node": self.node,
                    "job_ids": self.job_ids, "namespace": self.namespace, "job_kind": self.job_kind}
        return {**fields, **{key: value for key, value in optional.items() if value is not None}}


def command_id_for(cluster: str, incident: str, request_id: str | None) -> str:
    """The command id derives from the request (same request, same id), so a retried send cannot make the agent
    run a second command: the agent dedupes on the id."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic:{cluster}:{incident}:{request_id}")) if request_id \
        else str(uuid.uuid4())
