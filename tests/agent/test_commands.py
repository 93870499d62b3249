"""Pure specs for the agent's command parsing, validation and argv building."""

from __future__ import annotations

import json

import pytest
from medic_agent.commands import (
    Command,
    Refused,
    RequeueJob,
    job_name_argv,
    parse,
    parse_job_name_lines,
    requeue_argv,
    running_jobs_argv,
)

CLUSTER = "pretrain-slurm"
COMMAND_ID = "0b6f3a52-5d0e-4c1f-9a57-3f1e2d9c8b71"

HOSTILE_JOB_IDS = ["4211; rm -rf /", "$(reboot)", "`reboot`", "4211\n", "4211 ", " 4211", "-1", "42_1", "4211&&id",
                   "٤٢١١", "12345678901", "", "4211|sh", "--help"]
HOSTILE_NAMES = ["llama; reboot", "$(reboot)", "a b", "a,b", "llama\n", "x" * 129, "", "na/me", "*"]


def body(**fields) -> str:
    return json.dumps({"command_id": COMMAND_ID, "cluster": CLUSTER, "incident": "job:llama3-70b",
                       "issued_at": "2026-12-02T18:00:00+00:00", **fields})


class TestParseRequeue:
    def test_requeue_by_job_id(self):
        # Given a requeue message for job 4211 / When parsed
        command = parse(body(kind="requeue_job", job_id="4211"), cluster=CLUSTER)
        # Then it is a typed requeue of that job, with its envelope
        assert command == Command(command_id=COMMAND_ID, cluster=CLUSTER, kind="requeue_job",
                                  action=RequeueJob(job_id="4211"), incident="job:llama3-70b",
                                  issued_at="2026-12-02T18:00:00+00:00")
        assert command.target == "4211"

    def test_requeue_by_job_name(self):
        command = parse(body(kind="requeue_job", job_name="llama3-70b"), cluster=CLUSTER)
        assert command.action == RequeueJob(job_name="llama3-70b")
        assert command.target == "name:llama3-70b"

    @pytest.mark.parametrize("job_id", HOSTILE_JOB_IDS)
    def test_hostile_job_id_is_refused(self, job_id):
        with pytest.raises(Refused) as refused:
            parse(body(kind="requeue_job", job_id=job_id), cluster=CLUSTER)
        # the refusal still knows which command it was, so the ledger can say so
        assert refused.value.command_id == COMMAND_ID
        assert refused.value.kind == "requeue_job"
        assert refused.value.target == job_id[:256]
        assert "job_id" in refused.value.reason

    @pytest.mark.parametrize("job_id", [4211, 4211.0, None, ["4211"], {"id": "4211"}, True])
    def test_job_id_must_be_a_string_of_digits(self, job_id):
        with pytest.raises(Refused, match="job_id"):
            parse(body(kind="requeue_job", job_id=job_id), cluster=CLUSTER)

    @pytest.mark.parametrize("name", HOSTILE_NAMES)
    def test_hostile_job_name_is_refused(self, name):
        with pytest.raises(Refused, match="job_name"):
            parse(body(kind="requeue_job", job_name=name), cluster=CLUSTER)

    def test_requeue_by_id_limited_to_named_jobs(self):
        command = parse(body(kind="requeue_job", job_id="4211", job_names=["bert-xl", "llama3-70b"]), cluster=CLUSTER)
        assert command.action == RequeueJob(job_id="4211", job_names=("bert-xl", "llama3-70b"))
        assert command.target == "4211@bert-xl,llama3-70b"

    def test_requeue_by_name_preferring_the_job_medic_saw(self):
        command = parse(body(kind="requeue_job", job_name="llama3-70b", last_seen_id="4211"), cluster=CLUSTER)
        assert command.action == RequeueJob(job_name="llama3-70b", last_seen_id="4211")
        assert command.target == "name:llama3-70b@4211"

    @pytest.mark.parametrize("fields", [
        {"job_id": "1", "job_names": "llama3-70b"}, {"job_id": "1", "job_names": ["a b"]},
        {"job_id": "1", "job_names": ["a", "a"]}, {"job_id": "1", "job_names": [f"j{n}" for n in range(51)]},
        {"job_id": "1", "job_names": [4211]}, {"job_id": "1", "last_seen_id": "2"},
        {"job_name": "x", "job_names": ["x"]}, {"job_name": "x", "last_seen_id": "2;reboot"},
        {"job_name": "x", "last_seen_id": 2}], ids=repr)
    def test_a_forged_or_mixed_restriction_is_refused(self, fields):
        with pytest.raises(Refused):
            parse(body(kind="requeue_job", **fields), cluster=CLUSTER)

    def test_needs_exactly_one_of_id_or_name(self):
        with pytest.raises(Refused, match="exactly one"):
            parse(body(kind="requeue_job", job_id="1", job_name="x"), cluster=CLUSTER)
        with pytest.raises(Refused, match="exactly one"):
            parse(body(kind="requeue_job"), cluster=CLUSTER)


class TestParseFailNode:
    @pytest.mark.parametrize("repair", ["Replace", "Reboot"])
    def test_fail_node_which_medic_never_issues_is_refused(self, repair):
        # No Medic function issues it: an agent that ran it would act on a node no guardrail, protected group
        # or mode check ever saw.
        with pytest.raises(Refused, match="kind must be one of requeue_job"):
            parse(body(kind="fail_node", node="ip-10-1-2-3", repair=repair), cluster=CLUSTER)


class TestParseEnvelope:
    def test_other_cluster_is_refused(self):
        with pytest.raises(Refused, match="this agent serves") as refused:
            parse(body(kind="requeue_job", job_id="4211", cluster="someone-else"), cluster=CLUSTER)
        assert refused.value.command_id == COMMAND_ID
        assert refused.value.cluster == "someone-else"

    @pytest.mark.parametrize("kind", ["run_shell", "scancel", "", None, "REQUEUE_JOB"])
    def test_unknown_kind_is_refused(self, kind):
        with pytest.raises(Refused, match="kind must be one of"):
            parse(body(kind=kind, job_id="4211"), cluster=CLUSTER)

    @pytest.mark.parametrize("raw", ["not json", "[]", "null", json.dumps("x"), "{" * 10, "x" * 20_000])
    def test_garbage_is_refused_without_a_command_id(self, raw):
        with pytest.raises(Refused) as refused:
            parse(raw, cluster=CLUSTER)
        assert refused.value.command_id is None

    @pytest.mark.parametrize("command_id", [None, "", "a b", "x" * 65, "id;rm", "../../etc", "-abc"])
    def test_command_id_must_be_plain(self, command_id):
        with pytest.raises(Refused, match="command_id") as refused:
            parse(body(kind="requeue_job", job_id="4211", command_id=command_id), cluster=CLUSTER)
        assert refused.value.command_id is None

    def test_long_incident_is_truncated(self):
        command = parse(body(kind="requeue_job", job_id="1", incident="i" * 5000), cluster=CLUSTER)
        assert len(command.incident) == 512


class TestArgv:
    def test_requeue_argv(self):
        assert requeue_argv("4211") == ["scontrol", "requeue", "4211"]
        assert requeue_argv("4211_7") == ["scontrol", "requeue", "4211_7"]  # an array task, as squeue prints it

    def test_running_jobs_argv(self):
        assert running_jobs_argv("llama3-70b") == ["squeue", "--noheader", "--states=RUNNING", "--format=%i|%j",
                                                   "--name=llama3-70b"]

    def test_job_name_argv(self):
        assert job_name_argv("4211") == ["squeue", "--noheader", "--states=all", "--format=%i|%T|%j", "-j", "4211"]

    @pytest.mark.parametrize("job_id", [j for j in HOSTILE_JOB_IDS if j != "42_1"])  # array tasks come from squeue
    def test_builders_recheck_their_input(self, job_id):
        with pytest.raises(ValueError):
            requeue_argv(job_id)

    @pytest.mark.parametrize("name", HOSTILE_NAMES)
    def test_running_jobs_argv_rechecks(self, name):
        with pytest.raises(ValueError):
            running_jobs_argv(name)

    @pytest.mark.parametrize("job_id", HOSTILE_JOB_IDS)
    def test_job_name_argv_rechecks(self, job_id):
        with pytest.raises(ValueError):
            job_name_argv(job_id)

    def test_named_jobs_are_parsed_strictly_with_the_name_last(self):
        output = "4211|RUNNING|llama3-70b\n4212_3|PENDING|a|b name\n\n4211|RUNNING|again\n"
        assert parse_job_name_lines(output) == [("4211", "RUNNING", "llama3-70b"), ("4212_3", "PENDING", "a|b name")]
        with pytest.raises(ValueError):
            parse_job_name_lines("4211|running|x\n")
