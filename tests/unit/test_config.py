"""Specification: the Medic config model and its errors."""

import json

import pytest
import yaml
from pydantic import ValidationError

from medic.config import SECTIONS_ELSEWHERE, ConfigError, CoreConfig, JobSections, MedicConfig, parse_config
from medic.config_training import JOB_SECTIONS
from medic.deps import Deps

MINIMAL = {"clusters": [{"name": "pretrain-slurm", "id": "k3v9q2w8x1za", "orchestrator": "slurm"}]}


def test_the_bundled_config_is_valid():
    with open("medic.yaml") as handle:
        config = parse_config(yaml.safe_load(handle), "medic.yaml")
    assert {"controller-machine", "login-group", "controller", "login"} <= set(
        config.cluster("pretrain-slurm").protected_groups)


def test_defaults_are_the_documented_guardrails():
    config = parse_config(MINIMAL)
    assert config.mode == "act"
    assert config.guardrails.max_node_actions_per_hour == 4
    assert config.guardrails.max_fraction_in_repair == 0.25
    assert config.guardrails.node_cooldown_minutes == 60


def test_a_cluster_override_replaces_only_what_it_names():
    data = {"guardrails": {"node_cooldown_minutes": 30},
            "clusters": [{**MINIMAL["clusters"][0], "guardrails": {"max_node_actions_per_hour": 10}}]}
    config = parse_config(data)
    effective = config.guardrails_for(config.clusters[0])
    assert (effective.max_node_actions_per_hour, effective.node_cooldown_minutes) == (10, 30)


def test_the_handlers_receive_the_same_config():
    config = parse_config({**MINIMAL, "mode": "dry_run"})
    assert MedicConfig.from_env(config.to_env()) == config


@pytest.mark.parametrize(("data", "named"), [
    ({"clusters": [{**MINIMAL["clusters"][0], "orchestrator": "nomad"}]}, "clusters.0.orchestrator"),
    ({**MINIMAL, "guardrails": {"max_node_actions_per_hour": -1}}, "guardrails.max_node_actions_per_hour"),
    ({**MINIMAL, "mode": "yolo"}, "mode"),
    ({**MINIMAL, "colour": "blue"}, "colour"),
    ({**MINIMAL, "notify": {"emails": ["not-an-email"]}}, "notify.emails"),
    ({**MINIMAL, "jobs": [{"name": "j", "cluster": "nowhere"}]}, "jobs.0.cluster"),
    ({"clusters": []}, "clusters"),
])
def test_a_bad_config_names_the_key_and_the_value(data, named):
    with pytest.raises(ConfigError) as caught:
        parse_config(data, "medic.yaml")
    assert named in str(caught.value)
    assert "medic.yaml" in str(caught.value)


def test_default_protected_groups_cover_the_names_aws_docs_and_samples_give_controller_and_login_groups():
    groups = parse_config(MINIMAL).cluster("pretrain-slurm").protected_groups
    assert {"controller-machine", "login-group", "controller", "login"} <= set(groups)


def test_rebooting_a_slurm_controller_is_off_unless_the_config_opts_in():
    assert parse_config(MINIMAL).cluster("pretrain-slurm").allow_controller_reboot is False
    opted = {"clusters": [{**MINIMAL["clusters"][0], "allow_controller_reboot": True}]}
    assert parse_config(opted).cluster("pretrain-slurm").allow_controller_reboot is True


EKS = {"clusters": [{"name": "finetune-eks", "id": "p7r2m4x9c1qa", "orchestrator": "eks"},
                    {"name": "pretrain-slurm", "id": "k3v9q2w8x1za", "orchestrator": "slurm"}]}


def test_an_eks_job_names_its_kubernetes_object_with_documented_defaults():
    config = parse_config({**EKS, "jobs": [
        {"name": "bert-xl", "cluster": "finetune-eks"},
        {"name": "Llama_FT", "cluster": "finetune-eks", "namespace": "hyperpod-ns-team", "kind": "HyperPodPyTorchJob",
         "object_name": "llama-ft"}]})
    assert [job.kubernetes_object().target for job in config.jobs] == [
        "PyTorchJob/default/bert-xl", "HyperPodPyTorchJob/hyperpod-ns-team/llama-ft"]


@pytest.mark.parametrize("job, named", [
    ({"namespace": "Kube_Flow"}, "jobs.0.namespace"),
    ({"namespace": "a" * 64}, "jobs.0.namespace"),
    ({"kind": "MPIJob"}, "jobs.0.kind"),
    ({"object_name": "Bert-XL"}, "jobs.0.object_name"),
    ({"object_name": "x" * 254}, "jobs.0.object_name"),
    ({"name": "Bert_XL"}, "jobs.0.name"),  # the object's name by default: it must be a Kubernetes name
    ({"cluster": "pretrain-slurm", "namespace": "kubeflow"}, "jobs.0.namespace: only a job on an EKS cluster"),
    ({"launcher_exits_128_or_more_on_sigterm": "sometimes"}, "jobs.0.launcher_exits_128_or_more_on_sigterm"),
    ({"cluster": "pretrain-slurm", "launcher_exits_128_or_more_on_sigterm": True},
     "jobs.0.launcher_exits_128_or_more_on_sigterm: only a PyTorchJob on an EKS cluster"),
    ({"kind": "Job", "launcher_exits_128_or_more_on_sigterm": True},
     "jobs.0.launcher_exits_128_or_more_on_sigterm: only a PyTorchJob on an EKS cluster has restartPolicy ExitCode"),
])
def test_a_bad_kubernetes_key_names_the_key(job, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        parse_config({**EKS, "jobs": [{"name": "bert-xl", "cluster": "finetune-eks", **job}]})


def test_a_pytorchjob_whose_launcher_exits_128_or_more_on_sigterm_says_so_default_false():
    config = parse_config({**EKS, "jobs": [{"name": "bert-xl", "cluster": "finetune-eks"},
                                           {"name": "bert-xs", "cluster": "finetune-eks",
                                            "launcher_exits_128_or_more_on_sigterm": True}]})
    assert [job.launcher_exits_128_or_more_on_sigterm for job in config.jobs] == [False, True]


def test_two_jobs_naming_one_kubernetes_object_are_refused():
    with pytest.raises(ConfigError, match="more than one job names the same Kubernetes object"):
        parse_config({**EKS, "jobs": [{"name": "a", "cluster": "finetune-eks", "object_name": "bert"},
                                      {"name": "bert", "cluster": "finetune-eks"}]})


def test_the_oidc_issuer_is_an_eks_clusters_and_named_when_wrong():
    issuer = "https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
    eks = {"name": "finetune-eks", "id": "p7r2m4x9c1qa", "orchestrator": "eks", "eks_oidc_issuer": issuer}
    [cluster] = parse_config({"clusters": [eks]}).clusters
    assert cluster.eks_oidc_provider == issuer.removeprefix("https://")
    with pytest.raises(ConfigError, match="eks_oidc_issuer: only an EKS cluster's agent uses IRSA"):
        parse_config({"clusters": [{**eks, "orchestrator": "slurm"}]})
    for wrong in ("oidc.eks.us-west-2.amazonaws.com/id/EXAMPLE", "https://example.com/id/EXAMPLE"):
        with pytest.raises(ConfigError, match="eks_oidc_issuer"):
            parse_config({"clusters": [{**eks, "eks_oidc_issuer": wrong}]})


# --- issue 29: a wrong cluster id is caught at synth; the agent's silence bounds


def test_two_clusters_with_one_id_are_refused_naming_both():
    data = {"clusters": [{"name": "pretrain-slurm", "id": "k3v9q2w8x1za", "orchestrator": "slurm"},
                         {"name": "finetune-slurm", "id": "k3v9q2w8x1za", "orchestrator": "slurm"}]}
    with pytest.raises(ConfigError) as raised:
        parse_config(data, "medic.yaml")
    assert "duplicate cluster id(s) {'k3v9q2w8x1za': ['pretrain-slurm', 'finetune-slurm']}" in str(raised.value)


def test_a_full_cluster_arn_gives_its_id_and_synth_says_so():
    from medic.config import cluster_id_notices

    arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/k3v9q2w8x1za"
    data = {"clusters": [{"name": "pretrain-slurm", "id": arn, "orchestrator": "slurm"}]}
    assert parse_config(data).clusters[0].id == "k3v9q2w8x1za"
    [notice] = cluster_id_notices(data)
    assert notice.startswith("clusters.0.id: took the cluster id 'k3v9q2w8x1za' from the ARN " + arn)
    assert cluster_id_notices(MINIMAL) == []


@pytest.mark.parametrize("bad", ["arn:aws:sagemaker:us-west-2:123456789012:cluster/pretrain-slurm",
                                 "arn:aws:eks:us-west-2:123456789012:cluster/k3v9q2w8x1za", "K3V9Q2W8X1ZA"])
def test_anything_else_for_an_id_is_refused_naming_it(bad):
    with pytest.raises(ConfigError) as raised:
        parse_config({"clusters": [{"name": "pretrain-slurm", "id": bad, "orchestrator": "slurm"}]})
    assert "clusters.0.id" in str(raised.value) and repr(bad) in str(raised.value)


def test_the_agent_silence_bounds_default_and_are_bounded():
    guardrails = parse_config(MINIMAL).guardrails
    assert (guardrails.agent_silence_minutes, guardrails.agent_install_grace_hours) == (15, 24)
    with pytest.raises(ConfigError) as raised:
        parse_config({**MINIMAL, "guardrails": {"agent_silence_minutes": 2}})
    assert "guardrails.agent_silence_minutes" in str(raised.value)


def test_the_example_config_documents_every_guardrail():
    from pathlib import Path

    from medic.config import Guardrails

    example = yaml.safe_load((Path(__file__).resolve().parents[2] / "medic.example.yaml").read_text())
    assert set(Guardrails.model_fields) <= set(example["guardrails"])


FULL = {**MINIMAL, "notify": {"emails": ["oncall@example.com"]}, "event_archive_days": 7,
        "training_jobs": [{"prefix": "ft-", "role_arns": ["arn:aws:iam::123456789012:role/SageMakerTrainingRole"],
                           "checkpoint_buckets": ["ml-checkpoints-123456789012"]}]}


def test_a_handler_validates_only_the_core_sections_and_reads_the_rest_on_first_use():
    # Given the config synth validated whole and put in MEDIC_CONFIG
    env = parse_config(FULL).to_env()
    # When a handler reads it (wiring.dependencies)
    core = CoreConfig.from_env(env)
    # Then it holds the sections every handler reads, knows which others are set, and leaves them unread
    assert type(core) is CoreConfig and core.cluster("pretrain-slurm") is not None
    assert core.configures("training_jobs") and not core.configures("batch_jobs") and core.configures("clusters")
    # and a job flow reads the job sections through Deps.jobs_config, equal to synth's
    deps = Deps(config=core, hyperpod=None, table=None, pager=None, mode=None, region="us-west-2",  # type: ignore[arg-type]
                jobs_on_node={})
    whole = parse_config(FULL)
    assert type(deps.jobs_config) is JobSections
    assert deps.jobs_config.model_dump() == whole.model_dump(include=set(JOB_SECTIONS))
    assert deps.jobs_config.max_restarts_for(whole.training_jobs[0]) == whole.max_restarts_for(whole.training_jobs[0])


def test_the_core_skips_exactly_the_sections_the_contract_adds():
    assert set(MedicConfig.model_fields) - set(CoreConfig.model_fields) == SECTIONS_ELSEWHERE
    with pytest.raises(ValidationError, match="colour"):  # any other key is an error at run time too
        CoreConfig.from_env(json.dumps({**MINIMAL, "colour": "blue"}))
