"""Specification: no function may delete ledger items Medic never deletes (restart budgets, event claims, agent
commands and heartbeats), and the Slurm agent holds Medic's key only through the services it uses."""

from __future__ import annotations

import ast
from pathlib import Path

from infra.components.shared import LEDGER_DELETED_PREFIXES, LEDGER_NAMESPACES
from tests.infra.conftest import resources

LEDGER = Path(__file__).resolve().parents[2] / "functions" / "medic" / "ledger.py"


def statements(policy: dict) -> list[dict]:
    return policy["Properties"]["PolicyDocument"]["Statement"]


def actions_of(statement: dict) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


def role_policies(raw: dict) -> dict[str, dict]:
    return {lid: policy for lid, policy in resources(raw, "AWS::IAM::Policy").items()}


def test_no_function_may_delete_ledger_items_outside_the_families_medic_deletes(raw):
    granted = [(lid, s) for lid, policy in role_policies(raw).items() for s in statements(policy)
               if "dynamodb:DeleteItem" in actions_of(s)]
    assert len(granted) >= 8  # every function that uses the ledger
    for lid, statement in granted:
        assert actions_of(statement) == {"dynamodb:DeleteItem"}, lid
        keys = statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
        assert sorted(keys) == sorted(f"{n}{p}*" for n in LEDGER_NAMESPACES for p in LEDGER_DELETED_PREFIXES), lid


def test_restart_budgets_event_claims_and_agent_items_are_out_of_reach():
    # Operator requests, cluster events and alarm requeues are claimed for good: a claim never comes back
    for kept in ("lineage#", "request#operator#", "request#cluster_event#", "request#alarm#", "command#", "agent#"):
        assert not any(f"{n}{kept}".startswith(f"{n}{p}") for n in LEDGER_NAMESPACES for p in LEDGER_DELETED_PREFIXES)


def _pk_prefix(node: ast.AST) -> str | None:
    """The literal start of a partition key f-string: f"{self.namespace}incident#{...}" -> incident#."""
    if isinstance(node, ast.JoinedStr):
        parts = [p for p in node.values if not (isinstance(p, ast.FormattedValue) and "namespace" in ast.unparse(p))]
        if parts and isinstance(parts[0], ast.Constant):
            return parts[0].value.split("{")[0]
    return None


def ledger_deleted_prefixes() -> set[str]:
    """Each key family a delete_item call in ledger.py removes, from the key helpers and inline keys it uses."""
    tree = ast.parse(LEDGER.read_text())
    methods = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}

    def pk_prefixes(function: ast.FunctionDef, seen: set[str]) -> set[str]:
        found: set[str] = set()
        for node in ast.walk(function):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "pk" and isinstance(value, ast.Dict):
                        found |= {p for p in map(_pk_prefix, value.values) if p}
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr.startswith("_") and node.func.attr in methods
                    and node.func.attr not in seen):
                found |= pk_prefixes(methods[node.func.attr], seen | {node.func.attr})
            if isinstance(node, ast.Return) and node.value is not None:
                found |= {p for p in [_pk_prefix(node.value)] if p}
        return found

    deleting = [f for f in methods.values()
                if any(isinstance(n, ast.Attribute) and n.attr == "delete_item" for n in ast.walk(f))]
    assert len(deleting) >= 5, "ledger.py no longer deletes through delete_item: update this test"
    return set().union(*(pk_prefixes(f, {f.name}) for f in deleting))


def test_every_item_family_the_ledger_deletes_may_be_deleted():
    # A new delete in ledger.py (another key family) must be granted, or it fails in AWS with AccessDenied
    deleted = ledger_deleted_prefixes()
    assert deleted >= {"incident#", "alarm#", "recovery#watch"}
    for prefix in deleted:
        assert any(prefix.startswith(granted) for granted in LEDGER_DELETED_PREFIXES), prefix


def test_the_dry_run_namespace_is_the_ledgers():
    assert '"dry_run#"' in LEDGER.read_text() and "dry_run#" in LEDGER_NAMESPACES


def agent_policies(raw: dict) -> list[dict]:
    return [p for lid, p in resources(raw, "AWS::IAM::ManagedPolicy").items() if "AgentPolicy" in lid]


def test_the_agent_uses_the_key_only_through_sqs_and_dynamodb(raw):
    policies = agent_policies(raw)
    assert policies
    for policy in policies:
        kms = [s for s in statements(policy) if any(a.startswith("kms:") for a in actions_of(s))]
        via = {}
        for statement in kms:
            service = statement["Condition"]["StringEquals"]["kms:ViaService"]["Fn::Join"][1][0]
            via[service] = actions_of(statement)
        # Reading its queue needs Decrypt only (it sends nothing to SQS); its ledger writes go through DynamoDB
        assert via == {"sqs.": {"kms:Decrypt"},
                       "dynamodb.": {"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"}}
