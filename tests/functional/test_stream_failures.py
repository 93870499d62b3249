"""Specification: `medic stream-failures` reads back the agent results of a ledger-stream batch the results function
failed on every retry, from the stream within its 24 hours or from the agents' own items after, and with
--redrive has the results function record them (moto DynamoDB, DynamoDB Streams and SQS; the real agent and the
real results handler in-process, behind a stand-in for Lambda's Invoke).

What the on-failure destination receives is Lambda's invocation record, not the records: the message below follows
the example in the Lambda developer guide ("Using AWS Lambda with Amazon DynamoDB", Error handling)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field

import boto3
import pytest
from botocore.stub import Stubber
from medic_cli.context import Context
from medic_cli.main import main

from medic.handlers import agent_results
from tests.functional.conftest import REGION, TABLE
from tests.functional.slurm_world import SlurmWorld, streamed_slurm, watched_medic  # noqa: F401 - the `slurm` fixture
from tests.functional.test_agent_results import LambdaContext, requeue

FUNCTION = "Medic-SlurmJobRequeueAgentResultsHandlerFunction-0A1B2C3D4E5F"


@pytest.fixture
def medic(aws):
    """Requests by id are limited to watched jobs: llama3-70b is watched on the Slurm cluster."""
    yield from watched_medic(aws)


@dataclass
class InProcessLambda:
    """Lambda's Invoke (RequestResponse) running the deployed results handler here: its answer, or
    `FunctionError: Unhandled` with the error when it raises (Lambda API reference, Invoke)."""

    payloads: list[dict] = field(default_factory=list)
    fail: bool = False

    def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes) -> dict:  # noqa: N803 - boto3's names
        assert (FunctionName, InvocationType) == (FUNCTION, "RequestResponse")
        event = json.loads(Payload)
        self.payloads.append(event)
        if self.fail:
            return {"StatusCode": 200, "FunctionError": "Unhandled",
                    "Payload": io.BytesIO(b'{"errorMessage": "still failing", "errorType": "RuntimeError"}')}
        answer = agent_results.handler(event, LambdaContext())
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}


@pytest.fixture
def failures(slurm: SlurmWorld):
    """The stack's stream failures queue, and a CLI context on this account (outputs as the stack gives them)."""
    queue = slurm.sqs.create_queue(QueueName="Medic-SlurmJobRequeueResultsStreamOnFailure")["QueueUrl"]
    invoker = InProcessLambda()
    ctx = Context(region=REGION, table_name=TABLE)
    ctx.__dict__["outputs"] = {"AgentResultsStreamFailuresQueueUrl": queue, "AgentResultsFunctionName": FUNCTION}
    ctx._clients.update({"sqs": slurm.sqs, "dynamodb": slurm.dynamodb, "dynamodbstreams": slurm.streams,
                         "lambda": invoker})
    return queue, ctx, invoker


def gave_up_on(slurm: SlurmWorld, queue: str, records: list[dict]) -> None:
    """Lambda gives up on a batch of the ledger's stream: it sends the on-failure queue where the batch was."""
    shard = slurm.streams.describe_stream(StreamArn=slurm.stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    slurm.sqs.send_message(QueueUrl=queue, MessageBody=json.dumps({
        "requestContext": {"requestId": "316aa6d0-8154-4a5b-9af7-85d5f4a6bc81",
                           "functionArn": f"arn:aws:lambda:{REGION}:123456789012:function:{FUNCTION}",
                           "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 11},
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0", "timestamp": "2026-11-20T08:20:49.717Z",
        "DDBStreamBatchInfo": {
            "shardId": shard,
            "startSequenceNumber": records[0]["dynamodb"]["SequenceNumber"],
            "endSequenceNumber": records[-1]["dynamodb"]["SequenceNumber"],
            "approximateArrivalOfFirstRecord": "2026-11-20T08:14:07Z",
            "approximateArrivalOfLastRecord": "2026-11-20T08:14:07Z",
            "batchSize": len(records), "streamArn": slurm.stream_arn}}))


def medic_cli(ctx: Context, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["stream-failures", *args], out=out, err=err, context=ctx)
    return code, out.getvalue(), err.getvalue()


def waiting(slurm: SlurmWorld, queue: str) -> int:
    attributes = slurm.sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return sum(int(value) for value in attributes.values())


def lost_result(slurm: SlurmWorld) -> list[dict]:
    """A requeue Medic queued, run by the agent, whose result (with a heartbeat) reached the function in a batch
    the function failed on every retry: the batch's records."""
    requeue(slurm)
    slurm.stream_event()  # Medic's own writes so far
    slurm.run_agent()  # it heartbeats, claims the command, runs it, writes the result
    records = slurm.stream_event()["Records"]
    assert {"heartbeat", "claim", "result"} <= {r["dynamodb"]["Keys"]["sk"]["S"] for r in records}
    return records


def test_a_lost_result_is_read_back_from_the_stream_and_shown_unrecorded(slurm, failures):
    queue, ctx, invoker = failures
    gave_up_on(slurm, queue, lost_result(slurm))
    # When an operator looks
    code, out, err = medic_cli(ctx)
    # Then the result is read back from the stream by its sequence numbers: the agent's words, quoted, not recorded
    assert code == 1, err
    assert ("requeue_job 4211@llama3-70b executed, the agent said "
            "\"job 4211 is 'llama3-70b'; scontrol requeue 4211: exit 0\"") in out
    assert "Medic has NOT recorded it" in out and "heartbeat(s) skipped: a later heartbeat is what counts" in out
    assert "medic stream-failures --redrive" in out
    # And nothing was done: no invoke, no record, the message still waits
    assert invoker.payloads == [] and slurm.item(f"command#pretrain-slurm#{_command_id(slurm)}", "recorded") is None
    assert waiting(slurm, queue) == 1


def test_redrive_has_the_results_function_record_it_and_clears_the_message(slurm, failures):
    queue, ctx, invoker = failures
    gave_up_on(slurm, queue, lost_result(slurm))
    before = len(slurm.medic.log.lines)
    # When the operator redrives
    code, out, err = medic_cli(ctx, "--redrive")
    # Then the function gets the result record, exactly as the event source mapping delivers it ...
    assert code == 0, out + err
    [payload] = invoker.payloads
    [record] = payload["Records"]
    assert record["dynamodb"]["Keys"]["sk"] == {"S": "result"}
    assert record["eventSourceARN"] == slurm.stream_arn and isinstance(
        record["dynamodb"]["ApproximateCreationDateTime"], int)
    # ... and writes the requeue's final record, once; the message is gone
    [final] = slurm.medic.log.lines[before:]
    assert (final["outcome"], final["action"]) == ("executed", "requeue_job")
    assert "re-delivered: Medic recorded it now" in out
    assert waiting(slurm, queue) == 0
    # And a second look finds nothing left
    assert medic_cli(ctx)[:2] == (0, f"No stream batch waits in {queue}: nothing was lost.\n")


def test_after_24_hours_the_result_is_re_derived_from_the_agents_item(slurm, failures):
    queue, ctx, invoker = failures
    gave_up_on(slurm, queue, lost_result(slurm))
    # Given the batch is past the stream's 24 hours: DynamoDB Streams answers TrimmedDataAccessException ("the
    # requested data has been trimmed", API reference, GetShardIterator; moto never trims, so botocore's Stubber)
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    stub = Stubber(streams)
    stub.add_client_error("get_shard_iterator", "TrimmedDataAccessException",
                          "The operation attempted to read past the oldest stream record in a shard.", 400)
    stub.activate()
    ctx._clients["dynamodbstreams"] = streams
    # When the operator redrives
    code, out, err = medic_cli(ctx, "--redrive")
    # Then the result comes from the agent's own ledger item, and the function records it
    assert code == 0, out + err
    assert "no longer in the stream (TrimmedDataAccessException" in out
    [payload] = invoker.payloads
    [record] = payload["Records"]
    assert record["dynamodb"]["NewImage"]["status"] == {"S": "executed"}
    assert record["dynamodb"]["Keys"]["sk"] == {"S": "result"}
    assert slurm.item(f"command#pretrain-slurm#{_command_id(slurm)}", "recorded") is not None
    assert waiting(slurm, queue) == 0


def test_a_result_the_function_still_fails_on_stays_in_the_queue(slurm, failures):
    queue, ctx, invoker = failures
    gave_up_on(slurm, queue, lost_result(slurm))
    invoker.fail = True
    code, out, _ = medic_cli(ctx, "--redrive", "--json")
    assert code == 1
    [batch] = json.loads(out)["batches"]
    [result] = batch["results"]
    assert result["redriven"].startswith("the function failed again (Unhandled)") and result["recorded"] is False
    assert waiting(slurm, queue) == 1


def _command_id(slurm: SlurmWorld) -> str:
    [item] = [i for i in slurm.items() if i["sk"]["S"] == "result"]
    return item["pk"]["S"].rsplit("#", 1)[1]
