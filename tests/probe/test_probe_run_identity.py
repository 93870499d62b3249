"""Issue 33: the probe reports its run's identity (`Run`), so a cluster's watch rules find the run and Medic restarts
exactly it: the Slurm job id on Slurm, the pod and its owning training job on Kubernetes."""

from __future__ import annotations

import json

import pytest

from tests.probe.conftest import by_metric, dims


@pytest.fixture(autouse=True)
def no_run_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SLURM_JOB_ID", "POD_NAMESPACE", "POD_NAME", "MEDIC_OWNER", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)


class TestRunIdentity:
    def test_given_a_slurm_job_when_flushed_then_run_carries_its_job_id_under_the_cluster(
            self, make_probe, fake, monkeypatch):
        monkeypatch.setenv("SLURM_JOB_ID", "4242")
        probe = make_probe(job="gpt-sweep-7", cluster="pretrain-slurm", client=fake)
        probe.step(1)

        assert probe.flush() is True

        run = by_metric(fake.calls[0])[("Run", dims(Job="gpt-sweep-7", Cluster="pretrain-slurm",
                                                    SlurmJobId="4242"))]
        assert (run["Value"], run["Unit"]) == (1, "Count")

    def test_given_a_pytorchjob_pod_when_flushed_then_run_names_the_pod_and_the_owner_from_master_addr(
            self, make_probe, fake, monkeypatch):
        # the downward API's namespace and name; MASTER_ADDR as the training-operator sets it (<job>-master-0)
        monkeypatch.setenv("POD_NAMESPACE", "team-a")
        monkeypatch.setenv("POD_NAME", "gpt-ft-master-0")
        monkeypatch.setenv("MASTER_ADDR", "gpt-ft-master-0")
        probe = make_probe(job="gpt-ft", cluster="finetune-eks", client=fake)
        probe.step(1)

        probe.flush()

        assert ("Run", dims(Job="gpt-ft", Cluster="finetune-eks", Pod="team-a/gpt-ft-master-0",
                            Owner="PyTorchJob/gpt-ft")) in by_metric(fake.calls[0])

    def test_given_no_cluster_or_no_identity_then_no_run_metric(self, make_probe, fake, monkeypatch):
        probe = make_probe(job="gpt-a", cluster="c", client=fake)
        monkeypatch.setenv("SLURM_JOB_ID", "99")
        unclustered = make_probe(job="gpt-b", client=fake)
        for each in (probe, unclustered):
            each.step(1)
            each.flush()

        assert not [key for call in fake.calls for key in by_metric(call) if key[0] == "Run"]

    def test_given_a_slurm_job_id_that_is_not_digits_then_the_probe_refuses_it(self, make_probe):
        with pytest.raises(ValueError, match="slurm_job_id"):
            make_probe(cluster="c", slurm_job_id="42; rm -rf /")

    def test_given_emf_then_run_is_its_own_directive_with_the_identity_as_root_keys(self, make_probe, capsys):
        probe = make_probe(emf=True, cluster="pretrain-slurm", slurm_job_id=4242)
        probe.step(1)
        probe.flush()

        doc = json.loads(capsys.readouterr().out.strip())
        run = doc["_aws"]["CloudWatchMetrics"][-1]
        assert run["Dimensions"] == [["Job", "Cluster", "SlurmJobId"]]
        assert run["Metrics"] == [{"Name": "Run", "Unit": "Count"}]
        assert (doc["SlurmJobId"], doc["Run"]) == ("4242", 1)
