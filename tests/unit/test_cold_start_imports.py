"""Specification: what a handler's cold start imports (issue 31: each handler at most 2.0x `import boto3`).

A handler imports and builds only what its own flows use: the job sections of the config (and their models), the
Batch and Bedrock flows, the EKS agent's models and the training restart path load where a flow first needs them. A
fresh interpreter, as Lambda starts one, imports the handler; its sys.modules says what was loaded.
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cold_start import lambda_environment

HANDLERS = Path(__file__).resolve().parents[2] / "functions" / "medic" / "handlers"
JOB_MODELS = ("medic.config", "medic.config_training")
MANAGED_JOBS = ("medic.flows.jobs.batch", "medic.flows.jobs.bedrock", "medic.adapters.batch", "medic.adapters.bedrock",
                "medic.flows.jobs.batch_events", "medic.flows.jobs.bedrock_events")
OPERATOR_REQUESTS = ("medic.flows.agent.requests",)
OTHER_EVENTS = ("medic.flows.node.health_event", "medic.flows.mode.watch", "medic.flows.canary.arrival")
FUNCTIONS = HANDLERS.parents[1]


def loaded_by(handler: str) -> tuple[set[str], bool]:
    code = (f"import gc, json, sys; import medic.handlers.{handler}; "
            "print(json.dumps([sorted(m for m in sys.modules if m.startswith('medic')), gc.isenabled()]))")
    done = subprocess.run([sys.executable, "-c", code], env=lambda_environment(), capture_output=True, text=True,
                          check=True, timeout=60)
    modules, collecting = json.loads(done.stdout)
    return set(modules), collecting


@pytest.mark.parametrize(("handler", "absent"), [
    # the node path: no job sections, no Batch/Bedrock, no EKS agent models, no training restart path
    ("node_health", (*JOB_MODELS, *MANAGED_JOBS, "medic.flows.agent.eks", "medic.flows.jobs.restart")),
    # the reconciler: the training restart path only when a capacity backoff is due (flows.jobs.backoff), the EKS
    # agents' node reports only when the config names an EKS cluster; it builds and sweeps agent commands, but never
    # parses an operator's request or an agent's result; it decides for nodes and pauses, and sends the canary, but
    # never parses a node health event, a mode change or a canary's arrival
    ("reconcile", (*JOB_MODELS, *MANAGED_JOBS, "medic.flows.jobs.restart", "medic.flows.jobs.events",
                   "medic.flows.agent.eks_nodes", "medic.flows.agent.eks", *OPERATOR_REQUESTS,
                   "medic.flows.agent.agent_result", *OTHER_EVENTS)),
    # the agents' results: not the operators' requests (the requeue function's)
    ("agent_results", (*JOB_MODELS, *MANAGED_JOBS, *OPERATOR_REQUESTS, *OTHER_EVENTS)),
    # Batch and Bedrock: not the SageMaker training flow (its restart path, its event models); the clone watch
    # (flows.jobs.timeline) is shared: their restarts' incident lines close when the clone runs
    ("managed_job", ("medic.flows.jobs.restart", "medic.flows.jobs.events", "medic.config")),
    # the stall alarms: the node sweep's storm hold is shared, not the schedule's event or the sweep
    ("alarm", (*JOB_MODELS, *MANAGED_JOBS, *OPERATOR_REQUESTS, *OTHER_EVENTS, "medic.flows.node.sweep")),
])
def test_a_handler_does_not_import_the_flows_it_does_not_serve(handler, absent):
    modules, collecting = loaded_by(handler)
    assert not modules & set(absent)
    assert collecting  # the cold start's gc.disable() ends with the imports (medic.handlers.cold_start)


def test_the_training_handler_builds_the_job_sections_at_cold_start_not_at_its_first_event():
    modules, _ = loaded_by("training_job")
    assert "medic.config_training" in modules
    assert "medic.config" not in modules  # the whole contract (synth's notify, archive, concurrency): synth's alone
    assert not modules & set(MANAGED_JOBS)


def test_every_handler_imports_its_flows_inside_cold_start():
    for path in HANDLERS.glob("*.py"):
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text())
        medic_imports = [node for node in tree.body if isinstance(node, ast.ImportFrom)
                         and (node.module or "").startswith("medic.") and node.module != "medic.handlers"]
        guarded = [node for node in tree.body if isinstance(node, ast.With)
                   and ast.unparse(node.items[0].context_expr) == "cold_start()"]
        assert not medic_imports and guarded, f"{path.name}: imports its flows outside `with cold_start():`"


def test_no_pydantic_field_defaults_through_a_factory_pydantic_must_inspect():
    """A `Field(default_factory=list)` (or a class) makes pydantic read the factory's signature at class creation:
    for a builtin, a parse of its text signature (tokenize's regular expression, ~1.7 ms at the first one). An empty
    default is a value (pydantic copies it per instance); a model default is a lambda (docs/architecture.md)."""
    inspected = []
    for path in FUNCTIONS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "Field":
                inspected += [f"{path.relative_to(FUNCTIONS)}:{node.lineno}" for keyword in node.keywords
                              if keyword.arg == "default_factory" and not isinstance(keyword.value, ast.Lambda)]
    assert not inspected

