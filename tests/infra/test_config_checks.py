"""Specification: config mistakes synth used to accept are refused or warned (issue 29, item 3). Refused: a YAML key
given twice, no one to page, eks_cluster_name on a Slurm cluster. Warned (at synth as CDK warnings, and by `medic
validate`): a stall_minutes the NCCL watchdog beats, a role of another account, a training-job prefix so short it
reaches other teams' jobs (training_jobs, batch_jobs, bedrock_jobs alike)."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match

from infra.config import MIN_PREFIX_CHARS, NCCL_WATCHDOG_DEFAULT_MINUTES, config_warnings, load_config
from infra.stack import MedicStack
from medic.config import ConfigError, parse_config
from sim.synth import _cdk_context

ROOT = Path(__file__).resolve().parents[2]
BASE = """\
mode: act
notify:
  emails: [oncall@example.com]
clusters:
  - name: pretrain-slurm
    id: k3v9q2w8x1za
    orchestrator: slurm
training_jobs:
  - prefix: ft-mistral-
    role_arns: [arn:aws:iam::123456789012:role/SageMakerTrainingRole]
    checkpoint_buckets: [ml-artifacts-123456789012]
jobs:
  - name: llama3-70b
    cluster: pretrain-slurm
    stall_minutes: 8
"""


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "medic.yaml"
    path.write_text(text)
    return path


def test_a_key_given_twice_is_refused_naming_the_key_and_both_lines(tmp_path):
    # Given a second `notify:` further down, which PyYAML would silently keep instead of the first
    path = written(tmp_path, BASE + "notify:\n  emails: []\n")
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert "duplicate key 'notify' at line 16 (first at line 2)" in str(refused.value)
    assert str(path) in str(refused.value)


def test_a_key_given_twice_inside_a_list_item_is_refused_too(tmp_path):
    path = written(tmp_path, BASE.replace("    stall_minutes: 8\n", "    stall_minutes: 8\n    stall_minutes: 30\n"))
    with pytest.raises(ConfigError, match="duplicate key 'stall_minutes' at line 16 \\(first at line 15\\)"):
        load_config(path)


def test_no_one_to_page_is_refused_unless_the_topic_is_subscribed_elsewhere(tmp_path):
    # Given a config without notify: every page would reach a topic with no subscriber
    with pytest.raises(ConfigError, match="notify: nobody would get Medic's pages") as refused:
        load_config(written(tmp_path, BASE.replace("notify:\n  emails: [oncall@example.com]\n", "")))
    assert "notify.subscribed_elsewhere: true" in str(refused.value)
    # An empty notify is the same
    with pytest.raises(ConfigError, match="nobody would get Medic's pages"):
        load_config(written(tmp_path, BASE.replace("  emails: [oncall@example.com]\n", "  emails: []\n")))
    # The explicit opt-out: the operator subscribes the topic (PagingTopicArn) outside medic.yaml
    config = load_config(written(tmp_path, BASE.replace("  emails: [oncall@example.com]\n",
                                                        "  subscribed_elsewhere: true\n")))
    assert config.notify.subscribed_elsewhere and not config.notify.emails


def test_eks_cluster_name_on_a_slurm_cluster_is_refused():
    data = {"notify": {"emails": ["a@example.com"]},
            "clusters": [{"name": "pretrain-slurm", "id": "k3v9q2w8x1za", "orchestrator": "slurm",
                          "eks_cluster_name": "pretrain"}]}
    with pytest.raises(ConfigError, match="clusters.0: .*eks_cluster_name: only a HyperPod cluster orchestrated by "
                                          "EKS has an EKS cluster \\('pretrain-slurm' is orchestrated by slurm\\)"):
        parse_config(data, "medic.yaml")


def test_a_careful_config_has_no_warning(tmp_path):
    assert config_warnings(load_config(written(tmp_path, BASE)), account="123456789012") == []


def test_a_stall_bound_at_or_above_the_nccl_watchdogs_default_is_warned(tmp_path):
    assert NCCL_WATCHDOG_DEFAULT_MINUTES == 10  # PyTorch's kProcessGroupNCCLDefaultTimeout
    for minutes, warned in ((9, False), (10, True), (30, True)):
        config = load_config(written(tmp_path, BASE.replace("stall_minutes: 8", f"stall_minutes: {minutes}")))
        warnings = config_warnings(config)
        assert bool(warnings) is warned, minutes
        if warned:
            assert warnings[0].startswith(f"jobs.0.stall_minutes: {minutes} (llama3-70b) is at or above PyTorch's "
                                          "NCCL watchdog default of 10 minutes")


def test_a_short_training_job_prefix_is_warned(tmp_path):
    assert MIN_PREFIX_CHARS == 6
    for prefix, warned in (("ft-", True), ("llm-a-", True), ("bert5-", True), ("mistral", False), ("ft-mist", False)):
        config = load_config(written(tmp_path, BASE.replace("prefix: ft-mistral-", f"prefix: {prefix}")))
        warnings = config_warnings(config)
        assert bool(warnings) is warned, prefix
        if warned:
            assert f"training_jobs.0.prefix: '{prefix}' has" in warnings[0]
            assert "other teams' too" in warnings[0]


MANAGED = """\
batch_jobs:
  - prefix: {batch}
    job_queues: [gpu-training]
    job_definitions: [pretrain-mnp]
    allow_restart_without_checkpoint: true
bedrock_jobs:
  - prefix: {bedrock}
    role_arns: [arn:aws:iam::{account}:role/BedrockCustomization]
"""


def test_a_short_batch_or_bedrock_prefix_is_warned_as_a_training_jobs_one(tmp_path):
    # Given Batch and Bedrock entries beside the careful training_jobs one
    careful = BASE + MANAGED.format(batch="pretrain-", bedrock="cpt-titan-", account="123456789012")
    assert config_warnings(load_config(written(tmp_path, careful)), account="123456789012") == []
    # When their prefixes are short
    short = BASE + MANAGED.format(batch="pt-", bedrock="cpt-", account="123456789012")
    batch_warning, bedrock_warning = config_warnings(load_config(written(tmp_path, short)), account="123456789012")
    # Then each is warned under its own key, in the training_jobs warning's words, naming what it reaches
    assert batch_warning.startswith("batch_jobs.0.prefix: 'pt-' has 2 letters and digits (fewer than 6): Medic "
                                    "restarts any failed AWS Batch job in its job_queues whose name starts with it, "
                                    "other teams' too")
    assert bedrock_warning.startswith("bedrock_jobs.0.prefix: 'cpt-' has 3 letters and digits (fewer than 6): Medic "
                                      "restarts any failed Bedrock model customization job of the account")


def test_a_bedrock_role_of_another_account_is_warned(tmp_path):
    other = BASE + MANAGED.format(batch="pretrain-", bedrock="cpt-titan-", account="210987654321")
    [warning] = config_warnings(load_config(written(tmp_path, other)), account="123456789012")
    assert warning.startswith("bedrock_jobs.0.role_arns: arn:aws:iam::210987654321:role/BedrockCustomization is a "
                              "role of account 210987654321, not the deploying account 123456789012")


def test_a_role_of_another_account_is_warned_when_the_account_is_known(tmp_path):
    config = load_config(written(tmp_path, BASE.replace("iam::123456789012:role", "iam::210987654321:role")))
    [warning] = config_warnings(config, account="123456789012")
    assert warning.startswith("training_jobs.0.role_arns: arn:aws:iam::210987654321:role/SageMakerTrainingRole is a "
                              "role of account 210987654321, not the deploying account 123456789012")
    assert config_warnings(config, account=None) == []  # unknown account (synth without credentials): nothing said


def test_synth_shows_each_warning_as_a_cdk_warning(tmp_path):
    # Given a config with a short prefix and a stall bound the watchdog beats, deployed to a known account
    config = load_config(written(tmp_path, BASE.replace("prefix: ft-mistral-", "prefix: ft-")
                                 .replace("stall_minutes: 8", "stall_minutes: 10")))
    app = cdk.App(outdir=str(tmp_path / "cdk.out"), context=_cdk_context())
    stack = MedicStack(app, "Medic", config=config, env=cdk.Environment(account="123456789012", region="us-west-2"))
    # Then synth carries both as warnings on the stack (cdk synth prints them), worded as medic validate says them
    shown = [message.entry.data for message in Annotations.from_stack(stack).find_warning("/Medic", Match.any_value())]
    expected = config_warnings(config, "123456789012")
    assert len(expected) == 2
    assert [text.split(" [ack: ")[0] for text in shown] == [f"medic.yaml: {warning}" for warning in expected]
