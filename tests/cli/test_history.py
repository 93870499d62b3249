"""``medic history``: the decisions from the stack's log groups (or a sim replay file), filtered."""

from __future__ import annotations

import json

from tests.cli.conftest import CLUSTER, JOB_LOGS, NODE_LOGS, Deployed, ago

NODE_A, NODE_B = "i-0aaaaaaaaaaaaaaa1", "i-0bbbbbbbbbbbbbbb2"


def test_given_records_in_the_stacks_log_groups_when_history_then_one_table_row_per_decision_oldest_first(
        deployed: Deployed):
    # Given decisions in both functions' log groups, next to other log lines of the same functions
    deployed.log(NODE_LOGS, ago(hours=2), node_id=NODE_A, outcome="executed")
    deployed.write(NODE_LOGS, ago(hours=2), '{"level":"INFO","message":"claim race lost; re-deciding"}')
    deployed.write(NODE_LOGS, ago(hours=2), json.dumps({  # the EMF metric that goes with each record
        "_aws": {"CloudWatchMetrics": [{"Namespace": "Medic", "Dimensions": [["action", "outcome"]]}]},
        "action": "replace_node", "outcome": "executed", "trigger": "node_health", "incident": "x", "Remediations": 1}))
    deployed.write(NODE_LOGS, ago(hours=2), "START RequestId: 1 Version: $LATEST")
    deployed.log(JOB_LOGS, ago(hours=3), incident="job:ft-llama", trigger="job_state", cluster=None,
                 instance_group=None, node_id=None, job="ft-llama", fault="job_retryable", action="restart_job",
                 reason="Retryable failure (internal_error); restart 1 of 3 from the checkpoint.")
    deployed.log(NODE_LOGS, ago(hours=1), node_id=NODE_B, outcome="suppressed", paged=True,
                 reason="Cluster budget spent: 4 node actions in the last hour (max 4).")

    # When the operator asks for the history (log groups found from the stack outputs)
    result = deployed.cli("history")

    # Then each decision is one row, oldest first, and nothing else made it into the table
    assert result.code == 0, result.err
    rows = [line for line in result.out.splitlines() if line.startswith("20")]
    assert [("ft-llama" in row, NODE_A in row, NODE_B in row) for row in rows] == [
        (True, False, False), (False, True, False), (False, False, True)]
    assert "restart_job" in rows[0] and "suppressed" in rows[2] and "Cluster budget spent" in rows[2]
    assert "3 decision(s): 2 executed, 1 suppressed; 1 paged" in result.out
    assert NODE_LOGS in result.out and JOB_LOGS in result.out


def test_given_records_older_than_a_day_when_history_then_only_the_last_24_hours_unless_since_says_otherwise(
        deployed: Deployed):
    # Given one decision 30 hours ago and one 2 hours ago
    deployed.log(NODE_LOGS, ago(hours=30), node_id=NODE_A)
    deployed.log(NODE_LOGS, ago(hours=2), node_id=NODE_B)

    # When history runs with the default window, and with --since 2d
    default = deployed.cli("history", "--json")
    wider = deployed.cli("history", "--json", "--since", "2d")

    # Then the default shows the last 24 hours only; --since widens it
    assert [r["node_id"] for r in default.json_lines()] == [NODE_B]
    assert [r["node_id"] for r in wider.json_lines()] == [NODE_A, NODE_B]


def test_given_decisions_about_several_nodes_when_history_for_one_node_then_its_records_and_its_ledger_memory(
        deployed: Deployed):
    # Given decisions about two nodes, and the ledger's state of one of them
    deployed.log(NODE_LOGS, ago(hours=5), node_id=NODE_A, fault="gpu_reboot", action="reboot_node",
                 reason="Fault gpu_reboot calls for reboot.")
    deployed.log(NODE_LOGS, ago(hours=4), node_id=NODE_B)
    deployed.log(NODE_LOGS, ago(hours=1), node_id=NODE_A, attempt=2,
                 reason="Rebooted at 08:00 and failed again: escalating to replace.")
    deployed.node_state(NODE_A, action="replace_node", at=ago(hours=1), attempt=2)

    # When the operator asks why that node was replaced
    result = deployed.cli("history", "--node", NODE_A)

    # Then only its two decisions show, and what the ledger remembers about it (what the next decision sees)
    assert result.code == 0, result.err
    assert NODE_B not in result.out
    assert "reboot_node" in result.out and "escalating to replace" in result.out
    assert f"Ledger, node {CLUSTER}/{NODE_A}: last replace_node for gpu_fatal" in result.out
    assert "attempt 2" in result.out


def test_given_a_job_lineage_when_history_for_the_root_job_then_its_restarts_show_too(deployed: Deployed):
    # Given a job, its restart (incident job:<root>) and an unrelated job
    lineage = {"trigger": "job_state", "cluster": None, "instance_group": None, "node_id": None,
               "fault": "job_retryable", "action": "restart_job"}
    deployed.log(JOB_LOGS, ago(hours=3), incident="job:ft-a", job="ft-a", **lineage)
    deployed.log(JOB_LOGS, ago(hours=2), incident="job:ft-a", job="ft-a-r1", attempt=2, **lineage)
    deployed.log(JOB_LOGS, ago(hours=1), incident="job:ft-b", job="ft-b", **lineage)

    # When history is filtered by the root job
    result = deployed.cli("history", "--job", "ft-a", "--json")

    # Then the job and its restart show, the other job does not
    assert [r["job"] for r in result.json_lines()] == ["ft-a", "ft-a-r1"]


def test_given_mixed_outcomes_when_history_for_failed_and_suppressed_then_only_what_needed_a_human(
        deployed: Deployed):
    for hours, outcome in ((4, "executed"), (3, "failed"), (2, "duplicate"), (1, "suppressed")):
        deployed.log(NODE_LOGS, ago(hours=hours), outcome=outcome, node_id=f"i-0{hours:016x}")

    result = deployed.cli("history", "--outcome", "failed,suppressed", "--json")

    assert [r["outcome"] for r in result.json_lines()] == ["failed", "suppressed"]


def test_given_a_word_that_is_no_outcome_when_history_filters_on_it_then_it_is_refused_naming_the_outcomes(
        deployed: Deployed):
    # Given a failed decision in the logs
    deployed.log(NODE_LOGS, ago(hours=1), outcome="failed", node_id=NODE_A)

    # When the operator mistypes an outcome ("fail" for "failed") beside a real one
    result = deployed.cli("history", "--outcome", "failed,fail", "--json")

    # Then nothing is listed as if nothing had happened: the command fails, naming the word and every outcome
    assert result.code == 1
    assert result.out == ""
    assert "--outcome 'fail': not an outcome" in result.err
    assert "executed, dry_run, duplicate, suppressed, deferred, failed, rejected, ignored" in result.err


def test_given_history_as_json_when_read_back_from_file_then_the_same_records(deployed: Deployed):
    # Given two decisions, exported with --json
    deployed.log(NODE_LOGS, ago(hours=2), node_id=NODE_A)
    deployed.log(NODE_LOGS, ago(hours=1), node_id=NODE_B, outcome="deferred")
    exported = deployed.cli("history", "--json")
    path = deployed.tmp_path / "history.jsonl"
    path.write_text(exported.out)

    # When the export is read back as a file
    again = deployed.cli("history", "--from-file", str(path), "--json")

    # Then the records, with every field of the record schema and their times, are unchanged
    assert again.json_lines() == [{k: v for k, v in r.items() if k != "log_group"} for r in exported.json_lines()]
    assert {"incident", "trigger", "event_id", "fault", "action", "outcome", "reason", "paged", "mode", "attempt",
            "timestamp"} <= set(again.json_lines()[0])


def test_given_a_log_group_that_does_not_exist_when_history_names_it_then_a_warning_and_the_others_still_read(
        deployed: Deployed):
    deployed.log(NODE_LOGS, ago(hours=1), node_id=NODE_A)

    result = deployed.cli("history", "--log-group", "/aws/lambda/gone", "--log-group", NODE_LOGS, "--json")

    assert result.code == 0
    assert [r["node_id"] for r in result.json_lines()] == [NODE_A]
    assert "log group /aws/lambda/gone does not exist" in result.err


def test_given_no_stack_when_history_without_log_groups_then_an_error_says_how_to_name_them(deployed: Deployed):
    result = deployed.cli("history", "--stack", "NotDeployed")

    assert result.code == 1
    assert "cannot find Medic's log groups" in result.err and "--log-group" in result.err


def test_given_a_sim_replay_output_when_history_from_file_then_records_without_the_pages(deployed: Deployed):
    # Given a replay's output: a record, the page it sent, a training job line, and a stray line
    record = {"kind": "record", "incident": f"node:{CLUSTER}:{NODE_A}", "trigger": "node_health", "event_id": "e1",
              "cluster": CLUSTER, "instance_group": "controller", "node_id": NODE_A, "job": None,
              "fault": "gpu_fatal", "action": "replace_node", "outcome": "suppressed",
              "reason": "Instance group controller is protected.", "paged": True, "mode": "act", "attempt": 1,
              "timestamp": "2026-11-20T08:14:05.000+00:00"}
    page = {"kind": "page", "subject": "[Medic] ...", "record": {**record, "kind": None}}
    job = {"kind": "training_job", "name": "ft-x-r1", "status": "InProgress"}
    path = deployed.tmp_path / "out.jsonl"
    path.write_text("\n".join([json.dumps(record), json.dumps(page), json.dumps(job), "not json"]) + "\n")

    # When history reads it (no AWS involved, no time window by default)
    result = deployed.cli("history", "--from-file", str(path))

    # Then the one decision shows
    assert result.code == 0, result.err
    rows = [line for line in result.out.splitlines() if line.startswith("2026-11-20 08:14:05")]
    assert len(rows) == 1 and "controller" in rows[0] and "suppressed" in rows[0] and "yes" in rows[0]
    assert "1 decision(s): 1 suppressed; 1 paged" in result.out


def test_given_a_replay_piped_in_when_history_reads_stdin_then_its_records_show(deployed: Deployed):
    line = json.dumps({"kind": "record", "incident": "job:ft-a", "trigger": "job_state", "event_id": "e1",
                       "job": "ft-a", "fault": "job_not_retryable", "action": "none", "outcome": "deferred",
                       "reason": "Not retryable (out_of_memory).", "paged": True, "mode": "act", "attempt": 0,
                       "timestamp": "2026-11-21T02:40:12.000+00:00"})

    result = deployed.cli("history", "--from-file", "-", "--json", stdin=line + "\n")

    assert [(r["job"], r["outcome"], r["timestamp"]) for r in result.json_lines()] == [
        ("ft-a", "deferred", "2026-11-21T02:40:12+00:00")]


def test_given_records_a_human_must_act_on_when_history_needs_human_then_exactly_those(deployed: Deployed):
    # Given a replacement, a pause's held-back decision, a HyperPod repair Medic defers to and a protected node
    deployed.log(NODE_LOGS, ago(hours=4), node_id="i-0000000000000004", why="acted", needs_human=False)
    deployed.log(NODE_LOGS, ago(hours=3), node_id="i-0000000000000003", outcome="suppressed", why="paused",
                 needs_human=True)
    deployed.log(NODE_LOGS, ago(hours=2), node_id="i-0000000000000002", outcome="deferred",
                 why="hyperpod_repairing", needs_human=False, action="none")
    deployed.log(NODE_LOGS, ago(hours=1), node_id="i-0000000000000001", outcome="suppressed", why="protected",
                 needs_human=True)

    # When the operator asks for what needs a human
    result = deployed.cli("history", "--needs-human", "--json")

    # Then exactly the records that say so, with their sub-reasons
    assert [(r["node_id"], r["why"]) for r in result.json_lines()] == [
        ("i-0000000000000003", "paused"), ("i-0000000000000001", "protected")]
    # And the table shows the sub-reason and the flag, and counts them
    table = deployed.cli("history")
    row = next(line for line in table.out.splitlines() if "i-0000000000000002" in line)
    assert "hyperpod_repairing" in row and " no " in row
    assert "4 decision(s): 1 deferred, 1 executed, 2 suppressed; 0 paged; 2 need a human" in table.out


def test_given_one_outcome_word_for_several_things_when_history_why_then_only_that_sub_reason(deployed: Deployed):
    deployed.log(NODE_LOGS, ago(hours=3), node_id=NODE_A, outcome="suppressed", why="rate_limit", needs_human=True)
    deployed.log(NODE_LOGS, ago(hours=2), node_id=NODE_B, outcome="suppressed", why="paused", needs_human=True)

    result = deployed.cli("history", "--why", "paused", "--json")

    assert [r["node_id"] for r in result.json_lines()] == [NODE_B]


def test_given_a_why_that_is_no_sub_reason_when_history_then_an_error_naming_it_and_the_valid_ones(
        deployed: Deployed):
    result = deployed.cli("history", "--why", "paused,sleepy")

    assert result.code == 1
    assert "--why sleepy: not a sub-reason" in result.err and "hyperpod_repairing" in result.err


def test_given_a_slurm_node_repair_when_history_then_drain_repair_and_resume_are_three_actions_with_their_jobs(
        deployed: Deployed):
    # Given one replacement of a Slurm node: the drain (the jobs on it), the HyperPod call, the resume
    jobs = [{"id": "4211", "name": "llama3-70b"}]
    deployed.log(NODE_LOGS, ago(minutes=50), trigger="node_repair", action="drain_node", jobs=jobs,
                 event_id="stream-1", reason="The agent on pretrain-slurm drained ip-10-1-2-3 in Slurm.")
    deployed.log(NODE_LOGS, ago(minutes=49), action="replace_node", jobs=jobs)
    deployed.log(NODE_LOGS, ago(minutes=10), trigger="node_repair", action="resume_node", event_id="stream-2",
                 reason="The agent on pretrain-slurm resumed ip-10-1-2-3 in Slurm after the repair.")

    # When the operator reads the history
    table = deployed.cli("history")
    exported = deployed.cli("history", "--json")

    # Then each step is its own action, with its trigger and the jobs it hit (table and JSON)
    rows = [line for line in table.out.splitlines() if line.startswith("20")]
    assert [("node_repair" in row, "node_health" in row) for row in rows] == [(True, False), (False, True),
                                                                            (True, False)]
    assert ["drain_node" in rows[0], "replace_node" in rows[1], "resume_node" in rows[2]] == [True, True, True]
    assert "4211 (llama3-70b)" in rows[0] and "4211 (llama3-70b)" in rows[1]
    assert [(r["trigger"], r["action"], r.get("jobs", "absent")) for r in exported.json_lines()] == [
        ("node_repair", "drain_node", jobs), ("node_health", "replace_node", jobs),
        ("node_repair", "resume_node", "absent")]
    assert "trigger" in table.out.splitlines()[1] and "jobs" in table.out.splitlines()[1]
