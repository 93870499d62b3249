"""Specification: a node action and the Slurm job on the node, end to end (issue 16) — the health event, the drain
queued for the real agent before the HyperPod call, the jobs the agent lists (`squeue -w`), the replacement
coming back Running, the resume and the job states the reconciler asks for, and a requeue of each job that did not
come back, under the stall restart's budget and proof of recovery."""

from __future__ import annotations

import json

from medic_cli.render import parse_time

from sim.scenario import DEMO_CONFIG, SCENARIOS
from sim.scenarios.generate import NODE
from tests.e2e.conftest import node_action_calls

CLUSTER = "pretrain-slurm"
REPLACE = "sagemaker:BatchReplaceClusterNodes"
INCIDENT = f"node:{CLUSTER}:{NODE}"
JOB = [{"id": "4211", "name": "llama3-70b"}]


def summary(result) -> list[tuple]:
    return [(r["trigger"], r["action"], r["outcome"]) for r in result.records]


def argvs(result) -> list[list[str]]:
    return [run["argv"] for run in result.slurm_commands]


JOB_STATES = "--Format=JobID:0|,State:0|,Requeue:0|,BatchFlag:0|,RestartCnt:0"


def test_zh_a_batch_job_slurm_requeues_by_itself_is_left_alone(replay):
    # Given job 4211 (llama3-70b, a watched job) running on the node, a batch job with Slurm's default requeue flag,
    # launched without auto-resume, its agent up
    # When a GPU fault replaces the node and the node goes down under the job
    result = replay(SCENARIOS / "zh-node-repair-requeues-the-job.jsonl")
    # Then the node is replaced once, after the drain (issue 27: the call waits for the agent's drain result), and
    # the drain's record and the call's name the job
    assert node_action_calls(result) == {REPLACE: 1}
    node, drained, called = result.records[:3]
    assert (node["trigger"], node["action"], node["outcome"], node["jobs"]) == (
        "node_health", "replace_node", "deferred", None)
    assert "Drain of ip-" in node["reason"] and "queued for the agent" in node["reason"]
    assert (drained["incident"], drained["trigger"], drained["node_id"], drained["jobs"]) == (
        INCIDENT, "node_repair", NODE, JOB)
    assert (called["trigger"], called["action"], called["outcome"], called["jobs"]) == (
        "node_health", "replace_node", "executed", JOB)
    name = argvs(result)[0][2].removeprefix("NodeName=")
    assert argvs(result)[:2] == [
        ["scontrol", "update", f"NodeName={name}", "State=DRAIN", "Reason=Medic: drained before a node repair"],
        ["squeue", "--noheader", "--format=%i|%j", "-w", name]]
    # And slurmctld requeued the job itself when the node went down (job_mgr.c kill_running_job_by_node_name): every
    # sweep's job_states sees it running again with one restart, so Medic never runs `scontrol requeue`
    states = ["squeue", "--noheader", "--states=all", JOB_STATES, "-j", "4211"]
    resume = [["scontrol", "show", "node", name], ["scontrol", "update", f"NodeName={name}", "State=RESUME"]]
    assert all(argv in (states, *resume) for argv in argvs(result)[2:]), argvs(result)
    at = argvs(result).index(resume[1])
    assert argvs(result)[at - 1:at + 1] == resume  # read first: still drained with Medic's reason, then resumed
    outputs = {run["output"] for run in result.slurm_commands if run["argv"] == states}
    assert outputs == {"4211|RUNNING|1|1|1"}
    assert [r for r in result.records if r["action"] == "requeue_job"] == []
    # And once the replacement is Running, the job's record says Slurm requeued it: ignored, no restart, no page
    [job] = [r for r in result.records if r["job"] == "4211"]
    assert (job["trigger"], job["action"], job["outcome"], job["incident"]) == (
        "node_repair", "none", "ignored", f"job:slurm:{CLUSTER}:llama3-70b")
    assert "Slurm requeued it by itself when its node went down" in job["reason"]
    assert "restarts 1" in job["reason"]
    assert result.pages == []
    assert "jobs" not in job


def test_zo_a_job_submitted_no_requeue_ends_node_fail_and_pages_once_without_a_requeue(replay):
    # Given the same job submitted with sbatch --no-requeue
    result = replay(SCENARIOS / "zo-node-repair-job-not-requeueable.jsonl")
    # Then the node is replaced and the job listed; it ends NODE_FAIL when the node goes down, and the sweep that asks
    # sees it without its requeue flag
    assert node_action_calls(result) == {REPLACE: 1}
    assert result.records[1]["jobs"] == JOB
    assert [run["output"] for run in result.slurm_commands if JOB_STATES in run["argv"]] == ["4211|NODE_FAIL|0|1|0"]
    # And Medic never runs `scontrol requeue` (it cannot succeed): one record, deferred to a human, one page naming
    # the job and saying to resubmit it; no restart spent
    assert not any(argv[:2] == ["scontrol", "requeue"] for argv in argvs(result))
    [job] = [r for r in result.records if r["job"] == "4211"]
    assert (job["trigger"], job["fault"], job["action"], job["outcome"], job["paged"]) == (
        "node_repair", "job_not_requeueable", "none", "deferred", True)
    assert "submitted with --no-requeue" in job["reason"]
    [page] = result.pages
    assert page["subject"] == f"[Medic] {CLUSTER} job 4211: Slurm cannot requeue it, resubmit it"
    assert "Resubmit it with sbatch" in page["message"]
    assert 'Slurm job:      4211 (named "llama3-70b"), NODE_FAIL' in page["message"]
    # And after the repair the node is resumed, nothing more is asked or recorded about the job
    assert argvs(result)[-1][-1] == "State=RESUME"


def test_zi_a_job_hyperpod_auto_resumed_is_left_alone(replay):
    # Given the same job launched with `srun --auto-resume=1`
    result = replay(SCENARIOS / "zi-node-repair-auto-resume.jsonl")
    # Then the node is replaced and the job listed, but it runs again by itself: no requeue, `ignored` with why
    # (while the node is in repair the job waits PENDING: the sweeps' questions say nothing of it)
    assert node_action_calls(result) == {REPLACE: 1}
    assert result.records[1]["jobs"] == JOB
    assert ["scontrol", "requeue", "4211"] not in argvs(result)
    [job] = [r for r in result.records if r["job"] == "4211"]
    assert (job["trigger"], job["action"], job["outcome"]) == ("node_repair", "none", "ignored")
    assert "RUNNING again" in job["reason"] and "auto-resume" in job["reason"]
    assert result.pages == []


def test_zj_with_the_agent_down_the_node_is_still_replaced_and_one_page_says_the_jobs_need_a_look(replay):
    # Given the agent's last heartbeat twelve minutes before the fault
    result = replay(SCENARIOS / "zj-node-repair-agent-down.jsonl")
    # Then the repair goes ahead, nothing reaches Slurm, and the record says the jobs are unknown
    assert node_action_calls(result) == {REPLACE: 1}
    assert result.slurm_commands == [] and "sqs:SendMessage" not in result.calls
    [node] = result.records
    assert (node["action"], node["outcome"], node["jobs"], node["paged"]) == ("replace_node", "executed", None, True)
    assert "not reporting" in node["reason"] and "jobs on it are unknown" in node["reason"]
    [page] = result.pages
    assert "need a look" in page["subject"] and "sacct --nodelist=ip-" in page["message"]


def test_a_node_action_on_a_cluster_whose_agent_never_reported_pages_no_one_about_jobs(replay):
    # Given no agent ever installed (scenario a): the repair is as before, the jobs unknown, no page
    result = replay(SCENARIOS / "a-single-fault.jsonl")
    [node] = result.records
    assert (node["outcome"], node["jobs"], node["paged"]) == ("executed", None, False)
    assert "No Medic agent has reported" in node["reason"]
    assert result.pages == []


def test_a_reboot_drains_the_node_and_resumes_it_under_the_same_instance_id(replay):
    from sim.scenarios.generate import event

    # Given job 4300 (eval-7b, not a watched job: no proof of recovery) on a node HMA says needs a reboot, whose
    # process died with the GPU 40 s after the event: the batch job ended FAILED (an exit code, which Slurm does not
    # requeue by itself), and slurmctld remembers it until MinJobAge (300 s) after that
    result = replay([{"sim": {"slurm_job": {"cluster": CLUSTER, "id": 4300, "name": "eval-7b", "nodes": [NODE]}}},
                     {"sim": {"agent": {"cluster": CLUSTER, "heartbeat": True}}},
                     event(fault="NvidiaErrorReboot"), {"sim": {"advance": "+40s"}},
                     {"sim": {"slurm_job": {"cluster": CLUSTER, "id": 4300, "name": "eval-7b", "nodes": [NODE],
                                            "state": "FAILED"}}},
                     {"sim": {"advance": "+30m"}}])
    # Then the node is drained and rebooted, the job (FAILED, its requeue flag set) requeued by the next sweep, and
    # the node resumed once it is Running again (the same instance: a reboot keeps its id and name)
    assert node_action_calls(result) == {"sagemaker:BatchRebootClusterNodes": 1}
    assert result.records[1]["jobs"] == [{"id": "4300", "name": "eval-7b"}]
    name = argvs(result)[0][2].removeprefix("NodeName=")
    assert argvs(result)[2:] == [["squeue", "--noheader", "--states=all", JOB_STATES, "-j", "4300"],
                                 ["scontrol", "requeue", "4300"],
                                 ["scontrol", "show", "node", name],
                                 ["scontrol", "update", f"NodeName={name}", "State=RESUME"]]
    assert [(r["trigger"], r["action"], r["outcome"], r["incident"]) for r in result.records if r["job"] == "4300"] == [
        ("node_repair", "requeue_job", "deferred", f"job:slurm:{CLUSTER}:eval-7b"),
        ("node_repair", "requeue_job", "executed", f"job:slurm:{CLUSTER}:eval-7b")]
    assert result.pages == []


# --- issue 27: drain first, then the call; one incident, one owner


def test_zzr_the_repair_owns_the_watched_job_it_hits_and_its_recovery_window_starts_when_the_node_is_back(replay):
    # Given llama3-70b (watched: stall 10 min, recovery 20 min) training on every worker, the node among them, its
    # agent up; a batch job with Slurm's default requeue flag
    # When a GPU fault replaces the node: slurmctld requeues the job itself, and it can start again only once the
    # replacement is back in service (no other node is free)
    result = replay(SCENARIOS / "zzr-repair-owns-the-stalled-job.jsonl")
    name = argvs(result)[0][2].removeprefix("NodeName=")
    # Then the node is drained first, and HyperPod called only once the agent reported the drain
    node_records = [r for r in result.records if r["incident"] == INCIDENT]
    assert [(r["trigger"], r["outcome"], r["jobs"]) for r in node_records[:3]] == [
        ("node_health", "deferred", None), ("node_repair", "executed", JOB), ("node_health", "executed", JOB)]
    assert "called once the agent reports the drain" in node_records[0]["reason"]
    assert node_records[2]["reason"].startswith(f"Called after the agent drained {name} in Slurm")
    assert node_records[2]["event_id"] == node_records[0]["event_id"]  # the decision's final record
    assert node_action_calls(result) == {REPLACE: 1}
    # And the stall alarm, which fires while the node is in repair (the job pending, waiting for it), is deferred to
    # the repair: no requeue (before: a requeue Slurm refused, "Job is pending execution", and a page), no page
    assert not [argv for argv in argvs(result) if argv[:2] == ["scontrol", "requeue"]]
    alarm = [r for r in result.records if r["trigger"] == "alarm" and r["fault"] == "stalled"]
    assert [(r["action"], r["outcome"], r["paged"]) for r in alarm] == [("none", "deferred", False),
                                                                          ("none", "ignored", False)]
    assert "a node repair holds llama3-70b" in alarm[0]["reason"] and INCIDENT in alarm[0]["reason"]
    # And once the replacement is back, the node (still drained with Medic's reason) is read, then resumed; the job
    # Slurm requeued is left alone
    resume = [["scontrol", "show", "node", name], ["scontrol", "update", f"NodeName={name}", "State=RESUME"]]
    assert [argv for argv in argvs(result) if argv[0] == "scontrol"][-2:] == resume
    [job] = [r for r in result.records if r["job"] == "4211"]
    assert (job["outcome"], "Slurm requeued it by itself" in job["reason"]) == ("ignored", True)
    # And the job's window started when the node was back: it steps again 7 minutes later, recovered (before: a
    # no_progress page 23 minutes after the failed requeue), no page
    [recovered] = [r for r in result.records if r["fault"] == "recovered"]
    assert "the repair that held it ended at 08:45 UTC" in recovered["reason"]
    assert not [r for r in result.records if r["fault"] == "no_progress"]
    assert result.pages == []
    # And the job's incident line is the node repair's, from the node's fault: its downtime counts in its goodput
    [line] = [i for i in result.incidents if i["job"] == "llama3-70b"]
    assert (line["incident_kind"], line["node_id"], line["fault"], line["fault_at"], line["resumed_at"]) == (
        "node_repair", NODE, "gpu_fatal", "2026-11-20T08:14:05+00:00", "2026-11-20T08:52:00+00:00")


def test_a_watched_job_a_repair_hit_whose_stall_alarm_never_fired_is_a_node_repair_incident_from_the_nodes_fault(
        replay, tmp_path):
    from medic_cli.report import parse_line, report

    # Given (zzr) with a stall alarm slower than the repair (stall_minutes 60): no alarm reads the job's last
    # heartbeat, so before this, the line was a `stall` with no fault time, and the job's goodput 100 %
    config = tmp_path / "slow-stall.medic.yaml"
    config.write_text(DEMO_CONFIG.read_text().replace("    stall_minutes: 10", "    stall_minutes: 60", 1))
    result = replay(SCENARIOS / "zzr-repair-owns-the-stalled-job.jsonl", config)
    assert not [r for r in result.records if r["trigger"] == "alarm" and r["fault"] == "stalled"]
    # Then the job's line is a node_repair incident with the node's fault, its time and the node, and the work
    # since the checkpoint the probe read (800 steps at 40 a minute)
    [line] = [i for i in result.incidents if i["job"] == "llama3-70b"]
    assert (line["incident"], line["incident_kind"], line["node_id"], line["fault"]) == (
        "job:slurm:pretrain-slurm:llama3-70b", "node_repair", NODE, "gpu_fatal")
    assert (line["fault_at"], line["detected_at"], line["resumed_at"]) == (
        "2026-11-20T08:14:05+00:00", "2026-11-20T08:14:05+00:00", "2026-11-20T08:52:00+00:00")
    assert (line["time_to_resume_s"], line["lost_steps"], line["lost_minutes"]) == (2275, 800, 20)
    # And the report counts it against the job: down from 08:14:05 to 08:52, and 20 minutes re-done
    incidents = [parse_line(json.dumps(i)) for i in result.incidents]
    start, end = parse_time("2026-11-20T07:55:00Z"), parse_time("2026-11-20T09:05:00Z")
    [job] = report([i for i in incidents if i], start, end)["jobs"]
    assert (job["job"], job["downtime_s"], job["redone_s"]) == ("llama3-70b", 2275, 1200)
    assert job["goodput"] == round((4200 - 2275 - 1200) / 4200, 4)

def test_a_node_hyperpod_already_returned_to_service_is_not_resumed_and_nobody_is_paged(replay):
    from sim.scenarios.generate import event

    # Given HyperPod returning a node it repaired to service itself (an assumption the emulator can make: no AWS
    # source says what the Batch* APIs do to the node's Slurm state), job 4300 on the node
    result = replay([{"sim": {"slurm": {"cluster": CLUSTER, "repair_resumes": True}}},
                     {"sim": {"slurm_job": {"cluster": CLUSTER, "id": 4300, "name": "eval-7b", "nodes": [NODE]}}},
                     {"sim": {"agent": {"cluster": CLUSTER, "heartbeat": True}}},
                     event(fault="NvidiaErrorReboot"), {"sim": {"advance": "+30m"}}])
    # Then Medic's resume reads the node, finds it in service, and leaves it: `ignored`, not a failed resume
    name = argvs(result)[0][2].removeprefix("NodeName=")
    assert ["scontrol", "show", "node", name] in argvs(result)
    assert ["scontrol", "update", f"NodeName={name}", "State=RESUME"] not in argvs(result)
    [resume] = [r for r in result.records if "resume" in r["reason"] and r["trigger"] == "node_repair"]
    assert (resume["incident"], resume["outcome"], resume["paged"]) == (INCIDENT, "ignored", False)
    assert "already back in service in Slurm (State=IDLE)" in resume["reason"]
    assert result.pages == []


def test_a_drain_the_agent_never_reports_is_withdrawn_and_the_call_made_without_it(replay):
    from sim.scenarios.generate import event

    # Given an agent that reported two minutes before the fault (alive by Medic's clock) and then went silent
    result = replay([{"sim": {"slurm_job": {"cluster": CLUSTER, "id": 4300, "name": "eval-7b", "nodes": [NODE]}}},
                     {"sim": {"agent": {"cluster": CLUSTER, "heartbeat": "2026-11-20T08:12:00Z"}}},
                     event(fault="NvidiaErrorReboot"), {"sim": {"advance": "+20m"}},
                     {"sim": {"agent": {"cluster": CLUSTER, "heartbeat": True}}}, {"sim": {"advance": "+1m"}}])
    # Then the reboot waits for the drain, then (its deadline passed: the reconciler's next sweep) is called
    # without it; the record says so, and one page says the jobs on the node need a look
    node = [r for r in result.records if r["incident"] == INCIDENT and r["trigger"] == "node_health"]
    assert [(r["outcome"], r["jobs"], r["paged"]) for r in node] == [("deferred", None, False),
                                                                        ("executed", None, True)]
    assert "did not report the drain" in node[1]["reason"] and "withdrew the drain" in node[1]["reason"]
    assert node_action_calls(result) == {"sagemaker:BatchRebootClusterNodes": 1}
    jobs_page, silence_page = result.pages
    assert "need a look" in jobs_page["subject"]
    # (the agent silent since 08:12 is also reported by the reconciler, once: issue 29, item 1)
    assert silence_page["subject"] == f"[Medic] {CLUSTER}: its agent is silent"
    # And the agent back later never runs the withdrawn drain: it would land while HyperPod repairs the node
    assert not [argv for argv in argvs(result) if "State=DRAIN" in argv]


def test_zzs_a_repair_hyperpod_started_owns_the_watched_job_on_the_node_too(replay):
    # Given llama3-70b training on a node (the probe names it) that HyperPod itself takes into repair at 08:14
    result = replay(SCENARIOS / "zzs-hyperpod-repair-owns-the-stalled-job.jsonl")
    # Then the stall alarm that fires while the node is Pending is deferred to that repair: no requeue, no page
    assert not [argv for argv in argvs(result) if argv[:2] == ["scontrol", "requeue"]]
    stalled = [r for r in result.records if r["trigger"] == "alarm" and r["fault"] == "stalled"]
    assert (stalled[0]["action"], stalled[0]["outcome"], stalled[0]["paged"]) == ("none", "deferred", False)
    assert f"ip-10-1-37-73, a node llama3-70b ran on, is in repair (Pending, {INCIDENT})" in stalled[0]["reason"]
    # And the job's window starts when the node is Running again: it steps, recovered, without any act of Medic's
    [recovered] = [r for r in result.records if r["fault"] == "recovered"]
    assert "the repair that held it ended at 08:45 UTC" in recovered["reason"]
    # And its incident line is the repair's (node_repair): HyperPod's repair has no claim of Medic's, so the fault
    # is the stall Medic saw, from the job's last heartbeat
    [line] = [i for i in result.incidents if i["job"] == "llama3-70b"]
    assert (line["incident_kind"], line["node_id"], line["fault"]) == ("node_repair", NODE, "stalled")
    assert (line["acted_at"], line["fault_at"] is not None, line["resolved_at"] is not None) == (None, True, True)
    assert result.pages == []
