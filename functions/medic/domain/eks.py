"""Restarts of training jobs on HyperPod EKS clusters, through the cluster's EKS agent (agent/medic_agent/eks).

Medic restarts only the jobs its config watches (`jobs[]` on an EKS cluster names each one's Kubernetes object):
the agent's RBAC reaches only their namespaces, and a request for any other object is rejected here, before
anything is queued. Restart means: the agent deletes the job's pods and the job's own controller recreates them
under its restart policy, so the script resumes from its checkpoint; the job object is never deleted (its spec
is the only copy). agent/README.md says what that means per kind.
"""

from __future__ import annotations

from datetime import datetime

from medic.config import Job, KubernetesJob, MedicConfig
from medic.domain.slurm import AgentCommand, command_id_for


class NotWatched(LookupError):
    """A Kubernetes job Medic does not watch on that cluster: Medic never touches it."""


def eks_job_incident(cluster: str, job: KubernetesJob) -> str:
    """The incident and restart-budget lineage of a job on an EKS cluster: its Kubernetes object, so a stall
    alarm and an operator request for the same job share one budget."""
    return f"job:eks:{cluster}:{job.target}"


def watched_job(config: MedicConfig, cluster: str, namespace: str, name: str) -> Job:
    """The configured job whose object is `namespace/name` on the cluster; NotWatched (saying why) otherwise."""
    on_cluster = [job for job in config.jobs if job.cluster == cluster]
    for job in on_cluster:
        target = job.kubernetes_object()
        if (target.namespace, target.name) == (namespace, name):
            return job
    watched = sorted(f"{job.kubernetes_object().namespace}/{job.kubernetes_object().name}" for job in on_cluster)
    raise NotWatched(f"{namespace}/{name} is not a job Medic watches on {cluster} "
                     f"(watched: {', '.join(watched) if watched else 'none'}); Medic restarts only its configured "
                     "jobs, whose namespaces the agent's RBAC reaches")


def restart_command(cluster: str, incident: str, now: datetime, job: KubernetesJob,
                    request_id: str | None = None) -> AgentCommand:
    """`restart_job` for the EKS agent: the object's kind, namespace and name, already validated against
    Kubernetes' name rules by KubernetesJob (and again by the agent)."""
    return AgentCommand(command_id=command_id_for(cluster, incident, request_id), cluster=cluster,
                        kind="restart_job", incident=incident, issued_at=now, job_name=job.name,
                        namespace=job.namespace, job_kind=job.kind)
