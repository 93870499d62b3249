"""The recovery model (bench/recovery.py): its with-Medic numbers come from the replay, so a latency fed to the
replay moves them; the without-Medic path is the documented sum. On the hand-written template (no synth): the
training-job class end to end, and the node path up to the repair."""

from __future__ import annotations

import pytest
import yaml

from bench import recovery
from bench.report import RECOVERY_END, RECOVERY_START, update_page
from medic.config import parse_config
from tests.bench.template import template


@pytest.fixture(scope="module")
def tiny_template() -> dict:
    return template(parse_config(yaml.safe_load(recovery.CONFIG.read_text())))


def test_a_retryable_job_crash_is_timed_from_medics_restart(tiny_template):
    default = recovery.run("job_retryable", template=tiny_template)["classes"]["job_retryable"]
    medic = default["with_medic"]
    assert not medic["errors"]
    assert ["restart_job", "executed"] in [record[1:3] for record in medic["records"]]
    lat = recovery.latencies()
    assert medic["act_s"] == lat["eventbridge_delivery_s"]  # the record's timestamp: the event's delivery
    assert medic["resumed_s"] == medic["act_s"] + lat["sagemaker_start_s"]

    slower = recovery.run("job_retryable", template=tiny_template, eventbridge_delivery_s=40,
                          sagemaker_start_s=600)["classes"]["job_retryable"]["with_medic"]
    assert slower["act_s"] == 40 and slower["resumed_s"] == 640  # replayed again with the new inputs
    assert default["without_medic"]["resumed_s"] == lat["operator_unpaged_s"] + lat["sagemaker_start_s"]


def test_a_gpu_fault_is_repaired_when_the_emulated_replacement_ends(tiny_template):
    def replayed(**overrides: float) -> dict:
        return recovery.run("gpu_fatal", template=tiny_template, **overrides)["classes"]["gpu_fatal"]["with_medic"]

    medic = replayed(replace_s=900)
    assert ["replace_node", "executed"] in [record[1:3] for record in medic["records"]]
    assert medic["node_actions"] == [{"action": "replace", "successful": ["i-0d4e5f60718293a4b"]}]
    assert medic["detect_s"] == medic["act_s"] == 65  # HMA's minute and EventBridge's seconds, on the clock
    assert medic["repaired_s"] == 65 + 900  # read off the emulated HyperPod: the replacement Running again
    later = replayed(replace_s=1500, hma_detect_s=120)
    assert later["act_s"] == 125 and later["repaired_s"] == 125 + 1500
    # this template has no stall alarm and no Slurm agent queue (so the replay has no Slurm job): nothing resumes
    assert medic["resumed_s"] is None


def test_without_medic_follows_the_documented_paths():
    lat = recovery.latencies(nccl_timeout_s=300)
    hang = recovery.without_medic("hang", lat)
    assert hang["resumed_s"] == 300 + lat["auto_resume_checks_s"] + lat["job_start_s"]
    fatal = recovery.without_medic("gpu_fatal", lat)
    assert fatal["repaired_s"] == lat["hma_detect_s"] + lat["replace_s"]
    # the baseline: Slurm requeues the job itself when HyperPod takes the node down, and starts it at the first
    # scheduling pass once it is eligible (cred_expire + 1 s) and the node is back
    assert fatal["resumed_s"] == recovery.slurm_starts(lat, eligible_at=60 + 60 + 121,
                                                        node_back_at=60 + lat["replace_s"]) + lat["job_start_s"]
    assert recovery.slurm_starts(lat, eligible_at=241, node_back_at=0) == 300  # the 5th minute's pass
    assert recovery.slurm_starts(lat, eligible_at=120, node_back_at=1860) == 1860
    assert recovery.slurm_starts(recovery.latencies(slurm_sched_interval_s=30), eligible_at=241) == 270
    assert recovery.without_medic("capacity", lat)["resumed_s"] is None
    with pytest.raises(ValueError, match="unknown latency"):
        recovery.latencies(nope_s=1)


def test_every_latency_says_where_its_number_comes_from():
    for name, entry in recovery.LATENCIES.items():
        assert entry.kind in ("documented", "assumption"), name
        assert entry.seconds > 0 and len(entry.source) > 40, name


def test_the_table_and_its_page_block(tmp_path, tiny_template):
    result = recovery.run("job_retryable", template=tiny_template)
    text = recovery.table(result)
    assert "| Training job crash, retryable reason" in text and "**8.1 min**" in text and "**68.0 min**" in text
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# x\n\n{RECOVERY_START}\nstale numbers\n{RECOVERY_END}\n\n## Cold start and SnapStart\n")
    assert update_page(page, recovery.block(result), start=RECOVERY_START, end=RECOVERY_END)
    written = page.read_text()
    assert "stale numbers" not in written and "`sagemaker_start_s` = 480 s (assumption)" in written
    assert written.endswith("## Cold start and SnapStart\n")


def test_a_batch_job_on_a_terminated_host_is_timed_from_medics_submitjob(tiny_template):
    entry = recovery.run("batch_host_terminated", template=tiny_template)["classes"]["batch_host_terminated"]
    medic, lat = entry["with_medic"], recovery.latencies()
    assert not medic["errors"]
    assert ["restart_job", "executed"] in [record[1:3] for record in medic["records"]]
    assert medic["act_s"] == lat["eventbridge_delivery_s"]
    assert medic["resumed_s"] == medic["act_s"] + lat["batch_start_s"]
    assert entry["without_medic"]["resumed_s"] == lat["operator_unpaged_s"] + lat["batch_start_s"]
    # and Medic's own incident line, written at the clone's RUNNING event, says the same resume
    [line] = [line for line in medic["incidents"] if line["incident_kind"] == "batch_job"]
    assert line["time_to_resume_s"] == medic["resumed_s"]


def test_a_bedrock_service_error_is_timed_to_a_running_job_that_repeats_the_training(tiny_template):
    # Given a Bedrock job failing with a service error after 6 h of training, on an entry that allows a restart
    entry = recovery.run("bedrock_service_error", template=tiny_template)["classes"]["bedrock_service_error"]
    medic, own, lat = entry["with_medic"], entry["without_medic"], recovery.latencies()
    assert not medic["errors"]
    assert ["restart_job", "executed"] in [record[1:3] for record in medic["records"]]
    # Then the new job runs at Medic's call (InProgress from its creation): the resume is Medic's own incident line's
    assert medic["act_s"] == medic["repaired_s"] == medic["resumed_s"] == lat["eventbridge_delivery_s"]
    [line] = [line for line in medic["incidents"] if line["incident_kind"] == "bedrock_job"]
    assert line["time_to_resume_s"] == medic["resumed_s"]
    # And both columns say the training starts over: the failed job's 6 h repeat, with Medic or without
    assert medic["repeats_s"] == own["repeats_s"] == 6 * 3600
    assert own["resumed_s"] == lat["operator_unpaged_s"]
    text = recovery.table({"classes": {"bedrock_service_error": entry}})
    assert "**0.1 min** to a running job, which starts over: 6 h of training repeat" in text
    assert "**60.0 min** to a running job, which starts over: 6 h of training repeat" in text
    shorter = recovery.run("bedrock_service_error", template=tiny_template, bedrock_trained_s=7200)
    assert shorter["classes"]["bedrock_service_error"]["with_medic"]["repeats_s"] == 7200
