"""Specification, end to end: who controls Medic's decisions (issue 28, items 6-8) — the training metrics, the
operator's requests, the mode switch — replayed through the synthesized stack and the real handlers."""

from __future__ import annotations

from sim.scenario import SCENARIOS
from tests.e2e.conftest import node_action_calls, outcomes


def test_zy_every_mode_change_pages_and_a_failed_read_keeps_paused(replay):
    # Given the mode set to dry_run, then to paused, and SSM failing the node function's first read of it
    result = replay(SCENARIOS / "zy-mode-switch.jsonl")
    # Then each change is one record and one page (the dry_run one too), and the GPU fault is held back, paged
    assert [(r["trigger"], r["outcome"], r["mode"], r["paged"]) for r in result.records] == [
        ("mode_change", "ignored", "dry_run", True), ("mode_change", "ignored", "paused", True),
        ("node_health", "suppressed", "paused", True)]
    assert [page["subject"] for page in result.pages[:2]] == [
        "[Medic] mode changed: act -> dry_run", "[Medic] mode changed: dry_run -> paused"]
    assert node_action_calls(result) == {}
    assert result.injected["ssm:GetParameter"] == 4  # every attempt of the node function's read failed
    assert result.metrics["ModeReadFailures"] == 1
    assert outcomes(result)[-1] == ("replace_node", "suppressed")


def test_zw_operator_requests_reach_only_watched_jobs_and_never_a_held_namesake(replay):
    # Given three requests by id for another team's running jobs, then one by name for llama3-70b while nine held
    # jobs share its name
    result = replay(SCENARIOS / "zw-operator-reach.jsonl")
    # Then the agent asks squeue for each job's name and refuses the other team's: rejected, one page for the cluster
    assert [(r["job"], r["outcome"]) for r in result.records] == [
        ("5001", "deferred"), ("5001", "rejected"), ("5002", "deferred"), ("5002", "rejected"),
        ("5003", "deferred"), ("5003", "rejected"), ("llama3-70b", "deferred"), ("llama3-70b", "executed")]
    assert [page["subject"] for page in result.pages] == ["[Medic] pretrain-slurm job 5001: requeue refused"]
    # And only the running llama3-70b is requeued: no job of the other team, no held namesake
    assert [run["argv"] for run in result.slurm_commands if run["argv"][0] == "scontrol"] == [
        ["scontrol", "requeue", "4211"]]
    assert "not one of the jobs Medic watches on this cluster (llama3-70b)" in result.records[1]["reason"]


def test_zzh_back_dated_heartbeats_do_not_make_medic_requeue_a_job_that_never_stepped(replay):
    # Given a running job that has not stepped, and three datapoints someone wrote (one back-dated two hours)
    result = replay(SCENARIOS / "zzh-forged-heartbeats-before-the-first-step.jsonl")
    # Then the stall alarm's read-back finds only heartbeats no probe session vouches for: nothing requeued, one page
    assert [(r["action"], r["outcome"], r["paged"]) for r in result.records] == [("none", "deferred", True)]
    assert "without exactly one probe session" in result.records[0]["reason"]
    assert result.slurm_commands == [] and len(result.pages) == 1


def test_zv_forged_heartbeats_after_a_requeue_are_no_proof_of_recovery(replay):
    # Given a stall, Medic's requeue, a restarted process that never steps, and heartbeats someone wrote since
    result = replay(SCENARIOS / "zv-forged-recovery.jsonl")
    # Then no recovery is recorded; the alarm's OK and its next ALARM change nothing; one no_progress page
    assert [(r["fault"], r["outcome"]) for r in result.records] == [
        ("stalled", "deferred"), ("stalled", "executed"), ("stalled", "ignored"), ("stalled", "deferred"),
        ("no_progress", "failed")]
    assert "while Medic proves llama3-70b's recovery after its restart" in result.records[3]["reason"]
    assert "120 in minutes without exactly one probe session" in result.records[-1]["reason"]
    assert [page["subject"] for page in result.pages] == ["[Medic] job llama3-70b: no_progress"]
    assert [run["argv"] for run in result.slurm_commands if run["argv"][0] == "scontrol"] == [
        ["scontrol", "requeue", "4211"]]
