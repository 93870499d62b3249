"""The emulated Kubernetes API server itself (sim/kubeapi.py): the semantics the agent's tests rely on."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import UTC, datetime

import pytest
from medic_agent.eks.kube import Kube
from medic_agent.eks.lease import LeaseElector

from sim.kubeapi import Authorizer, KubeApiServer, Subject, _labels_match
from tests.agent.eks_world import manifest

NOW = datetime(2026, 12, 2, 18, 0, tzinfo=UTC)


@pytest.fixture
def api():
    with KubeApiServer(manifest(), clock=lambda: NOW) as server:
        server.add_node("node-a")
        yield server


def request(api, path, method="GET", token=None, body=None):
    req = urllib.request.Request(api.url + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": f"Bearer {token or api.token}",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as response:  # noqa: S310 - the local emulator
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_not_found_is_a_status_object(api):
    code, status = request(api, "/apis/batch/v1/namespaces/default/jobs/etl")
    assert code == 404
    assert status == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": 'jobs.batch "etl" not found', "reason": "NotFound",
                      "details": {"name": "etl", "group": "batch", "kind": "jobs"}, "code": 404}


def test_a_wrong_token_is_401_and_every_call_is_recorded(api):
    code, status = request(api, "/api/v1/nodes", token="someone-else")
    assert code == 401 and status["reason"] == "Unauthorized"
    assert api.calls[-1] == {"verb": "list", "path": "/api/v1/nodes", "status": 401}


def test_lists_carry_the_store_revision_and_objects_their_own(api):
    api.add_job("Job", "default", "etl", replicas=2)
    code, pods = request(api, "/api/v1/namespaces/default/pods?labelSelector=batch.kubernetes.io%2Fjob-name%3Detl")
    assert code == 200 and pods["kind"] == "PodList" and len(pods["items"]) == 2
    versions = [int(pod["metadata"]["resourceVersion"]) for pod in pods["items"]]
    assert int(pods["metadata"]["resourceVersion"]) >= max(versions) and len(set(versions)) == 2
    code, none = request(api, "/api/v1/namespaces/default/pods?labelSelector=job-name%3Dother")
    assert code == 200 and none["items"] == []


def test_not_granted_is_403(api):
    code, status = request(api, "/api/v1/namespaces/kube-system/pods")
    assert code == 403 and status["reason"] == "Forbidden"
    assert status["message"] == ('pods is forbidden: User "system:serviceaccount:medic-agent:medic-agent" cannot '
                                 'list resource "pods" in API group "" in the namespace "kube-system"')
    code, _ = request(api, "/apis/batch/v1/namespaces/default/jobs/not-watched")
    assert code == 403  # get is granted for the watched job's name only


def test_two_creates_of_the_lease_one_is_409_already_exists(api):
    kube = Kube.for_server(api.url, api.token)
    first = LeaseElector(kube, "medic-agent", "a", lambda: NOW)
    second = LeaseElector(kube, "medic-agent", "b", lambda: NOW)
    assert first._create(NOW).leader is True
    assert second._create(NOW).leader is False
    assert api.calls[-1] == {"verb": "create", "path": "/apis/coordination.k8s.io/v1/namespaces/medic-agent/leases",
                             "status": 409}


def test_rbac_rules():
    documents = manifest()
    rbac = Authorizer.from_documents(documents, Subject("medic-agent", "medic-agent"))
    assert rbac.allows("list", "", "nodes", None, None)
    assert not rbac.allows("get", "", "nodes", None, "node-a")
    assert rbac.allows("delete", "", "pods", "kubeflow", "bert-xl-worker-0")
    assert not rbac.allows("delete", "", "pods", "medic-agent", "x")
    assert rbac.allows("get", "kubeflow.org", "pytorchjobs", "kubeflow", "bert-xl")
    assert not rbac.allows("delete", "kubeflow.org", "pytorchjobs", "kubeflow", "bert-xl")
    assert not rbac.allows("list", "kubeflow.org", "pytorchjobs", "kubeflow", None)
    assert rbac.allows("update", "coordination.k8s.io", "leases", "medic-agent", "medic-agent")
    assert not rbac.allows("update", "coordination.k8s.io", "leases", "medic-agent", "other")
    assert not Authorizer.from_documents(documents, Subject("default", "medic-agent")).allows(
        "list", "", "nodes", None, None)  # another ServiceAccount of the same name gets nothing


@pytest.mark.parametrize("selector, labels, match", [
    ("a=b", {"a": "b"}, True), ("a==b", {"a": "b"}, True), ("a!=b", {"a": "b"}, False), ("a", {}, False),
    ("!a", {}, True), ("a=b,c=d", {"a": "b", "c": "x"}, False), ("", {}, True),
])
def test_label_selectors(selector, labels, match):
    assert _labels_match(labels, selector) is match
