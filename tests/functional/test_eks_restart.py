"""Specification: a stalled job on a HyperPod EKS cluster is restarted through the cluster's EKS agent, with the
Slurm path's guardrails: one restart per alarm episode, the restart budget shared with operator requests, nothing
queued into the void when the agent is down, only the jobs Medic watches; the agent's result closes the loop.
Against moto (DynamoDB and its stream, SQS, SNS, SSM, CloudWatch)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest

from medic.adapters.metrics import TrainingMetrics
from medic.config import parse_config
from medic.flows.agent.restart import handle_requeue_event
from medic.flows.stall.response import respond_to_alarm
from medic.handlers import agent_results
from medic.ledger.incidents import IncidentStore
from medic.ledger.pages import PageStore
from tests.functional.conftest import CONFIG, REGION, medic_world
from tests.functional.slurm_world import SlurmWorld
from tests.functional.test_agent_results import LambdaContext
from tests.functional.test_alarm_handler import ALARM_AT, alarm, probe_reports

EKS = "finetune-eks"
JOB = "bert-xl"
TARGET = "PyTorchJob/kubeflow/bert-xl"
INCIDENT = f"job:eks:{EKS}:{TARGET}"
EKS_CONFIG = {**CONFIG, "guardrails": {"max_job_restarts": 2},
              "jobs": [{"name": JOB, "cluster": EKS, "namespace": "kubeflow", "kind": "PyTorchJob"}]}


@pytest.fixture
def medic(aws):
    yield from medic_world(parse_config(EKS_CONFIG), aws)


@pytest.fixture
def eks(medic, tmp_path, monkeypatch) -> SlurmWorld:
    """The EKS cluster's agent queue and ledger stream; bert-xl trained (the probe counted steps) until 02:50."""
    medic.at(ALARM_AT)
    medic.deps.metrics = TrainingMetrics(boto3.client("cloudwatch", region_name=REGION))
    trained_until = datetime.fromisoformat(ALARM_AT) - timedelta(minutes=20)
    probe_reports("Heartbeat", 20, trained_until, job=JOB)
    probe_reports("Step", 1180, trained_until, job=JOB)
    monkeypatch.setattr(agent_results, "dependencies", lambda: medic.deps)
    return SlurmWorld(medic, tmp_path, cluster=EKS)


def request(eks: SlurmWorld, event_id: str = "7a1e0c55-0d7e-4a8e-9c61-2b7f3f1d9e20", **detail: Any) -> dict:
    detail = {"cluster": EKS, "job_id": None, "namespace": "kubeflow", "job_name": JOB, **detail}
    return handle_requeue_event(eks.request_event(event_id, **detail), eks.medic.deps)


def test_a_stall_alarm_queues_one_restart_of_the_jobs_kubernetes_object(eks):
    # Given a live EKS agent
    eks.heartbeat()
    # When bert-xl's stall alarm fires
    record = respond_to_alarm(alarm(f"medic-stall-{JOB}"), eks.medic.deps)
    # Then one restart_job command names the PyTorchJob's namespace, kind and name, for the agent to claim
    [body] = eks.queued()
    assert {key: body[key] for key in ("cluster", "kind", "namespace", "job_kind", "job_name", "incident")} == {
        "cluster": EKS, "kind": "restart_job", "namespace": "kubeflow", "job_kind": "PyTorchJob",
        "job_name": JOB, "incident": INCIDENT}
    issued = eks.item(f"command#{EKS}#{body['command_id']}", "issued")
    assert (issued["kind"]["S"], issued["target"]["S"]) == ("restart_job", TARGET)
    # And the record says the restart is queued, without a page; Medic watches for proof of recovery
    assert (record["action"], record["outcome"], record["incident"], record["job"], record["paged"]) == (
        "restart_job", "deferred", INCIDENT, JOB, False)
    assert [watch.incident for watch in IncidentStore(eks.medic.deps.table).recoveries()] == [INCIDENT]


def test_a_second_delivery_of_the_alarm_restarts_nothing_more(eks):
    eks.heartbeat()
    respond_to_alarm(alarm(f"medic-stall-{JOB}"), eks.medic.deps)
    again = respond_to_alarm(alarm(f"medic-stall-{JOB}"), eks.medic.deps)
    assert again["outcome"] == "duplicate" and again["paged"] is False
    assert len(eks.queued()) == 1


def test_with_the_agent_down_one_page_and_nothing_queued_into_the_void(eks):
    # Given an agent whose last heartbeat is an hour old
    eks.heartbeat(age=timedelta(hours=1))
    record = respond_to_alarm(alarm(f"medic-stall-{JOB}"), eks.medic.deps)
    assert (record["action"], record["outcome"], record["paged"]) == ("restart_job", "failed", True)
    assert eks.depth() == 0
    [page] = eks.medic.pages()
    assert "kubectl -n medic-agent" in page["Message"] and "Kubernetes job:" in page["Message"]


def test_an_operator_request_shares_the_stall_alarms_restart_budget(eks):
    # Given a budget of two restarts, one spent by the stall alarm
    eks.heartbeat()
    respond_to_alarm(alarm(f"medic-stall-{JOB}"), eks.medic.deps)
    # When an operator asks twice more for the same job (by namespace and name)
    first = request(eks)
    second = request(eks, event_id="7a1e0c55-0d7e-4a8e-9c61-2b7f3f1d9e21")
    # Then the first is the budget's second restart, on the same incident; the second gives up and pages
    assert (first["incident"], first["outcome"], first["attempt"], first["action"]) == (
        INCIDENT, "deferred", 2, "restart_job")
    assert first["requester"]["source"] == "medic.operator"
    assert (second["outcome"], second["paged"]) == ("suppressed", True)
    assert "restart budget spent (2 restarts" in second["reason"]
    assert len(eks.queued()) == 2


@pytest.mark.parametrize("detail, why", [
    ({"namespace": "default"}, "default/bert-xl is not a job Medic watches on finetune-eks"),
    ({"job_name": "other-job"}, "kubeflow/other-job is not a job Medic watches"),
    ({"job_id": "4211", "job_name": None, "namespace": None}, "name the job by namespace and job_name"),
    ({"cluster": "pretrain-slurm"}, "is orchestrated by slurm"),
])
def test_a_request_for_a_job_medic_does_not_watch_is_rejected_naming_why(eks, detail, why):
    eks.heartbeat()
    record = request(eks, **detail)
    assert (record["outcome"], record["action"]) == ("rejected", "none")
    assert why in record["reason"]
    assert eks.depth() == 0 and eks.medic.pages() == []


def test_a_namespace_that_is_not_a_kubernetes_name_is_rejected_before_anything_else(eks):
    record = request(eks, namespace="kube-system; rm -rf /")
    assert (record["outcome"], record["action"]) == ("rejected", "none") and "namespace" in record["reason"]
    assert eks.depth() == 0


def test_the_agents_result_closes_the_restart_as_executed_naming_the_pods(eks):
    # Given the restart Medic queued, and the agent's result (its own ledger item, as the EKS agent writes it)
    eks.heartbeat()
    deferred = respond_to_alarm(alarm(f"medic-stall-{JOB}"), eks.medic.deps)
    [body] = eks.queued()
    eks.stream_event()
    eks.agent_ledger.put_result({
        "command_id": body["command_id"], "cluster": EKS, "kind": "restart_job", "target": TARGET,
        "incident": INCIDENT, "status": "executed", "message": "deleted 2 pods; the training operator recreates them",
        "pods": ["bert-xl-master-0", "bert-xl-worker-0"], "force_deleted": ["bert-xl-worker-0"],
        "finished_at": eks.medic.clock[0].isoformat()}, eks.medic.clock[0])
    # When the ledger's stream brings it to the results function
    before = len(eks.medic.log.lines)
    agent_results.handler(eks.stream_event(), LambdaContext())
    [record] = eks.medic.log.lines[before:]
    # Then the restart's final record is executed, on the alarm's incident, naming what the agent deleted
    assert (record["outcome"], record["action"], record["incident"], record["attempt"]) == (
        "executed", "restart_job", INCIDENT, deferred["attempt"])
    assert "deleted 2 pod(s) of bert-xl" in record["reason"] and "bert-xl-master-0" in record["reason"]
    assert "force-deleted 1 stuck Terminating" in record["reason"]
    assert eks.medic.pages() == []


def agent_refuses(eks: SlurmWorld, refusal: str, message: str, pods: tuple[str, ...] = ()) -> dict:
    """The stall's restart queued, then the agent's `refused` result (its own item) through the stream: the record."""
    eks.heartbeat()
    respond_to_alarm(alarm(f"medic-stall-{JOB}"), eks.medic.deps)
    [body] = eks.queued()
    eks.stream_event()
    eks.agent_ledger.put_result({
        "command_id": body["command_id"], "cluster": EKS, "kind": "restart_job", "target": TARGET,
        "incident": INCIDENT, "status": "refused", "message": message, "pods": list(pods), "force_deleted": [],
        "refusal": refusal, "finished_at": eks.medic.clock[0].isoformat()}, eks.medic.clock[0])
    before = len(eks.medic.log.lines)
    agent_results.handler(eks.stream_event(), LambdaContext())
    [record] = eks.medic.log.lines[before:]
    return record


@pytest.mark.parametrize("refusal, what_to_do", [
    ("restart_policy_never", "set restartPolicy: OnFailure in each replica spec"),
    ("restart_policy_exit_code", "set launcher_exits_128_or_more_on_sigterm: true on the job in medic.yaml"),
    ("backoff_limit", "create it again with a backoffLimit sized for Medic's max_job_restarts"),
    ("job_finished", "Medic restarts no finished job, and left its pods"),
    ("something_new", "Check the job and its pods"),  # a code this Medic does not know: the generic next step
])
def test_a_restart_the_agent_refused_is_failed_with_one_page_saying_what_to_change(eks, refusal, what_to_do):
    # When the agent refuses the stall's restart (the job's own controller would have ended the job)
    refuses = agent_refuses(eks, refusal, "restartPolicy Never (Master): ...; no pod deleted")
    # Then the restart is failed, in the agent's quoted words, with one page whose next step is Medic's own
    assert (refuses["outcome"], refuses["action"], refuses["paged"]) == ("failed", "restart_job", True)
    assert refuses["reason"].startswith(f"The agent on {EKS} refused the restart of {JOB} (command ")
    [page] = eks.medic.pages()
    next_step = page["Message"].split("\nWhat to do:     ", 1)[1].split("\n", 1)[0]
    assert what_to_do in next_step
    # And Medic stops watching for a recovery that no restart can bring: no second page later
    assert IncidentStore(eks.medic.deps.table).recoveries() == []


def test_a_failed_restart_that_deleted_pods_keeps_its_recovery_watch(eks):
    """Part of the job was restarted (the agent deleted some pods before failing): its recovery is still watched."""
    agent_refuses(eks, "", "delete pod bert-xl-worker-1 failed: 500", pods=("bert-xl-master-0",))
    assert [watch.incident for watch in IncidentStore(eks.medic.deps.table).recoveries()] == [INCIDENT]


# --- the agent's node report, read by the reconciler's schedule

def report_nodes(eks: SlurmWorld, nodes: list[dict]) -> None:
    """The node report exactly as the EKS agent writes it (its own item, `agent#<cluster>/nodes`)."""
    eks.dynamodb.put_item(TableName="medic-ledger", Item={
        "pk": {"S": f"agent#{EKS}"}, "sk": {"S": "nodes"}, "at": {"S": eks.medic.clock[0].isoformat()},
        "host": {"S": "medic-agent-7c9d-x2"}, "version": {"S": "0.1.0"}, "nodes": {"S": json.dumps(nodes)}})


def node(name: str = "hyperpod-i-0a1b2c3d4e5f60718", status: str = "Schedulable", ready: bool = False,
         terminating_since: str | None = None, job: str = JOB, namespace: str = "kubeflow") -> dict:
    return {"name": name, "health_status": status, "ready": ready, "pods": [
        {"namespace": namespace, "name": f"{job}-worker-1", "job_kind": "PyTorchJob", "job_name": job,
         "phase": "Running", "terminating_since": terminating_since}]}


def sweep(eks: SlurmWorld) -> list[dict]:
    from medic.flows.agent.eks_nodes import sweep_node_reports

    return sweep_node_reports({"id": "run-1"}, eks.medic.deps)


def test_a_node_kubernetes_shows_not_ready_is_recorded_once_with_the_watched_pods_on_it_and_paged(eks):
    # Given the agent reports a NotReady node (HyperPod has not labelled it) with a bert-xl pod on it
    eks.heartbeat()
    report_nodes(eks, [node()])
    # When the reconciler's schedule runs twice
    [record] = sweep(eks)
    assert sweep(eks) == []
    # Then one record names the node's instance and the job's pod, and one page asks a human to look
    assert (record["incident"], record["node_id"], record["fault"], record["outcome"]) == (
        f"agent:{EKS}:node:hyperpod-i-0a1b2c3d4e5f60718", "i-0a1b2c3d4e5f60718", "k8s_node_unhealthy", "ignored")
    assert "bert-xl (pods bert-xl-worker-1)" in record["reason"] and record["paged"] is True
    assert len(eks.medic.pages()) == 1
    assert eks.depth() == 0  # nothing restarted, no node action on the agent's word


def test_a_report_naming_a_real_instance_never_takes_that_nodes_own_incident_page(eks):
    # Given the agent reports a real instance NotReady with a watched pod on it (true or forged: the agent's word)
    eks.heartbeat()
    report_nodes(eks, [node()])
    [record] = sweep(eks)
    assert record["paged"] is True
    # Then its page is claimed in the agent's own namespace: the node's own incident (HyperPod's events, Medic's
    # repairs) still has its one page to give
    store = PageStore(eks.medic.deps.table)
    assert not store.incident_paged(f"node:{EKS}:i-0a1b2c3d4e5f60718")
    assert store.incident_paged(f"agent:{EKS}:node:hyperpod-i-0a1b2c3d4e5f60718@20261121T031000")


def test_a_node_failing_again_another_day_pages_again(eks):
    # Given a notice that paged, and the node gone from the reports (recovered)
    eks.heartbeat()
    report_nodes(eks, [node()])
    assert sweep(eks)[0]["paged"] is True
    later(eks, 40)
    report_nodes(eks, [])
    sweep(eks)  # (the job watch restarts bert-xl meanwhile: it has not stepped since)
    eks.medic.pages()
    # When it is reported in trouble again the next day
    later(eks, 24 * 60)
    report_nodes(eks, [node()])
    [again] = [record for record in sweep(eks) if record["incident"].startswith(f"agent:{EKS}:node:")]
    # Then its new episode pages again: nothing closes an agent's node incident, so its page is claimed per episode
    assert again["paged"] is True and len(eks.medic.pages()) == 1


def nodes_in_trouble(count: int, ready: bool = False, first: int = 0) -> list[dict]:
    return [node(name=f"hyperpod-i-0{index:016x}", ready=ready) for index in range(first, first + count)]


def test_a_compromised_agent_reporting_hundreds_of_nodes_pages_once_and_writes_eleven_records_a_sweep(eks):
    # Given a compromised agent writing a report of 200 nodes NotReady, each with a watched pod on it
    eks.heartbeat()
    report_nodes(eks, nodes_in_trouble(200))
    first = sweep(eks)
    # Then one sweep writes ten node records and one summary of the other 190, and one page goes out
    assert len(first) == 11
    assert [record["incident"] for record in first[:10]] == [
        f"agent:{EKS}:node:hyperpod-i-0{index:016x}" for index in range(10)]
    summary = first[-1]
    assert (summary["incident"], summary["outcome"], summary["paged"]) == (f"agent:{EKS}:nodes", "ignored", False)
    assert "190 more nodes in trouble" in summary["reason"] and "bert-xl" in summary["reason"]
    [page] = eks.medic.pages()
    assert page["Subject"] == f"[Medic] {EKS} node hyperpod-i-0{0:016x}: Schedulable/NotReady"
    assert page["Message"].startswith("Paging held:    further agent nodes pages about cluster finetune-eks")
    # When it writes a second report of 200 other nodes ten minutes later
    later(eks, 10)
    report_nodes(eks, nodes_in_trouble(200, first=200))
    second = sweep(eks)
    # Then again at most eleven records, and no page: the agent's word pages once per cluster per hour
    assert len([r for r in second if r["fault"] == "k8s_node_unhealthy" and r["trigger"] == "reconcile"]) == 11
    assert not any(record["paged"] for record in second)
    assert eks.medic.pages() == []
    assert eks.depth() == 0  # nothing restarted on the agent's word alone


def test_a_node_hyperpod_is_repairing_is_recorded_as_deferred_without_a_page(eks):
    eks.heartbeat()
    report_nodes(eks, [node(status="UnschedulablePendingReplacement", ready=True)])
    [record] = sweep(eks)  # finetune-eks: node_recovery automatic
    assert (record["outcome"], record["paged"]) == ("deferred", False)
    assert "HyperPod is repairing it" in record["reason"]


def test_pods_stuck_terminating_past_the_guardrail_restart_the_job_once_under_its_budget(eks):
    # Given bert-xl's last step at 02:50, and a bert-xl pod Terminating since 02:55 on a NotReady node, 45 minutes
    # later (guardrail: 30 minutes): the job's probe shows no progress since the pod got stuck
    since = (eks.medic.clock[0] - timedelta(minutes=15)).isoformat()
    later(eks, 30)
    report_nodes(eks, [node(terminating_since=since)])
    # When the reconciler's schedule runs twice
    records = sweep(eks) + sweep(eks)
    # Then one restart of the job is queued (the agent force-deletes the stuck pod), spending its budget
    restarts = [r for r in records if r["action"] == "restart_job"]
    [restart] = restarts
    assert (restart["fault"], restart["outcome"], restart["incident"], restart["attempt"]) == (
        "pods_stuck_terminating", "deferred", INCIDENT, 1)
    [body] = eks.queued()
    assert (body["kind"], body["job_name"]) == ("restart_job", JOB)


def test_a_job_stepping_since_its_pods_got_stuck_is_not_restarted_whoever_wrote_their_owner(eks):
    # Given bert-xl stepping normally, and the agent reporting a pod of bert-xl stuck Terminating on a NotReady node
    # for 45 minutes (a namespace tenant's pod, whose ownerReference carries the job's real uid: the agent cannot tell)
    eks.heartbeat()
    since = eks.medic.clock[0] - timedelta(minutes=45)
    for minute in range(45):
        probe_reports("Heartbeat", 40, since + timedelta(minutes=minute), job=JOB)
        probe_reports("Step", 1240 + 40 * minute, since + timedelta(minutes=minute), job=JOB)
    report_nodes(eks, [node(terminating_since=since.isoformat())])
    # When the reconciler's schedule runs twice
    records = sweep(eks) + sweep(eks)
    # Then nothing is restarted: one record says the job is training, naming the pods; no page
    assert [r for r in records if r["action"] == "restart_job"] == [] and eks.depth() == 0
    [ignored] = [r for r in records if r["incident"] == INCIDENT]
    assert (ignored["fault"], ignored["action"], ignored["outcome"], ignored["paged"]) == (
        "pods_stuck_terminating", "none", "ignored", False)
    assert "the probe counted 1820 steps since 02:25 UTC" in ignored["reason"]
    assert "bert-xl-worker-1" in ignored["reason"]


def test_a_job_that_finished_is_not_restarted_for_pods_left_on_a_dead_node(eks):
    # Given bert-xl's probe closed cleanly at 02:50 (its completion marker), and a pod of it stuck Terminating since
    eks.heartbeat()
    probe_reports("Completed", 1, eks.medic.clock[0] - timedelta(minutes=20), job=JOB)
    since = eks.medic.clock[0] - timedelta(minutes=15)
    later(eks, 30)
    report_nodes(eks, [node(terminating_since=since.isoformat())])
    # Then no restart: the job finished
    records = sweep(eks)
    assert eks.depth() == 0
    [ignored] = [r for r in records if r["incident"] == INCIDENT]
    assert (ignored["fault"], ignored["outcome"]) == ("completed", "ignored")
    assert "completion marker" in ignored["reason"]


def test_pods_stuck_terminating_on_a_ready_node_are_left_to_its_kubelet(eks):
    # Given a bert-xl pod Terminating for 45 minutes on a node HyperPod labels for replacement, whose kubelet is alive
    eks.heartbeat()
    since = (eks.medic.clock[0] - timedelta(minutes=45)).isoformat()
    report_nodes(eks, [node(status="UnschedulablePendingReplacement", ready=True, terminating_since=since)])
    # Then the node is recorded, and no restart is queued: the agent would force-delete nothing there
    [record] = sweep(eks)
    assert record["fault"] == "k8s_node_unhealthy" and record["action"] == "none"
    assert eks.depth() == 0


def test_pods_of_jobs_medic_does_not_watch_are_never_restarted(eks):
    eks.heartbeat()
    since = (eks.medic.clock[0] - timedelta(hours=2)).isoformat()
    report_nodes(eks, [node(terminating_since=since, job="someone-elses-job")])
    [record] = sweep(eks)
    assert record["action"] == "none" and "none Medic watches" in record["reason"]
    assert record["paged"] is False  # no watched job there: recorded, nobody woken
    assert eks.depth() == 0


def test_a_report_from_an_agent_that_is_not_alive_is_not_acted_on(eks):
    eks.heartbeat(age=timedelta(hours=1))
    report_nodes(eks, [node(terminating_since=(eks.medic.clock[0] - timedelta(hours=2)).isoformat())])
    assert sweep(eks) == [] and eks.depth() == 0


def test_an_unreadable_report_is_skipped_without_acting(eks):
    eks.heartbeat()
    report_nodes(eks, [{"name": "Bad Name; rm -rf /", "ready": False, "pods": []}])
    assert sweep(eks) == [] and eks.depth() == 0


# --- a watched job on a failing node: its operator brings it back within recovery_minutes, or Medic restarts it

def later(eks: SlurmWorld, minutes: int) -> datetime:
    moment = eks.medic.clock[0] + timedelta(minutes=minutes)
    eks.medic.at(moment.isoformat())
    eks.heartbeat()
    return moment


def test_a_job_its_operator_does_not_bring_back_after_its_node_failed_is_restarted_once(eks):
    # Given HyperPod replacing a node with a bert-xl pod on it (recorded, no page: HyperPod is on it)
    eks.heartbeat()
    report_nodes(eks, [node(status="UnschedulablePendingReplacement", ready=False)])
    [notice] = sweep(eks)
    assert (notice["outcome"], notice["paged"]) == ("deferred", False)
    # When the job has not trained since, 10 and then 21 minutes later (recovery_minutes: 20)
    later(eks, 10)
    assert [r for r in sweep(eks) if r["action"] == "restart_job"] == []
    later(eks, 11)
    [restart] = [r for r in sweep(eks) if r["action"] == "restart_job"]
    # Then Medic restarts it once, trigger node_repair, under its budget, and watches for proof of recovery
    assert (restart["trigger"], restart["outcome"], restart["incident"], restart["attempt"]) == (
        "node_repair", "deferred", INCIDENT, 1)
    issued = eks.item(f"command#{EKS}#{eks.queued()[0]['command_id']}", "issued")
    assert "has not trained since" in issued["details"]["S"]
    assert [watch.incident for watch in IncidentStore(eks.medic.deps.table).recoveries()] == [INCIDENT]
    later(eks, 5)
    assert [r for r in sweep(eks) if r["action"] == "restart_job"] == [] and len(eks.queued()) == 1


def test_a_job_its_operator_brought_back_after_its_node_failed_is_left_alone(eks):
    eks.heartbeat()
    report_nodes(eks, [node(status="UnschedulablePendingReplacement", ready=False)])
    sweep(eks)
    # Given bert-xl stepping again 6 minutes after the node failed (its pods recreated elsewhere)
    stepping = later(eks, 6)
    probe_reports("Heartbeat", 30, stepping, job=JOB)
    probe_reports("Step", 1230, stepping, job=JOB)
    later(eks, 4)
    [record] = sweep(eks)
    assert (record["trigger"], record["action"], record["outcome"]) == ("node_repair", "none", "ignored")
    assert "its operator brought it back" in record["reason"]
    later(eks, 20)
    assert sweep(eks) == [] and eks.depth() == 0
