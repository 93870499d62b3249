"""The agent, as its own process, against a real Slurm (munged + slurmctld + slurmd on localhost) and emulated AWS.

Assertions are on Slurm's own state (`scontrol show job` Restarts, `scontrol show node` Reason), the
ledger, the queue, and the argv the agent handed to scontrol/squeue (recorded by a spying wrapper that
then runs the real binary).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from datetime import datetime

import pytest

from tests.agent.fakes import agent_pk, ledger_item


def test_requeues_a_running_job_by_id(cluster):
    # Given a real batch job, running
    job_id = cluster.slurm.submit("pretrain")
    cluster.slurm.wait_for_job_state(job_id, "RUNNING")
    assert cluster.slurm.job(job_id)["Restarts"] == "0"
    # When Medic queues a requeue for it and the agent polls
    body = cluster.command(job_id=job_id)
    cluster.send(body)
    run = cluster.run_agent()
    # Then Slurm requeued it: its restart count went up
    assert cluster.slurm.job(job_id)["Restarts"] == "1"
    assert cluster.slurm_calls() == [f"scontrol requeue {job_id}"]
    # And the ledger has the real outcome, and the message is gone
    result = cluster.result(body)
    assert result["status"] == "executed"
    assert result["message"] == f"scontrol requeue {job_id}: exit 0"
    assert result["target"] == job_id and result["cluster"] == cluster.name
    assert cluster.queue_depth() == 0
    # And it heartbeated, and said what it did in JSON lines
    beat = ledger_item(cluster.dynamodb, cluster.table, f"agent#{cluster.name}", "heartbeat")
    assert beat is not None and beat["version"]
    executed = [line for line in run.lines if line["message"] == "command executed"]
    assert executed and executed[0]["command_id"] == body["command_id"] and executed[0]["target"] == job_id


def test_a_requeue_by_name_requeues_the_running_job_medic_saw_and_no_namesake(cluster):
    # Given two running jobs named llama3-70b (Medic last saw the second one), a held one, and another job
    named = [cluster.slurm.submit("llama3-70b"), cluster.slurm.submit("llama3-70b")]
    held = cluster.slurm.submit("llama3-70b", hold=True)
    other = cluster.slurm.submit("eval")
    for job_id in [*named, other]:
        cluster.slurm.wait_for_job_state(job_id, "RUNNING")
    assert cluster.slurm.job(held)["JobState"] == "PENDING"
    # When Medic asks to requeue llama3-70b, naming the job it last saw running under it
    body = cluster.command(job_name="llama3-70b", last_seen_id=named[1])
    cluster.send(body)
    cluster.run_agent()
    # Then that job restarted, and neither its running namesake, the held one nor the other job
    assert [cluster.slurm.job(job_id)["Restarts"] for job_id in [*named, held, other]] == ["0", "1", "0", "0"]
    calls = cluster.slurm_calls()
    assert calls == ["squeue --noheader --states=RUNNING --format=%i|%j --name=llama3-70b",
                     f"scontrol requeue {named[1]}"]
    result = cluster.result(body)
    assert result["status"] == "executed" and result["target"] == f"name:llama3-70b@{named[1]}"
    assert [item["S"] for item in result["job_ids"]] == [named[1]]


def test_a_requeue_by_id_checks_with_squeue_that_the_job_is_watched(cluster):
    # Given a running job of another team and a running watched job
    other, watched = cluster.slurm.submit("eval-team-b"), cluster.slurm.submit("llama3-70b")
    for job_id in (other, watched):
        cluster.slurm.wait_for_job_state(job_id, "RUNNING")
    # When Medic asks to requeue each by id, limited to the jobs it watches
    refused = cluster.command(job_id=other, job_names=["llama3-70b"])
    taken = cluster.command(job_id=watched, job_names=["llama3-70b"])
    cluster.send(refused)
    cluster.send(taken)
    cluster.run_agent()
    # Then squeue's real answer names each job, and only the watched one restarted
    assert [cluster.slurm.job(job_id)["Restarts"] for job_id in (other, watched)] == ["0", "1"]
    assert cluster.result(refused)["status"] == "refused"
    assert "is named 'eval-team-b', not one of the jobs Medic watches" in cluster.result(refused)["message"]
    assert cluster.result(taken)["status"] == "executed"
    assert f"squeue --noheader --states=all --format=%i|%T|%j -j {other}" in cluster.slurm_calls()


def test_slurm_refusing_is_reported_as_failed(cluster):
    # Given a job id Slurm does not know
    body = cluster.command(job_id="999999")
    cluster.send(body)
    cluster.run_agent()
    # Then the ledger says failed, with Slurm's own words
    result = cluster.result(body)
    assert result["status"] == "failed"
    assert result["message"].startswith("scontrol requeue 999999: exit 1")
    assert "Invalid job id" in result["message"]
    assert cluster.queue_depth() == 0


@pytest.mark.parametrize("repair", ["Replace", "Reboot"])
def test_fail_node_which_medic_never_sends_leaves_the_node_alone(cluster, repair):
    # Given the cluster's node, idle, and a Slurm-native repair of it on the queue (no Medic function sends
    # one), even with a matching ledger item
    node = cluster.slurm.node
    assert cluster.slurm.node_state() == "idle"
    body = cluster.command(kind="fail_node", node=node, repair=repair)
    cluster.send(body)
    # When the agent polls
    run = cluster.run_agent()
    # Then nothing ran, the node is untouched, no result is written, and the message is gone
    assert cluster.slurm_calls() == []
    assert cluster.slurm.node_state() == "idle" and cluster.slurm.node_reason() == ""
    assert cluster.result(body) is None and cluster.queue_depth() == 0
    assert "command refused; not run, no result written" in run.messages()


def test_forged_requeue_medic_never_issued_does_not_touch_the_job(cluster):
    # Given a running job, and a well-formed requeue for it that Medic's ledger has no record of
    job_id = cluster.slurm.submit("pretrain")
    cluster.slurm.wait_for_job_state(job_id, "RUNNING")
    body = cluster.command(job_id=job_id)
    cluster.send(body, issued=False)
    # When the agent polls
    run = cluster.run_agent()
    # Then Slurm was never asked, the job did not restart, nothing was written, the message is gone
    assert cluster.slurm_calls() == []
    assert cluster.slurm.job(job_id)["Restarts"] == "0"
    assert cluster.result(body) is None and cluster.queue_depth() == 0
    refused = [line for line in run.lines if line["message"].startswith("command not issued by Medic")]
    assert refused and refused[0]["command_id"] == body["command_id"] and refused[0]["status"] == "not_issued"


def test_hostile_values_are_refused_and_nothing_runs(cluster, tmp_path):
    # Given a running job, and commands whose values would do harm through a shell
    job_id = cluster.slurm.submit("pretrain")
    cluster.slurm.wait_for_job_state(job_id, "RUNNING")
    canary = tmp_path / "canary"
    hostile = [
        cluster.command(job_id=f"{job_id}; rm -rf /"),
        cluster.command(job_id="$(reboot)"),
        cluster.command(job_id=f"$(touch {canary})"),
        cluster.command(job_id=f"{job_id}\n"),
        cluster.command(job_name=f"pretrain;touch {canary}"),
        cluster.command(job_name="pretrain`reboot`"),
        cluster.command(kind="fail_node", node=f"{cluster.slurm.node}; touch {canary}", repair="Replace"),
        cluster.command(kind="fail_node", node=cluster.slurm.node, repair="Replace"),
        cluster.command(kind="scancel", job_id=job_id),
    ]
    for body in hostile:
        cluster.send(body)
    # When the agent polls (twice: one receive brings at most 10)
    cluster.run_agent()
    cluster.run_agent()
    # Then every one is refused: no result in the ledger (a refusal could only spend a page)
    assert [cluster.result(body) for body in hostile] == [None] * len(hostile)
    # And nothing ran: no scontrol or squeue was started at all, no canary, Slurm untouched
    assert cluster.slurm_calls() == []
    assert not canary.exists()
    assert cluster.slurm.job(job_id)["Restarts"] == "0"
    assert cluster.slurm.job(job_id)["JobState"] == "RUNNING"
    assert cluster.slurm.node_state() in ("mixed", "allocated")
    assert cluster.slurm.node_reason() == ""
    assert cluster.queue_depth() == 0


def test_a_command_delivered_twice_runs_once(cluster):
    # Given a running job, and the same command delivered twice (two SQS messages, one command id)
    job_id = cluster.slurm.submit("pretrain")
    cluster.slurm.wait_for_job_state(job_id, "RUNNING")
    body = cluster.command(job_id=job_id)
    cluster.send(body)
    cluster.send(body)
    # When the agent polls
    run = cluster.run_agent()
    # Then scontrol ran once, the job restarted once, and both messages are gone
    assert cluster.slurm_calls() == [f"scontrol requeue {job_id}"]
    assert cluster.slurm.job(job_id)["Restarts"] == "1"
    assert cluster.result(body)["status"] == "executed"
    assert "command already handled; not run again" in run.messages()
    assert cluster.queue_depth() == 0


def test_a_restarted_agent_does_not_rerun_a_command(cluster):
    # Given an agent process that requeued a job
    job_id = cluster.slurm.submit("pretrain")
    cluster.slurm.wait_for_job_state(job_id, "RUNNING")
    body = cluster.command(job_id=job_id)
    cluster.send(body)
    cluster.run_agent()
    assert cluster.slurm.job(job_id)["Restarts"] == "1"
    # When the command comes back to a new agent process with the same state file
    cluster.send(body)
    cluster.run_agent()
    # And again after the ledger's claim is gone too (expired, restored table): the state file alone
    cluster.dynamodb.delete_item(TableName=cluster.table, Key={"pk": {"S": agent_pk(cluster.name, body['command_id'])},
                                                               "sk": {"S": "claim"}})
    cluster.send(body)
    cluster.run_agent()
    # Then it never ran again
    assert cluster.slurm_calls() == [f"scontrol requeue {job_id}"]
    assert cluster.slurm.job(job_id)["Restarts"] == "1"
    assert cluster.result(body)["status"] == "executed"
    assert cluster.queue_depth() == 0
    assert json.loads(cluster.state_file.read_text())["commands"][body["command_id"]]["status"] == "done"


def test_sigterm_stops_the_agent_cleanly_mid_poll(cluster):
    # Given the agent running as a service would: long-polling an empty queue
    process = subprocess.Popen(cluster.agent_argv("--wait-seconds", "20"), env=cluster.env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # its heartbeat shows it reached the loop
            if ledger_item(cluster.dynamodb, cluster.table, f"agent#{cluster.name}", "heartbeat"):
                break
            time.sleep(0.1)
        time.sleep(0.5)
        # When systemd stops it
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
    # Then it exits 0 well before the long-poll would have ended, saying so
    assert process.returncode == 0, err
    assert time.monotonic() - started < 5
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert lines[-1]["message"] == "agent stopped" and lines[-1]["reason"] == "signal"


def test_the_agent_on_the_controller_host_is_primary_and_acts(cluster):
    # Given a running job, a requeue for it, and the real `scontrol ping` naming this host's slurmctld
    job_id = cluster.slurm.submit("pretrain")
    cluster.slurm.wait_for_job_state(job_id, "RUNNING")
    ping = cluster.slurm.run("scontrol", "ping").stdout
    assert ping.startswith("Slurmctld(primary) at ") and ping.rstrip().endswith(" is UP")
    body = cluster.command(job_id=job_id)
    cluster.send(body)
    # When the agent polls with its default host (this machine's hostname, the SlurmctldHost)
    run = cluster.run_agent()
    # Then it asked who is in charge, found itself primary, and requeued the job
    # (pinged before the long poll, and again before the message it brought)
    assert cluster.slurm_calls(pings=True) == ["scontrol ping", "scontrol ping", f"scontrol requeue {job_id}"]
    assert cluster.slurm.job(job_id)["Restarts"] == "1"
    roles = [line for line in run.lines if line["message"] == "role: primary"]
    assert roles and roles[0]["role"] == "primary" and "is in charge" in roles[0]["reason"]
    beat = ledger_item(cluster.dynamodb, cluster.table, f"agent#{cluster.name}", "heartbeat")
    assert beat["role"] == "primary"


def test_an_agent_on_another_head_node_stands_by_and_does_nothing(cluster):
    # Given a running job and a requeue Medic issued for it
    job_id = cluster.slurm.submit("pretrain")
    cluster.slurm.wait_for_job_state(job_id, "RUNNING")
    body = cluster.command(job_id=job_id)
    cluster.send(body)
    # When an agent that runs on another head node (not the host of the slurmctld in charge) polls
    run = cluster.run_agent("--host", "ip-10-1-0-11")
    # Then it only asked Slurm who is in charge: the job did not restart, no claim, no result, message still queued
    assert cluster.slurm_calls(pings=True) == ["scontrol ping"]
    assert cluster.slurm.job(job_id)["Restarts"] == "0"
    assert cluster.result(body) is None
    assert ledger_item(cluster.dynamodb, cluster.table, agent_pk(cluster.name, body["command_id"]), "claim") is None
    assert cluster.queue_depth() == 1
    # And it heartbeated as standby under its own key, never as the primary
    assert ledger_item(cluster.dynamodb, cluster.table, f"agent#{cluster.name}", "heartbeat") is None
    beat = ledger_item(cluster.dynamodb, cluster.table, f"agent#{cluster.name}", "standby#ip-10-1-0-11")
    assert beat["role"] == "standby" and beat["host"] == "ip-10-1-0-11"
    assert beat["in_charge"] == cluster.slurm.run("scontrol", "ping").stdout.split(" at ")[1].split(" is ")[0]
    standby = [line for line in run.lines if line["message"] == "role: standby"]
    assert standby and "standing by" in standby[0]["reason"]
    # And the agent on the controller host then runs it
    cluster.run_agent()
    assert cluster.slurm.job(job_id)["Restarts"] == "1"


# --- drain_node / resume_node: Slurm's side of a node action


def test_drain_node_drains_and_lists_the_jobs_still_running_there(cluster):
    from medic_agent.commands import DRAIN_REASON

    # Given two jobs running on the node
    node = cluster.slurm.node
    jobs = [cluster.slurm.submit("pretrain"), cluster.slurm.submit("eval")]
    for job_id in jobs:
        cluster.slurm.wait_for_job_state(job_id, "RUNNING")
    # When Medic issues a drain of the node and the agent polls
    body = cluster.command(kind="drain_node", node=node)
    cluster.send(body)
    cluster.run_agent()
    # Then Slurm drained it with Medic's fixed reason (no new work lands on it), the jobs keep running
    assert "drain" in cluster.slurm.node_state()
    assert cluster.slurm.node_reason() == DRAIN_REASON
    assert [cluster.slurm.job(job_id)["JobState"] for job_id in jobs] == ["RUNNING", "RUNNING"]
    assert cluster.slurm_calls() == [f"scontrol update NodeName={node} State=DRAIN Reason={DRAIN_REASON}",
                                     f"squeue --noheader --format=%i|%j -w {node}"]
    # And the result lists the jobs on the node, id and name, for Medic's record
    result = cluster.result(body)
    assert result["status"] == "executed" and result["target"] == f"node:{node}"
    listed = sorted((job["M"]["id"]["S"], job["M"]["name"]["S"]) for job in result["jobs"])
    assert listed == sorted(zip(jobs, ["pretrain", "eval"], strict=True))
    assert cluster.queue_depth() == 0


def test_drain_node_with_no_job_reports_an_empty_list(cluster):
    node = cluster.slurm.node
    body = cluster.command(kind="drain_node", node=node)
    cluster.send(body)
    cluster.run_agent()
    assert "drain" in cluster.slurm.node_state()
    result = cluster.result(body)
    assert result["status"] == "executed" and result["jobs"] == []


def test_resume_node_returns_a_drained_node_to_service(cluster):
    # Given the node drained by Medic
    node = cluster.slurm.node
    drain = cluster.command(kind="drain_node", node=node)
    cluster.send(drain)
    cluster.run_agent()
    assert "drain" in cluster.slurm.node_state()
    # When Medic issues a resume
    resume = cluster.command(kind="resume_node", node=node)
    cluster.send(resume)
    cluster.run_agent()
    # Then the agent read the node first (scontrol show node: State=IDLE+DRAIN, Medic's reason), then resumed it:
    # it is back in service (Slurm may flag it not_responding until its next ping of slurmd)
    state = cluster.slurm.node_state()
    assert "drain" not in state and state.split("+")[0] == "idle", state
    assert cluster.slurm_calls()[-2:] == [f"scontrol show node {node}", f"scontrol update NodeName={node} State=RESUME"]
    result = cluster.result(resume)
    assert (result["status"], result["node_state"], result["resumed"]) == ("executed", "IDLE+DRAIN", "true")
    assert result["node_reason"] == "Medic: drained before a node repair"


def test_drain_of_a_node_slurm_does_not_know_fails_with_slurms_words(cluster):
    body = cluster.command(kind="drain_node", node="ip-10-9-9-9")
    cluster.send(body)
    cluster.run_agent()
    result = cluster.result(body)
    assert result["status"] == "failed" and "Invalid node name" in result["message"]
    assert "jobs" not in result
    assert cluster.slurm_calls() == ["scontrol update NodeName=ip-10-9-9-9 State=DRAIN "
                                     "Reason=Medic: drained before a node repair"]


def test_node_commands_medic_never_issued_or_with_hostile_nodes_touch_nothing(cluster, tmp_path):
    node = cluster.slurm.node
    canary = tmp_path / "canary"
    bodies = [cluster.command(kind="drain_node", node=f"{node}; touch {canary}"),
              cluster.command(kind="drain_node", node="ip-10-1-2-[0-9]"),
              cluster.command(kind="drain_node", node="ALL"),
              cluster.command(kind="resume_node", node=f"{node},ip-10-1-2-4")]
    for body in bodies:
        cluster.send(body)
    forged = cluster.command(kind="drain_node", node=node)
    cluster.send(forged, issued=False)
    cluster.run_agent()
    assert cluster.slurm_calls() == [] and not canary.exists()
    assert cluster.slurm.node_state() == "idle" and cluster.slurm.node_reason() == ""
    assert [cluster.result(body) for body in [*bodies, forged]] == [None] * 5
    assert cluster.queue_depth() == 0


# --- job_states: where the jobs a node repair hit are after it (issue 16 item 2; issue 27 item 6)


def reported(result: dict) -> dict[str, dict[str, str]]:
    """The result's job_states, by job id, as Medic reads them (DynamoDB JSON unwrapped)."""
    return {item["M"]["id"]["S"]: {key: value["S"] for key, value in item["M"].items()}
            for item in result["job_states"]}


def sbatch(cluster, name: str, *options: str, wrap: str = "sleep 300") -> str:
    return cluster.slurm.run("sbatch", "--parsable", *options, f"--job-name={name}", "--output=/dev/null",
                             f"--chdir={cluster.slurm.root / 'jobs'}", "--ntasks=1", f"--wrap={wrap}"
                             ).stdout.strip().split(";")[0]


def take_the_node_down(cluster) -> None:
    """What slurmctld sees when HyperPod reboots or replaces the node: it goes DOWN under its jobs, "Not responding"
    appended to the reason it had (src/slurmctld/ping_nodes.c → set_node_down_ptr → set_node_reason). slurmctld does
    it after SlurmdTimeout (300 s), so the test sets that state itself, as slurmctld would."""
    had = cluster.slurm.node_reason()
    reason = f"{had} : Not responding" if had else "Not responding"
    cluster.slurm.run("scontrol", "update", f"NodeName={cluster.slurm.node}", "State=DOWN", f"Reason={reason}")


def test_job_states_reports_what_squeue_says_of_each_job(cluster):
    # Given one job running and one cancelled (still in slurmctld's memory: MinJobAge=5), one with --no-requeue
    running, cancelled = cluster.slurm.submit("pretrain"), cluster.slurm.submit("eval")
    plain = sbatch(cluster, "plain", "--no-requeue")
    for job_id in (running, cancelled, plain):
        cluster.slurm.wait_for_job_state(job_id, "RUNNING")
    cluster.slurm.run("scancel", cancelled)
    cluster.slurm.wait_for_job_state(cancelled, "CANCELLED")
    # When Medic asks for their states
    ids = f"{running},{cancelled},{plain}"
    body = cluster.command(kind="job_states", job_ids=ids)
    cluster.send(body)
    cluster.run_agent()
    # Then the result has each job's state as Slurm names it, its requeue and batch flags and restart count, from
    # squeue -O as slurm-wlm prints it (size 0: no padding)
    assert cluster.slurm_calls() == ["squeue --noheader --states=all "
                                     f"--Format=JobID:0|,State:0|,Requeue:0|,BatchFlag:0|,RestartCnt:0 -j {ids}"]
    result = cluster.result(body)
    assert result["status"] == "executed" and result["target"] == f"jobs:{ids}"
    assert reported(result) == {
        running: {"id": running, "state": "RUNNING", "requeue": "1", "batch": "1", "restarts": "0"},
        cancelled: {"id": cancelled, "state": "CANCELLED", "requeue": "1", "batch": "1", "restarts": "0"},
        plain: {"id": plain, "state": "RUNNING", "requeue": "0", "batch": "1", "restarts": "0"}}


def test_job_states_of_a_job_slurm_forgot_is_an_empty_list(cluster):
    # Given a job id slurmctld does not know (ended more than MinJobAge ago, or never existed)
    body = cluster.command(kind="job_states", job_ids="999999")
    cluster.send(body)
    cluster.run_agent()
    # Then squeue's "Invalid job id specified" is an empty list, not a failure
    result = cluster.result(body)
    assert result["status"] == "executed" and result["job_states"] == []
    assert "Invalid job id specified" in result["message"]


def test_a_requeueable_batch_job_whose_node_goes_down_is_requeued_by_slurmctld_itself_and_held(cluster):
    from medic.flows.agent.commands import job_after_repair

    # Given a batch job with the requeue flag (JobRequeue=1, Slurm's default; --requeue) running on the node,
    # which Medic drains before repairing it
    node = cluster.slurm.node
    job_id = cluster.slurm.submit("llama3-70b")
    cluster.slurm.wait_for_job_state(job_id, "RUNNING")
    drain = cluster.command(kind="drain_node", node=node)
    cluster.send(drain)
    cluster.run_agent()
    assert [(j["M"]["id"]["S"], j["M"]["name"]["S"]) for j in cluster.result(drain)["jobs"]] == [
        (job_id, "llama3-70b")]
    # When the repair takes the node away
    take_the_node_down(cluster)
    cluster.slurm.wait_for_job_state(job_id, "PENDING")
    # Then slurmctld requeued it itself (job_mgr.c kill_running_job_by_node_name): pending, restart count 1, held
    # until its BeginTime: cred_expire (120 s by default) + 1 s after the requeue (batch_requeue_fini sets both)
    # (its Reason reads BeginTime once the scheduler has looked at it)
    shown = cluster.slurm.job(job_id)
    assert (shown["JobState"], shown["Restarts"], shown["Requeue"]) == ("PENDING", "1", "1")
    held = datetime.fromisoformat(shown["EligibleTime"]) - datetime.fromisoformat(shown["SubmitTime"])
    assert held.total_seconds() in (120, 121), shown
    # And Medic's job_states sees it pending again with its restart: Medic leaves it alone
    states = cluster.command(kind="job_states", job_ids=job_id)
    cluster.send(states)
    cluster.run_agent()
    seen = reported(cluster.result(states))[job_id]
    assert seen == {"id": job_id, "state": "PENDING", "requeue": "1", "batch": "1", "restarts": "1"}
    assert job_after_repair(seen["state"], seen["requeue"], seen["batch"]) == "back"
    # And a requeue of it now is refused as pending (what a second requeue from a stall alarm would get)
    requeue = cluster.command(job_id=job_id)
    cluster.send(requeue)
    cluster.run_agent()
    result = cluster.result(requeue)
    assert result["status"] == "failed" and "Job is pending execution" in result["message"], result["message"]
    # And when the node is back, the resume Medic issues returns it to service
    resume = cluster.command(kind="resume_node", node=node)
    cluster.send(resume)
    cluster.run_agent()
    assert cluster.result(resume)["status"] == "executed"
    assert "down" not in cluster.slurm.node_state() and "drain" not in cluster.slurm.node_state()


def test_a_no_requeue_job_ends_node_fail_and_slurm_refuses_any_requeue_of_it(cluster):
    from medic.flows.agent.commands import job_after_repair

    # Given a job submitted with --no-requeue on the node, which goes down under it
    job_id = sbatch(cluster, "pretrain", "--no-requeue")
    cluster.slurm.wait_for_job_state(job_id, "RUNNING")
    take_the_node_down(cluster)
    cluster.slurm.wait_for_job_state(job_id, "NODE_FAIL")
    # When Medic asks its state
    states = cluster.command(kind="job_states", job_ids=job_id)
    cluster.send(states)
    cluster.run_agent()
    seen = reported(cluster.result(states))[job_id]
    # Then it is NODE_FAIL without the requeue flag: one Medic does not requeue (it pages to resubmit it)
    assert seen == {"id": job_id, "state": "NODE_FAIL", "requeue": "0", "batch": "1", "restarts": "0"}
    assert job_after_repair(seen["state"], seen["requeue"], seen["batch"]) == "not_requeueable"
    assert job_after_repair("NODE_FAIL") == "not_requeueable"  # an agent that does not report the flags
    # And a requeue, had anyone tried, Slurm refuses in its own words (_job_requeue_op: ESLURM_DISABLED)
    cluster.slurm.run("scontrol", "update", f"NodeName={cluster.slurm.node}", "State=RESUME", check=False)
    requeue = cluster.command(job_id=job_id)
    cluster.send(requeue)
    cluster.run_agent()
    assert cluster.slurm_calls()[-1] == f"scontrol requeue {job_id}"
    result = cluster.result(requeue)
    assert result["status"] == "failed" and "Requested operation is presently disabled" in result["message"]


def test_a_job_that_is_not_a_batch_job_ends_node_fail_and_is_not_requeueable(cluster):
    from medic.flows.agent.commands import job_after_repair

    # Given a job started with srun (no batch script) on the node, which goes down under it
    srun = subprocess.Popen([cluster.slurm.bin_dir + "/srun", "--job-name=interactive", "--ntasks=1", "sleep", "300"],
                            env=cluster.slurm.env, cwd=cluster.slurm.root, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        job_id = ""
        deadline = time.monotonic() + 30
        while not job_id and time.monotonic() < deadline:
            job_id = cluster.slurm.run("squeue", "--noheader", "--format=%i", "--name=interactive").stdout.strip()
            time.sleep(0.2)
        cluster.slurm.wait_for_job_state(job_id, "RUNNING")
        take_the_node_down(cluster)
        cluster.slurm.wait_for_job_state(job_id, "NODE_FAIL")
        states = cluster.command(kind="job_states", job_ids=job_id)
        cluster.send(states)
        cluster.run_agent()
        seen = reported(cluster.result(states))[job_id]
        # Then its requeue flag is set (JobRequeue=1) but it is no batch job: Slurm would answer "Only batch jobs
        # are accepted or processed", so Medic does not try
        assert (seen["state"], seen["requeue"], seen["batch"]) == ("NODE_FAIL", "1", "0")
        assert job_after_repair(seen["state"], seen["requeue"], seen["batch"]) == "not_requeueable"
        refused = cluster.slurm.run("scontrol", "requeue", job_id, check=False)
        assert refused.returncode == 1 and "Only batch jobs are accepted or processed" in refused.stderr
    finally:
        srun.kill()
        srun.wait(timeout=10)


def test_a_requeueable_job_that_failed_with_its_node_is_requeued_by_medic(cluster):
    from medic.flows.agent.commands import job_after_repair

    # Given a batch job (--requeue) that ended FAILED (its process died with the node's GPU: Slurm requeues only on a
    # node failure, not on an exit code)
    job_id = sbatch(cluster, "pretrain", "--requeue", wrap="exit 1")
    cluster.slurm.wait_for_job_state(job_id, "FAILED")
    states = cluster.command(kind="job_states", job_ids=job_id)
    cluster.send(states)
    cluster.run_agent()
    seen = reported(cluster.result(states))[job_id]
    assert (seen["state"], seen["requeue"], seen["batch"]) == ("FAILED", "1", "1")
    assert job_after_repair(seen["state"], seen["requeue"], seen["batch"]) == "requeue"
    # When Medic requeues it through the agent
    requeue = cluster.command(job_id=job_id)
    cluster.send(requeue)
    cluster.run_agent()
    # Then slurmctld takes it back: executed, its restart count up
    assert cluster.result(requeue)["status"] == "executed"
    assert cluster.slurm.job(job_id)["Restarts"] == "1"


def test_a_failed_no_requeue_job_is_not_requeueable_either(cluster):
    from medic.flows.agent.commands import job_after_repair

    job_id = sbatch(cluster, "pretrain", "--no-requeue", wrap="exit 3")
    cluster.slurm.wait_for_job_state(job_id, "FAILED")
    states = cluster.command(kind="job_states", job_ids=job_id)
    cluster.send(states)
    cluster.run_agent()
    seen = reported(cluster.result(states))[job_id]
    assert job_after_repair(seen["state"], seen["requeue"], seen["batch"]) == "not_requeueable"
    refused = cluster.slurm.run("scontrol", "requeue", job_id, check=False)
    assert refused.returncode == 1 and "Requested operation is presently disabled" in refused.stderr


# --- a requeue by name that finds nothing to requeue (issue 27 item 3, Slurm's half)


def test_a_requeue_by_name_of_a_job_that_completed_reports_it_completed(cluster):
    # Given a job that ran and completed (slurmctld remembers it for MinJobAge: 5 s here)
    job_id = sbatch(cluster, "finished", wrap="true")
    cluster.slurm.wait_for_job_state(job_id, "COMPLETED")
    # When Medic asks to requeue it by name
    body = cluster.command(job_name="finished")
    cluster.send(body)
    cluster.run_agent()
    # Then nothing is requeued (a COMPLETED job *can* be requeued by id: Slurm would run it again), and the result
    # says what slurmctld still lists of that name
    calls = cluster.slurm_calls()
    assert calls[:2] == ["squeue --noheader --states=RUNNING --format=%i|%j --name=finished",
                         "squeue --noheader --states=all --format=%i|%T --name=finished"]
    assert not any(call.startswith("scontrol requeue") for call in calls)
    result = cluster.result(body)
    assert result["status"] == "failed" and "job_ids" not in result
    assert reported(result) == {job_id: {"id": job_id, "state": "COMPLETED"}}, result["message"]


def test_a_requeue_by_name_slurm_never_saw_asks_sacct_which_says_accounting_is_off(cluster):
    # Given a cluster without slurmdbd (AccountingStorageType=accounting_storage/none) and no job of that name
    body = cluster.command(job_name="never-ran")
    cluster.send(body)
    cluster.run_agent()
    # Then the agent asked slurmctld, then sacct, whose own words say why nothing is known
    assert cluster.slurm_calls()[-1] == ("sacct --noheader --parsable2 --allocations --format=JobIDRaw,State "
                                         "--name=never-ran --starttime=now-2days")
    result = cluster.result(body)
    assert result["status"] == "failed" and "job_states" not in result
    assert "Slurm accounting storage is disabled" in result["message"]


def test_a_node_already_back_in_service_is_not_resumed(cluster):
    # Given a node in service (HyperPod, or a person, returned it after the repair)
    body = cluster.command(kind="resume_node", node=cluster.slurm.node)
    cluster.send(body)
    cluster.run_agent()
    # Then the agent reads it and leaves it: executed, not resumed (Medic records it `ignored`, no page)
    result = cluster.result(body)
    assert (result["status"], result["node_state"], result["node_reason"], result["resumed"]) == (
        "executed", "IDLE", "", "false"), result["message"]
    assert cluster.slurm_calls() == [f"scontrol show node {cluster.slurm.node}"]


def test_a_node_someone_else_drained_is_not_resumed(cluster):
    # Given the node drained for another reason (a person's), not Medic's
    node = cluster.slurm.node
    cluster.slurm.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=disk replacement")
    body = cluster.command(kind="resume_node", node=node)
    cluster.send(body)
    cluster.run_agent()
    # Then it stays drained: whoever drained it decides
    result = cluster.result(body)
    assert (result["status"], result["node_state"], result["node_reason"], result["resumed"]) == (
        "executed", "IDLE+DRAIN", "disk replacement", "false")
    assert "drain" in cluster.slurm.node_state() and cluster.slurm.node_reason().startswith("disk replacement")
    cluster.slurm.run("scontrol", "update", f"NodeName={node}", "State=RESUME")


def test_with_two_head_nodes_in_slurm_conf_only_the_agent_on_the_first_up_acts(two_heads):
    # Given a slurm.conf with two SlurmctldHost lines (this machine, then ip-10-1-0-11), a running job and a requeue
    ping = two_heads.slurm.run("scontrol", "ping").stdout.splitlines()
    assert len(ping) == 2 and ping[0].startswith("Slurmctld(primary) at ") and ping[0].endswith(" is UP")
    assert ping[1] == "Slurmctld(backup) at ip-10-1-0-11 is UP"
    job_id = two_heads.slurm.submit("pretrain")
    two_heads.slurm.wait_for_job_state(job_id, "RUNNING")
    body = two_heads.command(job_id=job_id)
    two_heads.send(body)
    # When the agent on the backup head node polls: it stands by, touching nothing
    standby = two_heads.run_agent("--host", "ip-10-1-0-11")
    assert two_heads.slurm_calls(pings=True) == ["scontrol ping"]
    assert two_heads.slurm.job(job_id)["Restarts"] == "0" and two_heads.result(body) is None
    assert [line["reason"] for line in standby.lines if line["message"] == "role: standby"] == [
        f"standing by: the controller in charge is slurmctld(primary) on {ping[0].split(' at ')[1].split(' ')[0]}"]
    # And when the agent on this machine (the primary, first UP) polls, it requeues the job
    two_heads.run_agent()
    assert two_heads.slurm.job(job_id)["Restarts"] == "1"
    assert two_heads.result(body)["status"] == "executed"


def test_quarantine_drains_with_medics_reason_over_its_repair_drain_and_release_resumes_it(cluster):
    # Given the node still drained by Medic's repair drain (a repair just ended)
    node = cluster.slurm.node
    drain = cluster.command(kind="drain_node", node=node)
    cluster.send(drain)
    cluster.run_agent()
    # When Medic quarantines it (a repair loop, quarantine_repeat_offenders)
    hold = cluster.command(kind="quarantine_node", node=node)
    cluster.send(hold)
    cluster.run_agent()
    # Then slurmctld replaced the reason (update_node): drained with Medic's quarantine reason, fixed text
    assert "drain" in cluster.slurm.node_state()
    assert cluster.slurm.node_reason().startswith("Medic: quarantined after repeated repairs, medic release returns it")
    result = cluster.result(hold)
    assert (result["status"], result["held"], result["node_reason"]) == (
        "executed", "true", "Medic: drained before a node repair")
    # And a late resume_node of the repair leaves the quarantined node drained
    resume = cluster.command(kind="resume_node", node=node)
    cluster.send(resume)
    cluster.run_agent()
    assert cluster.result(resume)["resumed"] == "false" and "drain" in cluster.slurm.node_state()
    # When the operator releases it
    release = cluster.command(kind="release_node", node=node)
    cluster.send(release)
    cluster.run_agent()
    # Then it is back in service
    state = cluster.slurm.node_state()
    assert "drain" not in state and state.split("+")[0] == "idle", state
    assert cluster.slurm_calls()[-1] == f"scontrol update NodeName={node} State=RESUME"
    assert cluster.result(release)["resumed"] == "true"


def test_quarantine_keeps_someone_elses_drain_and_release_does_not_resume_it(cluster):
    # Given the node drained by a person
    node = cluster.slurm.node
    cluster.slurm.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=disk replacement")
    hold = cluster.command(kind="quarantine_node", node=node)
    release = cluster.command(kind="release_node", node=node)
    for body in (hold, release):
        cluster.send(body)
        cluster.run_agent()
    # Then their drain and reason stay: not Medic's to hold or release
    assert cluster.result(hold)["held"] == "false" and cluster.result(release)["resumed"] == "false"
    assert "drain" in cluster.slurm.node_state() and cluster.slurm.node_reason().startswith("disk replacement")
    cluster.slurm.run("scontrol", "update", f"NodeName={node}", "State=RESUME")


def test_a_quarantined_node_that_goes_down_for_a_repair_stays_drained_with_medics_reason_until_released(cluster):
    # Given a node Medic quarantined
    node = cluster.slurm.node
    hold = cluster.command(kind="quarantine_node", node=node)
    cluster.send(hold)
    cluster.run_agent()
    # When a repair takes it down (slurmctld appends "Not responding" to the reason: set_node_reason)
    take_the_node_down(cluster)
    # Then it is still drained, its reason Medic's quarantine's followed by Slurm's own: a late resume_node of a repair
    # leaves it, and the release recognizes it
    assert "drain" in cluster.slurm.node_state()
    assert cluster.slurm.node_reason().startswith(
        "Medic: quarantined after repeated repairs, medic release returns it : Not responding")
    resume = cluster.command(kind="resume_node", node=node)
    cluster.send(resume)
    cluster.run_agent()
    assert cluster.result(resume)["resumed"] == "false"
    release = cluster.command(kind="release_node", node=node)
    cluster.send(release)
    cluster.run_agent()
    assert cluster.result(release)["resumed"] == "true"
    assert "drain" not in cluster.slurm.node_state()
