"""Specification: what Medic does, end to end, for the bundled scenarios and under injected faults."""

from __future__ import annotations

from collections import Counter

from sim.scenario import SCENARIOS
from sim.scenarios.generate import event
from tests.e2e.conftest import DRY_RUN_CONFIG, node_action_calls, outcomes, sample

REPLACE = "sagemaker:BatchReplaceClusterNodes"
REBOOT = "sagemaker:BatchRebootClusterNodes"


def test_a_gpu_fault_replaces_the_node_without_paging(replay):
    # Given one NvidiaErrorTerminate health event for a worker node
    # When it is replayed through the stack
    result = replay(SCENARIOS / "a-single-fault.jsonl")
    # Then the node is replaced, once, and nobody is paged
    assert outcomes(result) == [("replace_node", "executed")]
    record = result.records[0]
    assert (record["cluster"], record["node_id"], record["fault"], record["paged"], record["mode"]) == (
        "pretrain-slurm", "i-0d4e5f60718293a4b", "gpu_fatal", False, "act")
    assert node_action_calls(result) == {REPLACE: 1}
    [call] = result.node_actions
    assert {key: call[key] for key in ("action", "cluster", "node_ids", "successful", "failed")} == {
        "action": "replace", "cluster": "pretrain-slurm", "node_ids": ["i-0d4e5f60718293a4b"],
        "successful": ["i-0d4e5f60718293a4b"], "failed": []}
    # A replacement is a new instance (BatchReplaceClusterNodes provisions a new instance id)
    assert set(call["replacements"]) == {"i-0d4e5f60718293a4b"}
    assert call["replacements"]["i-0d4e5f60718293a4b"] != "i-0d4e5f60718293a4b"
    assert result.pages == []


def test_b_a_repeated_delivery_is_handled_once(replay):
    # Given the same event delivered twice
    result = replay(SCENARIOS / "b-repeat-delivery.jsonl")
    # Then the second delivery is a duplicate and the node is replaced exactly once
    assert outcomes(result) == [("replace_node", "executed"), ("none", "duplicate")]
    assert node_action_calls(result) == {REPLACE: 1}
    assert result.pages == []


def test_c_a_node_failing_again_after_a_reboot_is_replaced(replay):
    # Given a reboot-class fault, and the same node failing the same way two hours later
    result = replay(SCENARIOS / "c-escalation.jsonl")
    # Then Medic reboots first and replaces the second time
    assert outcomes(result) == [("reboot_node", "executed"), ("replace_node", "executed")]
    assert node_action_calls(result) == {REBOOT: 1, REPLACE: 1}
    assert [record["attempt"] for record in result.records] == [1, 2]


def test_d_a_storm_is_capped_by_the_budget_with_one_summary_page(replay):
    # Given 30 distinct nodes of one cluster failing within ten minutes (budget: 4 actions an hour)
    result = replay(SCENARIOS / "d-storm.jsonl")
    # Then at most 4 nodes are replaced, the rest are suppressed, and one summary page goes out
    counts = Counter(record["outcome"] for record in result.records)
    assert len(result.records) == 30
    assert 1 <= counts["executed"] <= 4
    assert counts["suppressed"] == 30 - counts["executed"]
    assert node_action_calls(result) == {REPLACE: counts["executed"]}
    assert len(result.pages) == 1
    assert sum(record["paged"] for record in result.records) == 1
    assert result.pages[0]["record"]["cluster"] == "pretrain-slurm"


def test_e_a_protected_node_is_left_to_a_human(replay):
    # Given a fault on a node of the protected controller group
    result = replay(SCENARIOS / "e-protected-node.jsonl")
    # Then Medic calls nothing on it and pages once, naming the node
    assert [record["outcome"] for record in result.records] == ["suppressed"]
    record = result.records[0]
    assert (record["instance_group"], record["paged"]) == ("controller", True)
    assert node_action_calls(result) == {}
    assert len(result.pages) == 1
    page = result.pages[0]
    assert page["record"]["incident"] == record["incident"] == "node:pretrain-slurm:i-0c0ffee0c0ffee001"
    assert page["subject"] and page["message"]


def test_f_a_dry_run_decides_but_calls_nothing(replay):
    # Given the single-fault event and a config in dry_run mode
    result = replay(SCENARIOS / "f-dry-run.jsonl")
    # Then the record says what Medic would have done, and no node action or page happened
    assert outcomes(result) == [("replace_node", "dry_run")]
    assert result.records[0]["mode"] == "dry_run"
    assert node_action_calls(result) == {}
    assert result.pages == []


def test_f_the_dry_run_scenario_names_its_config():
    from sim.scenario import read_scenario

    assert read_scenario(SCENARIOS / "f-dry-run.jsonl").config == DRY_RUN_CONFIG


def test_g_hostile_input_is_rejected_and_the_next_event_still_executes(replay):
    # Given an InstanceId carrying a shell command, then a valid event for another node
    result = replay(SCENARIOS / "g-hostile-input.jsonl")
    # Then the first is rejected without any call, and the second is handled normally
    assert [record["outcome"] for record in result.records] == ["rejected", "executed"]
    assert result.records[0]["action"] == "none"
    assert [action["node_ids"] for action in result.node_actions] == [["i-0a1b2c3d4e5f60718"]]
    assert node_action_calls(result) == {REPLACE: 1}


def test_q_throttling_is_absorbed_by_the_sdk_retries(replay):
    # Given HyperPod throttles the first two replace attempts (the scenario's '# fault:' header)
    result = replay(SCENARIOS / "q-throttled-node-call.jsonl")
    # Then botocore retries and the replace goes through: one API call, three HTTP attempts, one node action
    assert outcomes(result) == [("replace_node", "executed")]
    assert result.calls[REPLACE] == 1
    assert (result.attempts[REPLACE], result.injected[REPLACE]) == (3, 2)
    assert [action["successful"] for action in result.node_actions] == [["i-0d4e5f60718293a4b"]]
    assert result.pages == []


def test_r_a_permanent_error_fails_at_once_and_pages_once(replay):
    # Given Medic's role is denied the replace call
    result = replay(SCENARIOS / "r-permanent-node-error.jsonl")
    # Then it is not retried: one attempt, a failed record naming the error, one page, no node action
    assert [(r["action"], r["outcome"], r["paged"]) for r in result.records] == [("replace_node", "failed", True)]
    assert "AccessDeniedException" in result.records[0]["reason"]
    assert (result.attempts[REPLACE], result.injected[REPLACE]) == (1, 1)
    assert result.node_actions == []
    assert len(result.pages) == 1 and result.pages[0]["record"]["outcome"] == "failed"


def test_s_a_page_that_cannot_be_published_is_counted_and_the_record_still_written(replay):
    # Given SNS failing every Publish attempt while a protected node needs a human
    result = replay(SCENARIOS / "s-page-publish-fails.jsonl")
    # Then the decision is recorded, honestly unpaged, and the failure shows as the PageFailures metric
    assert [(r["outcome"], r["paged"]) for r in result.records] == [("suppressed", False)]
    assert result.pages == []
    assert (result.calls["sns:Publish"], result.attempts["sns:Publish"], result.injected["sns:Publish"]) == (1, 4, 4)
    assert result.metrics["PageFailures"] == 1 and "Pages" not in result.metrics
    assert result.metrics["Remediations"] == 1
    # And the handler does not raise (paging releases its claim instead): nothing retried or dropped to the DLQ
    assert result.dropped == [] and result.errors == []
    assert sum(result.invocations.values()) == 1


def test_a_permanent_error_on_the_node_action_fails_and_pages(replay):
    # Given HyperPod answers every replace attempt with InternalServerError
    result = replay([sample("hyperpod-node-health-unhealthy")],
                    faults=["sagemaker:BatchReplaceClusterNodes=InternalServerError:100"])
    # Then the SDK retries, gives up, and Medic records the failure and pages a human once
    assert [(record["outcome"], record["paged"]) for record in result.records] == [("failed", True)]
    assert "InternalServerError" in result.records[0]["reason"]
    assert result.attempts[REPLACE] > 1 and result.injected[REPLACE] == result.attempts[REPLACE]
    assert result.node_actions == []  # no attempt reached the service
    assert len(result.pages) == 1


def test_an_event_no_rule_matches_produces_nothing(replay):
    # Given an EventBridge event none of the stack's rules match
    unmatched = {**sample("hyperpod-node-health-unhealthy"), "source": "aws.ec2",
                 "detail-type": "EC2 Instance State-change Notification"}
    result = replay([unmatched, sample("hyperpod-cluster-state-change")])
    # Then no handler runs: no records, no pages, no calls
    assert (result.lines, dict(result.calls)) == ([], {})


def test_bad_lines_are_reported_by_number_and_the_replay_goes_on(replay):
    # Given a file with a broken line, a non-event and an unknown directive before a valid event
    result = replay(["{not json", "[1, 2]", {"sim": {"teleport": {}}}, {"detail": {}},
                     "# a comment", "", sample("hyperpod-node-health-unhealthy")])
    # Then each bad line is named on stderr and the valid event is still handled
    assert [error.split(":")[0] for error in result.errors] == ["line 1", "line 2", "line 3", "line 4"]
    assert "unknown directive 'teleport'" in result.errors[2]
    assert outcomes(result) == [("replace_node", "executed")]


def test_directives_shape_the_world_the_handler_sees(replay):
    # Given a declared cluster shape and a node declared in a new group, already in repair
    result = replay([
        {"sim": {"cluster": {"name": "pretrain-slurm", "groups": {"controller": 1, "gpu-workers": 8}}}},
        {"sim": {"node": {"cluster": "pretrain-slurm", "id": "i-0aaaaaaaaaaaaaaa1", "group": "gpu-workers",
                          "status": "Pending"}}},
        event("i-0aaaaaaaaaaaaaaa1"),
        event("i-0bbbbbbbbbbbbbbb2"),
    ])
    # Then the node in repair is deferred, and an undeclared node joins the first unprotected group
    assert outcomes(result) == [("replace_node", "deferred"), ("replace_node", "executed")]
    assert [record["instance_group"] for record in result.records] == ["gpu-workers", "gpu-workers"]
