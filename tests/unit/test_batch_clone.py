"""Specification: the SubmitJob request of a Batch job's clone (adapters/batch.clone_request), pure, checked in full
against botocore's batch model (sim.contract)."""

from __future__ import annotations

import botocore.session
import pytest

from medic.adapters.batch import Unclonable, clone_request
from sim.contract import request_violations

MODEL = botocore.session.get_session().get_service_model("batch")
SINGLE = {
    "jobName": "pt-eval-0003", "jobId": "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9", "status": "FAILED",
    "jobQueue": "arn:aws:batch:us-west-2:123456789012:job-queue/gpu-training", "startedAt": 1,
    "jobDefinition": "arn:aws:batch:us-west-2:123456789012:job-definition/eval-single:3",
    "dependsOn": [{"jobId": "0a0a0a0a-0000-4000-8000-000000000000"}], "parameters": {},
    "container": {"image": "x", "command": ["python", "eval.py"], "vcpus": 4, "memory": 16384,
                  "environment": [{"name": "AWS_BATCH_JOB_ID", "value": "x"}, {"name": "MODE", "value": "full"}],
                  "instanceType": "g5.xlarge", "exitCode": 1, "reason": "x", "logStreamName": "s",
                  "jobRoleArn": "arn:aws:iam::123456789012:role/Eval"}}


def test_a_single_node_job_is_cloned_with_its_container_as_overrides_and_nothing_it_may_not_send():
    request = {**clone_request(MODEL, SINGLE), "jobName": "pt-eval-0003-r1"}
    assert request_violations("batch", "SubmitJob", request) == []
    assert request["containerOverrides"] == {"vcpus": 4, "memory": 16384, "command": ["python", "eval.py"],
                                             "environment": [{"name": "MODE", "value": "full"}]}
    # not its dependencies (they ran), its empty parameters, a single node's instanceType, nor the role
    assert set(request) == {"jobName", "jobQueue", "jobDefinition", "containerOverrides"}


def test_a_multi_node_job_with_closed_ranges_keeps_its_node_count_from_the_definition():
    job = {**SINGLE, "container": None, "nodeProperties": {"numNodes": 2, "mainNode": 0, "nodeRangeProperties": [
        {"targetNodes": "0", "container": {"command": ["main"]}},
        {"targetNodes": "1", "container": {"command": ["worker"]}}]}}
    request = clone_request(MODEL, job)
    assert request["nodeOverrides"] == {"nodePropertyOverrides": [
        {"targetNodes": "0", "containerOverrides": {"command": ["main"]}},
        {"targetNodes": "1", "containerOverrides": {"command": ["worker"]}}]}


@pytest.mark.parametrize("member", ["eksProperties", "ecsProperties"])
def test_a_job_medic_cannot_clone_faithfully_is_refused_with_its_reason(member):
    with pytest.raises(Unclonable, match="container and multi-node parallel jobs only"):
        clone_request(MODEL, {**SINGLE, member: {"podProperties": {}}})
