"""`python -m medic_agent.eks` as its own process: the command line, the watched-jobs file, and one cycle
against emulated AWS (moto's server) and the emulated Kubernetes API server (instead of the in-cluster config)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import boto3

from sim.kubeapi import KubeApiServer
from tests.agent.conftest import AGENT_DIR, REGION
from tests.agent.eks_world import CLUSTER, WATCHED, issue_restart, manifest, restart_body
from tests.agent.fakes import create_ledger, queue_depth, result_of


def run(argv, env=None):
    return subprocess.run([sys.executable, "-m", "medic_agent.eks", *argv], capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(AGENT_DIR), "PATH": "/usr/bin:/bin", **(env or {})})


def test_missing_options_and_a_bad_watched_file(tmp_path):
    done = run(["--cluster", CLUSTER])
    assert done.returncode == 2 and "missing --queue-url, --table, --region, --watched-jobs" in done.stderr
    bad = tmp_path / "watched.json"
    bad.write_text(json.dumps([{"kind": "Job", "name": "Not_A_Name"}]))
    done = run(["--cluster", CLUSTER, "--queue-url", "q", "--table", "t", "--region", REGION,
                "--watched-jobs", str(bad)])
    assert done.returncode == 2 and "watched jobs unreadable" in done.stdout


def test_one_cycle_as_a_process(moto_endpoint, tmp_path):
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    sqs, dynamodb = (session.client(name, endpoint_url=moto_endpoint) for name in ("sqs", "dynamodb"))
    suffix = uuid.uuid4().hex[:8]
    queue_url = sqs.create_queue(QueueName=f"medic-agent-eks-{suffix}")["QueueUrl"]
    table = create_ledger(dynamodb, f"medic-ledger-{suffix}")
    watched = tmp_path / "watched-jobs.json"
    watched.write_text(json.dumps(WATCHED))
    with KubeApiServer(manifest()) as api:
        api.add_node("hyperpod-i-0a1b2c3d4e5f60718")
        api.add_job("Job", "default", "etl", replicas=2)
        before = {pod["metadata"]["name"] for pod in api.job_pods("Job", "default", "etl")}
        body = restart_body(job_kind="Job", namespace="default", job_name="etl")
        issue_restart(dynamodb, table, body)
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(body))
        token = tmp_path / "token"
        token.write_text(api.token)
        done = run(["--cluster", CLUSTER, "--queue-url", queue_url, "--table", table, "--region", REGION,
                    "--watched-jobs", str(watched), "--state-file", str(tmp_path / "state.json"), "--once",
                    "--wait-seconds", "1", "--kube-host", api.url, "--kube-token-file", str(token)],
                   env={"AWS_ENDPOINT_URL": moto_endpoint, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_EC2_METADATA_DISABLED": "true",
                        "POD_NAME": "medic-agent-6f7c9-x"})
        assert done.returncode == 0, done.stdout + done.stderr
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert any(line["message"] == "command executed" for line in lines), done.stdout
        result = result_of(dynamodb, table, CLUSTER, body["command_id"])
        assert result["status"] == "executed" and result["host"] == "medic-agent-6f7c9-x"
        assert {pod["S"] for pod in result["pods"]} == before
        assert queue_depth(sqs, queue_url) == 0
        assert api.job("Job", "default", "etl") is not None
