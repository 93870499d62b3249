"""The agent's result of one command: an `agent#<cluster>#command#<id>/result` ledger item, parsed. The results flow
(the ledger stream's handler) and the repair flows that read a result back parse it; the reconciler's sweep, which
only closes commands without a result, never loads it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from medic.flows.agent.commands import (
    AGENT_COMMAND_PK,
    JOB_BACK,
    JOB_ID,
    NOT_REQUEUEABLE_ANSWERS,
    matches,
    parse_agent_command_pk,
)


class AgentResult(BaseModel):
    """An `agent#<cluster>#command#<id>/result` ledger item as the agent writes it (agent/medic_agent/ledger.py),
    deserialized. Only the key says who wrote it; everything else is the agent's word."""

    model_config = ConfigDict(extra="ignore")

    pk: str = Field(pattern=AGENT_COMMAND_PK.pattern.join("^$"))
    sk: Literal["result"]
    status: Literal["executed", "failed", "refused"]
    message: str = ""
    cluster: str = ""
    kind: str = ""
    target: str = ""
    incident: str = ""
    job_ids: list[str] = []
    # restart_job (EKS agent): the pods it deleted, and of those the ones stuck Terminating that it force-deleted
    pods: list[str] = []
    force_deleted: list[str] = []
    # restart_job refused because the job's own controller would end it (agent/medic_agent/eks/policy.py): which rule.
    # Only picks which of Medic's own "what to do" texts the page carries (EKS_REFUSALS); any other value: none.
    refusal: str = Field(default="", max_length=64)
    finished_at: str = ""
    # drain_node, list_node_jobs: the jobs on the node (absent: unknown); job_states: the state of each job Slurm
    # still knows
    jobs: list[dict[str, str]] | None = None
    job_states: list[dict[str, str]] | None = None
    # resume_node: the node's Slurm state and reason as the agent read them first, and whether it resumed it
    node_state: str | None = Field(default=None, max_length=128)
    node_reason: str | None = Field(default=None, max_length=1000)
    resumed: Literal["true", "false"] | None = None
    # quarantine_node: whether the agent took the node out of service (false: someone else had, left as it was);
    # release_node: `resumed` says whether it returned it
    held: Literal["true", "false"] | None = None

    @property
    def agent_cluster(self) -> str:
        """The cluster whose agent wrote the item (from its key: IAM-enforced)."""
        return str(parse_agent_command_pk(self.pk)[0])  # type: ignore[index]

    @property
    def command_id(self) -> str:
        return str(parse_agent_command_pk(self.pk)[1])  # type: ignore[index]


def requeue_found(result: AgentResult) -> str | None:
    """What a requeue_job result that requeued nothing says of the job (pure): "completed" when the newest job of
    that name Slurm (or its accounting) lists ended COMPLETED and none is pending or running (nothing to requeue);
    "not_requeueable" when Slurm refused it as a job it never requeues; None otherwise."""
    if result.status != "failed" or result.job_ids:
        return None
    if any(answer in result.message for answer in NOT_REQUEUEABLE_ANSWERS):
        return "not_requeueable"
    states = {job.get("id"): job.get("state") for job in result.job_states or ()
              if isinstance(job, dict) and matches(JOB_ID, job.get("id"))}
    if not states or any(state in JOB_BACK for state in states.values()):
        return None
    newest = max(states, key=lambda job_id: int(str(job_id)))
    return "completed" if states[newest] == "COMPLETED" else None
