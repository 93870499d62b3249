"""Specification: ``medic backtest`` replays the events Medic received with a candidate config and lists exactly
the decisions that would have differed from the live ones; exit 0 when none, 1 when some, 2 on error.

The "live" records here are a replay of the same events with the live config (sim output is a valid
``--against``), so the live side is what the real handlers decided."""

from __future__ import annotations

import io
import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from medic_cli import backtest
from medic_cli.context import Context
from medic_cli.main import main
from moto import mock_aws

from medic.config import parse_config
from medic.obs import logger as medic_logger
from sim.replay import run as sim_replay

ROOT = Path(__file__).resolve().parents[2]
LIVE_CONFIG = ROOT / "sim" / "scenarios" / "demo.medic.yaml"  # budget: 4 node actions per cluster per hour
STORM = ROOT / "sim" / "scenarios" / "d-storm.jsonl"  # 30 failing nodes of pretrain-slurm, 20 s apart


def storm_events(count: int) -> list[str]:
    return [line for line in STORM.read_text().splitlines() if line.startswith("{")][:count]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def replayed(lines: list[str], config: Path) -> list[dict]:
    """What `sim replay` prints (records and pages), as JSON lines."""
    return sim_replay(lines, config, err=io.StringIO()).lines


def lower_budget(tmp: Path, per_hour: int) -> Path:
    path = tmp / f"budget-{per_hour}.medic.yaml"
    path.write_text(LIVE_CONFIG.read_text().replace("max_node_actions_per_hour: 4",
                                                    f"max_node_actions_per_hour: {per_hour}"))
    return path


def medic(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["backtest", *args], out=out, err=err, context=Context(region="us-west-2"))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def storm(tmp_path_factory) -> dict[str, Path]:
    """Two storms on the live config: 4 failures (all within the hourly budget: 4 replaced, nobody paged) and
    5 failures (4 replaced, the 5th suppressed with the cluster's one storm page)."""
    tmp = tmp_path_factory.mktemp("storm")
    files = {}
    for count in (4, 5):
        events = storm_events(count)
        files[f"events{count}"] = write_lines(tmp / f"events{count}.jsonl", events)
        files[f"live{count}"] = write_lines(tmp / f"live{count}.jsonl",
                                            [json.dumps(line) for line in replayed(events, LIVE_CONFIG)])
    files["budget2"] = lower_budget(tmp, 2)
    return files


def test_given_a_storm_within_the_live_budget_when_the_candidate_budget_is_lower_then_the_extra_actions_are_removed_and_a_storm_page_added(storm):  # noqa: E501
    code, out, err = medic("--config", str(storm["budget2"]), "--events", str(storm["events4"]),
                           "--against", str(storm["live4"]), "--json")
    assert code == 1, err
    result = json.loads(out)
    # Then the 3rd and 4th failures are no longer replaced; the 3rd carries the cluster's one summary page
    changed = [(d["live"]["outcome"], d["live"]["paged"], d["candidate"]["outcome"], d["candidate"]["paged"])
               for d in result["differences"]]
    assert changed == [("executed", False, "suppressed", True), ("executed", False, "suppressed", False)]
    assert {key: result["summary"][key] for key in ("actions_added", "actions_removed", "pages_added",
                                                    "pages_removed")} == {
        "actions_added": 0, "actions_removed": 2, "pages_added": 1, "pages_removed": 0}
    assert result["summary"]["by"] == [{"cluster": "pretrain-slurm", "fault": "gpu_fatal", "actions_added": 0,
                                        "actions_removed": 2, "pages_added": 1, "pages_removed": 0}]


def test_given_a_storm_beyond_both_budgets_then_the_one_storm_page_per_window_moves_to_the_first_suppressed_event(storm):  # noqa: E501
    # One summary page per cluster per guardrail window: live pages on the 5th failure, the candidate on the 3rd
    code, out, _ = medic("--config", str(storm["budget2"]), "--events", str(storm["events5"]),
                         "--against", str(storm["live5"]))
    assert code == 1
    assert "Decisions that differ: 3" in out
    assert "Summary: actions +0 -2, pages +1 -1" in out
    row = next(line for line in out.splitlines() if line.startswith("  2026-11-20 08:15:25"))
    assert "replace_node suppressed paged" in row and "replace_node suppressed not paged" in row
    assert "live:      Fault gpu_fatal calls for replace; capacity: " in out  # the reasons, side by side


def test_given_the_live_config_as_candidate_then_no_decision_differs_and_the_exit_status_is_0(storm):
    code, out, err = medic("--config", str(LIVE_CONFIG), "--events", str(storm["events5"]),
                           "--against", str(storm["live5"]))
    assert code == 0, err
    assert "Decisions that differ: 0" in out
    assert "Summary: actions +0 -0, pages +0 -0" in out


def test_replay_level_the_backtest_lists_exactly_the_decisions_a_replay_with_the_candidate_changes(storm, tmp_path):
    # Given the events replayed with config A (live) and, independently, with config B
    events = storm_events(8)
    records_a = [line for line in replayed(events, LIVE_CONFIG) if line["kind"] == "record"]
    records_b = [line for line in replayed(events, storm["budget2"]) if line["kind"] == "record"]

    def decided(records: list[dict]) -> dict:
        return {(r["event_id"], r["incident"]): (r["action"], r["outcome"], r["paged"]) for r in records}

    a, b = decided(records_a), decided(records_b)
    changed = {key for key in a.keys() | b.keys() if a.get(key) != b.get(key)}
    assert changed  # the storm is beyond budget B: B changes some decisions
    # When backtesting B against A's records
    against = write_lines(tmp_path / "a.jsonl", [json.dumps(r) for r in records_a])
    code, out, _ = medic("--config", str(storm["budget2"]), "--events",
                         str(write_lines(tmp_path / "events.jsonl", events)), "--against", str(against), "--json")
    # Then it lists exactly those decisions, each with A's and B's side
    result = json.loads(out)
    assert code == 1
    assert {(d["event_id"], d["incident"]) for d in result["differences"]} == changed
    for difference in result["differences"]:
        key = (difference["event_id"], difference["incident"])
        assert (difference["live"]["action"], difference["live"]["outcome"], difference["live"]["paged"]) == a[key]
        assert (difference["candidate"]["action"], difference["candidate"]["outcome"],
                difference["candidate"]["paged"]) == b[key]


def test_given_a_malformed_events_file_then_the_error_names_the_line_and_the_exit_status_is_2(storm, tmp_path):
    events = write_lines(tmp_path / "events.jsonl", [*storm_events(2), '{"id": "x", "source": "aws.sagemaker"',
                                                     *storm_events(3)[2:]])
    code, out, err = medic("--config", str(LIVE_CONFIG), "--events", str(events), "--against", str(storm["live4"]))
    assert code == 2
    assert f"{events}: line 3: not valid JSON" in err
    assert out == ""


def test_given_a_line_that_is_not_an_eventbridge_event_then_the_error_names_what_is_missing(storm, tmp_path):
    events = write_lines(tmp_path / "events.jsonl", ['{"id": "e1", "time": "2026-11-20T08:14:05Z", "source": "x"}'])
    code, _, err = medic("--config", str(LIVE_CONFIG), "--events", str(events), "--against", str(storm["live4"]))
    assert code == 2
    assert "line 1: not an EventBridge event (missing detail-type, detail)" in err


def test_without_a_candidate_config_or_with_events_but_no_records_the_exit_status_is_2(storm):
    assert medic("--events", str(storm["events4"]), "--against", str(storm["live4"]))[0] == 2
    code, _, err = medic("--config", str(LIVE_CONFIG), "--events", str(storm["events4"]))
    assert code == 2 and "--events and --against go together" in err


def test_a_bad_candidate_config_is_an_error_naming_the_key(storm, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(LIVE_CONFIG.read_text().replace("max_node_actions_per_hour: 4", "max_node_actions_per_hour: -1"))
    code, _, err = medic("--config", str(bad), "--events", str(storm["events4"]), "--against", str(storm["live4"]))
    assert code == 2 and "guardrails.max_node_actions_per_hour" in err


# --- the world the events need, rebuilt from the records

def node_event(node: str) -> dict:
    return json.loads(storm_events(1)[0]) | {"detail": {**json.loads(storm_events(1)[0])["detail"], "InstanceId": node}}


def test_a_node_group_the_live_records_name_is_set_in_the_world_and_a_protected_group_is_said_so():
    config = parse_config(json.loads(json.dumps({"clusters": [
        {"name": "pretrain-slurm", "id": "k3v9q2w8x1za", "orchestrator": "slurm"}]})))
    live = [{"cluster": "pretrain-slurm", "node_id": "i-0aaaaaaaaaaaaaaa1", "instance_group": "controller"}]
    directives, assumptions = backtest.rebuild_world([node_event("i-0aaaaaaaaaaaaaaa1")], live, config)
    assert directives == [{"sim": {"node": {"cluster": "pretrain-slurm", "id": "i-0aaaaaaaaaaaaaaa1",
                                            "group": "controller"}}}]
    assert any("group controller from the live records (protected" in text for text in assumptions)


def test_a_node_group_nothing_names_is_stated_as_assumed_unprotected_never_silently_guessed():
    config = parse_config({"clusters": [{"name": "pretrain-slurm", "id": "k3v9q2w8x1za", "orchestrator": "slurm"}]})
    directives, assumptions = backtest.rebuild_world([node_event("i-0bbbbbbbbbbbbbbb2")], [], config)
    assert directives == []
    assert "node i-0bbbbbbbbbbbbbbb2 (pretrain-slurm): node group unknown: assumed unprotected" in assumptions
    assert any(text.startswith("cluster pretrain-slurm: size unknown") for text in assumptions)


def test_a_cluster_the_candidate_does_not_configure_is_stated():
    config = parse_config({"clusters": [{"name": "other", "id": "k3v9q2w8x1za", "orchestrator": "slurm"}]})
    _, assumptions = backtest.rebuild_world([node_event("i-0bbbbbbbbbbbbbbb2")], [], config)
    assert ("cluster pretrain-slurm: not in the candidate config: its events match no rule of the candidate"
            in assumptions)


def test_the_live_run_time_mode_is_replayed_before_each_event_it_changed_for():
    first, second = json.loads(storm_events(2)[0]), json.loads(storm_events(2)[1])
    live = [{"event_id": first["id"], "mode": "act"}, {"event_id": second["id"], "mode": "paused"}]
    assert list(backtest._with_live_mode([first, second], live)) == [
        {"sim": {"mode": {"value": "act", "event": False}}}, first,
        {"sim": {"mode": {"value": "paused", "event": False}}}, second]


# --- reading the archive back

def test_the_read_back_takes_only_this_replays_events_from_the_queue_and_deletes_them(monkeypatch):
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-west-2")
        queue = sqs.create_queue(QueueName="readback")["QueueUrl"]
        event = json.loads(storm_events(1)[0])
        sqs.send_message(QueueUrl=queue, MessageBody=json.dumps({**event, "replay-name": "medic-backtest-mine"}))
        sqs.send_message(QueueUrl=queue, MessageBody=json.dumps({**event, "id": "other",
                                                                 "replay-name": "medic-backtest-theirs"}))
        monkeypatch.setattr(backtest, "EMPTY_RECEIVES", 1)
        got = backtest.drain(sqs, queue, "medic-backtest-mine")
        assert [e["id"] for e in got] == [event["id"]]
        left = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages",
                                                                         "ApproximateNumberOfMessagesNotVisible"])
        assert sum(int(v) for v in left["Attributes"].values()) == 1  # the other backtest's message stays


def offline_credentials(monkeypatch) -> None:
    """Emulated AWS only: no profile or endpoint of the developer's, fake keys, one empty receive ends a drain."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setattr(backtest, "EMPTY_RECEIVES", 1)


def test_the_archive_is_read_back_through_a_replay_that_names_only_the_read_back_rule(monkeypatch):
    """StartReplay with FilterArns = the read-back rule (moto replays to every rule; AWS only to FilterArns)."""
    offline_credentials(monkeypatch)
    with mock_aws():
        events, sqs = boto3.client("events", region_name="us-west-2"), boto3.client("sqs", region_name="us-west-2")
        queue = sqs.create_queue(QueueName="readback")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        rule = events.put_rule(Name="readback", EventPattern=json.dumps(
            {"replay-name": [{"prefix": backtest.REPLAY_PREFIX}]}))["RuleArn"]
        events.put_targets(Rule="readback", Targets=[{"Id": "q", "Arn": queue_arn}])
        bus = events.describe_event_bus()["Arn"]
        archive = events.create_archive(ArchiveName="medic", EventSourceArn=bus, EventPattern=json.dumps(
            {"source": ["aws.sagemaker"]}))["ArchiveArn"]
        sample = json.loads(storm_events(1)[0])
        events.put_events(Entries=[{"Source": sample["source"], "DetailType": sample["detail-type"],
                                    "Detail": json.dumps(sample["detail"]), "Resources": sample["resources"]}])
        ctx = Context(region="us-west-2")
        ctx.__dict__["outputs"] = {"EventArchiveArn": archive, "BacktestRuleArn": rule, "BacktestQueueUrl": queue}
        err = io.StringIO()
        got = backtest.read_archive(ctx, backtest.parse_time("2020-01-01T00:00:00Z"),
                                    backtest.parse_time("2100-01-01T00:00:00Z"), err, sleep=lambda _: None)
        [replay] = events.list_replays(NamePrefix=backtest.REPLAY_PREFIX)["Replays"]
        assert replay["State"] == "COMPLETED"
        assert events.describe_replay(ReplayName=replay["ReplayName"])["Destination"]["FilterArns"] == [rule]
        assert [(e["detail"]["InstanceId"], e["replay-name"]) for e in got] == [
            (sample["detail"]["InstanceId"], replay["ReplayName"])]
        assert "replaying the archive" in err.getvalue()


def test_events_read_back_from_a_replay_with_new_ids_still_match_their_live_decisions(storm, tmp_path):
    """A replayed event carries replay-name and, as moto has it, may carry a new id (EventBridge does not say it
    keeps the id): its live decision is found by incident and time, and the handlers take replay-name."""
    events = [json.loads(line) for line in storm_events(5)]
    read_back = [json.dumps({**event, "id": f"00000000-0000-4000-8000-00000000000{i}",
                             "replay-name": "medic-backtest-20261203T101500-abc123"})
                 for i, event in enumerate(events)]
    code, out, err = medic("--config", str(LIVE_CONFIG), "--events",
                           str(write_lines(tmp_path / "read-back.jsonl", read_back)), "--against", str(storm["live5"]))
    assert code == 0, out + err
    assert "Decisions that differ: 0" in out


def test_online_the_archive_and_the_log_groups_of_the_last_hour_are_backtested(storm, tmp_path, monkeypatch):
    """`medic backtest --since 1h`: the storm's events from the stack's archive (a replay to the read-back rule),
    the live records from its log group; a lower budget removes two replacements and adds the storm page."""
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)
    events = []
    for index, line in enumerate(storm_events(4)):
        event = json.loads(line)
        event["time"] = (start + timedelta(seconds=20 * index)).strftime("%Y-%m-%dT%H:%M:%SZ")
        events.append(event)
    live = [line for line in replayed([json.dumps(e) for e in events], LIVE_CONFIG) if line["kind"] == "record"]
    assert [r["outcome"] for r in live] == ["executed"] * 4

    offline_credentials(monkeypatch)
    with mock_aws():
        region = "us-west-2"
        client = boto3.client("events", region_name=region)
        sqs, logs = boto3.client("sqs", region_name=region), boto3.client("logs", region_name=region)
        queue = sqs.create_queue(QueueName="readback")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        rule = client.put_rule(Name="readback", EventPattern=json.dumps(
            {"replay-name": [{"prefix": backtest.REPLAY_PREFIX}]}))["RuleArn"]
        client.put_targets(Rule="readback", Targets=[{"Id": "q", "Arn": queue_arn}])
        archive = client.create_archive(ArchiveName="medic", EventSourceArn=client.describe_event_bus()["Arn"],
                                        EventPattern=json.dumps({"source": ["aws.sagemaker"]}))["ArchiveArn"]
        client.put_events(Entries=[{"Source": e["source"], "DetailType": e["detail-type"], "Resources": e["resources"],
                                    "Detail": json.dumps(e["detail"]), "Time": backtest.parse_time(e["time"])}
                                   for e in events])
        group, stream = "/aws/lambda/Medic-NodeRemediation", "2026/12/03/[$LATEST]0123456789abcdef"
        logs.create_log_group(logGroupName=group)
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
        for record in live:
            fields = {key: value for key, value in record.items() if key not in ("kind", "timestamp")}
            log_record = logging.LogRecord("medic", logging.INFO, __file__, 1, "remediation", None, None)
            log_record.__dict__.update(fields)
            logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[{
                "timestamp": int(backtest.parse_time(record["timestamp"]).timestamp() * 1000),
                "message": medic_logger.registered_formatter.format(log_record)}])
        ctx = Context(region=region, log_group_names=[group])
        ctx.__dict__["outputs"] = {"EventArchiveArn": archive, "BacktestRuleArn": rule, "BacktestQueueUrl": queue}
        out, err = io.StringIO(), io.StringIO()
        code = main(["backtest", "--config", str(storm["budget2"]), "--since", "1h", "--json"], out=out, err=err,
                    context=ctx)
    assert code == 1, err.getvalue()
    summary = json.loads(out.getvalue())["summary"]
    assert (summary["actions_removed"], summary["pages_added"], summary["pages_removed"]) == (2, 1, 0)


def test_a_world_file_line_that_is_not_a_sim_directive_is_an_error_naming_the_line(storm, tmp_path):
    world = write_lines(tmp_path / "world.jsonl", ['{"sim": {"cluster": {"name": "pretrain-slurm"}}}',
                                                   '{"cluster": "pretrain-slurm"}'])
    code, _, err = medic("--config", str(LIVE_CONFIG), "--events", str(storm["events4"]), "--against",
                         str(storm["live4"]), "--world", str(world))
    assert code == 2
    assert f"{world}: line 2: expected a sim directive" in err



def test_a_world_file_sets_what_the_records_cannot_say(storm, tmp_path):
    # Given the operator knows the first failing node is in the controller group (protected)
    node = json.loads(storm_events(1)[0])["detail"]["InstanceId"]
    world = write_lines(tmp_path / "world.jsonl", [json.dumps(
        {"sim": {"node": {"cluster": "pretrain-slurm", "id": node, "group": "controller"}}})])
    code, out, _ = medic("--config", str(LIVE_CONFIG), "--events", str(storm["events4"]), "--against",
                         str(storm["live4"]), "--world", str(world), "--json")
    result = json.loads(out)
    # Then that node is not replaced but paged, and the assumption is stated
    assert code == 1
    [difference] = result["differences"]
    assert difference["node_id"] == node
    assert difference["live"]["outcome"] == "executed"
    assert (difference["candidate"]["outcome"], difference["candidate"]["paged"]) == ("suppressed", True)
    assert f"the world directives of {world}: clusters before the rebuilt world, the rest after it" in result[
        "assumptions"]


# --- the operator's world: cluster sizes, and directives mixed into --events (issue 29 item 10/11)

SMALL_CLUSTER = json.dumps({"sim": {"cluster": {"name": "pretrain-slurm", "groups": {"controller": 1, "workers": 2}}}})


@pytest.fixture(scope="module")
def small_cluster(tmp_path_factory) -> dict[str, Path]:
    """The live Medic on a small cluster (controller ×1 + workers ×2, besides the failing nodes): of 4 failures the
    breaker (max_fraction_in_repair 0.25) lets one be replaced and suppresses the rest, paging once."""
    tmp = tmp_path_factory.mktemp("small")
    events = storm_events(4)
    live = replayed([SMALL_CLUSTER, *events], LIVE_CONFIG)
    assert [(line["outcome"], line["paged"]) for line in live if line["kind"] == "record"] == [
        ("executed", False), ("suppressed", True), ("suppressed", False), ("suppressed", False)]
    return {"events": write_lines(tmp / "events.jsonl", events),
            "live": write_lines(tmp / "live.jsonl", [json.dumps(line) for line in live]),
            "world": write_lines(tmp / "world.jsonl", [SMALL_CLUSTER]),
            "mixed": write_lines(tmp / "mixed.jsonl", [SMALL_CLUSTER, *events,
                                                       json.dumps({"sim": {"advance": "+10m"}})])}


def test_given_the_clusters_size_in_the_world_file_when_the_config_is_unchanged_then_no_decision_differs(
        small_cluster):
    # When the operator backtests the live config itself, telling the backtest the cluster's real size
    code, out, err = medic("--config", str(LIVE_CONFIG), "--events", str(small_cluster["events"]), "--against",
                           str(small_cluster["live"]), "--world", str(small_cluster["world"]), "--json")
    # Then the world has that size (the breaker counts against it as live) and nothing differs
    result = json.loads(out)
    assert code == 0, (err, result["differences"])
    assert result["replay_errors"] == []
    assert ("cluster pretrain-slurm: size from the world directives: controller ×1 + workers ×2, plus the node(s) "
            "the events name that it does not hold") in result["assumptions"]


def test_given_an_events_file_that_mixes_in_directives_then_they_set_the_world_and_a_timed_one_is_left_out(
        small_cluster):
    # When the events file is a scenario: the cluster directive, the events, and time passing
    code, out, err = medic("--config", str(LIVE_CONFIG), "--events", str(small_cluster["mixed"]), "--against",
                           str(small_cluster["live"]), "--json")
    # Then the directives went into the world (no difference), and the one that happens at a time is said left out
    result = json.loads(out)
    assert code == 0, (err, result["differences"])
    assert result["events"] == 4
    assert (f"{small_cluster['mixed']}: line 6: directive 'advance' left out: it happens at a time, and the backtest "
            "replays each event at its own time") in result["assumptions"]


def test_given_a_directive_in_the_events_file_that_is_not_one_then_the_error_names_the_line(small_cluster, tmp_path):
    events = write_lines(tmp_path / "events.jsonl", [*storm_events(1), '{"sim": []}'])
    code, _, err = medic("--config", str(LIVE_CONFIG), "--events", str(events), "--against",
                         str(small_cluster["live"]))
    assert code == 2
    assert f"{events}: line 2: expected a sim directive" in err
