"""Specification: a replay fails loudly when the emulator answers what AWS's service model does not
allow (sim/contract.py hooked into the harness router): the error names the input line, the operation,
the member path, the value and the constraint, and `sim replay` exits 3."""

from __future__ import annotations

import json

import pytest

from sim import cli
from sim.contract import ContractViolation
from sim.faults import raw_response
from sim.hyperpod import HyperPodWorld
from sim.replay import run
from sim.scenario import DEMO_CONFIG
from tests.e2e.conftest import sample


def _invented_error_code(self, request):
    """A Batch* answer with an error code HyperPod never returns."""
    node = json.loads(request.body)["NodeIds"][0]
    body = {"Failed": [{"NodeId": node, "ErrorCode": "NodeBusy", "Message": "busy"}]}
    return raw_response(request.url, 200, {"Content-Type": "application/x-amz-json-1.1"}, json.dumps(body).encode())


def test_an_emulated_answer_outside_the_model_fails_the_replay_naming_line_member_value_and_enum(monkeypatch):
    # Given an emulator whose BatchReplaceClusterNodes answers an error code outside the model's enum
    monkeypatch.setattr(HyperPodWorld, "batch_replace", _invented_error_code)
    # When a node health event makes the handler replace the node
    with pytest.raises(ContractViolation) as raised:
        run(["# the sample NvidiaErrorTerminate event", json.dumps(sample("hyperpod-node-health-unhealthy"))],
            DEMO_CONFIG)
    # Then the replay stops with the line, operation, member path, value and constraint
    message = str(raised.value)
    assert message.startswith("line 2: sagemaker:BatchReplaceClusterNodes response violates AWS's service model: "
                              "Failed[0].ErrorCode = 'NodeBusy': must be one of the enum")
    assert [v.path for v in raised.value.violations] == ["Failed[0].ErrorCode"]


def test_sim_replay_exits_3_on_a_contract_violation(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(HyperPodWorld, "batch_replace", _invented_error_code)
    scenario = tmp_path / "replace.jsonl"
    scenario.write_text(json.dumps(sample("hyperpod-node-health-unhealthy")) + "\n")
    assert cli.main(["replay", str(scenario), "--config", str(DEMO_CONFIG), "--quiet"]) == 3
    assert "sim: contract: line 1: sagemaker:BatchReplaceClusterNodes response" in capsys.readouterr().err
