"""Specification: the job adapters make their boto3 client on first use, not when built (the project rule: clients
injected, created lazily), each with its retry policy: Batch's SubmitJob once (not idempotent), Bedrock's standard."""

from __future__ import annotations

from unittest import mock

import pytest

from medic.adapters.aws import CLIENT_CONFIG
from medic.adapters.batch import SUBMIT_ONCE, BatchJobs
from medic.adapters.bedrock import BedrockJobs


@pytest.mark.parametrize(("adapter", "service", "config", "call"), [
    (BatchJobs, "batch", SUBMIT_ONCE, lambda jobs: jobs.describe("job-1")),
    (BedrockJobs, "bedrock", CLIENT_CONFIG, lambda jobs: jobs.describe("arn:job")),
])
def test_the_client_is_made_on_first_use_with_the_adapters_retry_policy(adapter, service, config, call):
    with mock.patch("boto3.client") as make:
        # Given the adapter built with no client, then no client is made yet
        jobs = adapter()
        assert make.call_count == 0
        # When it makes its first call, then one client is made, with its config, and kept for the next
        call(jobs)
        call(jobs)
    make.assert_called_once_with(service, config=config)


def test_an_injected_client_is_used_as_is():
    given = mock.Mock()
    with mock.patch("boto3.client") as make:
        assert BatchJobs(given).client is given and BedrockJobs(given).client is given
    assert make.call_count == 0
