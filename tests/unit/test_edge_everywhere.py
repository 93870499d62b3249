"""Specification: every event a handler acts on passes the one edge check (issue 28): each flow parses its event with
the validation context `Deps.edge()`, so its age, its clock, its time zone and its partition are checked. A flow
that parsed without it would skip the checks that need Medic's clock, silently."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import medic.flows
from medic.core.models import MedicEvent

FUNCTIONS = Path(medic.flows.__file__).resolve().parents[2]


def event_models() -> set[str]:
    """The names of every MedicEvent model the flows define (their modules imported, so none is missed)."""
    for module in pkgutil.walk_packages(medic.flows.__path__, "medic.flows."):
        importlib.import_module(module.name)
    found, pending = set(), [MedicEvent]
    while pending:
        for subclass in pending.pop().__subclasses__():
            found.add(subclass.__name__)
            pending.append(subclass)
    return found


def parses(models: set[str]) -> list[tuple[str, int, ast.Call]]:
    """Every `<Model>.model_validate(...)` call of those models in Medic's Lambda code."""
    calls = []
    for path in sorted((FUNCTIONS / "medic").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("model_validate", "model_validate_json")
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in models):
                calls.append((str(path.relative_to(FUNCTIONS)), node.lineno, node))
    return calls


def test_every_flow_parses_its_event_with_the_edge_context():
    models = event_models()
    assert {"NodeHealthEvent", "ClusterEvent", "TrainingJobStateEvent", "AlarmStateChangeEvent", "RequeueJobEvent",
            "ScheduleEvent"} <= models
    calls = parses(models)
    assert len(calls) >= 6
    without = [f"{path}:{line}" for path, line, call in calls
               if not any(keyword.arg == "context" for keyword in call.keywords)]
    assert without == [], f"parsed without the edge context (context=deps.edge()): {without}"
