"""Resource policies as AWS evaluates them, for the one question the replay asks: may this AWS service
principal call this action on this resource, in this request context?

IAM's evaluation logic (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html):
an explicit Deny in any matching statement wins; otherwise an Allow is needed; no matching statement is an
implicit deny. Condition operators: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html
(keys are case-insensitive, values of String*/Arn* operators case-sensitive; a key missing from the request
makes a positive operator false and a negated one true). What this module does not know fails loudly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sim.cfn import SimError


@dataclass(frozen=True)
class Request:
    service: str  # the calling service principal, e.g. cloudwatch.amazonaws.com
    action: str  # e.g. sns:Publish
    resource: str  # the ARN acted on
    context: dict[str, str]  # condition keys (any case) -> value


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _like(pattern: str, text: str, ignore_case: bool = False) -> bool:
    """IAM wildcards: * any run of characters, ? one character (no other glob syntax)."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, (re.IGNORECASE | re.DOTALL) if ignore_case else re.DOTALL) is not None


def _principal_matches(statement: dict, service: str) -> bool:
    if "NotPrincipal" in statement:
        raise SimError("policy: NotPrincipal is not evaluated by the replay")
    principal = statement.get("Principal")
    if principal == "*":
        return True
    if not isinstance(principal, dict):
        raise SimError(f"policy: a resource policy statement needs a Principal (got {principal!r})")
    if "*" in _listed(principal.get("AWS", [])):
        return True  # "AWS": "*" is everyone, services included
    return service in _listed(principal.get("Service", []))


def _action_matches(statement: dict, action: str) -> bool:
    if "NotAction" in statement:
        raise SimError("policy: NotAction is not evaluated by the replay")
    return any(_like(str(pattern), action, ignore_case=True) for pattern in _listed(statement.get("Action", [])))


def _resource_matches(statement: dict, resource: str) -> bool:
    if "NotResource" in statement:
        raise SimError("policy: NotResource is not evaluated by the replay")
    # In a key policy "*" is the key itself; in a topic policy the topic's ARN (or a wildcard).
    return any(_like(str(pattern), resource) for pattern in _listed(statement.get("Resource", "*")))


_POSITIVE = {
    "StringEquals": lambda want, got: got == want,
    "StringEqualsIgnoreCase": lambda want, got: got.lower() == want.lower(),
    "StringLike": lambda want, got: _like(want, got),
    "ArnEquals": lambda want, got: got == want,
    "ArnLike": lambda want, got: _like(want, got),
    "Bool": lambda want, got: got.lower() == want.lower(),
}
_NEGATED = {"StringNotEquals": "StringEquals", "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
            "StringNotLike": "StringLike", "ArnNotEquals": "ArnEquals", "ArnNotLike": "ArnLike"}


def _conditions_hold(statement: dict, context: dict[str, str]) -> bool:
    keyed = {key.lower(): value for key, value in context.items()}
    for operator, clauses in (statement.get("Condition") or {}).items():
        base, if_exists = (operator[:-len("IfExists")], True) if operator.endswith("IfExists") else (operator, False)
        negated = base in _NEGATED
        test = _POSITIVE.get(_NEGATED.get(base, base))
        if test is None or not isinstance(clauses, dict):
            raise SimError(f"policy: condition operator {operator!r} is not evaluated by the replay")
        for key, wanted in clauses.items():
            got = keyed.get(key.lower())
            if got is None:
                if not (negated or if_exists):
                    return False
                continue
            matched = any(test(str(value), got) for value in _listed(wanted))
            if matched == negated:
                return False
    return True


def decide(documents: list[dict], request: Request) -> tuple[bool, str]:
    """(allowed, why) for the request under these policy documents."""
    allowed_by = None
    for document in documents:
        for index, statement in enumerate(_listed(document.get("Statement", []))):
            if not (_principal_matches(statement, request.service) and _action_matches(statement, request.action)
                    and _resource_matches(statement, request.resource)
                    and _conditions_hold(statement, request.context)):
                continue
            name = statement.get("Sid") or f"statement {index}"
            if statement.get("Effect") == "Deny":
                return False, f"explicitly denied by {name}"
            if statement.get("Effect") == "Allow":
                allowed_by = allowed_by or name
    if allowed_by:
        return True, f"allowed by {allowed_by}"
    return False, "no statement allows it (implicit deny)"

