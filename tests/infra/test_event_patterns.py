"""Specification: every event pattern the stack deploys fits EventBridge's "Event pattern size" quota (2,048
characters by default, Amazon EventBridge quotas), with the account id resolved, for a large realistic config;
a config that would break it stops synth naming the quota; the archive's pattern does not grow with the config
and still keeps every event some rule takes; and every rule that reaches a handler takes only live events."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml

from infra.config import load_config
from infra.event_patterns import EVENT_PATTERN_QUOTA, NO_REPLAYS, EventPatternTooLarge, deployed_text
from infra.stack import MedicStack
from medic.config import ConfigError, parse_config
from sim.synth import _cdk_context
from tests.helpers import load_event
from tests.infra.conftest import resources
from tests.infra.test_node_remediation_stack import matches

ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"
BUCKET = "ml-checkpoints-123456789012"


def platform_config(clusters: list[tuple[str, str]], jobs: list[tuple[str, str]], prefixes: list[str]) -> dict:
    """A platform team's medic.yaml: Slurm and EKS clusters, watched jobs on them, training-job prefixes."""
    return {
        "notify": {"emails": ["ml-platform-oncall@example.com"]},
        "clusters": [{"name": name, "id": f"{index:02d}k3v9q2w8x1z"[:12], "orchestrator": orchestrator}
                     for index, (name, orchestrator) in enumerate(clusters)],
        "training_jobs": [{"prefix": prefix, "role_arns": [ROLE], "checkpoint_buckets": [BUCKET]}
                          for prefix in prefixes],
        "jobs": [{"name": name, "cluster": cluster} for name, cluster in jobs],
    }


# 6 clusters, 12 watched jobs, 4 training-job prefixes, as teams name them: short names (so that every alarm name
# is listed in the alarm rule) and long ones (so that the rules' cluster lists are long).
SHORT = platform_config(
    [("pretrain-p5-use1", "slurm"), ("pretrain-p5e-usw2", "slurm"), ("finetune-eks-prod", "eks"),
     ("research-h200", "slurm"), ("speech-trn2", "slurm"), ("rl-post-train-eks", "eks")],
    [("llama3-70b", "pretrain-p5-use1"), ("llama3-405b", "pretrain-p5-use1"),
     ("mixtral-8x22b", "pretrain-p5e-usw2"), ("codellama-34b", "pretrain-p5e-usw2"),
     ("vit-22b", "finetune-eks-prod"), ("whisper-xl", "finetune-eks-prod"), ("moe-scale-17", "research-h200"),
     ("ctx-128k-abl", "research-h200"), ("conformer-2b", "speech-trn2"), ("tts-diff-1b", "speech-trn2"),
     ("ppo-70b", "rl-post-train-eks"), ("dpo-13b", "rl-post-train-eks")],
    ["sft-", "rlhf-rm-", "distill-", "asr-ft-"])
LONG = platform_config(
    [("llm-pretrain-p5-use1-prod", "slurm"), ("llm-pretrain-p5e-usw2-prod", "slurm"),
     ("multimodal-finetune-eks-prod", "eks"), ("research-h200-slurm-shared", "slurm"),
     ("speech-trn2-slurm-prod", "slurm"), ("rl-post-training-eks-prod", "eks")],
    [("llama3-70b-pretrain", "llm-pretrain-p5-use1-prod"), ("llama3-405b-pretrain", "llm-pretrain-p5-use1-prod"),
     ("mixtral-8x22b-continued-pretrain", "llm-pretrain-p5e-usw2-prod"),
     ("code-llm-34b-pretrain", "llm-pretrain-p5e-usw2-prod"), ("vit-22b-contrastive", "multimodal-finetune-eks-prod"),
     ("whisper-xl-finetune", "multimodal-finetune-eks-prod"), ("moe-scaling-run-17", "research-h200-slurm-shared"),
     ("long-context-128k-ablation", "research-h200-slurm-shared"),
     ("conformer-2b-asr-pretrain", "speech-trn2-slurm-prod"),
     ("tts-diffusion-1b", "speech-trn2-slurm-prod"), ("ppo-policy-70b", "rl-post-training-eks-prod"),
     ("dpo-reward-13b", "rl-post-training-eks-prod")],
    ["llm-sft-", "rlhf-reward-model-", "embeddings-distill-", "speech-asr-finetune-"])
# The example: 4 clusters, 8 watched jobs, 3 prefixes made a 2,288-character archive pattern.
SMALLER = platform_config([(c["name"], c["orchestrator"]) for c in SHORT["clusters"][:4]],
                          [(j["name"], j["cluster"]) for j in SHORT["jobs"][:8]],
                          [t["prefix"] for t in SHORT["training_jobs"][:3]])



def synthesize(config: dict, tmp: Path) -> dict:
    """The template `cdk synth` deploys for ``config`` (loaded as app.py loads medic.yaml)."""
    path = tmp / "medic.yaml"
    path.write_text(yaml.safe_dump(config))
    app = cdk.App(outdir=str(tmp / "cdk.out"), context=_cdk_context())
    MedicStack(app, "Medic", config=load_config(path), env=cdk.Environment(account="123456789012", region="us-west-2"))
    app.synth()
    return json.loads((tmp / "cdk.out" / "Medic.template.json").read_text())


@pytest.fixture(scope="module", params=["short-names", "long-names", "issue-example"])
def platform(request, tmp_path_factory) -> dict:
    config = {"short-names": SHORT, "long-names": LONG, "issue-example": SMALLER}[request.param]
    return synthesize(config, tmp_path_factory.mktemp(request.param))


def patterns(template: dict) -> dict[str, dict]:
    """Every event pattern in the template, by logical id: the rules' and the archive's."""
    return {lid: res["Properties"]["EventPattern"] for lid, res in template["Resources"].items()
            if res["Type"] in ("AWS::Events::Rule", "AWS::Events::Archive") and "EventPattern" in res["Properties"]}


def archive_pattern(template: dict) -> dict:
    [archive] = resources(template, "AWS::Events::Archive").values()
    return archive["Properties"]["EventPattern"]


def acting_rules(template: dict) -> dict[str, dict]:
    """The rules whose events reach a handler (all but the backtest's read-back rule), by logical id."""
    return {lid: res["Properties"]["EventPattern"] for lid, res in resources(template, "AWS::Events::Rule").items()
            if "EventPattern" in res["Properties"] and not lid.startswith("EventArchiveReadbackRule")}


def test_the_platform_configs_have_the_size_the_test_means():
    assert (len(SHORT["clusters"]), len(SHORT["jobs"]), len(SHORT["training_jobs"])) == (6, 12, 4)
    assert (len(LONG["clusters"]), len(LONG["jobs"]), len(LONG["training_jobs"])) == (6, 12, 4)
    assert (len(SMALLER["clusters"]), len(SMALLER["jobs"]), len(SMALLER["training_jobs"])) == (4, 8, 3)


def test_every_pattern_of_a_large_platform_fits_the_quota_with_the_account_resolved(platform):
    # Given a stack for 6 clusters, 12 watched jobs and 4 prefixes (or the 4, 8 and 3)
    sizes = {lid: len(deployed_text(pattern)) for lid, pattern in patterns(platform).items()}
    # Then the node, cluster-event, requeue, alarm, training-job, mode-watch and canary rules, the read-back rule and
    # the archive ...
    assert len(sizes) == 9
    # ... each fit EventBridge's "Event pattern size" quota, as EventBridge counts the deployed pattern
    over = {lid: size for lid, size in sizes.items() if size > EVENT_PATTERN_QUOTA}
    assert not over, f"over the {EVENT_PATTERN_QUOTA}-character quota: {over}"


def test_the_account_is_measured_at_its_real_length():
    assert deployed_text({"account": [{"Ref": "AWS::AccountId"}]}) == '{"account":["000000000000"]}'


def test_the_alarm_rule_names_the_alarms_while_they_fit_and_takes_medics_prefix_beyond(platform):
    [alarm_rule] = [p for lid, p in patterns(platform).items() if lid.startswith("AlarmResponseRule")]
    alarms = {res["Properties"].get("AlarmName") for res in resources(platform, "AWS::CloudWatch::Alarm").values()}
    names = alarm_rule["detail"]["alarmName"]
    assert names == [{"prefix": "medic-"}] or set(names) == alarms - {None}


def test_the_archive_pattern_does_not_grow_with_the_config(platform, raw):
    assert archive_pattern(platform) == archive_pattern(raw)


def covered(rule: dict, branch: dict) -> bool:
    """Every event the rule takes is one the archive branch takes: its sources and detail-types are among the
    branch's, and each detail field the branch filters on is filtered by the rule within the branch's values."""
    if not (set(rule["source"]) <= set(branch["source"]) and set(rule["detail-type"]) <= set(branch["detail-type"])):
        return False
    for field, allowed in branch.get("detail", {}).items():
        values = rule.get("detail", {}).get(field)
        if values is None:
            return False
        for value in values:
            if isinstance(value, str) and not any(value == a or (isinstance(a, dict) and value.startswith(a["prefix"]))
                                                  for a in allowed):
                return False
            if isinstance(value, dict) and not any(
                    isinstance(a, dict) and value.get("prefix", "").startswith(a["prefix"]) for a in allowed):
                return False
    return True


def test_every_rule_that_reaches_a_handler_is_within_the_archive(platform):
    # (but the mode watch's: a change of the mode is paged, not a remediation event a backtest replays; nor the
    # canary's: Medic's own proof of the pipeline, which a backtest has nothing to decide about)
    archive = archive_pattern(platform)
    rules = {lid: rule for lid, rule in acting_rules(platform).items()
             if not lid.startswith(("ModeWatchRule", "CanaryRule"))}
    assert len(rules) == 5
    for lid, rule in rules.items():
        assert rule["account"] == archive["account"]
        assert any(covered(rule, branch) for branch in archive["$or"]), f"{lid} takes events the archive drops"


@pytest.mark.parametrize("sample", ["hyperpod-node-health-unhealthy", "hyperpod-cluster-event-error",
                                    "training-job-failed", "cloudwatch-alarm-state-change", "medic-requeue-job"])
def test_the_archive_keeps_each_kind_of_event_medic_takes(platform, sample):
    event = {**load_event(sample), "account": "123456789012"}
    assert matches(archive_pattern(platform), event)


def test_the_archive_drops_what_no_rule_could_take(raw):
    archive = archive_pattern(raw)
    completed = load_event("training-job-failed")
    completed["detail"]["TrainingJobStatus"] = "Completed"
    someone_elses_alarm = load_event("cloudwatch-alarm-state-change")
    someone_elses_alarm["detail"]["alarmName"] = "someone-elses-alarm"
    for event in (completed, someone_elses_alarm):
        assert not matches(archive, {**event, "account": "123456789012"})
    assert not matches(archive, {**load_event("hyperpod-node-health-unhealthy"), "account": "210987654321"})


def test_every_rule_that_reaches_a_handler_takes_only_live_events(raw):
    # Given the rules whose target is one of Medic's functions
    rules = acting_rules(raw)
    assert len(rules) == 11  # node, cluster events, training jobs, Batch jobs and their restarts running, Bedrock
    # jobs and theirs, alarms, operator requests, the mode watch, the canary
    for pattern in rules.values():
        # Then each excludes what EventBridge replays from an archive (it adds replay-name to a replayed event)
        assert pattern["replay-name"] == NO_REPLAYS["replay-name"]
    [node_rule] = [p for lid, p in rules.items() if lid.startswith("NodeRemediationRule")]
    event = load_event("hyperpod-node-health-unhealthy")
    assert matches(node_rule, event)
    assert not matches(node_rule, {**event, "replay-name": "ops-investigation-replay"})


def test_the_canary_rule_takes_only_its_own_stacks_live_canaries_to_the_node_remediation_function(raw):
    # Given the canary rule (issue 29, item 6) and the canary the reconciler of stack "Medic" puts
    [(lid, canary_rule)] = [(lid, p) for lid, p in acting_rules(raw).items() if lid.startswith("CanaryRule")]
    canary = {"version": "0", "id": "3f6c1a2b-4d5e-4f60-8a7b-9c0d1e2f3a4b", "detail-type": "Medic Canary",
              "source": "medic.canary", "account": "123456789012", "time": "2026-11-20T08:05:00Z",
              "region": "us-west-2", "resources": [],
              "detail": {"stack": "Medic", "ledger": "Medic-LedgerTable",
                         "canary": "3f6c1a2b-4d5e-4f60-8a7b-9c0d1e2f3a4b", "sent_at": "2026-11-20T08:05:00+00:00"}}
    assert canary_rule["account"] == [{"Ref": "AWS::AccountId"}]
    resolved = {**canary_rule, "account": ["123456789012"]}
    # Then it takes that canary, and neither another stack's, a replay of it, nor a node event
    assert matches(resolved, canary)
    assert not matches(resolved, {**canary, "detail": {**canary["detail"], "stack": "MedicCandidate"}})
    assert not matches(resolved, {**canary, "replay-name": "ops-investigation-replay"})
    assert not matches(resolved, {**load_event("hyperpod-node-health-unhealthy"), "account": "123456789012"})
    # And its target is the node remediation function, with that function's dead-letter queue
    [target] = raw["Resources"][lid]["Properties"]["Targets"]
    assert target["Arn"]["Fn::GetAtt"][0].startswith("NodeRemediationHandlerFunction")
    assert target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0].startswith("NodeRemediationHandlerDeadLetters")


def test_a_config_whose_rule_would_break_the_quota_stops_synth_naming_the_quota_and_the_keys(tmp_path):
    # Given 30 clusters with names of HyperPod's maximum length, 63 characters (more than the functions' environment
    # holds today: infra/config.py stops such a file first; the stack refuses it on its own all the same)
    names = [(f"{index:02d}-" + "llm-pretrain-p5-capacity-block-us-east-1-production-fleet-ab", "slurm")
             for index in range(30)]
    assert {len(name) for name, _ in names} == {63}
    config = parse_config(platform_config(names, [], []))
    # When the stack is built
    app = cdk.App(outdir=str(tmp_path), context=_cdk_context())
    with pytest.raises(EventPatternTooLarge) as raised:
        MedicStack(app, "Medic", config=config, env=cdk.Environment(account="123456789012", region="us-west-2"))
    # Then synth stops before anything is deployed, naming each rule, its size, the config keys and the quota
    message = str(raised.value)
    assert "the EventBridge rule Medic/ClusterEvents/Rule has a 2," in message and "clusters[].name" in message
    assert "Medic/NodeRemediation/Rule" in message
    assert "Medic/SlurmJobRequeue/RequeueRule" not in message  # it takes every request: no cluster names in it
    assert '"Event pattern size" quota of 2,048 characters' in message
    assert isinstance(raised.value, ConfigError)  # app.py prints it as `error: ...` and exits 1, like a bad key
