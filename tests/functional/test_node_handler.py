"""Specification: the node health handler against emulated AWS."""

from __future__ import annotations

import json

import pytest

from medic.config import parse_config
from medic.flows.node import health_event as node_event_entry
from medic.ledger.pages import PageStore
from tests.functional.conftest import CLUSTER, CONFIG, medic_world
from tests.helpers import hma_reason, node_event

NODE = "i-0d4e5f60718293a4b"
RECORD_FIELDS = {"incident", "trigger", "event_id", "cluster", "instance_group", "node_id", "job", "fault",
                 "action", "outcome", "reason", "paged", "mode", "attempt", "requester", "why", "needs_human"}


def test_an_unhealthy_gpu_node_is_replaced_and_recorded(medic, unhealthy_event):
    # Given a worker node that HMA reports as NvidiaErrorTerminate
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)
    # When the event arrives
    record = medic.handle(unhealthy_event)
    # Then the node is replaced through the HyperPod API, and nobody is paged
    medic.hyperpod.assert_all_called()
    assert record == {
        "incident": f"node:{CLUSTER}:{NODE}", "trigger": "node_health", "event_id": unhealthy_event["id"],
        "cluster": CLUSTER, "instance_group": "gpu-workers", "node_id": NODE, "job": None, "fault": "gpu_fatal",
        "action": "replace_node", "outcome": "executed",
        # the capacity check before a replace (issue 32) says which signal it used
        "reason": "Fault gpu_fatal calls for replace; capacity: no training plan on instance group gpu-workers and no "
                  "capacity failure in it in the last hour.",
        "paged": False, "mode": "act", "attempt": 1, "requester": None,  # requester: operator requests only
        "why": "acted", "needs_human": False,  # the outcome's one meaning; nobody needs to act
    }
    assert medic.pages() == []
    # And exactly one remediation log line carries the record
    [line] = medic.log.lines
    assert RECORD_FIELDS <= set(line)
    assert {key: line[key] for key in RECORD_FIELDS} == record


def test_the_record_emits_an_emf_metric_per_action_and_outcome(medic, unhealthy_event, capsys):
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)
    medic.handle(unhealthy_event)
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    [metric] = [b for b in blobs if b.get("Remediations") == [1.0]]
    assert (metric["action"], metric["outcome"], metric["trigger"]) == ("replace_node", "executed", "node_health")
    assert metric["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Medic"


def test_a_redelivered_event_is_a_duplicate_and_calls_nothing(medic, unhealthy_event):
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)
    first = medic.handle(unhealthy_event)
    # When the same event comes again (SageMaker may send several for one state change)
    medic.hyperpod.node(NODE)
    second = medic.handle(node_event(unhealthy_event, event_id="another-id-same-fault"))
    # Then exactly one replace call was made (the stub would fail on a second)
    medic.hyperpod.assert_all_called()
    assert (first["outcome"], second["outcome"]) == ("executed", "duplicate")
    assert medic.pages() == []


def test_two_invocations_racing_on_one_node_make_one_call(medic, unhealthy_event):
    # Given invocation A has read the ledger and is about to claim
    original_load = node_event_entry.load_node_event
    racing = {"done": False, "result": None}

    def load_then_let_b_win(*args, **kwargs):
        state = original_load(*args, **kwargs)
        if not racing["done"]:
            racing["done"] = True
            # B, SageMaker's second event for the same state change (another event id), runs in between
            racing["result"] = medic.handle(node_event(unhealthy_event, event_id="second-delivery"))
        return state

    # (A reads the ledger first, then looks the node up: B runs whole in between)
    medic.hyperpod.node(NODE)  # B's lookup
    medic.hyperpod.size(16)  # B's breaker check
    medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)  # B's call, the only one
    medic.hyperpod.node(NODE)  # A's lookup
    node_event_entry.load_node_event = load_then_let_b_win
    try:
        a = medic.handle(unhealthy_event)
    finally:
        node_event_entry.load_node_event = original_load
    # Then B executed, A lost the conditional claim and saw B's action: one call in all
    medic.hyperpod.assert_all_called()
    assert (racing["result"]["outcome"], a["outcome"]) == ("executed", "duplicate")


def test_a_repair_already_running_is_deferred_without_a_page(medic, unhealthy_event):
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE, failed="InstanceIdInUse")
    record = medic.handle(unhealthy_event)
    assert (record["outcome"], record["paged"]) == ("deferred", False)
    assert "InstanceIdInUse" in record["reason"]
    assert medic.pages() == []


def test_a_refused_action_fails_and_pages_once_with_the_record(medic, unhealthy_event):
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE, failed="InstanceIdNotFound")
    record = medic.handle(unhealthy_event)
    assert (record["action"], record["outcome"], record["paged"]) == ("replace_node", "failed", True)
    [page] = medic.pages()
    assert page["Subject"].startswith(f"[Medic] {CLUSTER} {NODE}: gpu_fatal")
    for expected in (f"Cluster:        {CLUSTER}", f"Node:           {NODE}", "Instance group: gpu-workers",
                     "NvidiaErrorTerminate", "What to do:", "console.aws.amazon.com/sagemaker"):
        assert expected in page["Message"]
    attached = json.loads(page["MessageAttributes"]["record"]["Value"])
    assert attached["incident"] == record["incident"] and attached["outcome"] == "failed"
    # And a repeat of the event neither calls again nor pages again
    medic.hyperpod.node(NODE)
    again = medic.handle(node_event(unhealthy_event, event_id="second-delivery"))
    assert (again["outcome"], again["paged"]) == ("duplicate", False)
    assert medic.pages() == []


def test_an_api_error_on_the_action_fails_and_pages(medic, unhealthy_event):
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action_error("batch_replace_cluster_nodes", NODE, "AccessDeniedException")
    record = medic.handle(unhealthy_event)
    assert (record["outcome"], record["paged"]) == ("failed", True)
    assert "AccessDeniedException" in record["reason"]
    assert len(medic.pages()) == 1


def test_a_protected_node_is_left_alone_and_pages_once(medic, unhealthy_event):
    controller = "i-0123456789abcdef0"
    event = node_event(unhealthy_event, instance_id=controller)
    medic.hyperpod.node(controller, group="controller")
    medic.hyperpod.size(16)
    first = medic.handle(event)
    medic.hyperpod.node(controller, group="controller")
    second = medic.handle(node_event(event, time="2026-11-20T08:20:00Z", event_id="later"))
    medic.hyperpod.assert_all_called()  # no reboot/replace call was queued, none was made
    assert (first["outcome"], first["paged"], second["paged"]) == ("suppressed", True, False)
    [page] = medic.pages()
    assert "protected" in page["Message"]


def test_an_unrecognized_reason_pages_a_human_and_takes_no_action(medic, unhealthy_event):
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    record = medic.handle(node_event(unhealthy_event, reason="Fan speed reading out of range"))
    assert (record["fault"], record["action"], record["outcome"], record["paged"]) == (
        "unknown", "none", "deferred", True)
    assert "Fan speed" in medic.pages()[0]["Message"]


def test_a_user_application_xid_takes_no_node_action(medic, unhealthy_event):
    record = medic.handle(node_event(unhealthy_event, reason=hma_reason("XidUserAppError")))
    medic.hyperpod.assert_all_called()
    assert (record["fault"], record["outcome"], record["paged"]) == ("user_app_error", "ignored", False)


def test_a_healthy_event_closes_the_incident_so_the_next_failure_pages_again(medic, unhealthy_event):
    # Given a page was sent for an unknown fault
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.handle(node_event(unhealthy_event, reason="mystery"))
    assert len(medic.pages()) == 1
    # When the node reports healthy
    medic.hyperpod.node(NODE)
    healthy = medic.handle(node_event(unhealthy_event, status="Healthy", reason="", time="2026-11-20T09:00:00Z",
                                      event_id="healthy"))
    assert (healthy["fault"], healthy["outcome"], healthy["paged"]) == ("healthy", "ignored", False)
    assert medic.pages() == []
    # Then its next failure is a new incident and pages again
    medic.hyperpod.node(NODE)
    medic.handle(node_event(unhealthy_event, reason="mystery again", time="2026-11-20T10:00:00Z", event_id="again"))
    assert len(medic.pages()) == 1


def test_a_reboot_then_a_second_failure_hours_later_escalates_to_replace(medic, unhealthy_event):
    reboot_fault = node_event(unhealthy_event, reason=hma_reason("NvidiaErrorReboot"))
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action("batch_reboot_cluster_nodes", NODE)
    first = medic.handle(reboot_fault)
    medic.at("2026-11-20T10:30:00Z")
    medic.hyperpod.node(NODE)
    medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)
    second = medic.handle(node_event(reboot_fault, time="2026-11-20T10:30:00Z", event_id="later"))
    medic.hyperpod.assert_all_called()
    assert (first["action"], second["action"], second["outcome"], second["attempt"]) == (
        "reboot_node", "replace_node", "executed", 2)


def test_a_storm_is_held_to_the_budget_with_one_summary_page(medic, unhealthy_event):
    # Given a 64-node cluster (the breaker allows 16) and the default budget of 4 actions per hour
    records = []
    for n in range(30):
        node = f"i-{n:017x}"
        medic.hyperpod.node(node)
        if n == 0:
            medic.hyperpod.size(64)  # read once, then cached
        if n < 4:
            medic.hyperpod.node_action("batch_replace_cluster_nodes", node)
        medic.at(f"2026-11-20T08:{10 + n // 3:02d}:00Z")
        records.append(medic.handle(node_event(unhealthy_event, instance_id=node, event_id=f"e{n}")))
    medic.hyperpod.assert_all_called()
    outcomes = [r["outcome"] for r in records]
    assert outcomes.count("executed") == 4 and outcomes.count("suppressed") == 26
    [page] = medic.pages()
    assert "held back by guardrails" in page["Subject"]
    assert "Cluster budget spent" in page["Message"]
    assert sum(r["paged"] for r in records) == 1


def test_a_hostile_instance_id_is_rejected_without_any_call_and_the_next_event_works(medic, unhealthy_event):
    hostile = node_event(unhealthy_event, instance_id="i-0abc; rm -rf /")
    record = medic.handle(hostile)
    assert (record["outcome"], record["action"], record["fault"]) == ("rejected", "none", "invalid")
    assert "InstanceId" in record["reason"]
    medic.hyperpod.assert_all_called()
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)
    assert medic.handle(unhealthy_event)["outcome"] == "executed"


@pytest.mark.parametrize("garbage", [None, [], "text", {"detail": "x"}, {"id": 5, "detail": {}},
                                     {"id": "x", "detail-type": "y", "detail": {"ClusterName": {"$ne": 1}}}])
def test_malformed_events_are_rejected(medic, garbage):
    record = medic.handle(garbage)
    assert record["outcome"] == "rejected"
    assert medic.pages() == []


def test_an_unconfigured_cluster_is_ignored(medic, unhealthy_event):
    record = medic.handle(node_event(unhealthy_event, cluster="someone-elses"))
    assert (record["outcome"], record["action"]) == ("ignored", "none")


def test_automatic_recovery_clusters_are_deferred_to_hyperpod(medic, unhealthy_event):
    event = node_event(unhealthy_event, cluster="finetune-eks")
    medic.hyperpod.node(NODE, group="workers", cluster="finetune-eks")
    medic.hyperpod.size(16, cluster="finetune-eks", node_recovery="Automatic")
    record = medic.handle(event)
    assert (record["outcome"], record["action"], record["paged"]) == ("deferred", "none", False)


def test_a_node_no_longer_in_the_cluster_is_ignored(medic, unhealthy_event):
    medic.hyperpod.missing_node(NODE)
    assert medic.handle(unhealthy_event)["outcome"] == "ignored"


def test_dry_run_records_what_it_would_do_and_calls_nothing(medic, unhealthy_event):
    medic.set_mode("dry_run")
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    record = medic.handle(unhealthy_event)
    medic.hyperpod.node(NODE)
    again = medic.handle(node_event(unhealthy_event, event_id="second-delivery"))
    medic.hyperpod.assert_all_called()
    assert (record["outcome"], record["mode"], record["paged"]) == ("dry_run", "dry_run", False)
    assert again["outcome"] == "duplicate"
    # And a dry run leaves no claim behind that would block the real action later
    medic.set_mode("act")
    medic.hyperpod.node(NODE)
    medic.hyperpod.node_action("batch_replace_cluster_nodes", NODE)
    assert medic.handle(unhealthy_event)["outcome"] == "executed"


def test_paused_suppresses_and_pages(medic, unhealthy_event):
    medic.set_mode("paused")
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    record = medic.handle(unhealthy_event)
    assert (record["outcome"], record["mode"], record["paged"]) == ("suppressed", "paused", True)
    assert "paused" in medic.pages()[0]["Message"]


def test_an_invalid_mode_value_is_read_as_paused(medic, unhealthy_event):
    medic.set_mode("pause-please")
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    assert medic.handle(unhealthy_event)["mode"] == "paused"


def test_a_failed_page_still_writes_the_record(aws, unhealthy_event):
    for medic in medic_world(parse_config(CONFIG), aws):
        medic.deps.pager.topic_arn = "arn:aws:sns:us-west-2:123456789012:does-not-exist"
        medic.hyperpod.node(NODE)
        medic.hyperpod.size(16)
        record = medic.handle(node_event(unhealthy_event, reason="mystery"))
        assert (record["outcome"], record["paged"]) == ("deferred", False)
        assert len(medic.log.lines) == 1


# --- as AWS behaves: event ids, event times, foreign ARNs, per-node errors, NodeRecovery, replacements

REPLACE, REBOOT = "batch_replace_cluster_nodes", "batch_reboot_cluster_nodes"
NEW_NODE = "i-0fedcba9876543210"


def replaced(medic, event) -> dict:
    medic.hyperpod.node(NODE, logical_id="worker-7")
    medic.hyperpod.size(16)
    medic.hyperpod.node_action(REPLACE, NODE)
    return medic.handle(event)


def test_the_same_event_id_delivered_again_two_hours_later_calls_nothing(medic, unhealthy_event):
    """Attack: a DLQ redrive or archive replay of an event after the cooldown."""
    replaced(medic, unhealthy_event)
    medic.at("2026-11-20T10:14:05Z")
    again = medic.handle(unhealthy_event)
    medic.hyperpod.assert_all_called()  # no DescribeClusterNode, no second replace
    assert (again["outcome"], again["action"], again["paged"]) == ("duplicate", "none", False)
    assert unhealthy_event["id"] in again["reason"]


def test_an_unhealthy_event_older_than_the_nodes_last_healthy_report_is_ignored_as_stale(medic, unhealthy_event):
    medic.hyperpod.node(NODE)
    medic.handle(node_event(unhealthy_event, status="Healthy", reason="", time="2026-11-20T09:00:00Z",
                            event_id="healthy"))
    medic.at("2026-11-20T09:05:00Z")
    medic.hyperpod.node(NODE)
    old = medic.handle(node_event(unhealthy_event, time="2026-11-20T08:30:00Z", event_id="late"))
    medic.hyperpod.assert_all_called()  # looked up, never acted on
    assert (old["outcome"], old["action"], old["paged"]) == ("ignored", "none", False)
    assert "2026-11-20 08:30:00" in old["reason"] and "2026-11-20 09:00:00" in old["reason"]


@pytest.mark.parametrize("arn", [
    "arn:aws:sagemaker:us-west-2:999999999999:cluster/k3v9q2w8x1za",  # another account
    "arn:aws:sagemaker:eu-west-1:123456789012:cluster/k3v9q2w8x1za",  # another region
])
def test_a_node_event_naming_a_foreign_cluster_arn_is_rejected_without_any_call(medic, unhealthy_event, arn):
    event = node_event(unhealthy_event)
    event["detail"]["ClusterArn"] = arn
    record = medic.handle(event)
    medic.hyperpod.assert_all_called()
    assert (record["outcome"], record["action"], record["paged"]) == ("rejected", "none", False)


def test_the_configured_name_under_another_id_in_the_stacks_account_is_a_config_error_paged_once_a_day(
        medic, unhealthy_event):
    # Given HyperPod's events for pretrain-slurm under id zzzzzzzzzzzz, in the stack's own account and region, while
    # medic.yaml says k3v9q2w8x1za (issue 29, item 2)
    def under_another_id(event_id: str, time: str) -> dict:
        event = node_event(unhealthy_event, event_id=event_id, time=time)
        event["detail"]["ClusterArn"] = "arn:aws:sagemaker:us-west-2:123456789012:cluster/zzzzzzzzzzzz"
        return event

    first = medic.handle(under_another_id("first", "2026-11-20T08:14:05Z"))
    second = medic.handle(under_another_id("second", "2026-11-20T09:30:00Z"))
    # Then both are rejected with no call; the first pages, naming the id to set; the second that day does not
    medic.hyperpod.assert_all_called()
    assert [(r["outcome"], r["action"], r["paged"]) for r in (first, second)] == [
        ("rejected", "none", True), ("rejected", "none", False)]
    assert "until clusters[pretrain-slurm].id is zzzzzzzzzzzz" in first["reason"]
    [page] = medic.pages()
    assert page["Subject"] == "[Medic] pretrain-slurm: clusters[].id in medic.yaml is not the cluster's id"
    assert "Set id: zzzzzzzzzzzz for cluster pretrain-slurm" in page["Message"]


def test_the_documented_example_arn_with_the_cluster_name_is_accepted(medic, unhealthy_event):
    event = node_event(unhealthy_event)
    event["detail"]["ClusterArn"] = f"arn:aws:sagemaker:us-west-2:123456789012:cluster/{CLUSTER}"
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action(REPLACE, NODE)
    assert medic.handle(event)["outcome"] == "executed"


@pytest.mark.parametrize(("status_after", "outcome", "paged"), [
    ("SystemUpdating", "deferred", False), ("Running", "failed", True)])
def test_invalid_instance_status_rechecks_the_node_before_deciding(medic, unhealthy_event, status_after, outcome,
                                                                    paged):
    """InvalidInstanceStatus: "a state that does not allow" the action, not necessarily a repair."""
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action(REPLACE, NODE, failed="InvalidInstanceStatus")
    medic.hyperpod.node(NODE, status=status_after)
    record = medic.handle(unhealthy_event)
    medic.hyperpod.assert_all_called()
    assert (record["outcome"], record["paged"]) == (outcome, paged)
    assert status_after in record["reason"]


def test_invalid_instance_status_on_a_node_since_gone_is_ignored(medic, unhealthy_event):
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action(REPLACE, NODE, failed="InvalidInstanceStatus")
    medic.hyperpod.missing_node(NODE)
    record = medic.handle(unhealthy_event)
    assert (record["outcome"], record["paged"]) == ("ignored", False)


def test_a_per_node_internal_server_error_is_retried_once_after_a_pause(medic, unhealthy_event):
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action(REPLACE, NODE, failed="InternalServerError")
    medic.hyperpod.node_action(REPLACE, NODE)
    record = medic.handle(unhealthy_event)
    medic.hyperpod.assert_all_called()
    assert record["outcome"] == "executed" and "retry" in record["reason"]
    assert len(medic.slept) == 1 and medic.slept[0] > 0


def test_a_per_node_internal_server_error_twice_fails_and_is_never_asked_a_third_time(medic, unhealthy_event):
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16)
    medic.hyperpod.node_action(REPLACE, NODE, failed="InternalServerError")
    medic.hyperpod.node_action(REPLACE, NODE, failed="InternalServerError")
    record = medic.handle(unhealthy_event)
    medic.hyperpod.assert_all_called()  # exactly two calls: a third would be unstubbed
    assert (record["outcome"], record["paged"]) == ("failed", True)
    assert "asked twice" in record["reason"]


def test_a_slurm_controller_in_aws_samples_group_is_left_alone_with_the_default_config(medic, unhealthy_event):
    controller = "i-0123456789abcdef0"
    medic.hyperpod.node(controller, group="controller-machine")
    medic.hyperpod.size(16, controller_group="controller-machine")
    record = medic.handle(node_event(unhealthy_event, instance_id=controller,
                                     reason=hma_reason("NvidiaErrorReboot")))
    medic.hyperpod.assert_all_called()  # no reboot was queued, none was made
    assert (record["outcome"], record["paged"]) == ("suppressed", True)
    assert len(medic.pages()) == 1


def test_describe_cluster_node_recovery_automatic_decides_and_the_config_disagreement_pages_once(
        medic, unhealthy_event):
    medic.hyperpod.node(NODE)
    medic.hyperpod.size(16, node_recovery="Automatic")
    first = medic.handle(unhealthy_event)
    medic.hyperpod.node(NODE)
    second = medic.handle(node_event(unhealthy_event, event_id="second", time="2026-11-20T08:30:00Z"))
    medic.hyperpod.assert_all_called()  # no node action; DescribeCluster read once (cached)
    assert (first["outcome"], second["outcome"]) == ("deferred", "deferred")
    mismatches = [line for line in medic.log.lines if line["fault"] == "config_mismatch"]
    assert len(mismatches) == 1 and mismatches[0]["paged"] is True
    [page] = medic.pages()
    assert "node_recovery" in page["Subject"]
    item = medic.deps.table.client.get_item(TableName="medic-ledger", Key={
        "pk": {"S": f"cluster#{CLUSTER}"}, "sk": {"S": "node_recovery"}})["Item"]
    assert (item["configured"]["S"], item["actual"]["S"]) == ("none", "automatic")


def test_a_replaced_nodes_new_instance_reporting_healthy_closes_medics_incident(medic, unhealthy_event):
    """BatchReplaceClusterNodes provisions a new instance id; NodeLogicalId persists."""
    replaced(medic, unhealthy_event)
    assert PageStore(medic.deps.table).claim_page(f"node:{CLUSTER}:{NODE}", medic.clock[0])  # say a page went out
    medic.at("2026-11-20T08:50:00Z")
    medic.hyperpod.node(NEW_NODE, logical_id="worker-7")
    medic.handle(node_event(unhealthy_event, instance_id=NEW_NODE, status="Healthy", reason="",
                            time="2026-11-20T08:50:00Z", event_id="new-healthy"))
    assert not PageStore(medic.deps.table).incident_paged(f"node:{CLUSTER}:{NODE}")


def test_a_node_medic_replaced_failing_again_hours_later_under_its_old_id_calls_nothing(medic, unhealthy_event):
    replaced(medic, unhealthy_event)
    medic.at("2026-11-20T12:00:00Z")
    medic.hyperpod.missing_node(NODE)  # DescribeClusterNode: ResourceNotFound for the terminated instance
    later = medic.handle(node_event(unhealthy_event, time="2026-11-20T12:00:00Z", event_id="hours-later"))
    medic.hyperpod.assert_all_called()
    assert (later["outcome"], later["action"]) == ("ignored", "none")
    assert "Medic replaced it" in later["reason"]
