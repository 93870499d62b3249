"""Specification: the replay holds every call of the synthesized stack's functions and agents to their own policies
(sim/iam.py): the bundled scenarios run under them (the demo's spec replays them all, and fails on a denial), and
the checks are live, dynamodb:LeadingKeys conditions included."""

from __future__ import annotations

from sim.scenario import SCENARIOS


def test_a_requeue_is_checked_call_by_call_the_agents_claim_under_its_own_policy(replay):
    # Given the Slurm requeue scenario on the synthesized stack
    result = replay(SCENARIOS / "k-slurm-requeue.jsonl")
    # Then the functions' ledger calls and deletes, and the agent's claim (a ConditionCheck on command#<cluster>#*,
    # its policy's only grant of it), were each authorized by the policies the stack gives them
    assert result.authorizations["dynamodb:DeleteItem"] >= 1
    assert result.authorizations["dynamodb:ConditionCheckItem"] >= 1
    assert result.authorizations["dynamodb:PutItem"] >= 1 and result.authorizations["ssm:GetParameter"] >= 1
    assert not result.errors


def test_a_clone_watch_ends_with_a_delete_the_delete_prefix_condition_allows(replay):
    # Given a Batch clone that reaches RUNNING: its watch (jobclone#watch) is deleted, under the ForAllValues
    # dynamodb:LeadingKeys condition of every function's DeleteItem grant (infra/components/shared.py)
    result = replay(SCENARIOS / "zzzu-batch-clone-running-closes-the-incident.jsonl")
    assert result.authorizations["dynamodb:DeleteItem"] >= 1
    assert not result.errors
