"""restart_job parsing: every name is validated as Kubernetes validates it before it is used."""

from __future__ import annotations

import json

import pytest
from medic_agent.commands import Refused
from medic_agent.eks.commands import is_namespace, is_object_name, load_watched, parse

from tests.agent.eks_world import CLUSTER, restart_body


def test_a_restart_job_parses_with_its_target():
    body = restart_body()
    command = parse(json.dumps(body), cluster=CLUSTER)
    assert command.kind == "restart_job"
    assert command.target == "PyTorchJob/kubeflow/bert-xl"
    assert command.action.spec.plural == "pytorchjobs"
    assert command.command_id == body["command_id"] and command.incident == "job:bert-xl"


@pytest.mark.parametrize("kind", ["PyTorchJob", "HyperPodPyTorchJob", "Job"])
def test_each_job_kind(kind):
    assert parse(json.dumps(restart_body(job_kind=kind)), cluster=CLUSTER).target == f"{kind}/kubeflow/bert-xl"


@pytest.mark.parametrize("value, ok", [
    ("kubeflow", True), ("a", True), ("0", True), ("a-b", True), ("a" * 63, True),
    ("a" * 64, False), ("", False), ("-a", False), ("a-", False), ("A", False), ("a.b", False), ("a_b", False),
    ("a\n", False), ("kube flow", False), ("ｋｕｂｅ", False), ("../etc", False), ("a/b", False), (None, False),
    (7, False),
])
def test_namespace_is_a_dns1123_label(value, ok):
    assert is_namespace(value) is ok


@pytest.mark.parametrize("value, ok", [
    ("bert-xl", True), ("bert.xl", True), ("a" * 253, True), ("a" * 63 + "." + "b" * 63, True),
    ("a" * 254, False), ("Bert", False), ("bert_xl", False), ("bert..xl", False), (".bert", False),
    ("bert.", False), ("bert-.x", False), ("bert\n", False), ("bert%2Fx", False), ("bert/../x", False),
    ("béрт", False), ("", False),
])
def test_job_name_is_a_dns1123_subdomain(value, ok):
    assert is_object_name(value) is ok


@pytest.mark.parametrize("changes, reason", [
    ({"job_kind": "MPIJob"}, "job_kind must be one of"),
    ({"job_kind": "pytorchjob"}, "job_kind must be one of"),
    ({"namespace": "Kubeflow"}, "namespace must be a DNS-1123 label"),
    ({"namespace": "kube-system/../x"}, "namespace must be a DNS-1123 label"),
    ({"job_name": "bert xl; rm -rf /"}, "job_name must be a DNS-1123 subdomain"),
    ({"job_name": "x" * 254}, "job_name must be a DNS-1123 subdomain"),
    ({"job_name": ["bert-xl"]}, "job_name must be a DNS-1123 subdomain"),
    ({"kind": "requeue_job"}, "kind must be one of restart_job, quarantine_node, release_node"),
    ({"cluster": "other"}, "command is for cluster"),
    ({"command_id": "../x"}, "command_id must match"),
])
def test_hostile_values_are_refused(changes, reason):
    with pytest.raises(Refused) as refused:
        parse(json.dumps(restart_body(**changes)), cluster=CLUSTER)
    assert reason in refused.value.reason


def test_missing_fields_and_garbage_are_refused():
    for body in ("", "not json", "[]", json.dumps({k: v for k, v in restart_body().items() if k != "namespace"})):
        with pytest.raises(Refused):
            parse(body, cluster=CLUSTER)


def test_watched_jobs_file():
    jobs = load_watched(json.dumps([{"namespace": "kubeflow", "kind": "PyTorchJob", "name": "bert-xl"},
                                    {"kind": "Job", "name": "etl"}]))
    assert [job.target for job in jobs] == ["PyTorchJob/kubeflow/bert-xl", "Job/default/etl"]
    assert [job.launcher_exits_128_or_more_on_sigterm for job in jobs] == [False, False]
    exits = "launcher_exits_128_or_more_on_sigterm"
    said = load_watched(json.dumps([{"kind": "PyTorchJob", "name": "x", exits: True}]))
    assert said[0].launcher_exits_128_or_more_on_sigterm is True
    for bad in ([{"kind": "MPIJob", "name": "x"}], [{"kind": "Job", "name": "X"}], {"jobs": "x"},
                [{"kind": "Job", "name": "x", "namespace": "a.b"}],
                [{"kind": "PyTorchJob", "name": "x", "launcher_exits_128_or_more_on_sigterm": "true"}]):
        with pytest.raises(ValueError):
            load_watched(json.dumps(bad))
