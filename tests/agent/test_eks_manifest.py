"""The EKS agent's manifest (agent/kubernetes/render.py): it parses, and holds only what the agent needs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.agent.eks_world import CLUSTER, CONFIG, ROOT, manifest, render_module


def by_kind(documents, kind):
    return [doc for doc in documents if doc["kind"] == kind]


def grants(documents):
    """(binding scope, apiGroup, resource, verb, resourceNames) for every rule bound to the agent."""
    out = set()
    roles = {(doc["metadata"].get("namespace"), doc["metadata"]["name"]): doc for doc in documents
             if doc["kind"] in ("Role", "ClusterRole")}
    for binding in by_kind(documents, "RoleBinding") + by_kind(documents, "ClusterRoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "medic-agent", "namespace": "medic-agent"}]
        namespace = binding["metadata"].get("namespace")
        ref = binding["roleRef"]
        role = roles[(namespace if ref["kind"] == "Role" else None, ref["name"])]
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.add((namespace or "*", group, resource, verb, tuple(rule.get("resourceNames", ()))))
    return out


def test_the_rbac_is_exactly_what_the_agent_needs():
    assert grants(manifest()) == {
        ("*", "", "nodes", "list", ()),
        ("medic-agent", "coordination.k8s.io", "leases", "create", ()),
        ("medic-agent", "coordination.k8s.io", "leases", "get", ("medic-agent",)),
        ("medic-agent", "coordination.k8s.io", "leases", "update", ("medic-agent",)),
        ("kubeflow", "", "pods", "list", ()),
        ("kubeflow", "", "pods", "delete", ()),
        ("kubeflow", "kubeflow.org", "pytorchjobs", "get", ("bert-xl",)),
        ("hyperpod-ns", "", "pods", "list", ()),
        ("hyperpod-ns", "", "pods", "delete", ()),
        ("hyperpod-ns", "sagemaker.amazonaws.com", "hyperpodpytorchjobs", "get", ("llama",)),
        ("default", "", "pods", "list", ()),
        ("default", "", "pods", "delete", ()),
        ("default", "batch", "jobs", "get", ("etl",)),
    }
    rules = [rule for doc in manifest() if doc["kind"] in ("Role", "ClusterRole") for rule in doc["rules"]]
    assert not any("*" in rule["verbs"] + rule["resources"] + rule["apiGroups"] for rule in rules)
    assert [doc["metadata"]["name"] for doc in by_kind(manifest(), "ClusterRole")] == ["medic-agent-nodes"]


def test_with_quarantine_repeat_offenders_the_agent_may_also_patch_nodes_and_nothing_more():
    # Given the cluster keeps nodes in a repair loop cordoned (issue 32): the cordon is a patch of the node
    config = {**CONFIG, "clusters": [{**CONFIG["clusters"][0], "quarantine_repeat_offenders": True},
                                     *CONFIG["clusters"][1:]]}
    # Then the one grant added is patch on nodes (RBAC cannot narrow a patch to fields: cordon.py changes only
    # spec.unschedulable and Medic's annotation)
    assert grants(manifest(config)) - grants(manifest()) == {("*", "", "nodes", "patch", ())}
    assert grants(manifest()) - grants(manifest(config)) == set()


def test_the_deployment():
    documents = manifest()
    assert [doc["kind"] for doc in documents][:4] == ["Namespace", "ServiceAccount", "ConfigMap", "ConfigMap"]
    (deployment,) = by_kind(documents, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == "medic-agent"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    for container in pod["containers"] + pod["initContainers"]:
        assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                "capabilities": {"drop": ["ALL"]}}
        assert container["resources"]["limits"]["memory"]
    (install,) = pod["initContainers"]
    assert "--require-hashes" in install["command"] and "--only-binary=:all:" in install["command"]
    env = {item["name"]: item.get("value") for item in pod["containers"][0]["env"]}
    assert env["MEDIC_CLUSTER"] == CLUSTER and env["MEDIC_QUEUE_URL"] == "https://sqs.example/q"
    assert env["MEDIC_TABLE"] == "medic-ledger" and env["MEDIC_WATCHED_JOBS"] == "/etc/medic-agent/watched-jobs.json"
    config = next(doc for doc in documents if doc["metadata"]["name"] == "medic-agent-config")
    exits = "launcher_exits_128_or_more_on_sigterm"
    assert json.loads(config["data"]["watched-jobs.json"]) == [
        {"namespace": "default", "kind": "Job", "name": "etl", exits: False},
        {"namespace": "hyperpod-ns", "kind": "HyperPodPyTorchJob", "name": "llama", exits: False},
        {"namespace": "kubeflow", "kind": "PyTorchJob", "name": "bert-xl", exits: False}]


def test_the_configmap_says_which_launchers_exit_128_or_more_on_sigterm_and_the_agent_reads_it():
    from medic_agent.eks.commands import load_watched

    config = {**CONFIG, "jobs": [*CONFIG["jobs"], {"name": "bert-xs", "cluster": CLUSTER, "namespace": "kubeflow",
                                                   "launcher_exits_128_or_more_on_sigterm": True}]}
    documents = render_module().render(config, cluster=CLUSTER, queue_url="q", table="t", region="r")
    configmap = next(doc for doc in documents if doc["metadata"]["name"] == "medic-agent-config")
    text = configmap["data"]["watched-jobs.json"]
    watched = {job.name: job.launcher_exits_128_or_more_on_sigterm for job in load_watched(text)}
    assert watched == {"etl": False, "llama": False, "bert-xl": False, "bert-xs": True}


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_render_refuses_a_flag_that_is_not_a_boolean(value):
    config = {**CONFIG, "jobs": [{"name": "x", "cluster": CLUSTER, "launcher_exits_128_or_more_on_sigterm": value}]}
    with pytest.raises(ValueError, match="launcher_exits_128_or_more_on_sigterm must be true or false"):
        render_module().render(config, cluster=CLUSTER, queue_url="q", table="t", region="r")


def test_the_code_configmap_holds_the_agent_and_maps_back_to_its_paths(tmp_path):
    documents = manifest()
    code = next(doc for doc in documents if doc["metadata"]["name"] == "medic-agent-code")
    volume = next(v for v in by_kind(documents, "Deployment")[0]["spec"]["template"]["spec"]["volumes"]
                  if v["name"] == "code")
    for item in volume["configMap"]["items"]:
        target = tmp_path / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code["data"][item["key"]])
    assert "--hash=sha256:" in (tmp_path / "requirements-eks.txt").read_text()
    # the agent starts from exactly these files (its --help needs nothing else)
    done = subprocess.run([sys.executable, "-m", "medic_agent.eks", "--help"], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(tmp_path)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--watched-jobs" in done.stdout and "--terminating-grace-seconds" in done.stdout


def test_render_cli(tmp_path):
    config = tmp_path / "medic.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    done = subprocess.run([sys.executable, str(ROOT / "agent" / "kubernetes" / "render.py"), "--config", str(config),
                           "--cluster", CLUSTER, "--queue-url", "https://sqs.example/q", "--table", "medic-ledger",
                           "--region", "us-east-1", "--role-arn", "arn:aws:iam::123456789012:role/medic-agent"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    documents = list(yaml.safe_load_all(done.stdout))
    assert documents == manifest_with_role()
    account = by_kind(documents, "ServiceAccount")[0]
    role = "arn:aws:iam::123456789012:role/medic-agent"
    assert account["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": role}


def manifest_with_role():
    return render_module().render(CONFIG, cluster=CLUSTER, queue_url="https://sqs.example/q", table="medic-ledger",
                                  region="us-east-1", role_arn="arn:aws:iam::123456789012:role/medic-agent")


@pytest.mark.parametrize("cluster, error", [("pretrain-slurm", "not an EKS cluster"), ("nope", "not in the config")])
def test_render_refuses_a_cluster_that_is_not_eks(cluster, error):
    with pytest.raises(ValueError, match=error):
        render_module().render(CONFIG, cluster=cluster, queue_url="q", table="t", region="r")


def test_render_refuses_an_unknown_job_kind():
    config = {**CONFIG, "jobs": [{"name": "x", "cluster": CLUSTER, "kind": "MPIJob"}]}
    with pytest.raises(ValueError, match="kind must be one of"):
        render_module().render(config, cluster=CLUSTER, queue_url="q", table="t", region="r")


def test_the_requirements_are_hash_pinned():
    lines = (ROOT / "agent" / "requirements-eks.txt").read_text().splitlines()
    requirements = [line for line in lines if line and not line.startswith("#")]
    pins = [line.split(" ")[0] for line in requirements if "==" in line]
    assert "kubernetes==36.0.0" in pins and any(pin.startswith("boto3==") for pin in pins)
    text = "\n".join(requirements)
    assert all(line.startswith("    --hash=sha256:") for line in requirements if "==" not in line)
    assert all(f"{pin} \\\n    --hash=sha256:" in text for pin in pins)


MODELS = {"Namespace": "V1Namespace", "ServiceAccount": "V1ServiceAccount", "ConfigMap": "V1ConfigMap",
          "ClusterRole": "V1ClusterRole", "ClusterRoleBinding": "V1ClusterRoleBinding", "Role": "V1Role",
          "RoleBinding": "V1RoleBinding", "Deployment": "V1Deployment"}


def test_every_document_is_a_valid_kubernetes_object():
    """Each document read into the Kubernetes client's model of its kind (required fields checked) and written
    back is the same document: no field the API does not know (a misspelt field would vanish), no wrong type."""
    from kubernetes.client import ApiClient

    client = ApiClient()
    for document in manifest_with_role():
        model = client._ApiClient__deserialize(document, MODELS[document["kind"]])
        assert client.sanitize_for_serialization(model) == document, document["kind"]
