"""``medic status``: mode and its last change, open incidents, recent actions, guardrail budgets left."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import timedelta

import boto3
from medic_cli.render import when

from medic.core.progress import RecoveryWatch
from medic.ledger.incidents import IncidentStore
from medic.ledger.jobs import JobStore
from medic.ledger.nodes import NodeStore
from medic.ledger.pages import PageStore
from tests.cli.conftest import CALLER, CLUSTER, REGION, STACK, TABLE, TEMPLATE, Deployed, ago


def budget_row(out: str, cluster: str) -> list[str]:
    section = out.split("Guardrail budgets")[1]
    return next(line.split() for line in section.splitlines() if line.strip().startswith(cluster + " "))


def test_given_recent_node_actions_when_status_then_each_clusters_budget_is_its_hourly_max_minus_the_last_hour(
        deployed: Deployed):
    # Given three node actions in the last hour on one cluster (and one 90 minutes ago, outside the hour),
    # and one on the cluster whose override allows 2 an hour
    deployed.cluster_actions([ago(minutes=90), ago(minutes=50), ago(minutes=20), ago(minutes=5)])
    deployed.cluster_actions([ago(minutes=10)], cluster="finetune-eks")

    # When the operator asks for the status with the config
    result = deployed.cli("status", "--config", str(deployed.config_file))

    # Then: used, max, left per cluster, the breaker's repair-window count, and when the next slot frees
    assert result.code == 0, result.err
    assert budget_row(result.out, CLUSTER)[:6] == [CLUSTER, "3", "4", "1", "2", "in"]
    assert budget_row(result.out, "finetune-eks")[:4] == ["finetune-eks", "1", "2", "1"]
    # (the oldest action of the hour, 50 minutes ago, leaves the window in 10 minutes)
    assert " ".join(budget_row(result.out, CLUSTER)).endswith(when(ago(minutes=50) + timedelta(hours=1)))


def test_given_a_spent_budget_when_status_then_none_left(deployed: Deployed):
    deployed.cluster_actions([ago(minutes=m) for m in (40, 30, 20, 10, 5)])

    result = deployed.cli("status", "--config", str(deployed.config_file), "--json")

    budget = next(b for b in json.loads(result.out)["budgets"] if b["cluster"] == CLUSTER)
    assert (budget["used_last_hour"], budget["left"]) == (5, 0)


def test_given_incidents_waiting_on_people_when_status_then_they_are_listed_as_open(deployed: Deployed):
    # Given a paged incident, a node Medic replaced 10 minutes ago (in repair), an open alarm incident,
    # and a node replaced 3 hours ago (repair over) whose page incident was closed
    PageStore(deployed.ledger()).claim_page(f"node:{CLUSTER}:i-0c0ffee0c0ffee001", ago(minutes=30))
    deployed.node_state("i-0aaaaaaaaaaaaaaa1", action="replace_node", at=ago(minutes=10))
    IncidentStore(deployed.ledger()).open_alarm_incident(
        "medic-stall-llama3-70b", "slurmjob:pretrain-slurm:llama3-70b", ago(minutes=15))
    deployed.node_state("i-0bbbbbbbbbbbbbbb2", action="replace_node", at=ago(hours=3))

    # When
    result = deployed.cli("status", "--config", str(deployed.config_file), "--json")

    # Then three incidents are open, each with why
    assert result.code == 0, result.err
    incidents = {i["incident"]: i["states"] for i in json.loads(result.out)["open_incidents"]}
    assert incidents == {
        f"node:{CLUSTER}:i-0c0ffee0c0ffee001": ["paged, not closed"],
        f"node:{CLUSTER}:i-0aaaaaaaaaaaaaaa1": ["replace_node in progress (since Medic acted)"],
        "slurmjob:pretrain-slurm:llama3-70b": ["alarm medic-stall-llama3-70b in ALARM"],
    }


def test_given_a_restart_waiting_for_training_and_an_escalation_when_status_then_each_incident_shows_why(
        deployed: Deployed):
    # Given a stall restarted 10 minutes ago, its recovery page sent and the watch running until the deadline;
    # and another job's incident escalated (its restart did not bring training back)
    incidents = IncidentStore(deployed.ledger())
    incidents.watch_recovery(RecoveryWatch("slurmjob:pretrain-slurm:llama3-70b", job="llama3-70b", cluster=CLUSTER,
                                           restarted_at=ago(minutes=10), deadline=ago(minutes=-20), attempt=1))
    PageStore(deployed.ledger()).claim_page("slurmjob:pretrain-slurm:llama3-70b:recovery", ago(minutes=9))
    incidents.escalate("slurmjob:pretrain-slurm:mistral-7b", ago(minutes=30))

    result = deployed.cli("status", "--config", str(deployed.config_file), "--json")

    # Then the recovery page counts as its incident's; newest first
    assert result.code == 0, result.err
    incidents_shown = json.loads(result.out)["open_incidents"]
    assert [(i["incident"], sorted(i["states"])) for i in incidents_shown] == [
        ("slurmjob:pretrain-slurm:llama3-70b", [
            "paged, not closed", f"waiting for training to resume (until {ago(minutes=-20):%H:%M} UTC)"]),
        ("slurmjob:pretrain-slurm:mistral-7b", ["escalated (no more automatic restarts)"]),
    ]


def test_given_a_watched_job_a_node_repair_holds_when_status_then_it_says_the_window_waits_for_the_node(
        deployed: Deployed):
    # Given llama3-70b on a node Medic is replacing (issue 27: the repair owns the job until the node is back)
    held_by = f"node:{CLUSTER}:i-0d4e5f60718293a4b"
    IncidentStore(deployed.ledger()).watch_recovery(RecoveryWatch(
        "job:slurm:pretrain-slurm:llama3-70b", job="llama3-70b", cluster=CLUSTER, restarted_at=ago(minutes=5),
        deadline=ago(minutes=-45), attempt=0, held_by=held_by))
    result = deployed.cli("status", "--config", str(deployed.config_file), "--json")
    assert result.code == 0, result.err
    [shown] = json.loads(result.out)["open_incidents"]
    assert (shown["incident"], shown["states"]) == ("job:slurm:pretrain-slurm:llama3-70b", [
        f"held by the repair of {held_by}: its recovery window starts when the node is back"])


def test_given_unconfirmed_calls_and_long_repairs_when_status_then_they_are_open_for_the_reconciler(
        deployed: Deployed):
    # Given a claim whose call is in flight, one whose answer was lost, and a repair the reconciler reported
    deployed.node_state("i-0aaaaaaaaaaaaaaa1", action="replace_node", at=ago(minutes=1), outcome="in_flight")
    deployed.node_state("i-0bbbbbbbbbbbbbbb2", action="reboot_node", at=ago(minutes=3), outcome="unknown")
    deployed.node_state("i-0ddddddddddddddd4", action="replace_node", at=ago(seconds=20), outcome="awaiting_drain")
    nodes = NodeStore(deployed.ledger())
    nodes.watch_repair(CLUSTER, "i-0cccccccccccccc3", "Pending", since=ago(minutes=50), medics=False)
    nodes.repair_reported(CLUSTER, "i-0cccccccccccccc3", ago(minutes=5))

    result = deployed.cli("status", "--config", str(deployed.config_file), "--json")

    incidents = {i["incident"]: i["states"] for i in json.loads(result.out)["open_incidents"]}
    assert incidents == {
        f"node:{CLUSTER}:i-0aaaaaaaaaaaaaaa1": ["replace_node claimed, call not confirmed yet (in flight)"],
        f"node:{CLUSTER}:i-0bbbbbbbbbbbbbbb2": ["reboot_node sent, answer lost: the reconciler re-checks the node"],
        f"node:{CLUSTER}:i-0ddddddddddddddd4": [
            "replace_node claimed, waiting for the agent's drain of the node in Slurm"],
        f"node:{CLUSTER}:i-0cccccccccccccc3": [
            "in repair (Pending, started by hyperpod), longer than repair_minutes: paged"],
    }


def test_given_actions_today_and_last_week_when_status_then_recent_actions_are_todays_newest_first(
        deployed: Deployed):
    deployed.node_state("i-0aaaaaaaaaaaaaaa1", action="reboot_node", fault="gpu_reboot", at=ago(hours=5))
    deployed.node_state("i-0bbbbbbbbbbbbbbb2", action="replace_node", at=ago(hours=1), outcome="failed")
    deployed.node_state("i-0cccccccccccccc3", action="replace_node", at=ago(days=3))
    jobs = JobStore(deployed.ledger())
    jobs.claim_job_restart("ft-llama", max_restarts=3, now=ago(hours=3))
    jobs.claim_job_restart("ft-llama", max_restarts=3, now=ago(hours=2))  # restart 2, the last one

    result = deployed.cli("status", "--json")

    actions = json.loads(result.out)["recent_actions"]
    assert [(a["subject"], a["action"], a["outcome"]) for a in actions] == [
        ("i-0bbbbbbbbbbbbbbb2", "replace_node", "failed"),
        ("ft-llama", "restart_job", "executed"),
        ("i-0aaaaaaaaaaaaaaa1", "reboot_node", "executed"),
    ]


def test_given_a_recorded_pause_when_status_then_the_mode_and_who_paused_it_and_why_show(deployed: Deployed):
    # Given Medic paused through the CLI's big switch
    assert deployed.cli("mode", "paused", "--reason", "network partition in use1-az2").code == 0

    # When
    result = deployed.cli("status", "--config", str(deployed.config_file))

    # Then
    assert result.code == 0, result.err
    assert "Mode:         paused" in result.out
    last = next(line for line in result.out.splitlines() if line.startswith("Last change:"))
    assert "act -> paused" in last and CALLER in last and "network partition in use1-az2" in last
    assert "Open incidents: 0" in result.out
    assert "UTC: 0 (the ledger keeps each node's last action" in result.out
    assert "Guardrail budgets, rolling hour (paused: no node action is taken whatever is left)" in result.out


def test_given_dry_run_mode_when_status_then_the_budgets_are_the_dry_run_copys(deployed: Deployed):
    # Given real actions spent the budget, and dry-run decisions claimed one in their own copy
    deployed.cluster_actions([ago(minutes=m) for m in (40, 30, 20, 10)])
    deployed.cluster_actions([ago(minutes=5)], mode="dry_run")
    deployed.set_mode("dry_run")

    result = deployed.cli("status", "--config", str(deployed.config_file), "--json")

    status = json.loads(result.out)
    assert status["budgets_ledger"] == "dry_run"
    assert next(b for b in status["budgets"] if b["cluster"] == CLUSTER)["used_last_hour"] == 1


def test_given_no_config_file_when_status_then_the_deployed_functions_config_is_used(deployed: Deployed):
    # Given the stack's node function carries its config (MEDIC_CONFIG), with a budget of 7 an hour
    config = {"clusters": [{"name": "deployed-cluster", "id": "abcdefabcdef", "orchestrator": "eks"}],
              "guardrails": {"max_node_actions_per_hour": 7}}
    role = boto3.client("iam").create_role(RoleName="medic", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("index.py", "def handler(event, context): pass")
    boto3.client("lambda", region_name=REGION).create_function(
        FunctionName="Medic-NodeRemediation", Runtime="python3.13", Role=role, Handler="index.handler",
        Code={"ZipFile": code.getvalue()}, Environment={"Variables": {"MEDIC_CONFIG": json.dumps(config)}})
    template = {**TEMPLATE, "Outputs": {**TEMPLATE["Outputs"],
                                        "NodeRemediationFunctionName": {"Value": "Medic-NodeRemediation"}}}
    boto3.client("cloudformation").update_stack(StackName=STACK, TemplateBody=json.dumps(template))

    # When
    result = deployed.cli("status", "--json")

    # Then the deployed clusters and guardrails are the ones shown
    status = json.loads(result.out)
    assert status["config"] == "deployed (function Medic-NodeRemediation)"
    assert [(b["cluster"], b["left"]) for b in status["budgets"]] == [("deployed-cluster", 7)]


def test_given_no_config_at_all_when_status_then_clusters_from_the_ledger_with_default_guardrails(
        deployed: Deployed):
    deployed.cluster_actions([ago(minutes=5)], cluster="seen-in-ledger")

    result = deployed.cli("status", "--json")

    status = json.loads(result.out)
    assert status["config"].startswith("none")
    assert [(b["cluster"], b["used_last_hour"], b["max_node_actions_per_hour"]) for b in status["budgets"]] == [
        ("seen-in-ledger", 1, 4)]


def test_given_no_stack_when_status_without_table_then_an_error_says_to_pass_table(deployed: Deployed):
    result = deployed.cli("status", "--stack", "Elsewhere")

    assert result.code == 1
    assert "mode parameter /medic/Elsewhere/mode not found" in result.err and "--stack" in result.err


def test_given_a_medic_yaml_in_the_working_directory_when_status_without_config_then_it_is_used(
        deployed: Deployed):
    (deployed.tmp_path / "medic.yaml").write_text(deployed.config_file.read_text())

    result = deployed.cli("status", "--json")

    status = json.loads(result.out)
    assert status["config"] == "./medic.yaml"
    assert [b["cluster"] for b in status["budgets"]] == [CLUSTER, "finetune-eks"]


def test_given_items_medic_does_not_write_when_status_then_they_are_left_out_and_the_rest_shows(deployed: Deployed):
    # Given a node action claimed as Medic claims it, and beside it two items written raw on purpose (no store
    # writes them): a node state whose time is unreadable, and an agent's heartbeat (the agent's own item)
    deployed.node_state("i-0aaaaaaaaaaaaaaa1", action="replace_node", at=ago(minutes=10))
    deployed.dynamodb.put_item(TableName=TABLE, Item={
        "pk": {"S": f"node#{CLUSTER}#i-0bbbbbbbbbbbbbbb2"}, "sk": {"S": "state"}, "fault": {"S": "gpu_fatal"},
        "action": {"S": "replace_node"}, "outcome": {"S": "executed"}, "acted_at": {"S": "yesterday"},
        "attempt": {"N": "1"}, "version": {"N": "1"}})
    deployed.dynamodb.put_item(TableName=TABLE, Item={
        "pk": {"S": f"agent#{CLUSTER}"}, "sk": {"S": "heartbeat"}, "role": {"S": "primary"}, "at": {"S": "now"}})

    # When
    result = deployed.cli("status", "--json")

    # Then only Medic's readable item shows
    assert result.code == 0, result.err
    status = json.loads(result.out)
    assert [i["incident"] for i in status["open_incidents"]] == [f"node:{CLUSTER}:i-0aaaaaaaaaaaaaaa1"]
    assert [a["subject"] for a in status["recent_actions"]] == ["i-0aaaaaaaaaaaaaaa1"]
