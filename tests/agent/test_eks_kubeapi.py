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


# --- the emulated controllers follow their sources (sim/kubeapi.py cites them)

def delete_all(api, kind, namespace, name):
    kube = Kube.for_server(api.url, api.token)
    for pod in api.job_pods(kind, namespace, name):
        kube.delete_pod(namespace, pod["metadata"]["name"], pod["metadata"]["uid"])


def conditions(job):
    return {c["type"]: c["status"] for c in job["status"].get("conditions") or []}


@pytest.mark.parametrize("policy, exit_code", [("OnFailure", 143), ("Always", 1), ("ExitCode", 143), ("ExitCode", 137)])
def test_the_training_operator_recreates_deleted_pods_under_its_restart_policy(api, policy, exit_code):
    # Given a running PyTorchJob whose containers exit with `exit_code` on SIGTERM
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=2, restart_policy=policy, sigterm_exit_code=exit_code)
    before = {pod["metadata"]["uid"] for pod in api.job_pods("PyTorchJob", "kubeflow", "bert-xl")}
    # When its pods are deleted
    delete_all(api, "PyTorchJob", "kubeflow", "bert-xl")
    # Then the operator created them again (new uids) and the job runs
    after = api.job_pods("PyTorchJob", "kubeflow", "bert-xl")
    assert len(after) == 2 and not before & {pod["metadata"]["uid"] for pod in after}
    job = api.job("PyTorchJob", "kubeflow", "bert-xl")
    assert conditions(job)["Running"] == "True" and "Failed" not in conditions(job)


def test_under_never_a_deleted_pod_fails_the_pytorchjob_for_good(api):
    """pkg/core/status.go: a Running pod with a deletionTimestamp counts as failed; pytorchjob_controller.go
    UpdateJobStatus: under Never the job is Failed; common/job.go ReconcileJobs: a finished job gets no pods."""
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=2, restart_policy="Never")
    delete_all(api, "PyTorchJob", "kubeflow", "bert-xl")
    job = api.job("PyTorchJob", "kubeflow", "bert-xl")
    assert conditions(job)["Failed"] == "True" and conditions(job)["Running"] == "False"
    assert api.job_pods("PyTorchJob", "kubeflow", "bert-xl") == []


def test_under_exit_code_a_launcher_exiting_below_128_on_sigterm_fails_the_job(api):
    """common/pod.go ReconcilePods: ExitCode and a non-retryable exit code (1-127) fails the job."""
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=1, restart_policy="ExitCode", sigterm_exit_code=1)
    delete_all(api, "PyTorchJob", "kubeflow", "bert-xl")
    assert conditions(api.job("PyTorchJob", "kubeflow", "bert-xl"))["Failed"] == "True"
    assert api.job_pods("PyTorchJob", "kubeflow", "bert-xl") == []


def test_a_pod_whose_containers_exit_0_on_sigterm_ends_the_job_as_succeeded(api):
    """The kubelet gives a deleted pod its terminal phase from its exit codes (Pod Lifecycle, since 1.27): all 0 is
    Succeeded, and a succeeded Master completes the PyTorchJob (UpdateJobStatus)."""
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=2, sigterm_exit_code=0)
    delete_all(api, "PyTorchJob", "kubeflow", "bert-xl")
    assert conditions(api.job("PyTorchJob", "kubeflow", "bert-xl"))["Succeeded"] == "True"


def test_a_pod_stuck_terminating_counts_as_failed_while_it_waits(api):
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=2, restart_policy="OnFailure")
    api.set_node("node-a", ready=False)
    delete_all(api, "PyTorchJob", "kubeflow", "bert-xl")
    job = api.job("PyTorchJob", "kubeflow", "bert-xl")
    assert conditions(job)["Restarting"] == "True"
    assert job["status"]["replicaStatuses"]["Master"] == {"active": 0, "succeeded": 0, "failed": 1}


def test_each_deleted_pod_of_a_batch_job_counts_against_its_backoff_limit(api):
    """job_controller.go isPodFailed: a pod with a deletionTimestamp that has not succeeded is failed;
    exceedsBackoffLimit: failed > backoffLimit fails the Job (BackoffLimitExceeded), and no pod replaces it."""
    api.add_job("Job", "default", "etl", replicas=2, backoff_limit=3)
    delete_all(api, "Job", "default", "etl")
    job = api.job("Job", "default", "etl")
    assert job["status"]["failed"] == 2 and job["status"]["active"] == 2 and "Failed" not in conditions(job)
    delete_all(api, "Job", "default", "etl")
    job = api.job("Job", "default", "etl")
    assert job["status"]["failed"] == 4
    assert conditions(job) == {"FailureTarget": "True", "Failed": "True"}
    assert api.job_pods("Job", "default", "etl") == []


@pytest.mark.parametrize("kind, name, terminal", [
    ("PyTorchJob", "bert-xl", {"Succeeded": "True"}), ("Job", "etl", {"Complete": "True"}),
    ("HyperPodPyTorchJob", "llama", {"Complete": "True"}),
])
def test_a_finished_job_gets_no_new_pods(api, kind, name, terminal):
    namespace = {"PyTorchJob": "kubeflow", "Job": "default", "HyperPodPyTorchJob": "hyperpod-ns"}[kind]
    api.add_job(kind, namespace, name, replicas=2, status="Succeeded")
    assert terminal.items() <= conditions(api.job(kind, namespace, name)).items()
    left = api.job_pods(kind, namespace, name)
    assert all(pod["status"]["phase"] == "Succeeded" for pod in left)  # kept for their logs (HyperPod: cleaned up)
    delete_all(api, kind, namespace, name)
    assert api.job_pods(kind, namespace, name) == []
