"""The EKS agent's Kubernetes calls, through the real `kubernetes` client, against the emulated API server
(sim/kubeapi.py) whose RBAC is computed from the shipped manifest (agent/kubernetes/render.py)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta

import pytest
from medic_agent.eks.commands import RestartJob, WatchedJob
from medic_agent.eks.kube import Kube, KubeError
from medic_agent.eks.lease import LeaseElector
from medic_agent.eks.restart import encode_nodes, node_report, restart

from sim.kubeapi import KubeApiServer
from tests.agent.eks_world import manifest, watched_jobs

NOW = datetime(2026, 12, 2, 18, 0, tzinfo=UTC)
BERT = RestartJob("kubeflow", "PyTorchJob", "bert-xl")
LLAMA = RestartJob("hyperpod-ns", "HyperPodPyTorchJob", "llama")
ETL = RestartJob("default", "Job", "etl")


def start(documents=None, clock=lambda: NOW) -> KubeApiServer:
    server = KubeApiServer(documents if documents is not None else manifest(), clock=clock).start()
    for node in ("node-a", "node-b", "node-c"):
        server.add_node(node)
    return server


@pytest.fixture
def api():
    server = start()
    yield server
    server.stop()


@pytest.fixture
def kube(api):
    return Kube.for_server(api.url, api.token)


def names(pods):
    return sorted(pod["metadata"]["name"] for pod in pods)


def uids(pods):
    return {pod["metadata"]["uid"] for pod in pods}


def writes(api):
    """Every call but reads: what the agent changed."""
    return [(call["verb"], call["path"], call["status"]) for call in api.calls if call["verb"] not in ("get", "list")]


def test_pytorchjob_restart_deletes_its_pods_and_the_operator_recreates_them(api, kube):
    job = api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=3)
    before = api.job_pods("PyTorchJob", "kubeflow", "bert-xl")
    assert names(before) == ["bert-xl-master-0", "bert-xl-worker-0", "bert-xl-worker-1"]
    result = restart(kube, BERT, watched=watched_jobs(), now=NOW)
    assert result.status == "executed", result.message
    assert sorted(result.pods) == names(before) and result.force_deleted == ()
    after = api.job_pods("PyTorchJob", "kubeflow", "bert-xl")
    assert names(after) == names(before)  # same names: the operator's replica pods
    assert not uids(after) & uids(before)  # new pods
    assert api.job("PyTorchJob", "kubeflow", "bert-xl")["metadata"]["uid"] == job["metadata"]["uid"]  # never deleted
    assert [verb for verb, _, _ in writes(api)] == ["delete"] * 3
    assert all(path.startswith("/api/v1/namespaces/kubeflow/pods/") for _, path, _ in writes(api))
    assert api.calls[0] == {"verb": "get", "path": "/apis/kubeflow.org/v1/namespaces/kubeflow/pytorchjobs/bert-xl",
                            "status": 200}


def test_hyperpodpytorchjob_restart(api, kube):
    api.add_job("HyperPodPyTorchJob", "hyperpod-ns", "llama", replicas=2)
    before = api.job_pods("HyperPodPyTorchJob", "hyperpod-ns", "llama")
    result = restart(kube, LLAMA, watched=watched_jobs(), now=NOW)
    assert result.status == "executed" and sorted(result.pods) == ["llama-pod-0", "llama-pod-1"]
    after = api.job_pods("HyperPodPyTorchJob", "hyperpod-ns", "llama")
    assert names(after) == names(before) and not uids(after) & uids(before)
    assert api.calls[0]["path"] == "/apis/sagemaker.amazonaws.com/v1/namespaces/hyperpod-ns/hyperpodpytorchjobs/llama"
    assert api.job("HyperPodPyTorchJob", "hyperpod-ns", "llama") is not None


def test_batch_job_restart_gets_new_pod_names(api, kube):
    api.add_job("Job", "default", "etl", replicas=2)
    before = api.job_pods("Job", "default", "etl")
    result = restart(kube, ETL, watched=watched_jobs(), now=NOW)
    assert result.status == "executed" and sorted(result.pods) == names(before)
    after = api.job_pods("Job", "default", "etl")
    assert len(after) == 2 and not set(names(after)) & set(names(before))
    assert api.job("Job", "default", "etl") is not None
    assert any(call["path"] == "/api/v1/namespaces/default/pods" and call["verb"] == "list" for call in api.calls)


def test_a_job_that_does_not_exist_fails_and_nothing_is_deleted(api, kube):
    result = restart(kube, BERT, watched=watched_jobs(), now=NOW)
    assert result.status == "failed" and result.message == "job not found: PyTorchJob/kubeflow/bert-xl"
    assert writes(api) == [] and api.calls[0]["status"] == 404


def test_a_job_not_watched_is_not_touched(api, kube):
    api.add_job("PyTorchJob", "kubeflow", "other", replicas=2)
    result = restart(kube, RestartJob("kubeflow", "PyTorchJob", "other"), watched=watched_jobs(), now=NOW)
    assert result.status == "failed" and "not among the jobs this agent watches" in result.message
    assert api.calls == []  # not even a read


def test_a_kind_or_namespace_the_rbac_does_not_grant_is_403(api, kube):
    """The agent's own config may list a job its RBAC does not grant (an out-of-date manifest): the API says
    403 and the result names what was refused."""
    api.add_job("PyTorchJob", "team-b", "bert-xl", replicas=1)
    job = RestartJob("team-b", "PyTorchJob", "bert-xl")
    result = restart(kube, job, watched=[WatchedJob("team-b", "PyTorchJob", "bert-xl")], now=NOW)
    assert result.status == "failed" and result.message.startswith("forbidden: ")
    assert 'cannot get resource "pytorchjobs" in API group "kubeflow.org" in the namespace "team-b"' in result.message
    assert api.calls == [{"verb": "get", "path": "/apis/kubeflow.org/v1/namespaces/team-b/pytorchjobs/bert-xl",
                          "status": 403}]


def test_pods_not_owned_by_the_job_are_left_alone(api, kube):
    """A pod carrying the job's label but whose controller is another object (or an older job of the same name)
    is never deleted: only ownerReferences with the job's uid count."""
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=1)
    impostor = api.create(("", "v1", "pods"), "kubeflow", {
        "metadata": {"name": "bert-xl-worker-9", "labels": {"training.kubeflow.org/job-name": "bert-xl"},
                     "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "bert-xl",
                                          "uid": "an-older-job", "controller": True}]},
        "spec": {"containers": [{"name": "x", "image": "x"}], "nodeName": "node-a"}})
    loose = api.create(("", "v1", "pods"), "kubeflow", {
        "metadata": {"name": "debug", "labels": {"training.kubeflow.org/job-name": "bert-xl"}},
        "spec": {"containers": [{"name": "x", "image": "x"}], "nodeName": "node-a"}})
    result = restart(kube, BERT, watched=watched_jobs(), now=NOW)
    assert result.pods == ("bert-xl-master-0",)
    assert api.pod("kubeflow", "bert-xl-worker-9")["metadata"]["uid"] == impostor["metadata"]["uid"]
    assert api.pod("kubeflow", "debug")["metadata"]["uid"] == loose["metadata"]["uid"]


def test_stuck_terminating_pods_are_force_deleted_only_on_not_ready_nodes_and_after_the_grace(api, kube):
    """Forced Pod termination (Kubernetes docs, Pod Lifecycle) skips the kubelet's confirmation: only where no
    kubelet runs. A node HyperPod labels unschedulable but whose Ready condition is True has a live kubelet."""
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=3)
    on = {pod["metadata"]["name"]: pod["spec"]["nodeName"] for pod in api.job_pods("PyTorchJob", "kubeflow",
                                                                                 "bert-xl")}
    dead, sick, fine = on["bert-xl-master-0"], on["bert-xl-worker-0"], on["bert-xl-worker-1"]
    api.set_node(dead, ready=False)
    api.set_node(sick, health="UnschedulablePendingReplacement")
    for pod in ("bert-xl-master-0", "bert-xl-worker-0", "bert-xl-worker-1"):
        api.mark_terminating("kubeflow", pod, NOW - timedelta(minutes=10))
    # another job's pod stuck on the same dead node: not watched, never touched
    api.add_job("PyTorchJob", "kubeflow", "other", replicas=1)
    other = api.job_pods("PyTorchJob", "kubeflow", "other")[0]
    other["spec"]["nodeName"] = dead
    api.mark_terminating("kubeflow", other["metadata"]["name"], NOW - timedelta(hours=1))

    early = restart(kube, BERT, watched=watched_jobs(), now=NOW - timedelta(minutes=9),
                    terminating_grace_seconds=300)
    assert early.status == "failed" and early.force_deleted == ()  # only 1 minute past their deadline

    result = restart(kube, BERT, watched=watched_jobs(), now=NOW, terminating_grace_seconds=300)
    assert result.status == "executed", result.message
    assert result.force_deleted == ("bert-xl-master-0",) and result.pods == ()
    # the pod on the labelled but Ready node is left to its kubelet, as is the one on the healthy node
    for pod, node in (("bert-xl-worker-0", sick), ("bert-xl-worker-1", fine)):
        assert (f"{pod} terminating for 600 s past its grace period on node {node}, which is Ready: left to its "
                "kubelet") in result.message
    forced = [call for call in api.calls if call["verb"] == "delete"]
    assert [call["path"].rsplit("/", 1)[1] for call in forced] == ["bert-xl-master-0"]
    assert api.pod("kubeflow", "bert-xl-worker-0")["metadata"]["deletionTimestamp"]  # still its kubelet's
    assert api.pod("kubeflow", other["metadata"]["name"]) is not None  # the unwatched job's pod stays
    recreated = {pod["metadata"]["name"]: pod for pod in api.job_pods("PyTorchJob", "kubeflow", "bert-xl")}
    assert recreated["bert-xl-master-0"]["spec"]["nodeName"] not in (dead, sick)
    assert recreated["bert-xl-master-0"]["metadata"].get("deletionTimestamp") is None


def test_a_graceful_delete_on_a_dead_node_leaves_the_pod_terminating(api, kube):
    """What issue 2072 is about: the pod object stays, the operator cannot recreate its name."""
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=1)
    pod = api.pod("kubeflow", "bert-xl-master-0")
    api.set_node(pod["spec"]["nodeName"], ready=False)
    first = restart(kube, BERT, watched=watched_jobs(), now=NOW)
    assert first.pods == ("bert-xl-master-0",)
    stuck = api.pod("kubeflow", "bert-xl-master-0")
    assert stuck["metadata"]["uid"] == pod["metadata"]["uid"] and stuck["metadata"]["deletionTimestamp"]
    later = restart(kube, BERT, watched=watched_jobs(), now=NOW + timedelta(minutes=10))
    assert later.force_deleted == ("bert-xl-master-0",)
    assert api.pod("kubeflow", "bert-xl-master-0")["metadata"]["uid"] != pod["metadata"]["uid"]


def test_each_delete_is_conditional_on_the_pod_checked(api, kube):
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=1)
    pod = api.pod("kubeflow", "bert-xl-master-0")
    with pytest.raises(Exception) as raised:
        kube.delete_pod("kubeflow", "bert-xl-master-0", uid="not-this-one")
    assert raised.value.status == 409
    assert api.pod("kubeflow", "bert-xl-master-0")["metadata"]["uid"] == pod["metadata"]["uid"]


def test_a_rule_removed_from_the_manifest_makes_the_call_403():
    """The RBAC the emulator enforces is the shipped manifest's: drop `delete` on pods and the restart fails."""
    documents = copy.deepcopy(manifest())
    role = next(doc for doc in documents if doc["kind"] == "Role" and doc["metadata"]["namespace"] == "kubeflow")
    role["rules"][0]["verbs"] = [verb for verb in role["rules"][0]["verbs"] if verb != "delete"]
    server = start(documents)
    try:
        server.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=1)
        result = restart(Kube.for_server(server.url, server.token), BERT, watched=watched_jobs(), now=NOW)
        assert result.status == "failed"
        assert 'cannot delete resource "pods" in API group "" in the namespace "kubeflow"' in result.message
        assert server.calls[-1] == {"verb": "delete", "path": "/api/v1/namespaces/kubeflow/pods/bert-xl-master-0",
                                    "status": 403}
    finally:
        server.stop()


@pytest.mark.parametrize("drop", ["nodes", "leases", "pytorchjobs"])
def test_every_rule_is_needed(drop):
    """Without any one of the manifest's rules a call the agent makes is refused."""
    documents = [doc for doc in copy.deepcopy(manifest())]
    for doc in documents:
        if doc["kind"] in ("Role", "ClusterRole"):
            doc["rules"] = [rule for rule in doc["rules"] if drop not in rule["resources"]]
    server = start(documents)
    try:
        server.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=1)
        kube = Kube.for_server(server.url, server.token)
        if drop == "leases":
            assert LeaseElector(kube, "medic-agent", "a", lambda: NOW).check().leader is False
        elif drop == "nodes":
            with pytest.raises(KubeError) as raised:
                node_report(kube, watched_jobs())
            assert raised.value.status == 403
        else:
            assert restart(kube, BERT, watched=watched_jobs(), now=NOW).message.startswith("forbidden")
        assert server.calls[-1]["status"] == 403
    finally:
        server.stop()


def test_node_report(api, kube):
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=3)
    api.add_job("Job", "default", "etl", replicas=1)
    api.add_node("node-d", ready=True, health=None)  # not a HyperPod node: only Ready counts
    master = api.pod("kubeflow", "bert-xl-master-0")["spec"]["nodeName"]
    api.set_node(master, health="UnschedulablePendingReboot")
    api.add_node("node-e", ready=False)
    api.mark_terminating("kubeflow", "bert-xl-master-0", NOW - timedelta(minutes=7))
    report = node_report(kube, watched_jobs())
    assert [node["name"] for node in report] == sorted([master, "node-e"])
    bad = next(node for node in report if node["name"] == master)
    assert bad["health_status"] == "UnschedulablePendingReboot" and bad["ready"] is True
    master_entry = next(pod for pod in bad["pods"] if pod["name"] == "bert-xl-master-0")
    assert master_entry == {"namespace": "kubeflow", "name": "bert-xl-master-0", "job_kind": "PyTorchJob",
                            "job_name": "bert-xl", "phase": "Running", "terminating_since": "2026-12-02T17:53:00+00:00"}
    dead = next(node for node in report if node["name"] == "node-e")
    assert dead == {"name": "node-e", "health_status": "Schedulable", "ready": False, "pods": []}


def test_a_pod_whose_owner_reference_only_names_a_watched_job_is_never_reported_as_its(api, kube):
    # Given bert-xl running its 3 pods, and a namespace tenant's pod on a NotReady node whose controller
    # ownerReference names bert-xl (kind, apiVersion, name) with a uid that is not the job's, left Terminating
    job = api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=3)
    api.add_node("node-dead", ready=False)
    forged = {"apiVersion": job["apiVersion"], "kind": "PyTorchJob", "name": "bert-xl", "controller": True,
              "uid": "0b6f3e1c-7a2d-4c5e-9f10-2a3b4c5d6e7f"}
    api.add_pod("kubeflow", "bert-xl-worker-9", "node-dead", [forged])
    api.mark_terminating("kubeflow", "bert-xl-worker-9", NOW - timedelta(minutes=45))
    # When the agent reports the nodes in trouble
    report = node_report(kube, watched_jobs())
    # Then the node is reported, without the pod: it is not the job's (its uid is not bert-xl's)
    assert report == [{"name": "node-dead", "health_status": "Schedulable", "ready": False, "pods": []}]
    # And with the job's real uid (which anyone who may read the job can copy) it is reported as bert-xl's: Medic
    # then restarts only when bert-xl's probe shows no progress since (tests/functional/test_eks_restart.py)
    api.add_pod("kubeflow", "bert-xl-worker-8", "node-dead", [{**forged, "uid": job["metadata"]["uid"]}])
    [node] = node_report(kube, watched_jobs())
    assert [(pod["name"], pod["job_name"]) for pod in node["pods"]] == [("bert-xl-worker-8", "bert-xl")]


def test_the_node_report_reads_each_watched_job_and_skips_one_not_found(api, kube):
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=1)
    api.add_node("node-dead", ready=False)
    node_report(kube, watched_jobs())
    reads = [call["path"] for call in api.calls if call["verb"] == "get"]
    assert "/apis/kubeflow.org/v1/namespaces/kubeflow/pytorchjobs/bert-xl" in reads
    assert [call["status"] for call in api.calls if call["verb"] == "get" and "/etl" in call["path"]] == [404]


def test_node_report_truncates():
    nodes = [{"name": f"node-{i}", "health_status": "Unschedulable", "ready": False, "pods": []} for i in range(3000)]
    text, truncated = encode_nodes(nodes)
    assert truncated and len(text.encode()) <= 90_000 and json.loads(text) == nodes[:len(json.loads(text))]
    assert encode_nodes(nodes[:3]) == (json.dumps(nodes[:3], separators=(",", ":"), sort_keys=True), False)


def test_lease_one_leader_of_two_and_takeover_after_expiry(api, kube):
    clock = {"now": NOW}
    first = LeaseElector(kube, "medic-agent", "medic-agent-7d9f-a", lambda: clock["now"], lease_seconds=60)
    second = LeaseElector(kube, "medic-agent", "medic-agent-7d9f-b", lambda: clock["now"], lease_seconds=60)
    assert first.check().leader is True
    assert second.check().leader is False
    clock["now"] += timedelta(seconds=30)
    assert first.check().leader is True  # renewed
    assert second.check().leader is False
    # the first replica stops renewing (its node died): after 60 s of an unchanged lease the second takes over
    clock["now"] += timedelta(seconds=59)
    assert second.check().leader is False
    clock["now"] += timedelta(seconds=2)
    taken = second.check()
    assert taken.leader is True and "taken over from medic-agent-7d9f-a" in taken.reason
    assert first.check().leader is False  # the first comes back: the lease is the second's
    lease = kube.read_lease("medic-agent", "medic-agent")
    assert lease["spec"]["holderIdentity"] == "medic-agent-7d9f-b" and lease["spec"]["leaseTransitions"] == 1


def test_lease_race_has_one_winner(api, kube):
    """Both read the expired lease; only the first update carries the current resourceVersion: 409 for the other."""
    first = LeaseElector(kube, "medic-agent", "a", lambda: NOW)
    second = LeaseElector(kube, "medic-agent", "b", lambda: NOW)
    assert first.check().leader
    lease = kube.read_lease("medic-agent", "medic-agent")
    won = second._write(copy.deepcopy(lease), NOW, renew=False)
    lost = first._write(copy.deepcopy(lease), NOW, renew=True)
    assert won.leader and not lost.leader
    assert [call["status"] for call in api.calls if call["verb"] == "update"][-2:] == [200, 409]


def test_a_pod_deleted_on_a_not_ready_node_is_named_in_the_message(api, kube):
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=2)
    node = api.pod("kubeflow", "bert-xl-worker-0")["spec"]["nodeName"]
    api.set_node(node, ready=False)
    result = restart(kube, BERT, watched=watched_jobs(), now=NOW)
    assert result.status == "executed"
    assert (f"bert-xl-worker-0 is on node {node}, NotReady: it may stay Terminating; a restart 300 s after its grace "
            "period force-deletes it") in result.message


def test_a_pod_deleted_on_a_labelled_but_ready_node_goes_as_anywhere_else(api, kube):
    """HyperPod's label says the node needs checks or a repair; its kubelet still stops the pod."""
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=2)
    node = api.pod("kubeflow", "bert-xl-worker-0")["spec"]["nodeName"]
    api.set_node(node, health="Unschedulable")
    result = restart(kube, BERT, watched=watched_jobs(), now=NOW)
    assert result.status == "executed" and "Terminating" not in result.message
    assert api.pod("kubeflow", "bert-xl-worker-0")["metadata"].get("deletionTimestamp") is None  # recreated


# --- restarts the job's own controller would turn into its end are refused, and nothing is deleted (policy.py)

def only_the_job_was_read(api, path):
    return [(call["verb"], call["path"]) for call in api.calls] == [("get", path)]


def test_a_pytorchjob_under_restart_policy_never_is_refused_and_keeps_running(api, kube):
    # Given bert-xl, whose replica specs say restartPolicy: Never
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=3, restart_policy="Never")
    before = uids(api.job_pods("PyTorchJob", "kubeflow", "bert-xl"))
    # When Medic asks for a restart
    result = restart(kube, BERT, watched=watched_jobs(), now=NOW)
    # Then the agent refuses, saying why, and deletes nothing: the job runs on (deleting would have failed it)
    assert (result.status, result.refusal) == ("refused", "restart_policy_never")
    assert "restartPolicy Never (Master, Worker)" in result.message and result.pods == ()
    assert only_the_job_was_read(api, "/apis/kubeflow.org/v1/namespaces/kubeflow/pytorchjobs/bert-xl")
    assert uids(api.job_pods("PyTorchJob", "kubeflow", "bert-xl")) == before
    assert "Failed" not in {c["type"] for c in api.job("PyTorchJob", "kubeflow", "bert-xl")["status"]["conditions"]}


def test_a_pytorchjob_under_exit_code_is_restarted_only_when_its_launcher_exits_128_or_more(api, kube):
    api.add_job("PyTorchJob", "kubeflow", "bert-xl", replicas=2, restart_policy="ExitCode")
    refused = restart(kube, BERT, watched=watched_jobs(), now=NOW)
    assert (refused.status, refused.refusal) == ("refused", "restart_policy_exit_code") and writes(api) == []
    # medic.yaml says the launcher exits >= 128 on SIGTERM (the ConfigMap carries it): the operator recreates the pods
    said = (WatchedJob("kubeflow", "PyTorchJob", "bert-xl", launcher_exits_128_or_more_on_sigterm=True),)
    result = restart(kube, BERT, watched=said, now=NOW)
    assert result.status == "executed" and sorted(result.pods) == ["bert-xl-master-0", "bert-xl-worker-0"]
    assert len(api.job_pods("PyTorchJob", "kubeflow", "bert-xl")) == 2


@pytest.mark.parametrize("job, kind, status, path", [
    (BERT, "PyTorchJob", "Succeeded", "/apis/kubeflow.org/v1/namespaces/kubeflow/pytorchjobs/bert-xl"),
    (BERT, "PyTorchJob", "Failed", "/apis/kubeflow.org/v1/namespaces/kubeflow/pytorchjobs/bert-xl"),
    (LLAMA, "HyperPodPyTorchJob", "Succeeded",
     "/apis/sagemaker.amazonaws.com/v1/namespaces/hyperpod-ns/hyperpodpytorchjobs/llama"),
    (ETL, "Job", "Succeeded", "/apis/batch/v1/namespaces/default/jobs/etl"),
    (ETL, "Job", "Failed", "/apis/batch/v1/namespaces/default/jobs/etl"),
])
def test_a_finished_job_is_refused_and_its_pods_keep_its_logs(api, kube, job, kind, status, path):
    api.add_job(kind, job.namespace, job.job_name, replicas=2, status=status)
    left = uids(api.job_pods(kind, job.namespace, job.job_name))
    result = restart(kube, job, watched=watched_jobs(), now=NOW)
    assert (result.status, result.refusal) == ("refused", "job_finished")
    assert result.message.startswith("the job has finished (condition ")
    assert only_the_job_was_read(api, path)  # not even listed
    assert uids(api.job_pods(kind, job.namespace, job.job_name)) == left


def test_a_batch_job_whose_deleted_pods_would_exceed_its_backoff_limit_is_refused(api, kube):
    # Given etl (2 pods), backoffLimit 3, one failure already
    api.add_job("Job", "default", "etl", replicas=2, backoff_limit=3)
    restart(kube, ETL, watched=watched_jobs(), now=NOW)  # a first restart: 2 failures counted
    assert api.job("Job", "default", "etl")["status"]["failed"] == 2
    api.calls.clear()
    # When Medic asks again: 2 + 2 > 3
    result = restart(kube, ETL, watched=watched_jobs(), now=NOW)
    # Then it is refused, naming the limit; the Job still runs its pods
    assert (result.status, result.refusal) == ("refused", "backoff_limit")
    assert "would make 4 failures, over backoffLimit 3 (2 already)" in result.message
    assert writes(api) == [] and len(api.job_pods("Job", "default", "etl")) == 2
    assert "conditions" not in api.job("Job", "default", "etl")["status"]
