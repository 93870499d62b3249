"""Specification: `medic explain` says, for an AWS Batch job state change, what Medic would do and why (the same
scope, lineage, claim and plan as flows/jobs/batch; read calls only)."""

from __future__ import annotations

import copy
from datetime import timedelta

import boto3
import pytest

from medic.ledger.jobs import JobStore
from tests.cli.conftest import CONFIG_YAML, NOW, REGION, Deployed
from tests.cli.test_explain import Explainer, decision
from tests.helpers import load_event

JOB, JOB_ID = "pt-llama-0007", "9b2f6c1e-4a7d-4e3b-8c5f-0d1e2a3b4c5d"
BUCKET = "ml-checkpoints-123456789012"
BATCH_YAML = f"""
batch_jobs:
  - prefix: pt-
    job_queues: [gpu-training]
    job_definitions: [pretrain-mnp]
    max_restarts: 2
    checkpoint_buckets:
      - {{bucket: {BUCKET}, prefix: "pretrain/{{lineage}}/"}}
"""


@pytest.fixture
def explainer(deployed: Deployed) -> Explainer:
    deployed.config_file.write_text(CONFIG_YAML + BATCH_YAML)
    boto3.client("s3", region_name=REGION).create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    return Explainer(deployed)


def batch_failure(reason: str = "Host EC2 (instance i-0b7c9d1e2f3a4b5c6) terminated.",
                  exit_code: int | None = None) -> dict:
    """AWS's documented sample ("Job state change events"), as a FAILED job of the configured queue, just now."""
    event = copy.deepcopy(load_event("aws-docs-batch-job-state-change"))
    event.update(region=REGION, time=(NOW - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    container = {"reason": reason, **({} if exit_code is None else {"exitCode": exit_code})}
    event["detail"].update(
        jobArn=f"arn:aws:batch:{REGION}:123456789012:job/{JOB_ID}", jobName=JOB, jobId=JOB_ID, status="FAILED",
        jobQueue=f"arn:aws:batch:{REGION}:123456789012:job-queue/gpu-training", statusReason=reason,
        jobDefinition=f"arn:aws:batch:{REGION}:123456789012:job-definition/pretrain-mnp:7",
        attempts=[{"statusReason": reason, "container": container}])
    return event


def test_given_a_batch_job_on_a_terminated_host_with_a_checkpoint_when_explained_then_submitjob_of_its_clone(
        explainer: Explainer):
    boto3.client("s3", region_name=REGION).put_object(Bucket=BUCKET, Key=f"pretrain/{JOB}/step-1.pt", Body=b"")
    code, out, err = explainer.run(batch_failure())
    assert code == 0, err
    assert decision(out) == "Decision:  restart_job -> executed (attempt 1)"
    assert f"call SubmitJob {JOB}-r1 to queue gpu-training" in out
    assert f"resuming from s3://{BUCKET}/pretrain/{JOB}/" in out
    assert "host_terminated" in out and "Batch made 1 attempt(s)" in out


def test_given_a_batch_jobs_own_exit_when_explained_then_deferred_and_paged_once(explainer: Explainer):
    code, out, err = explainer.run(batch_failure("Essential container in task exited", exit_code=1))
    assert code == 0, err
    assert decision(out) == "Decision:  none -> deferred"
    assert "job_exit_code" in out and f"page once for incident batch-job:{JOB}" in out
    assert "SubmitJob" not in out


def test_given_a_batch_failure_already_handled_when_explained_then_duplicate(explainer: Explainer):
    JobStore(explainer.deployed.ledger()).claim_job_failure(f"batch/{JOB_ID}", NOW)
    code, out, _ = explainer.run(batch_failure())
    assert code == 0 and "duplicate" in decision(out)


def test_given_a_job_of_another_queue_when_explained_then_ignored(explainer: Explainer):
    event = batch_failure()
    event["detail"]["jobQueue"] = f"arn:aws:batch:{REGION}:123456789012:job-queue/someone-elses"
    code, out, _ = explainer.run(event)
    assert code == 0 and "ignored" in decision(out) and "not in its batch_jobs entry's job_queues" in out


# --- Amazon Bedrock model customization jobs

BEDROCK_YAML = """
bedrock_jobs:
  - prefix: cpt-
    role_arns: [arn:aws:iam::123456789012:role/BedrockCustomization]
    allow_restart_from_scratch: true
"""


def bedrock_failure(message: str) -> dict:
    """AWS's documented sample ("How EventBridge for Amazon Bedrock works"), as a failed job of this account, now."""
    event = copy.deepcopy(load_event("aws-docs-bedrock-model-customization-job-state-change"))
    event.update(region=REGION, time=(NOW - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    event["detail"].update(jobName="cpt-llama-0003", failureMessage=message,
                           jobArn=f"arn:aws:bedrock:{REGION}:123456789012:model-customization-job/k2j4h6g8f0d1")
    return event


def test_given_a_bedrock_jobs_validation_error_when_explained_then_deferred_without_a_restart(explainer: Explainer):
    explainer.deployed.config_file.write_text(CONFIG_YAML + BEDROCK_YAML)
    code, out, err = explainer.run(bedrock_failure("ValidationException: the training data is malformed."))
    assert code == 0, err
    assert decision(out) == "Decision:  none -> deferred"
    assert "validation_error" in out and "page once for incident bedrock-job:cpt-llama-0003" in out
    assert "CreateModelCustomizationJob" not in out


def test_given_medics_restart_running_when_explained_then_its_incident_line_is_written_and_nothing_decided(
        explainer: Explainer):
    from medic.ledger.jobs import CloneWatch, MedicRestart

    # Given Medic's restart pt-llama-0007-r1 (submitted as job c0ffee...), its incident line waiting for it to run
    store, clone_id = JobStore(explainer.deployed.ledger()), "c0ffee00-0000-4000-8000-000000000001"
    acted = NOW - timedelta(minutes=12)
    store.intend_restart(MedicRestart(name=f"batch/{JOB}-r1", root=JOB, attempt=1, restarted_from=JOB,
                                      intended_at=acted))
    store.note_submitted(f"batch/{JOB}-r1", clone_id)
    store.watch_clone(CloneWatch(clone=f"batch/{JOB}-r1", incident=f"batch-job:{JOB}", job=JOB, fault="job_retryable",
                                 fault_at=acted, detected_at=acted, acted_at=acted, deadline=acted + timedelta(days=1),
                                 kind="batch_job"))
    running = batch_failure()
    running["detail"].update(jobName=f"{JOB}-r1", jobId=clone_id, status="RUNNING", statusReason="", attempts=[],
                             jobArn=f"arn:aws:batch:{REGION}:123456789012:job/{clone_id}")
    # When its RUNNING event is explained
    code, out, err = explainer.run(running)
    # Then Medic decides nothing and writes the restart's incident line (read only: the watch stays)
    assert code == 0, err
    assert decision(out) == "Decision:  none -> ignored"
    assert f"write incident batch-job:{JOB}'s line: resumed at" in out and "write no remediation record" in out
    assert store.clone_watch(f"batch/{JOB}-r1") is not None
    # And another job that only shares the name writes nothing
    running["detail"].update(jobId="0ther000-0000-4000-8000-000000000009")
    code, out, _ = explainer.run(running)
    assert code == 0 and "not a restart Medic started and waits for" in out
