"""Specification: `cdk synth` validates medic.yaml; a bad file stops it and names the key and value."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from infra.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "medic.yaml"
    path.write_text(text)
    return path


GOOD_CLUSTER = "clusters: [{name: c1, id: abcdefabcdef, orchestrator: slurm}]\n"


@pytest.mark.parametrize("text,key,value", [
    ("mode: sometimes\n" + GOOD_CLUSTER, "mode", "'sometimes'"),
    ("clusters: [{name: c1, id: abcdefabcdef, orchestrator: pbs}]\n", "clusters.0.orchestrator", "'pbs'"),
    ("guardrails: {max_fraction_in_repair: 2}\n" + GOOD_CLUSTER, "guardrails.max_fraction_in_repair", "2"),
    ("clusters: [{name: c1, id: abcdefabcdef, orchestrator: slurm, colour: red}]\n", "clusters.0.colour", "'red'"),
    ("notify: {emails: [not-an-address]}\n" + GOOD_CLUSTER, "notify.emails", "not-an-address"),
])
def test_a_bad_value_is_named_with_its_key(tmp_path, text, key, value):
    with pytest.raises(ConfigError) as error:
        load_config(write(tmp_path, text))
    assert key in str(error.value) and value in str(error.value)


def test_a_file_that_is_not_a_mapping_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(write(tmp_path, "- just\n- a list\n"))


def test_the_example_config_is_valid():
    assert load_config(ROOT / "medic.example.yaml").clusters


def test_cdk_synth_with_a_bad_config_stops_and_synthesizes_nothing(tmp_path):
    # (make test runs make setup first, which installs the CDK CLI and Node 22 from package.json)
    # Given a config with a bad mode, selected with -c config=PATH
    bad = write(tmp_path, "mode: sometimes\n" + GOOD_CLUSTER)
    out = tmp_path / "cdk.out"
    env = {**os.environ, "PATH": f"{ROOT / 'node_modules' / 'node' / 'bin'}:{os.environ['PATH']}"}
    # When the operator runs cdk synth
    result = subprocess.run([str(ROOT / "node_modules" / ".bin" / "cdk"), "synth", "-c", f"config={bad}",
                             "--output", str(out), "--quiet"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    # Then it fails, names the key and the value, and leaves no template behind
    assert result.returncode != 0
    assert "mode" in result.stderr and "'sometimes'" in result.stderr
    assert not list(out.glob("*.template.json")) if out.exists() else True
    shutil.rmtree(out, ignore_errors=True)


def test_a_full_cluster_arn_for_an_id_is_taken_and_synth_says_which_id(tmp_path, capsys):
    # Given a config that names pretrain-slurm's id by its ClusterArn (issue 29, item 2)
    path = tmp_path / "medic.yaml"
    path.write_text("notify: {emails: [oncall@example.com]}\nclusters:\n  - name: pretrain-slurm\n"
                    "    id: arn:aws:sagemaker:us-west-2:123456789012:cluster/k3v9q2w8x1za\n    orchestrator: slurm\n")
    # When synth loads it
    config = load_config(path)
    # Then the id is the ARN's, and synth says so
    assert config.clusters[0].id == "k3v9q2w8x1za"
    assert "clusters.0.id: took the cluster id 'k3v9q2w8x1za' from the ARN" in capsys.readouterr().err


def test_two_clusters_with_one_id_stop_synth(tmp_path):
    path = tmp_path / "medic.yaml"
    path.write_text("notify: {emails: [oncall@example.com]}\nclusters:\n"
                    "  - {name: pretrain-slurm, id: k3v9q2w8x1za, orchestrator: slurm}\n"
                    "  - {name: finetune-slurm, id: k3v9q2w8x1za, orchestrator: slurm}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert "duplicate cluster id(s)" in str(raised.value)
