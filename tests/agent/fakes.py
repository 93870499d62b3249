"""Test doubles and helpers shared by the agent tests."""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LEDGER_KEY_SCHEMA = {
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                             {"AttributeName": "sk", "AttributeType": "S"}],
    "BillingMode": "PAY_PER_REQUEST",
}


def create_ledger(dynamodb: Any, name: str) -> str:
    dynamodb.create_table(TableName=name, **LEDGER_KEY_SCHEMA)
    return name


def command_body(cluster: str, kind: str = "requeue_job", command_id: str | None = None, **fields: Any) -> dict:
    return {"command_id": command_id or str(uuid.uuid4()), "cluster": cluster, "kind": kind,
            "incident": "job:test", "issued_at": "2026-12-02T18:00:00+00:00", **fields}


def issue(dynamodb: Any, table: str, body: dict, legacy: bool = False, **changes: str) -> None:
    """Medic's own record of issuing the command (what restart_through_agent writes before it queues it): the
    agent runs a command only when this item names the same cluster, kind, target and incident. ``legacy``: where a
    Medic from before commands were keyed by cluster wrote it (`command#<id>`)."""
    if "job_id" in body:
        target = body["job_id"] + ("@" + ",".join(body["job_names"]) if body.get("job_names") else "")
    elif "node" in body or "job_ids" in body:
        target = f"node:{body['node']}" if "node" in body else f"jobs:{body['job_ids']}"
    else:
        target = f"name:{body.get('job_name')}" + (f"@{body['last_seen_id']}" if body.get("last_seen_id") else "")
    fields = {"cluster": body["cluster"], "kind": body["kind"], "target": target, "incident": body["incident"],
              **changes}
    dynamodb.put_item(TableName=table, Item={
        "pk": {"S": issued_pk(body["cluster"], body["command_id"], legacy)}, "sk": {"S": "issued"},
        **{key: {"S": value} for key, value in fields.items()}})


def issued_pk(cluster: str, command_id: str, legacy: bool = False) -> str:
    """The partition of Medic's `issued` item for a command (medic.ledger.agents.CommandRef)."""
    return f"command#{command_id}" if legacy else f"command#{cluster}#{command_id}"


def send(sqs: Any, queue_url: str, body: dict | str) -> str:
    text = body if isinstance(body, str) else json.dumps(body)
    return sqs.send_message(QueueUrl=queue_url, MessageBody=text)["MessageId"]


def ledger_item(dynamodb: Any, table: str, pk: str, sk: str) -> dict | None:
    item = dynamodb.get_item(TableName=table, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True).get("Item")
    if item is None:
        return None
    return {key: next(iter(value.values())) for key, value in item.items()}


def agent_pk(cluster: str, command_id: str) -> str:
    """The agent's own partition for one command (what its IAM policy lets it write)."""
    return f"agent#{cluster}#command#{command_id}"


def result_of(dynamodb: Any, table: str, cluster: str, command_id: str) -> dict | None:
    return ledger_item(dynamodb, table, agent_pk(cluster, command_id), "result")


def queue_depth(sqs: Any, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def ping_output(*controllers: tuple[str, bool]) -> tuple[int, str, str]:
    """What `scontrol ping` prints (Slurm's _print_ping) for (host, up) controllers in SlurmctldHost order, as
    root (the RESTORE banner when one is DOWN), and its exit status (1 when none answers)."""
    lines = []
    for offset, (host, up) in enumerate(controllers):
        mode = "primary" if offset == 0 else "backup" if len(controllers) == 2 else f"backup{offset}"
        lines.append(f"Slurmctld({mode}) at {host} is {'UP' if up else 'DOWN'}")
    if not all(up for _, up in controllers):
        lines += ["*" * 41, "** RESTORE SLURMCTLD DAEMON TO SERVICE **", "*" * 41]
    return (0 if any(up for _, up in controllers) else 1), "".join(f"{line}\n" for line in lines), ""


PRIMARY_HERE = ping_output(("controller-1", True))  # the loop tests' agent runs on controller-1


@dataclass
class FakeRunner:
    """Stands in for subprocess.run: records every call, answers from a script, never runs anything.
    `scontrol ping` says controller-1 (the loop tests' host) is the controller in charge unless told otherwise."""

    answers: dict[str, tuple[int, str, str]] = field(default_factory=lambda: {"scontrol ping": PRIMARY_HERE})
    calls: list[dict[str, Any]] = field(default_factory=list)
    raises: BaseException | None = None  # raised by every command but the role check ...
    ping_raises: bool = False  # ... and by it too

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        self.calls.append({"argv": list(argv), **kwargs})
        program = Path(argv[0]).name
        key = " ".join([program, *argv[1:2]])
        if self.raises is not None and (key != "scontrol ping" or self.ping_raises):
            raise self.raises
        # the answer for the longest leading part of the command line given (`squeue --noheader --states=all`
        # before `squeue --noheader`)
        words = [program, *argv[1:]]
        given = next((" ".join(words[:n]) for n in range(len(words), 0, -1) if " ".join(words[:n]) in self.answers),
                     key)
        returncode, stdout, stderr = self.answers.get(given, (0, "", ""))
        return subprocess.CompletedProcess(argv, returncode, stdout, stderr)

    @property
    def argvs(self) -> list[list[str]]:
        """Every command run, except the role checks (`scontrol ping`)."""
        return [argv for argv in self.all_argvs if argv != ["scontrol", "ping"]]

    @property
    def all_argvs(self) -> list[list[str]]:
        return [[Path(call["argv"][0]).name, *call["argv"][1:]] for call in self.calls]


def canary_bin_dir(directory: Path, canary: Path) -> Path:
    """scontrol, squeue and sacct that only touch a canary file: proof that nothing ran when nothing may run."""
    directory.mkdir(parents=True, exist_ok=True)
    for program in ("scontrol", "squeue", "sacct"):
        script = directory / program
        script.write_text(f"#!/bin/sh\necho \"{program} $*\" >> '{canary}'\n")
        script.chmod(0o755)
    return directory
