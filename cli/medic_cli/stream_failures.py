"""``medic stream-failures``: the agent results' stream batches Lambda gave up on, read back and re-delivered.

The ledger's stream brings each agent result to the results function. When the function fails a batch on every
retry, Lambda sends the mapping's on-failure destination (the stack's queue, output
``AgentResultsStreamFailuresQueueUrl``) an invocation record that says where the batch was, not what it held:
``DDBStreamBatchInfo`` (``shardId``, ``startSequenceNumber``, ``endSequenceNumber``, ``streamArn``, arrival times,
``batchSize``). "The actual records aren't included, so you must process this record and retrieve them from the
stream before they expire and are lost" (Lambda developer guide, "Using AWS Lambda with Amazon DynamoDB", Error
handling). A stream keeps a record 24 hours (DynamoDB developer guide, "Change data capture for DynamoDB Streams").

So, for each message: GetShardIterator (``AT_SEQUENCE_NUMBER`` the start) and GetRecords up to the end sequence
number; of the records, the agents' results (heartbeats are skipped: a later heartbeat is what counts). When the
stream no longer has the batch (older than 24 hours: the shard trimmed or gone), the results are re-derived from the
agents' own items in the ledger instead (``agent#<cluster>#command#<id>`` / ``result``, kept 7 days): every result
Medic wrote no final record for. Each result is shown (the agent's words quoted) with whether Medic recorded it;
``--redrive`` hands the unrecorded ones to the results function (a synchronous invoke with the records in the
shape the event source mapping delivers them: the function checks each against the command Medic issued and
writes its final record once), then deletes each message whose batch is done.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from botocore.exceptions import ClientError

from medic.core.text import quoted
from medic.flows.agent.commands import parse_agent_command_pk
from medic.ledger.agents import CommandRef
from medic_cli.context import CliError, Context
from medic_cli.render import json_block

QUEUE_OUTPUT = "AgentResultsStreamFailuresQueueUrl"
FUNCTION_OUTPUT = "AgentResultsFunctionName"
# DynamoDB Streams errors that mean the batch is no longer there (API reference, GetShardIterator / GetRecords):
# past the 24-hour retention (TrimmedDataAccessException), or the shard or stream gone (ResourceNotFoundException).
GONE = {"TrimmedDataAccessException", "ResourceNotFoundException"}
RECEIVE_VISIBILITY = 60  # seconds a message read here stays hidden; without --redrive it is released at once
MAX_PAGES = 100  # GetRecords calls per batch (a batch is at most the mapping's BatchSize records)


@dataclass
class AgentResult:
    """One agent result from a failed batch (or re-derived from the ledger)."""

    cluster: str
    command_id: str
    item: dict  # the result item, DynamoDB JSON (the stream record's NewImage, or the ledger item)
    record: dict | None = None  # the stream record as Lambda delivers it; None when re-derived from the ledger
    recorded: bool = False  # Medic wrote the command's final record (command#<cluster>#<id>/recorded)
    redriven: str = ""  # what re-delivering it did: "" (not tried), "recorded", or why it failed

    def as_json(self) -> dict:
        value = {name: self.item.get(name, {}).get("S", "") for name in ("status", "kind", "target", "message")}
        return {"cluster": self.cluster, "command_id": self.command_id, **value, "recorded": self.recorded,
                "from": "stream" if self.record is not None else "ledger", "redriven": self.redriven or None}


@dataclass
class FailedBatch:
    message_id: str
    receipt: str
    info: dict
    function_error: str = ""
    from_stream: bool = True  # False: the stream no longer has it; results re-derived from the ledger
    gone_because: str = ""
    results: list[AgentResult] = field(default_factory=list)
    heartbeats: int = 0
    other: int = 0  # records the mapping's filter would not pass (claims, Medic's own items)

    @property
    def done(self) -> bool:
        return all(result.recorded for result in self.results)

    def as_json(self) -> dict:
        return {"message_id": self.message_id, "batch": self.info, "function_error": self.function_error or None,
                "from": "stream" if self.from_stream else "ledger", "gone_because": self.gone_because or None,
                "results": [result.as_json() for result in self.results], "heartbeats_skipped": self.heartbeats,
                "done": self.done}


def command(args: argparse.Namespace, ctx: Context, out: TextIO, err: TextIO) -> int:
    queue, function = ctx.outputs.get(QUEUE_OUTPUT), ctx.outputs.get(FUNCTION_OUTPUT)
    if not queue or not function:
        problem = ctx.stack_problem or f"stack {ctx.stack!r} has no {QUEUE_OUTPUT}/{FUNCTION_OUTPUT} output"
        raise CliError(f"cannot find the agent results' stream failures: {problem} (deploy this version of the stack)")
    sqs = ctx.client("sqs")
    batches = [read_batch(ctx, message) for message in receive(sqs, queue)]
    gone = [batch for batch in batches if not batch.from_stream]
    if gone:  # one look at the ledger serves every batch the stream no longer has
        gone[0].results = unrecorded_results(ctx)
    for batch in batches:
        mark_recorded(ctx, batch.results)
        if args.redrive:
            redrive(ctx, function, batch)
            if batch.done:
                sqs.delete_message(QueueUrl=queue, ReceiptHandle=batch.receipt)
        else:  # read only: the message is visible again for the next look (or --redrive)
            sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=batch.receipt, VisibilityTimeout=0)
    if args.json:
        print(json_block({"queue": queue, "function": function, "redrive": args.redrive,
                          "batches": [batch.as_json() for batch in batches]}), file=out)
    else:
        print(as_text(batches, queue, args.redrive), file=out)
    return 0 if all(batch.done for batch in batches) else 1


# --- reading

def receive(sqs: Any, queue: str) -> list[dict]:
    """Every message on the queue (each read once: hidden while this runs)."""
    messages: list[dict] = []
    while True:
        got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=RECEIVE_VISIBILITY,
                                  WaitTimeSeconds=1).get("Messages", [])
        if not got:
            return messages
        messages.extend(got)


def read_batch(ctx: Context, message: dict) -> FailedBatch:
    """The message's batch: its agent results from the stream, or (stream past 24 h) from the ledger."""
    try:
        body = json.loads(message["Body"])
        info = body["DDBStreamBatchInfo"]
        start, end, shard, stream = (str(info[key]) for key in ("startSequenceNumber", "endSequenceNumber",
                                                                "shardId", "streamArn"))
    except (ValueError, KeyError, TypeError):
        raise CliError(f"message {message.get('MessageId')} on the stream failures queue is not a Lambda "
                       "invocation record with DDBStreamBatchInfo; leave it for a look by hand") from None
    batch = FailedBatch(message["MessageId"], message["ReceiptHandle"], info,
                        function_error=str((body.get("responseContext") or {}).get("functionError") or ""))
    try:
        records = stream_records(ctx.client("dynamodbstreams"), stream, shard, start, end)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        if code not in GONE:
            raise
        batch.from_stream, batch.gone_because = False, f"{code}: {error.response['Error'].get('Message', '')}"
        return batch  # its results: from the ledger (command)
    region = stream.split(":")[3]
    for raw in records:
        keys = raw.get("dynamodb", {}).get("Keys", {})
        pk, sk = keys.get("pk", {}).get("S", ""), keys.get("sk", {}).get("S", "")
        command = parse_agent_command_pk(pk)
        if raw.get("eventName") in ("INSERT", "MODIFY") and sk == "result" and command is not None:
            batch.results.append(AgentResult(command[0], command[1], raw["dynamodb"].get("NewImage", {}),
                                             record=lambda_record(raw, stream, region)))
        elif pk.startswith("agent#") and sk == "heartbeat":
            batch.heartbeats += 1
        else:
            batch.other += 1
    return batch


def stream_records(streams: Any, stream: str, shard: str, start: str, end: str) -> list[dict]:
    """The records of one shard from sequence number ``start`` to ``end``, both included (GetShardIterator
    AT_SEQUENCE_NUMBER, then GetRecords; sequence numbers grow within a shard)."""
    iterator = streams.get_shard_iterator(StreamArn=stream, ShardId=shard, ShardIteratorType="AT_SEQUENCE_NUMBER",
                                          SequenceNumber=start)["ShardIterator"]
    records: list[dict] = []
    for _ in range(MAX_PAGES):
        response = streams.get_records(ShardIterator=iterator)
        for record in response.get("Records", []):
            if int(record["dynamodb"]["SequenceNumber"]) > int(end):
                return records
            records.append(record)
        iterator = response.get("NextShardIterator")
        if not iterator or not response.get("Records"):
            return records
    return records


def unrecorded_results(ctx: Context) -> list[AgentResult]:
    """Every agent result in the ledger that Medic wrote no final record for (one Scan of the agents' items)."""
    client, table = ctx.client("dynamodb"), ctx.table
    results = []
    for page in client.get_paginator("scan").paginate(
            TableName=table, FilterExpression="begins_with(pk, :agent) AND sk = :result",
            ExpressionAttributeValues={":agent": {"S": "agent#"}, ":result": {"S": "result"}}):
        for item in page.get("Items", []):
            command = parse_agent_command_pk(item["pk"]["S"])
            if command is not None:
                results.append(AgentResult(command[0], command[1], item))
    mark_recorded(ctx, results)
    return [result for result in results if not result.recorded]


def mark_recorded(ctx: Context, results: list[AgentResult]) -> None:
    client = ctx.client("dynamodb")
    for result in results:
        # where Medic claims the record: its command's key (a command issued before commands were keyed by cluster:
        # the old one, CommandRef.legacy)
        result.recorded = any(
            client.get_item(TableName=ctx.table, Key=CommandRef(result.cluster, result.command_id, legacy).key(
                "recorded"), ProjectionExpression="pk").get("Item") is not None for legacy in (False, True))


def lambda_record(raw: dict, stream: str, region: str) -> dict:
    """A GetRecords record as the event source mapping hands it to the function: ``eventSourceARN`` added, the
    creation time in epoch seconds (DynamoDB Streams API reference, StreamRecord)."""
    record = json.loads(json.dumps(raw, default=_epoch))
    record.update({"eventSourceARN": stream, "awsRegion": record.get("awsRegion") or region})
    return record


def _epoch(value: Any) -> Any:
    if isinstance(value, datetime):
        return int(value.timestamp())
    raise TypeError(f"not JSON: {type(value).__name__}")


# --- re-delivering

def redrive(ctx: Context, function: str, batch: FailedBatch) -> None:
    """Each unrecorded result to the results function, one at a time (a failure stays with its own result)."""
    for result in batch.results:
        if result.recorded:
            continue
        record = result.record or ledger_record(result, batch.info)
        try:
            response = ctx.client("lambda").invoke(FunctionName=function, InvocationType="RequestResponse",
                                                   Payload=json.dumps({"Records": [record]}).encode())
        except ClientError as error:
            result.redriven = f"invoke failed: {error.response.get('Error', {}).get('Code')}"
            continue
        payload = response["Payload"].read()
        answer = json.loads(payload) if payload else None
        if response.get("FunctionError"):
            result.redriven = f"the function failed again ({response['FunctionError']}): its log group says why"
        elif isinstance(answer, dict) and answer.get("batchItemFailures"):
            result.redriven = "the function reported it failed again: its log group says why"
        else:
            mark_recorded(ctx, [result])
            result.redriven = "recorded" if result.recorded else "delivered; no final record (the function's " \
                                                                 "log group says why: rejected, or not a result)"
    return None


def ledger_record(result: AgentResult, info: dict) -> dict:
    """A result re-derived from the ledger, in the stream record's shape: the agent's item as NewImage."""
    stream = str(info.get("streamArn", ""))
    keys = {"pk": result.item["pk"], "sk": result.item["sk"]}
    return {"eventID": f"medic-stream-failures-{result.command_id}", "eventName": "INSERT", "eventVersion": "1.1",
            "eventSource": "aws:dynamodb", "awsRegion": stream.split(":")[3] if stream.count(":") > 3 else "",
            "eventSourceARN": stream,
            "dynamodb": {"ApproximateCreationDateTime": int(datetime.now(UTC).timestamp()), "Keys": keys,
                         "NewImage": result.item, "SequenceNumber": "0", "SizeBytes": len(json.dumps(result.item)),
                         "StreamViewType": "NEW_IMAGE"}}


# --- output

def as_text(batches: list[FailedBatch], queue: str, redrive_asked: bool) -> str:
    if not batches:
        return f"No stream batch waits in {queue}: nothing was lost."
    lines = [f"{len(batches)} stream batch(es) Lambda gave up on, in {queue}:"]
    for number, batch in enumerate(batches, 1):
        info = batch.info
        lines.append(f"batch {number}: shard {info.get('shardId')}, sequence numbers {info.get('startSequenceNumber')}"
                     f"..{info.get('endSequenceNumber')} ({info.get('batchSize')} records), arrived "
                     f"{info.get('approximateArrivalOfFirstRecord')}..{info.get('approximateArrivalOfLastRecord')}"
                     + (f"; the function failed ({batch.function_error})" if batch.function_error else ""))
        if not batch.from_stream:
            lines.append(f"  no longer in the stream ({batch.gone_because})" + (
                "; re-derived from the agents' result items in the ledger: every result Medic has no final record "
                "for" if batch is next(b for b in batches if not b.from_stream) else "; see the first such batch"))
        for result in batch.results:
            status, kind, target, said = (result.item.get(name, {}).get("S", "")
                                          for name in ("status", "kind", "target", "message"))
            state = "Medic recorded it" if result.recorded else "Medic has NOT recorded it"
            if result.redriven and result.redriven != "recorded":
                state += f"; re-delivered: {result.redriven}"
            elif result.redriven:
                state = "re-delivered: Medic recorded it now"
            lines.append(f"  {result.cluster} command {result.command_id}: {kind} {target} {status}, the agent said "
                         f"{quoted(said, 200)}: {state}")
        if batch.heartbeats:
            lines.append(f"  {batch.heartbeats} heartbeat(s) skipped: a later heartbeat is what counts")
    undone = [batch for batch in batches if not batch.done]
    if undone and not redrive_asked:
        lines.append("Run `medic stream-failures --redrive` to hand the unrecorded results to the results function.")
    elif undone:
        lines.append("Some results could not be recorded: their messages stay in the queue; the function's log "
                     "group says why.")
    return "\n".join(lines)
