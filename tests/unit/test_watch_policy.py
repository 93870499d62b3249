"""Specification: watch by pattern (issue 33). Which runs a cluster's watch rules cover, when one has stalled, and
exactly what a stall may restart (a Slurm job id; an owner in an opted-in namespace), or why it pages instead."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from medic.config import ConfigError, parse_config
from medic.core.mode import Mode
from medic.core.models import Action, Outcome, Why
from medic.core.progress import Progress, RunReport
from medic.flows.stall.policy import AlarmContext, AlarmKind, Plan, decide_alarm
from medic.flows.stall.watch_policy import RunState, watched_runs

SLURM = {"name": "pretrain-slurm", "id": "k3v9q2w8x1za", "orchestrator": "slurm",
         "watch": [{"job_prefix": "gpt-", "stall_minutes": 7}, {"job_prefix": "gpt-long-", "stall_minutes": 30}]}
EKS = {"name": "finetune-eks", "id": "p7r2m4x9c1qa", "orchestrator": "eks",
       "watch": [{"job_prefix": "gpt-", "namespaces": ["team-a"]}]}
CONFIG = parse_config({"clusters": [SLURM, EKS], "jobs": [{"name": "gpt-pinned", "cluster": "pretrain-slurm"}]})
NOW = datetime(2026, 11, 21, 3, 15, tzinfo=UTC)


def minutes_ago(count: float) -> datetime:
    return NOW - timedelta(minutes=count)


def slurm_run(job: str = "gpt-sweep-7", job_id: str = "5120", first: float | None = 60, last: float | None = 0,
              stepped: float | None = 10, **more) -> RunReport:
    return RunReport(job=job, cluster="pretrain-slurm", slurm_job_id=job_id,
                     first_report_at=None if first is None else minutes_ago(first),
                     last_report_at=None if last is None else minutes_ago(last),
                     last_step_at=None if stepped is None else minutes_ago(stepped),
                     **more)


def eks_run(pod: str = "team-a/gpt-ft-master-0", owner: str | None = "PyTorchJob/gpt-ft") -> RunReport:
    return RunReport(job="gpt-ft", cluster="finetune-eks", pod=pod, owner=owner, first_report_at=minutes_ago(60),
                     last_report_at=minutes_ago(0), last_step_at=minutes_ago(10))


def judged(cluster: int, *reports: RunReport):
    return watched_runs(CONFIG, CONFIG.clusters[cluster], list(reports), NOW)


class TestWhichRunsAreWatched:
    def test_a_run_matching_a_rule_is_watched_with_the_most_specific_rules_timings(self):
        (short, long) = judged(0, slurm_run(), slurm_run(job="gpt-long-3", job_id="5121"))
        assert (short.rule.job_prefix, short.subject.job.stall_minutes, short.state) == ("gpt-", 7, RunState.STALLED)
        assert (long.rule.job_prefix, long.subject.job.stall_minutes, long.state) == ("gpt-long-", 30,
                                                                                      RunState.STEPPING)

    def test_a_jobs_entry_of_the_same_name_wins_and_a_run_no_rule_matches_is_not_watched(self):
        assert judged(0, slurm_run(job="gpt-pinned"), slurm_run(job="llama-9", job_id="77")) == []

    def test_a_run_that_never_stepped_counts_its_stall_from_its_first_report(self):
        (run,) = judged(0, slurm_run(first=8, stepped=None))
        assert (run.state, run.since) == (RunState.STALLED, minutes_ago(8))

    def test_the_probes_own_hang_verdict_is_a_stall_at_once_read_back_as_the_hang_alarm(self):
        (run,) = judged(0, slurm_run(stepped=2, hung=True))
        assert (run.state, run.subject.kind) == (RunState.STALLED, AlarmKind.HANG)

    def test_a_run_silent_past_the_window_is_gone_and_an_older_run_of_a_reused_name_is_superseded(self):
        gone = slurm_run(job_id="4000", first=None, last=None)
        old = slurm_run(job_id="5000", first=120, last=90, stepped=90)
        new = slurm_run(job_id="5120", first=30, stepped=1)
        states = {run.report.key: run.state for run in judged(0, old, new, gone)}
        assert states == {"5000": RunState.SUPERSEDED, "5120": RunState.STEPPING, "4000": RunState.GONE}


class TestWhatAStallRestarts:
    def test_on_slurm_exactly_the_job_id_and_a_budget_per_job_id(self):
        (run,) = judged(0, slurm_run())
        assert (run.subject.run.slurm_job_id, run.subject.name) == ("5120", "medic-watch:pretrain-slurm:5120")

    def test_a_slurm_job_id_that_is_not_digits_is_never_watched(self):
        assert judged(0, slurm_run(job_id="5120; scancel -u root"), slurm_run(job_id="")) == []

    def test_a_new_run_reusing_a_name_has_its_own_incident_and_budget(self):
        from medic.flows.stall.response import incident_of

        old, new = (judged(0, slurm_run(job_id=job_id))[0].subject for job_id in ("5000", "5120"))
        assert (incident_of(old), incident_of(new)) == ("job:slurm:pretrain-slurm:5000",
                                                        "job:slurm:pretrain-slurm:5120")

    def test_on_eks_the_owner_in_an_opted_in_namespace(self):
        (run,) = judged(1, eks_run())
        assert run.subject.run.kubernetes.target == "PyTorchJob/team-a/gpt-ft" and run.subject.run.refused is None

    def test_on_eks_a_namespace_not_opted_in_or_an_unknown_owner_pages_instead(self):
        (elsewhere,) = judged(1, eks_run(pod="team-b/gpt-ft-master-0"))
        (unknown,) = judged(1, eks_run(owner="unknown"))
        assert "not one the operator opted in" in elsewhere.subject.run.refused
        assert "MEDIC_OWNER" in unknown.subject.run.refused and unknown.subject.run.kubernetes is None
        decision = decide_alarm(AlarmContext(
            subject=elsewhere.subject, state="ALARM", episode_seen=False, incident_open=False, incident_paged=False,
            escalated=False, nodes_in_repair=0, mode=Mode.ACT, recent_progress=Progress(steps=0, last_step=None,
                                                                                         steps_before=400)))
        assert (decision.plan, decision.action, decision.outcome, decision.page, decision.why) == (
            Plan.RECORD, Action.NONE, Outcome.DEFERRED, True, Why.HUMAN_DECIDES)

    def test_a_pod_that_is_not_a_namespace_and_name_is_not_watched(self):
        assert judged(1, eks_run(pod="team-a/../../x"), eks_run(pod="Team A/gpt")) == []


def test_an_eks_cluster_with_watch_rules_and_no_jobs_needs_its_agent():
    from medic.flows.agent.silence_policy import needs_agent

    assert needs_agent(CONFIG, CONFIG.clusters[1])
    bare = parse_config({"clusters": [{**EKS, "watch": []}]})
    assert not needs_agent(bare, bare.clusters[0])


class TestWatchRulesInTheConfig:
    @pytest.mark.parametrize(("rule", "orchestrator", "key"), [
        ({"job_prefix": "gpt-", "namespaces": ["team-a"]}, "slurm", "watch.0.namespaces"),
        ({"job_prefix": "gpt-", "stall_minutes": 0}, "slurm", "watch.0.stall_minutes"),
        ({"job_prefix": "gpt-", "namespaces": ["Team_A"]}, "eks", "watch.0.namespaces"),
        ({"job_prefix": "gpt -"}, "eks", "watch.0.job_prefix"),
    ])
    def test_a_bad_rule_stops_synth_naming_its_key(self, rule: dict, orchestrator: str, key: str):
        cluster = {"name": "c", "id": "k3v9q2w8x1za", "orchestrator": orchestrator, "watch": [rule]}
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            parse_config({"clusters": [cluster]})

    def test_the_same_prefix_twice_is_refused(self):
        cluster = {"name": "c", "id": "k3v9q2w8x1za", "orchestrator": "slurm",
                   "watch": [{"job_prefix": "gpt-"}, {"job_prefix": "gpt-"}]}
        with pytest.raises(ConfigError, match=r"watch\.1\.job_prefix"):
            parse_config({"clusters": [cluster]})
