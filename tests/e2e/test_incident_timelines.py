"""Specification: each kind of incident Medic closes prints one incident line with its timeline (replays)."""

from __future__ import annotations

from sim.hyperpod import REPAIR
from sim.scenario import SCENARIOS, read_scenario


def scenario_then(name: str, *more: dict | str) -> list[dict | str]:
    """A bundled scenario's lines followed by more events or directives."""
    return [*read_scenario(SCENARIOS / name).lines, *more]


def test_a_node_replaced_and_running_again_is_repaired_in_the_emulated_repair_time(replay):
    # Given the GPU fault of scenario (a) at 08:14:05, replaced at once, and 40 minutes of reconciler sweeps
    result = replay(scenario_then("a-single-fault.jsonl", {"sim": {"advance": "+40m"}}))
    # Then one node incident line: the replacement is Running again when the emulated replace is over
    # (the sweeps run every 5 minutes from the first event: one sees it exactly then)
    [incident] = result.incidents
    assert (incident["incident"], incident["incident_kind"], incident["node_id"], incident["fault"]) == (
        "node:pretrain-slurm:i-0d4e5f60718293a4b", "node", "i-0d4e5f60718293a4b", "gpu_fatal")
    assert incident["time_to_repair_s"] == REPAIR["replace"][1].total_seconds() == 1800
    assert (incident["fault_at"], incident["acted_at"], incident["repaired_at"], incident["resolved_at"]) == (
        "2026-11-20T08:14:05+00:00", "2026-11-20T08:14:05+00:00", "2026-11-20T08:44:05+00:00",
        "2026-11-20T08:44:05+00:00")
    assert (incident["time_to_detect_s"], incident["time_to_act_s"], incident["total_s"]) == (0, 0, 1800)
    assert (incident["resumed_at"], incident["lost_steps"]) == (None, None)


def test_a_node_still_in_repair_has_no_incident_line_yet(replay):
    # Given the same replacement, 20 minutes in
    result = replay(scenario_then("a-single-fault.jsonl", {"sim": {"advance": "+20m"}}))
    # Then the incident is not closed: no line
    assert result.incidents == []


def test_a_rebooted_node_is_repaired_in_the_emulated_reboot_time(replay):
    # Given the reboot-class fault of scenario (c)'s first event, and 15 minutes of sweeps
    first = next(line for line in read_scenario(SCENARIOS / "c-escalation.jsonl").lines if line.startswith("{"))
    result = replay([first, {"sim": {"advance": "+15m"}}])
    [incident] = result.incidents
    assert incident["incident_kind"] == "node"
    assert incident["time_to_repair_s"] == REPAIR["reboot"][1].total_seconds() == 600


def test_a_restarted_training_job_resumes_when_its_clone_trains_not_when_create_returns(replay):
    # Given scenario (h): a retryable failure at 02:40:12, restarted from its checkpoint at once; the emulated clone
    # is `Starting` for 5 minutes, then `Training` (DescribeTrainingJob's SecondaryStatusTransitions)
    result = replay(SCENARIOS / "h-training-job-restart.jsonl")
    # Then one training_job line for the lineage, written by the recovery check that sees the clone training: the
    # clone InProgress is the repair, its `Training` status the resume and the end (before: 0 s lost)
    [incident] = result.incidents
    assert (incident["incident"], incident["incident_kind"], incident["job"], incident["fault"]) == (
        "job:ft-mistral-7b-0042", "training_job", "ft-mistral-7b-0042", "job_retryable")
    assert incident["fault_at"] == incident["acted_at"] == incident["repaired_at"] == "2026-11-21T02:40:12+00:00"
    assert incident["resumed_at"] == incident["resolved_at"] == "2026-11-21T02:45:12+00:00"
    assert (incident["time_to_repair_s"], incident["time_to_resume_s"], incident["total_s"]) == (0, 300, 300)
    # ... and when the job that failed had started (its TrainingStartTime in the event): its goodput's start
    assert incident["job_started_at"] == "2026-11-21T00:45:12+00:00"


def test_a_restart_whose_clone_has_not_trained_yet_has_no_line_yet(replay):
    # Given scenario (h) only until 2 minutes after the restart (the clone still `Starting`)
    lines = [line for line in read_scenario(SCENARIOS / "h-training-job-restart.jsonl").lines
             if "advance" not in str(line)]
    result = replay([*lines, {"sim": {"advance": "+2m"}}])
    # Then the incident is not closed: no line
    assert result.incidents == []


def test_a_training_job_medic_gives_up_on_still_gets_a_line_with_nulls(replay):
    # Given scenario (i): three restarts, then the budget is spent
    result = replay(SCENARIOS / "i-training-job-gives-up.jsonl")
    # Then one line per failure handled: three repaired, each clone training 5 minutes later (written by the recovery
    # check before the clone's own failure), the last with no action, repair or end
    assert [line["total_s"] for line in result.incidents] == [300, 300, 300, None]
    assert {line["job"] for line in result.incidents} == {"ft-mistral-7b-0042"}
    last = result.incidents[-1]
    assert (last["acted_at"], last["repaired_at"], last["resolved_at"], last["time_to_detect_s"]) == (
        None, None, None, 0)


def test_a_divergence_incident_closes_when_its_alarm_goes_ok_with_no_action(replay):
    # Given scenario (o)'s divergence (ALARM at 03:03), then finite losses again from 03:10
    healthy = [item for minute in (11, 12)
               for item in ({"sim": {"probe": {"job": "llama3-70b", "steps": 40, "loss": 1.9,
                                               "tokens_per_sec": 41000.0}}},
                            {"sim": {"advance": f"2026-11-21T03:{minute}:00Z"}})]
    result = replay(scenario_then("o-divergence.jsonl", *healthy))
    # Then at the OK (03:11) one divergence line: detected at the ALARM, resolved at the OK, no action
    [incident] = result.incidents
    assert (incident["incident"], incident["incident_kind"], incident["job"], incident["cluster"]) == (
        "alarm:medic-divergence-llama3-70b", "divergence", "llama3-70b", "pretrain-slurm")
    assert (incident["fault_at"], incident["resolved_at"]) == ("2026-11-21T03:03:00+00:00",
                                                               "2026-11-21T03:11:00+00:00")
    assert (incident["time_to_detect_s"], incident["total_s"]) == (0, 480)
    assert all(incident[key] is None for key in ("acted_at", "repaired_at", "time_to_act_s", "time_to_repair_s"))


def test_v_the_bundled_replacement_scenario_shows_the_emulated_repair_time(replay):
    # Given scenario (v): Medic replaces the node, and HyperPod's late event names the old instance id
    result = replay(SCENARIOS / "v-replaced-node-old-id.jsonl")
    # Then its one node incident took the emulated replacement's 30 minutes to repair, from the fault
    [incident] = [line for line in result.incidents if line["incident_kind"] == "node"]
    assert (incident["node_id"], incident["fault"]) == ("i-0d4e5f60718293a4b", "gpu_fatal")
    assert incident["time_to_repair_s"] == incident["total_s"] == REPAIR["replace"][1].total_seconds()


def test_c_the_bundled_escalation_scenario_times_the_reboot_then_the_replacement(replay):
    # Given scenario (c): a reboot, the same node failing again two hours later, replaced
    result = replay(SCENARIOS / "c-escalation.jsonl")
    # Then the reboot's incident line shows the emulated reboot's 10 minutes
    first = result.incidents[0]
    assert (first["incident_kind"], first["fault"], first["time_to_repair_s"]) == (
        "node", "gpu_reboot", REPAIR["reboot"][1].total_seconds())
