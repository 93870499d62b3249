"""The EKS agent's quarantine_node / release_node (agent/medic_agent/eks/cordon.py, issue 32): a cordon of the node
(spec.unschedulable, as `kubectl cordon`) marked as Medic's, and an uncordon of Medic's own only, through the real
Kubernetes client against the emulated API server under the shipped RBAC."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from medic_agent.eks.commands import HoldNode, parse
from medic_agent.eks.cordon import QUARANTINE_ANNOTATION, hold_or_release
from medic_agent.eks.kube import Kube

from sim.kubeapi import KubeApiServer
from tests.agent.eks_world import CLUSTER, CONFIG, manifest

NOW = datetime(2026, 11, 20, 10, 24, 5, tzinfo=UTC)
NODE = "hyperpod-i-055a5b1738b81e1e2"
QUARANTINE = {**CONFIG, "clusters": [{**CONFIG["clusters"][0], "quarantine_repeat_offenders": True},
                                     *CONFIG["clusters"][1:]]}


@pytest.fixture
def api():
    with KubeApiServer(manifest(QUARANTINE), clock=lambda: NOW) as server:
        server.add_node(NODE)
        yield server


def run(api, kind: str):
    return hold_or_release(Kube.for_server(api.url, api.token), HoldNode(kind, NODE), NOW)


def test_quarantine_cordons_the_node_as_medics_and_release_uncordons_it(api):
    held = run(api, "quarantine_node")
    node = api.node(NODE)
    assert (held.status, held.held) == ("executed", True)
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"] == {QUARANTINE_ANNOTATION: "2026-11-20T10:24:05Z"}
    released = run(api, "release_node")
    node = api.node(NODE)
    assert (released.status, released.resumed) == ("executed", True)
    assert "unschedulable" not in node["spec"] and QUARANTINE_ANNOTATION not in node["metadata"].get("annotations", {})
    assert [call["verb"] for call in api.calls] == ["list", "patch", "list", "patch"]


def test_a_node_someone_else_cordoned_is_neither_held_nor_released(api):
    api.objects[(("", "v1", "nodes"), "", NODE)]["spec"]["unschedulable"] = True  # kubectl cordon, by a person
    assert run(api, "quarantine_node").held is False
    assert run(api, "release_node").resumed is False
    assert api.node(NODE)["spec"]["unschedulable"] is True
    assert [call["verb"] for call in api.calls] == ["list", "list"]


def test_without_the_option_the_rbac_refuses_the_patch(api):
    api.set_documents(manifest())  # the manifest of a cluster without quarantine_repeat_offenders
    result = run(api, "quarantine_node")
    assert result.status == "failed" and "403" in result.message
    assert api.calls[-1] == {"verb": "patch", "path": f"/api/v1/nodes/{NODE}", "status": 403}


def test_the_hold_commands_parse_with_a_node_and_nothing_else():
    body = {"command_id": "c-1", "cluster": CLUSTER, "kind": "release_node", "incident": "quarantine:x:y",
            "node": NODE}
    command = parse(json.dumps(body), cluster=CLUSTER)
    assert (command.action, command.target) == (HoldNode("release_node", NODE), f"node:{NODE}")
    for bad in ({"node": "Hyperpod_I"}, {"node": NODE, "job_name": "bert-xl"}, {"node": None}):
        with pytest.raises(ValueError, match="node"):
            parse(json.dumps({**body, **bad}), cluster=CLUSTER)


def test_the_emulated_patch_is_a_merge_patch_refused_on_a_stale_resource_version(api):
    kube = Kube.for_server(api.url, api.token)
    stale = api.node(NODE)["metadata"]["resourceVersion"]
    kube.patch_node(NODE, {"metadata": {"labels": {"rack": "r7"}}})
    with pytest.raises(Exception, match="409"):
        kube.patch_node(NODE, {"metadata": {"resourceVersion": stale}, "spec": {"unschedulable": True}})
    assert api.node(NODE)["metadata"]["labels"]["rack"] == "r7" and "unschedulable" not in api.node(NODE)["spec"]
    # a body the client sends as json-patch+json (its default for a PATCH) is not a merge patch
    code, _ = api.handle("PATCH", f"/api/v1/nodes/{NODE}", b'{"spec": {}}', f"Bearer {api.token}",
                         "application/json-patch+json")
    assert code == 415
