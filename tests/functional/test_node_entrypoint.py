"""Specification: the Lambda entry point wires itself from its environment, as deployed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from medic.config import CoreConfig, JobSections, parse_config
from medic.handlers import node_health
from medic.wiring import dependencies
from tests.functional.conftest import CONFIG, MODE_PARAMETER, TABLE, medic_world


@dataclass
class LambdaContext:
    function_name: str = "medic-node-remediation"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-west-2:123456789012:function:medic-node-remediation"
    aws_request_id: str = "00000000-0000-0000-0000-000000000001"


@pytest.fixture
def deployed_env(aws, monkeypatch):
    config = parse_config(CONFIG)
    for medic in medic_world(config, aws):
        monkeypatch.setenv("MEDIC_CONFIG", config.to_env())
        monkeypatch.setenv("LEDGER_TABLE", TABLE)
        monkeypatch.setenv("PAGE_TOPIC_ARN", medic.deps.pager.topic_arn)
        monkeypatch.setenv("MODE_PARAMETER", MODE_PARAMETER)
        dependencies.cache_clear()
        yield medic
        dependencies.cache_clear()


def test_the_handler_builds_its_adapters_from_the_environment(deployed_env, unhealthy_event):
    # Given the environment the stack sets on the function
    # When a hostile event reaches the deployed handler
    record = node_health.handler({**unhealthy_event, "detail": {**unhealthy_event["detail"],
                                                                "InstanceId": "i-0abc; rm -rf /"}},
                                 LambdaContext())
    # Then it is rejected using the configured mode, without touching SageMaker
    assert (record["outcome"], record["mode"]) == ("rejected", "act")
    deps = dependencies()
    assert (deps.table.name, deps.mode.parameter) == (TABLE, MODE_PARAMETER)
    # the sections every handler reads, validated at cold start; the job sections on a job flow's first read
    assert type(deps.config) is CoreConfig
    assert deps.config.model_dump() == parse_config(CONFIG).model_dump(include=set(CoreConfig.model_fields))
    assert deps.jobs_config.model_dump() == parse_config(CONFIG).model_dump(include=set(JobSections.model_fields))
