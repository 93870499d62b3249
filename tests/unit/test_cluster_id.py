"""A cluster id that is not the cluster's (issue 29, item 2): which ClusterArn is a configuration error (the stack's own
partition, account and region, the configured name's cluster under another id) and which is a foreign event."""

from __future__ import annotations

import pytest

from medic.core.models import mismatched_cluster_id

STACK = {"account": "123456789012", "region": "us-west-2", "partition": "aws", "name": "pretrain-slurm",
         "cluster_id": "k3v9q2w8x1za"}


def arn(resource: str, *, account: str = "123456789012", region: str = "us-west-2", partition: str = "aws") -> str:
    return f"arn:{partition}:sagemaker:{region}:{account}:cluster/{resource}"


def test_the_configured_clusters_arn_is_no_mismatch():
    assert mismatched_cluster_id(arn("k3v9q2w8x1za"), **STACK) is None
    assert mismatched_cluster_id(arn("pretrain-slurm"), **STACK) is None  # AWS's documented examples carry the name


def test_another_id_in_the_stacks_own_account_and_region_is_the_id_to_set():
    assert mismatched_cluster_id(arn("q8w4e6r2t0yz"), **STACK) == "q8w4e6r2t0yz"


@pytest.mark.parametrize("other", [arn("q8w4e6r2t0yz", account="999999999999"),
                                   arn("q8w4e6r2t0yz", region="us-east-1"), arn("q8w4e6r2t0yz", partition="aws-us-gov"),
                                   "not-an-arn"])
def test_an_arn_of_another_account_region_or_partition_is_foreign_not_a_config_error(other):
    assert mismatched_cluster_id(other, **STACK) is None


def test_without_the_stacks_account_nothing_is_called_a_config_error():
    assert mismatched_cluster_id(arn("q8w4e6r2t0yz"), **{**STACK, "account": ""}) is None
