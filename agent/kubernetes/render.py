#!/usr/bin/env python3
"""Render the EKS agent's manifest for one HyperPod EKS cluster from the stack's outputs and medic.yaml.

    python agent/kubernetes/render.py --config medic.yaml --cluster finetune-eks \
        --queue-url https://sqs.../medic-agent-finetune-eks --table medic-ledger --region us-east-1 \
        [--role-arn arn:aws:iam::...:role/medic-agent-finetune-eks]  > medic-agent.yaml
    kubectl apply -f medic-agent.yaml

Writes multi-document YAML when PyYAML is importable, else one JSON `List` (kubectl applies either). The
manifest holds only what the agent needs (agent/README.md, "HyperPod EKS", lists every rule and why):
  Namespace medic-agent, ServiceAccount medic-agent (annotated with --role-arn for IRSA; with EKS Pod Identity
    make the association instead, see agent/README.md)
  ConfigMap medic-agent-config  watched-jobs.json: the cluster's jobs from medic.yaml `jobs:` [{namespace, kind,
                                name, launcher_exits_128_or_more_on_sigterm}], the only jobs the agent may restart
  ConfigMap medic-agent-code    the agent's source and requirements-eks.txt (no image to build: the Deployment
                                runs python:3.13-slim, an init container pip-installs the hash-pinned wheels)
  ClusterRole(+Binding)  medic-agent-nodes: list nodes (cluster-scoped: the only cluster-wide rule); patch nodes too
                         only with the cluster's quarantine_repeat_offenders (the cordon and uncordon of a node in a
                         repair loop: medic_agent/eks/cordon.py)
  Role(+Binding) medic-agent-lease in medic-agent: create leases; get, update the lease `medic-agent`
  Role(+Binding) medic-agent-jobs in each watched namespace: list, delete pods; get the watched jobs by name (in a
                 namespace a watch rule opts in: get every job of the three kinds, no resourceNames)
  Deployment medic-agent: 1 replica, non-root, read-only root filesystem, no capabilities
Pure Python; PyYAML only to read medic.yaml (and to write YAML when present).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

AGENT_DIR = Path(__file__).resolve().parents[1]
NAMESPACE = "medic-agent"
NAME = "medic-agent"
IMAGE = "python:3.13-slim"  # pin by digest for production: python:3.13-slim@sha256:...
LEASE = "medic-agent"
# (group, version, plural) per job kind: agent/medic_agent/eks/commands.py JOB_KINDS
JOB_RESOURCES = {"PyTorchJob": ("kubeflow.org", "pytorchjobs"),
                 "HyperPodPyTorchJob": ("sagemaker.amazonaws.com", "hyperpodpytorchjobs"),
                 "Job": ("batch", "jobs")}
# The modules the EKS agent imports (not the Slurm agent's main, actions, slurm)
CODE_FILES = ("medic_agent/__init__.py", "medic_agent/commands.py", "medic_agent/handling.py", "medic_agent/ledger.py",
              "medic_agent/logs.py", "medic_agent/queue.py", "medic_agent/role.py", "medic_agent/state.py",
              "medic_agent/eks/__init__.py", "medic_agent/eks/__main__.py", "medic_agent/eks/commands.py",
              "medic_agent/eks/cordon.py",
              "medic_agent/eks/kube.py", "medic_agent/eks/lease.py", "medic_agent/eks/main.py",
              "medic_agent/eks/policy.py", "medic_agent/eks/restart.py")
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "medic"}
EXIT_CODE_KEY = "launcher_exits_128_or_more_on_sigterm"  # medic.yaml's job key; agent/medic_agent/eks/commands.py
ANY_JOB = "*"  # a watched entry for any job of its kind in its namespace (agent/medic_agent/eks/commands.py ANY_JOB)


def watched_jobs(config: dict, cluster: str) -> list[dict]:
    """medic.yaml `jobs:` entries on `cluster` → [{namespace, kind, name, launcher_exits_128_or_more_on_sigterm}]
    (namespace default `default`, kind default PyTorchJob, name: `object_name`, default the entry's `name`: Medic's
    own defaults, functions/medic/config.py Job.kubernetes_object; the flag default false), sorted, duplicates
    removed. Two entries naming the same object must agree on the flag."""
    clusters = {entry.get("name"): entry for entry in config.get("clusters") or [] if isinstance(entry, dict)}
    if cluster not in clusters:
        raise ValueError(f"cluster {cluster!r} is not in the config's clusters")
    if (clusters[cluster].get("orchestrator") or "slurm") != "eks":
        raise ValueError(f"cluster {cluster!r} is not an EKS cluster (orchestrator: eks)")
    jobs: dict[tuple[str, str, str], bool] = {}
    for entry in config.get("jobs") or []:
        if not isinstance(entry, dict) or entry.get("cluster") != cluster:
            continue
        kind = entry.get("kind") or "PyTorchJob"
        if kind not in JOB_RESOURCES:
            raise ValueError(f"job {entry.get('name')!r}: kind must be one of {', '.join(JOB_RESOURCES)}")
        exits_128 = entry.get(EXIT_CODE_KEY, False)
        if not isinstance(exits_128, bool):
            raise ValueError(f"job {entry.get('name')!r}: {EXIT_CODE_KEY} must be true or false")
        key = (str(entry.get("namespace") or "default"), kind, str(entry.get("object_name") or entry["name"]))
        if jobs.setdefault(key, exits_128) != exits_128:
            raise ValueError(f"jobs naming {key[1]} {key[0]}/{key[2]} disagree on {EXIT_CODE_KEY}")
    for namespace in watched_namespaces(clusters[cluster]):
        for kind in JOB_RESOURCES:
            jobs.setdefault((namespace, kind, ANY_JOB), False)
    return [{"namespace": namespace, "kind": kind, "name": name, EXIT_CODE_KEY: exits_128}
            for (namespace, kind, name), exits_128 in sorted(jobs.items())]


def quarantines(config: dict, cluster: str) -> bool:
    """The cluster's quarantine_repeat_offenders (medic.yaml; default false)."""
    entry = next((entry for entry in config.get("clusters") or []
                  if isinstance(entry, dict) and entry.get("name") == cluster), {})
    return entry.get("quarantine_repeat_offenders") is True


def watched_namespaces(cluster: dict) -> list[str]:
    """The namespaces the cluster's watch rules opt in (clusters[].watch[].namespaces, issue 33): in each, the agent
    may restart any job of the three kinds (`*` entries in its ConfigMap; RBAC `get` on the kinds without
    resourceNames: docs/security.md)."""
    rules = cluster.get("watch") or []
    return sorted({str(namespace) for rule in rules if isinstance(rule, dict)
                   for namespace in rule.get("namespaces") or []})


def rbac(watched: list[dict], namespace: str = NAMESPACE, quarantine: bool = False) -> list[dict]:
    """``quarantine``: the agent may also patch nodes (cordon / uncordon: only spec.unschedulable and Medic's
    annotation, cordon.py; RBAC cannot narrow a patch to fields, and resourceNames cannot name nodes not yet made)."""
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]
    docs: list[dict] = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": f"{NAME}-nodes", "labels": LABELS},
         "rules": [{"apiGroups": [""], "resources": ["nodes"],
                    "verbs": ["list", "patch"] if quarantine else ["list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{NAME}-nodes", "labels": LABELS},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{NAME}-nodes"},
         "subjects": subject},
        # create cannot be limited by resourceNames (the name is not known when it is authorized)
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": f"{NAME}-lease", "namespace": namespace, "labels": LABELS},
         "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                   {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"],
                    "resourceNames": [LEASE]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{NAME}-lease", "namespace": namespace, "labels": LABELS},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{NAME}-lease"},
         "subjects": subject},
    ]
    by_namespace: dict[str, dict[str, list[str]]] = {}
    for job in watched:
        by_namespace.setdefault(job["namespace"], {}).setdefault(job["kind"], []).append(job["name"])
    for job_namespace in sorted(by_namespace):
        rules: list[dict] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]}]
        for kind in sorted(by_namespace[job_namespace]):
            group, plural = JOB_RESOURCES[kind]
            names = sorted(set(by_namespace[job_namespace][kind]))
            if ANY_JOB in names:  # an opted-in namespace: every job of the kind (issue 33; docs/security.md)
                rules.append({"apiGroups": [group], "resources": [plural], "verbs": ["get"]})
            else:
                rules.append({"apiGroups": [group], "resources": [plural], "verbs": ["get"], "resourceNames": names})
        docs += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": f"{NAME}-jobs", "namespace": job_namespace, "labels": LABELS}, "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": f"{NAME}-jobs", "namespace": job_namespace, "labels": LABELS},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{NAME}-jobs"},
             "subjects": subject},
        ]
    return docs


def code_files(agent_dir: Path = AGENT_DIR) -> dict[str, str]:
    files = {path: (agent_dir / path).read_text(encoding="utf-8") for path in CODE_FILES}
    files["requirements-eks.txt"] = (agent_dir / "requirements-eks.txt").read_text(encoding="utf-8")
    return files


def config_key(path: str) -> str:
    """A ConfigMap key for a file path (keys may not hold '/'); the volume's items map it back."""
    return path.replace("/", "..")


def render(config: dict, *, cluster: str, queue_url: str, table: str, region: str, role_arn: str | None = None,
           image: str = IMAGE, agent_dir: Path = AGENT_DIR, terminating_grace_seconds: int = 300) -> list[dict]:
    watched = watched_jobs(config, cluster)
    files = code_files(agent_dir)
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    watched_text = json.dumps(watched, indent=2) + "\n"
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": LABELS}}
    if role_arn:  # IRSA; with EKS Pod Identity the association names the role instead (agent/README.md)
        account["metadata"]["annotations"] = {"eks.amazonaws.com/role-arn": role_arn}
    restricted = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                  "capabilities": {"drop": ["ALL"]}}
    env = [{"name": "MEDIC_CLUSTER", "value": cluster}, {"name": "MEDIC_QUEUE_URL", "value": queue_url},
           {"name": "MEDIC_TABLE", "value": table}, {"name": "MEDIC_REGION", "value": region},
           {"name": "AWS_REGION", "value": region},
           {"name": "MEDIC_WATCHED_JOBS", "value": "/etc/medic-agent/watched-jobs.json"},
           {"name": "MEDIC_STATE_FILE", "value": "/var/lib/medic-agent/state.json"},
           {"name": "MEDIC_TERMINATING_GRACE_SECONDS", "value": str(terminating_grace_seconds)},
           {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
           {"name": "PYTHONPATH", "value": "/opt/medic-agent:/opt/deps"},
           {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}, {"name": "PYTHONUNBUFFERED", "value": "1"},
           # uid 65532 has no passwd entry in the image: give botocore a home to look for ~/.aws in
           {"name": "HOME", "value": "/tmp"}]  # noqa: S108 - an emptyDir of its own
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": LABELS},
        "spec": {
            "replicas": 1,  # leader-safe if scaled: only the Lease holder acts (medic_agent/eks/lease.py)
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "template": {
                "metadata": {"labels": LABELS, "annotations": {"medic/code-sha256": digest}},
                "spec": {
                    "serviceAccountName": NAME,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                        "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                    "initContainers": [{
                        "name": "install", "image": image,
                        "command": ["python", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
                                    "--require-hashes", "--only-binary=:all:", "--no-deps", "--target", "/opt/deps",
                                    "-r", "/opt/medic-agent/requirements-eks.txt"],
                        "env": [{"name": "HOME", "value": "/tmp"}],  # noqa: S108 - an emptyDir of its own
                        "securityContext": restricted,
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
                        "volumeMounts": [{"name": "code", "mountPath": "/opt/medic-agent", "readOnly": True},
                                         {"name": "deps", "mountPath": "/opt/deps"},
                                         {"name": "tmp", "mountPath": "/tmp"}]}],  # noqa: S108 - emptyDir
                    "containers": [{
                        "name": "agent", "image": image, "command": ["python", "-m", "medic_agent.eks"],
                        "env": env, "securityContext": restricted,
                        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                        "volumeMounts": [{"name": "code", "mountPath": "/opt/medic-agent", "readOnly": True},
                                         {"name": "deps", "mountPath": "/opt/deps", "readOnly": True},
                                         {"name": "config", "mountPath": "/etc/medic-agent", "readOnly": True},
                                         {"name": "state", "mountPath": "/var/lib/medic-agent"},
                                         {"name": "tmp", "mountPath": "/tmp"}]}],  # noqa: S108 - emptyDir
                    "volumes": [
                        {"name": "code", "configMap": {"name": f"{NAME}-code", "items": [
                            {"key": config_key(path), "path": path} for path in sorted(files)]}},
                        {"name": "config", "configMap": {"name": f"{NAME}-config"}},
                        {"name": "deps", "emptyDir": {}}, {"name": "state", "emptyDir": {}},
                        {"name": "tmp", "emptyDir": {}}],
                }}}}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": LABELS}},
        account,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{NAME}-config", "namespace": NAMESPACE,
                                                               "labels": LABELS},
         "data": {"watched-jobs.json": watched_text}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{NAME}-code", "namespace": NAMESPACE,
                                                               "labels": LABELS},
         "data": {config_key(path): text for path, text in sorted(files.items())}},
        *rbac(watched, quarantine=quarantines(config, cluster)),
        deployment,
    ]


def dump(docs: list[dict]) -> str:
    try:
        import yaml
    except ImportError:
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=2) + "\n"
    return yaml.safe_dump_all(docs, sort_keys=False, width=120)


def load_config(path: str) -> dict:
    text = Path(path).read_text(encoding="utf-8")
    try:
        import yaml
    except ImportError:
        return json.loads(text)  # a JSON medic config works without PyYAML
    return yaml.safe_load(text) or {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="medic.yaml")
    parser.add_argument("--cluster", required=True, help="the HyperPod EKS cluster's name in medic.yaml")
    parser.add_argument("--queue-url", required=True, help="the stack output: the cluster's agent queue URL")
    parser.add_argument("--table", required=True, help="the stack output: the ledger table's name")
    parser.add_argument("--region", required=True)
    parser.add_argument("--role-arn", help="the agent's IAM role (IRSA annotation); omit with EKS Pod Identity")
    parser.add_argument("--image", default=IMAGE)
    parser.add_argument("--terminating-grace-seconds", type=int, default=300)
    parser.add_argument("--output", "-o", help="file to write (default: stdout)")
    args = parser.parse_args(argv)
    try:
        docs = render(load_config(args.config), cluster=args.cluster, queue_url=args.queue_url, table=args.table,
                      region=args.region, role_arn=args.role_arn, image=args.image,
                      terminating_grace_seconds=args.terminating_grace_seconds)
    except (OSError, ValueError, KeyError) as error:
        print(f"render: {error}", file=sys.stderr)
        return 2
    text = dump(docs)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
