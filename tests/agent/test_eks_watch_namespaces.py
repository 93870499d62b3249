"""Issue 33: in a namespace a watch rule opts in, the EKS agent may restart any job of the three kinds (its ConfigMap's
`*` entries; RBAC `get` on the kinds there without resourceNames); elsewhere only the jobs it watches by name. Against
the emulated API server whose RBAC is the rendered manifest's."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime

import pytest
from medic_agent.eks.commands import ANY_JOB, RestartJob, load_watched
from medic_agent.eks.kube import Kube
from medic_agent.eks.restart import restart

from sim.kubeapi import KubeApiServer
from tests.agent.eks_world import CLUSTER, CONFIG, manifest, render_module

NOW = datetime(2026, 12, 2, 18, 0, tzinfo=UTC)


def opted_in_config() -> dict:
    config = copy.deepcopy(CONFIG)
    cluster = next(entry for entry in config["clusters"] if entry["name"] == CLUSTER)
    cluster["watch"] = [{"job_prefix": "gpt-", "namespaces": ["team-a"]}]
    return config


@pytest.fixture
def api():
    server = KubeApiServer(manifest(opted_in_config()), clock=lambda: NOW).start()
    for node in ("node-a", "node-b"):
        server.add_node(node)
    yield server
    server.stop()


def watched() -> tuple:
    return load_watched(json.dumps(render_module().watched_jobs(opted_in_config(), CLUSTER)))


def test_the_rendered_rbac_gets_every_job_of_the_kinds_in_the_opted_in_namespace_only():
    roles = {doc["metadata"]["namespace"]: doc["rules"] for doc in manifest(opted_in_config())
             if doc["kind"] == "Role" and doc["metadata"]["name"] == "medic-agent-jobs"}
    team_a = roles["team-a"]
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]} in team_a
    assert {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get"]} in team_a
    assert all("resourceNames" not in rule for rule in team_a)
    # every other namespace keeps its jobs by name
    assert all("resourceNames" in rule for namespace, rules in roles.items() if namespace != "team-a"
               for rule in rules if rule["resources"] != ["pods"])
    assert [(job.namespace, job.name) for job in watched() if job.name == ANY_JOB] == [("team-a", ANY_JOB)] * 3


def test_a_job_in_the_opted_in_namespace_is_restarted_though_no_entry_names_it(api):
    api.add_job("PyTorchJob", "team-a", "gpt-ft", replicas=2)
    result = restart(Kube.for_server(api.url, api.token), RestartJob("team-a", "PyTorchJob", "gpt-ft"),
                     watched=watched(), now=NOW)
    assert result.status == "executed", result.message
    assert sorted(call["path"].rsplit("/", 1)[-1] for call in api.calls if call["verb"] == "delete") == [
        "gpt-ft-master-0", "gpt-ft-worker-0"]


def test_a_job_in_a_namespace_not_opted_in_is_not_touched(api):
    api.add_job("PyTorchJob", "team-b", "gpt-ft", replicas=2)
    result = restart(Kube.for_server(api.url, api.token), RestartJob("team-b", "PyTorchJob", "gpt-ft"),
                     watched=watched(), now=NOW)
    assert result.status == "failed" and "not among the jobs this agent watches" in result.message
    assert not [call for call in api.calls if call["verb"] == "delete"]
