"""``medic report``: per-job goodput, time lost per incident kind and the top causes, from the incident lines."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from sim.replay import run
from sim.scenario import DEMO_CONFIG, SCENARIOS
from tests.cli.conftest import CLUSTER, JOB_LOGS, NODE_LOGS, Deployed, ago

NODE = "i-0d4e5f60718293a4b"


def scenario_lines(name: str) -> list[str]:
    return [line for line in (SCENARIOS / name).read_text().splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def replay_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A replay's stdout: scenario (a)'s GPU fault moved to 02:20 (replaced, Running again at 02:50), then
    scenario (m)'s stall of llama3-70b (last heartbeat 03:05, requeued 03:18, stepping 03:24, closed 03:25)."""
    node_fault = scenario_lines("a-single-fault.jsonl")[0].replace("2026-11-20T08:14:05Z", "2026-11-21T02:20:00Z")
    result = run([node_fault, *scenario_lines("m-stall-recovered.jsonl")], DEMO_CONFIG)
    path = tmp_path_factory.mktemp("report") / "out.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in result.lines))
    return path


def test_given_a_replays_output_when_report_then_goodput_per_job_time_lost_per_kind_and_the_incidents(
        deployed: Deployed, replay_output: Path):
    # When the operator reads the replay's output with medic report
    result = deployed.cli("report", "--from-file", str(replay_output))

    # Then the window is the replay's span (02:20 to 03:25: 65 min), and llama3-70b lost its stall's downtime (the
    # last heartbeat 03:05 to the first step after the requeue 03:24: 19 min) and 6 min of re-done work (240 steps
    # at 40 a minute): 40 of 65 minutes productive
    assert result.code == 0, result.err
    assert "Goodput from 2026-11-21 02:20:00 to 2026-11-21 03:25:00 UTC (1h05m)" in result.out
    row = next(line for line in result.out.splitlines() if line.startswith("llama3-70b"))
    assert row.split() == ["llama3-70b", CLUSTER, "61.5%", "1h05m", "40m00s", "25m00s", "19m00s", "6m00s", "1",
                           "incidents"]
    # ... time lost per kind and the causes, the node's 30-minute replacement first
    kinds = result.out.split("Time lost per incident kind")[1].split("Top causes")[0]
    assert [line.split()[:3] for line in kinds.splitlines() if line.startswith(("node", "stall"))] == [
        ["node", "1", "30m00s"], ["stall", "1", "25m00s"]]
    causes = result.out.split("Top causes")[1].split("Incidents")[0]
    assert [line.split()[0] for line in causes.splitlines() if line.startswith(("gpu", "stalled"))] == [
        "gpu_fatal", "stalled"]
    # ... and each incident's timeline, in seconds from its fault
    incidents = result.out.split("Incidents (seconds from the fault")[1]
    node = next(line for line in incidents.splitlines() if NODE in line).split()
    assert node[2:10] == ["node", NODE, "gpu_fatal", "0", "0", "1800", "-", "1800"]
    stall = next(line for line in incidents.splitlines() if "llama3-70b" in line).split()
    assert stall[2:11] == ["stall", "llama3-70b", "stalled", "780", "780", "-", "1140", "1200", "240"]


def test_given_a_replays_output_when_report_as_json_then_the_same_numbers_for_machines(
        deployed: Deployed, replay_output: Path):
    result = deployed.cli("report", "--from-file", str(replay_output), "--json")

    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["window"] == {"from": "2026-11-21T02:20:00+00:00", "until": "2026-11-21T03:25:00+00:00",
                                "wall_s": 3900}
    [job] = report["jobs"]
    assert (job["job"], job["goodput"], job["productive_s"], job["downtime_s"], job["redone_s"], job["from"]) == (
        "llama3-70b", round(40 / 65, 4), 2400, 1140, 360, "incidents")
    assert [(row["kind"], row["incidents"], row["lost_s"]) for row in report["kinds"]] == [
        ("node", 1, 1800), ("stall", 1, 1500)]
    assert [row["fault"] for row in report["causes"]] == ["gpu_fatal", "stalled"]
    assert [(i["kind"], i["time_to_repair_s"], i["time_to_resume_s"]) for i in report["incidents"]] == [
        ("node", 1800, None), ("stall", None, 1140)]


def test_given_a_job_filter_when_report_then_only_that_jobs_incidents(deployed: Deployed, replay_output: Path):
    result = deployed.cli("report", "--from-file", str(replay_output), "--job", "llama3-70b", "--json")

    report = json.loads(result.out)
    assert [i["kind"] for i in report["incidents"]] == ["stall"] and len(report["jobs"]) == 1


def incident_log_line(**fields: object) -> str:
    """An incident line as the functions' Powertools logger writes it (medic.obs.emit_incident)."""
    return json.dumps({"level": "INFO", "location": "emit_incident:75", "message": "incident",
                       "timestamp": fields.get("resolved_at") or fields["detected_at"], "service": "medic", **fields})


def test_given_incident_lines_in_the_stacks_log_groups_when_report_then_goodput_over_the_window(deployed: Deployed):
    # Given, in the last 7 days, a training job that failed and was restarted 10 minutes later, and one that Medic
    # gave up on 2 hours before now (no probe on either: goodput from the incidents)
    failed, gave_up = ago(days=2), ago(hours=2)
    restarted = failed + timedelta(minutes=10)
    deployed.write(JOB_LOGS, failed, incident_log_line(
        incident="job:ft-a", kind="training_job", cluster=None, job="ft-a", node_id=None, fault="job_retryable",
        fault_at=failed.isoformat(), detected_at=failed.isoformat(), acted_at=restarted.isoformat(),
        repaired_at=restarted.isoformat(), resumed_at=None, resolved_at=restarted.isoformat(),
        total_s=(restarted - failed).total_seconds()))
    deployed.write(JOB_LOGS, gave_up, incident_log_line(
        incident="job:ft-b", kind="training_job", cluster=None, job="ft-b", node_id=None, fault="job_retryable",
        fault_at=gave_up.isoformat(), detected_at=gave_up.isoformat(), acted_at=None, repaired_at=None,
        resumed_at=None, resolved_at=None, total_s=None))
    deployed.write(NODE_LOGS, gave_up, '{"level":"INFO","message":"remediation","incident":"x"}')

    # When the operator asks for the last 7 days' report
    result = deployed.cli("report", "--since", "7d", "--json")

    # Then ft-a lost its 10 minutes, ft-b everything since its failure (it never came back)
    assert result.code == 0, result.err
    report = json.loads(result.out)
    wall = report["window"]["wall_s"]
    jobs = {row["job"]: row for row in report["jobs"]}
    assert jobs["ft-a"]["downtime_s"] == (restarted - failed).total_seconds()
    assert jobs["ft-b"]["downtime_s"] == pytest.approx(2 * 3600, abs=1)
    assert jobs["ft-b"]["goodput"] == pytest.approx((wall - 2 * 3600) / wall, abs=1e-3)
    assert [row["unresolved"] for row in report["kinds"]] == [1]


# --- the arithmetic (pure)

def incident(kind: str, fault_at: str, back: dict[str, str | None], job: str = "llama",
             lost_minutes: float | None = None, fault: str = "stalled") -> dict:
    from medic_cli.render import parse_time

    line = {"incident": f"job:{job}", "kind": kind, "cluster": CLUSTER, "job": job, "node_id": None, "fault": fault,
            "fault_at": fault_at, "resumed_at": None, "repaired_at": None, "resolved_at": None, "total_s": None,
            "lost_minutes": lost_minutes, **back}
    line["_fault"] = parse_time(fault_at)
    return line


def test_overlapping_incidents_count_their_downtime_once_and_a_slowdown_costs_none():
    from medic_cli.render import parse_time
    from medic_cli.report import report

    start, end = parse_time("2026-11-21T00:00:00Z"), parse_time("2026-11-21T10:00:00Z")
    # Given a stall 01:00 -> resumed 02:00 with 6 min re-done, a divergence 01:30 -> OK 02:30 (overlapping),
    # and a slowdown 05:00 -> OK 06:00
    incidents = [
        incident("stall", "2026-11-21T01:00:00Z", {"resumed_at": "2026-11-21T02:00:00Z"}, lost_minutes=6),
        incident("divergence", "2026-11-21T01:30:00Z", {"resolved_at": "2026-11-21T02:30:00Z"}, fault="diverged"),
        incident("slowdown", "2026-11-21T05:00:00Z", {"resolved_at": "2026-11-21T06:00:00Z"}, fault="slowed"),
    ]
    [job] = report(incidents, start, end)["jobs"]
    # Then the job was down 01:00-02:30 (90 min, not 120), re-did 6 min, and the slowdown cost no downtime
    assert (job["downtime_s"], job["redone_s"], job["productive_s"]) == (5400, 360, 36000 - 5400 - 360)
    assert job["goodput"] == round((36000 - 5760) / 36000, 4)


def test_an_incident_that_never_came_back_costs_until_the_end_of_the_window():
    from medic_cli.render import parse_time
    from medic_cli.report import report

    start, end = parse_time("2026-11-21T00:00:00Z"), parse_time("2026-11-21T10:00:00Z")
    # Given a training job Medic gave up on at 08:00 (no restart, no resolution)
    gave_up = incident("training_job", "2026-11-21T08:00:00Z", {}, job="ft", fault="job_retryable")
    result = report([gave_up], start, end)
    # Then it lost the last two hours, and counts as unresolved
    assert result["jobs"][0]["downtime_s"] == 7200 and result["kinds"][0]["unresolved"] == 1


def test_with_the_probes_minutes_productive_time_is_the_minutes_it_stepped_less_the_redone_work():
    from medic_cli.render import parse_time
    from medic_cli.report import report

    start, end = parse_time("2026-11-21T00:00:00Z"), parse_time("2026-11-21T10:00:00Z")
    stall = incident("stall", "2026-11-21T01:00:00Z", {"resumed_at": "2026-11-21T02:00:00Z"}, lost_minutes=6)
    # Given the probe counted steps in 500 of the 600 minutes
    [job] = report([stall], start, end, productive_minutes=lambda name: 500)["jobs"]
    # Then productive time is 500 minutes less the 6 re-done
    assert (job["productive_s"], job["from"]) == (494 * 60, "probe")


def test_given_a_job_with_a_probe_when_report_live_then_productive_time_is_the_minutes_it_stepped(deployed: Deployed):
    import boto3

    from tests.cli.conftest import REGION

    # Given llama's stall an hour ago (resumed 20 min later, 5 min of work re-done), and the probe counting steps in
    # 90 of the last 120 minutes
    fault = ago(hours=1)
    deployed.write(JOB_LOGS, fault + timedelta(minutes=21), incident_log_line(
        incident="job:slurm:c:llama", kind="stall", cluster=CLUSTER, job="llama", node_id=None, fault="stalled",
        fault_at=fault.isoformat(), detected_at=(fault + timedelta(minutes=13)).isoformat(),
        resumed_at=(fault + timedelta(minutes=20)).isoformat(),
        resolved_at=(fault + timedelta(minutes=21)).isoformat(), lost_minutes=5))
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    start = ago(minutes=120).replace(second=0)
    cloudwatch.put_metric_data(Namespace="Medic/Training", MetricData=[
        {"MetricName": "Heartbeat", "Dimensions": [{"Name": "Job", "Value": "llama"}],
         "Timestamp": start + timedelta(minutes=minute), "Value": 40.0 if minute % 4 else 0.0}
        for minute in range(120)])

    # When the operator asks for the last 2 hours
    result = deployed.cli("report", "--since", "2h", "--json")

    # Then llama's productive time is the 90 minutes the probe saw steps in, less the 5 re-done
    assert result.code == 0, result.err
    [job] = json.loads(result.out)["jobs"]
    assert (job["job"], job["from"], job["productive_s"]) == ("llama", "probe", (90 - 5) * 60)


def test_a_job_without_a_probe_counts_from_its_own_start_not_from_the_windows():
    from medic_cli.render import parse_time
    from medic_cli.report import report

    # Given a 7-day window, and a training job (no probe) that started 2 hours before its end, failed 1 hour in and
    # was back 10 minutes later (its line says when the job started: job_started_at, from its state change event)
    start, end = parse_time("2026-11-14T10:00:00Z"), parse_time("2026-11-21T10:00:00Z")
    line = incident("training_job", "2026-11-21T09:00:00Z", {"resolved_at": "2026-11-21T09:10:00Z",
                                                             "job_started_at": "2026-11-21T08:00:00+00:00"},
                    job="ft-a", fault="job_retryable")
    [job] = report([line], start, end)["jobs"]
    # Then its wall time is its 2 hours, not the window's 7 days: 10 of 120 minutes lost (before: 99.9 %)
    assert (job["since"], job["wall_s"], job["downtime_s"]) == ("2026-11-21T08:00:00+00:00", 7200, 600)
    assert job["goodput"] == round(110 / 120, 4)
    # ... a lineage counts from its root's start (the earliest of its lines), and a job started before the window
    # from the window's start
    clone = incident("training_job", "2026-11-21T09:30:00Z", {"resolved_at": "2026-11-21T09:40:00Z",
                                                              "job_started_at": "2026-11-21T09:10:00+00:00"},
                     job="ft-a", fault="job_retryable")
    [job] = report([line, clone], start, end)["jobs"]
    assert (job["wall_s"], job["downtime_s"]) == (7200, 1200)
    older = incident("training_job", "2026-11-21T09:00:00Z", {"resolved_at": "2026-11-21T09:10:00Z",
                                                              "job_started_at": "2026-11-01T00:00:00+00:00"},
                     job="ft-b", fault="job_retryable")
    [job] = report([older], start, end)["jobs"]
    assert (job["since"], job["wall_s"]) == (start.isoformat(), 7 * 86400)
    # ... and a job with a probe counts the probe's minutes over the window, as before
    [job] = report([line], start, end, productive_minutes=lambda name: 100)["jobs"]
    assert (job["wall_s"], job["from"]) == (7 * 86400, "probe")
