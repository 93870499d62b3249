"""Shared pieces of the EKS agent tests: the shipped manifest's RBAC for a set of watched jobs, the emulated
Kubernetes API server (sim/kubeapi.py) behind the real `kubernetes` client, and Medic's ledger/queue side."""

from __future__ import annotations

import importlib.util
import json
import sys
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "finetune-eks"
WATCHED = [{"namespace": "kubeflow", "kind": "PyTorchJob", "name": "bert-xl"},
           {"namespace": "hyperpod-ns", "kind": "HyperPodPyTorchJob", "name": "llama"},
           {"namespace": "default", "kind": "Job", "name": "etl"}]
CONFIG = {"clusters": [{"name": CLUSTER, "orchestrator": "eks"}, {"name": "pretrain-slurm", "orchestrator": "slurm"}],
          "jobs": [{"name": job["name"], "cluster": CLUSTER, "namespace": job["namespace"], "kind": job["kind"]}
                   for job in WATCHED] + [{"name": "llama3-70b", "cluster": "pretrain-slurm"}]}


def render_module() -> Any:
    """agent/kubernetes/render.py (a script, not a package)."""
    if "medic_render" not in sys.modules:
        spec = importlib.util.spec_from_file_location("medic_render", ROOT / "agent" / "kubernetes" / "render.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["medic_render"] = module
        spec.loader.exec_module(module)
    return sys.modules["medic_render"]


def manifest(config: dict | None = None) -> list[dict]:
    return render_module().render(config or CONFIG, cluster=CLUSTER, queue_url="https://sqs.example/q",
                                  table="medic-ledger", region="us-east-1")


def watched_jobs() -> tuple:
    from medic_agent.eks.commands import load_watched

    return load_watched(json.dumps(WATCHED))


def restart_body(job_kind: str = "PyTorchJob", namespace: str = "kubeflow", job_name: str = "bert-xl",
                 **fields: Any) -> dict:
    return {"command_id": str(uuid.uuid4()), "cluster": CLUSTER, "kind": "restart_job", "incident": "job:bert-xl",
            "issued_at": "2026-12-02T18:00:00+00:00", "namespace": namespace, "job_kind": job_kind,
            "job_name": job_name, **fields}


def issue_restart(dynamodb: Any, table: str, body: dict) -> None:
    """Medic's `command#<cluster>#<id>/issued` item for a restart_job (target <job_kind>/<namespace>/<job_name>)."""
    target = f"{body['job_kind']}/{body['namespace']}/{body['job_name']}"
    dynamodb.put_item(TableName=table, Item={
        "pk": {"S": f"command#{body['cluster']}#{body['command_id']}"}, "sk": {"S": "issued"},
        "cluster": {"S": body["cluster"]}, "kind": {"S": body["kind"]}, "target": {"S": target},
        "incident": {"S": body["incident"]}})
