"""Specification: a node action and the Slurm job on the node, end to end (issue 16) — the health event, the drain
queued for the real agent before the HyperPod call, the jobs the agent lists (`squeue -w`), the replacement
coming back Running, the resume and the job states the reconciler asks for, and a requeue of each job that did not
come back, under the stall restart's budget and proof of recovery."""

from __future__ import annotations

from sim.scenario import SCENARIOS
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
    # Then the node is replaced once, the drain queued first, and the drain's record names the job
    assert node_action_calls(result) == {REPLACE: 1}
    node, drained = result.records[:2]
    assert (node["trigger"], node["action"], node["outcome"], node["jobs"]) == (
        "node_health", "replace_node", "executed", None)
    assert "Drain of ip-" in node["reason"] and "queued for the agent" in node["reason"]
    assert (drained["incident"], drained["trigger"], drained["node_id"], drained["jobs"]) == (
        INCIDENT, "node_repair", NODE, JOB)
    name = argvs(result)[0][2].removeprefix("NodeName=")
    assert argvs(result)[:2] == [
        ["scontrol", "update", f"NodeName={name}", "State=DRAIN", "Reason=Medic: drained before a node repair"],
        ["squeue", "--noheader", "--format=%i|%j", "-w", name]]
    # And slurmctld requeued the job itself when the node went down (job_mgr.c kill_running_job_by_node_name): every
    # sweep's job_states sees it running again with one restart, so Medic never runs `scontrol requeue`
    states = ["squeue", "--noheader", "--states=all", JOB_STATES, "-j", "4211"]
    assert all(argv in (states, ["scontrol", "update", f"NodeName={name}", "State=RESUME"])
               for argv in argvs(result)[2:]), argvs(result)
    assert ["scontrol", "update", f"NodeName={name}", "State=RESUME"] in argvs(result)
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
                                 ["scontrol", "update", f"NodeName={name}", "State=RESUME"]]
    assert [(r["trigger"], r["action"], r["outcome"], r["incident"]) for r in result.records if r["job"] == "4300"] == [
        ("node_repair", "requeue_job", "deferred", f"job:slurm:{CLUSTER}:eval-7b"),
        ("node_repair", "requeue_job", "executed", f"job:slurm:{CLUSTER}:eval-7b")]
    assert result.pages == []
