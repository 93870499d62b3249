"""Specification: no function may delete ledger items Medic never deletes (restart budgets, event claims, agent
commands and heartbeats), and the Slurm agent holds Medic's key only through the services it uses."""

from __future__ import annotations

import ast
from pathlib import Path

from infra.components.shared import LEDGER_DELETED_PREFIXES, LEDGER_NAMESPACES
from tests.infra.conftest import resources

LEDGER = Path(__file__).resolve().parents[2] / "functions" / "medic" / "ledger"


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


def _store_modules() -> list[ast.Module]:
    return [ast.parse(path.read_text()) for path in sorted(LEDGER.glob("*.py")) if path.name != "table.py"]


def _constants(trees: list[ast.Module]) -> dict[str, str]:
    return {target.id: node.value.value for tree in trees for node in tree.body if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant)}


def _pk_prefix(node: ast.AST, constants: dict[str, str]) -> str | None:
    """The literal start of a partition key given to Table.key: f"incident#{incident}" -> incident#."""
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return node.values[0].value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.FormattedValue) \
            and isinstance(node.values[0].value, ast.Name):  # f"{PARTITION}{cluster}": the constant's value
        return constants.get(node.values[0].value.id)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return call.func.id if isinstance(call.func, ast.Name) else None


def ledger_deleted_prefixes() -> set[str]:
    """Each key family a store deletes (Table.delete, Table.delete_if), from the key helpers and the Table.key calls
    it uses: module by module, each with its own constants (several stores name theirs PARTITION)."""
    found: set[str] = set()
    deleting_anywhere = 0
    for tree in _store_modules():
        constants = _constants([tree])
        functions = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}

        def pk_prefixes(function: ast.FunctionDef, seen: set[str], constants: dict = constants,
                        functions: dict = functions) -> set[str]:
            prefixes: set[str] = set()
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                name = _called_name(node)
                if name == "key" and node.args:
                    prefixes |= {p for p in [_pk_prefix(node.args[0], constants)] if p}
                elif name and "key" in name and name in functions and name not in seen:
                    prefixes |= pk_prefixes(functions[name], seen | {name})
            return prefixes

        deleting = [f for f in functions.values()  # Table.delete and Table.delete_if: both are DeleteItem
                    if any(isinstance(n, ast.Call) and _called_name(n) in ("delete", "delete_if")
                           for n in ast.walk(f))]
        deleting_anywhere += len(deleting)
        found |= set().union(*(pk_prefixes(f, {f.name}) for f in deleting))
    assert deleting_anywhere >= 5, "the stores no longer delete through Table.delete: update this test"
    return found


def test_every_item_family_the_ledger_deletes_may_be_deleted():
    # A new delete in a store (another key family) must be granted, or it fails in AWS with AccessDenied
    deleted = ledger_deleted_prefixes()
    assert deleted >= {"incident#", "alarm#", "recovery#watch"}
    # An event id's claim is never deleted (it rides the node claim's transaction): a redelivery stays a duplicate
    assert not any(prefix.startswith("request#") for prefix in deleted | set(LEDGER_DELETED_PREFIXES))
    for prefix in deleted:
        assert any(prefix.startswith(granted) for granted in LEDGER_DELETED_PREFIXES), prefix


def test_the_dry_run_namespace_is_the_ledgers():
    assert '"dry_run#"' in (LEDGER / "table.py").read_text() and "dry_run#" in LEDGER_NAMESPACES


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
