"""Policies as AWS evaluates them, for the one question the replay asks: may this principal (an AWS service
under a resource policy, or a function's role under its identity-based policies: sim/iam.py) call this action on
this resource, in this request context?

IAM's evaluation logic (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html):
an explicit Deny in any matching statement wins; otherwise an Allow is needed; no matching statement is an
implicit deny. Condition operators: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html
(keys are case-insensitive, values of String*/Arn* operators case-sensitive; a key missing from the request
makes a positive operator false and a negated one true). What this module does not know fails loudly.

Multivalued context keys (e.g. dynamodb:LeadingKeys: the partition keys of every item a request touches) take a
set operator: IAM User Guide, "Set operators for multivalued context keys" / "Single-valued vs. multivalued context
keys" (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html):
``ForAllValues`` is true when every value in the request matches at least one of the policy's values, and also
when the key is absent or its set empty ("Multivalued context key examples":
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition_examples-multi-valued-context-keys.html,
"The ForAllValues set operator also returns true if there are no context keys in the request");
``ForAnyValue`` is true when at least one request value matches one policy value, false for an absent key.
Not evaluated (a clear error): a set operator over a negated or ...IfExists operator, a single-valued operator on
a multivalued key (the guide: "Multivalued context keys require a condition set operator"), and, for a request
that lists the keys the emulator computes (``Request.modelled``), any other key.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sim.cfn import SimError


@dataclass(frozen=True)
class Request:
    service: str | None  # the calling service principal (cloudwatch.amazonaws.com); None: an identity-based policy's
    action: str  # e.g. sns:Publish
    resource: str  # the ARN acted on
    context: Mapping[str, str | tuple[str, ...]]  # condition keys (any case) -> a value, or a multivalued key's set
    # The condition keys the emulator computes for this request, lower case (present in `context` or absent from
    # it); a matching statement that tests another key fails loudly. None: resource policies, where an unknown key
    # is absent from the request (the deny side for a positive operator in an Allow).
    modelled: frozenset[str] | None = None


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _like(pattern: str, text: str, ignore_case: bool = False) -> bool:
    """IAM wildcards: * any run of characters, ? one character (no other glob syntax)."""
    return _wildcard(pattern, ignore_case).fullmatch(text) is not None


@functools.cache
def _wildcard(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    """A policy's pattern compiled once: a replay checks every call of every function against the same few hundred
    (built per call, they were a tenth of a replay's CPU)."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(regex, (re.IGNORECASE | re.DOTALL) if ignore_case else re.DOTALL)


def _principal_matches(statement: dict, service: str | None) -> bool:
    if "NotPrincipal" in statement:
        raise SimError("policy: NotPrincipal is not evaluated by the replay")
    principal = statement.get("Principal")
    if service is None:  # an identity-based policy: its statements name no principal (IAM JSON policy elements)
        if principal is not None:
            raise SimError(f"policy: an identity-based policy statement names a Principal ({principal!r})")
        return True
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


_SET_OPERATORS = ("ForAllValues:", "ForAnyValue:")


def _conditions_hold(statement: dict, request: Request) -> bool:
    keyed = {key.lower(): value for key, value in request.context.items()}
    for operator, clauses in (statement.get("Condition") or {}).items():
        set_operator = next((prefix for prefix in _SET_OPERATORS if operator.startswith(prefix)), "")
        single = operator[len(set_operator):]
        base, if_exists = (single[:-len("IfExists")], True) if single.endswith("IfExists") else (single, False)
        negated = base in _NEGATED
        test = _POSITIVE.get(_NEGATED.get(base, base))
        if test is None or not isinstance(clauses, dict) or (set_operator and (negated or if_exists)):
            raise SimError(f"policy: condition operator {operator!r} is not evaluated by the replay")
        for key, wanted in clauses.items():
            if request.modelled is not None and key.lower() not in request.modelled:
                computed = ", ".join(sorted(request.modelled)) or "none"
                raise SimError(f"policy: condition key {key!r} (under {operator}) is not modelled by the replay for "
                               f"{request.action}; the keys it computes: {computed}")
            got = keyed.get(key.lower())
            if set_operator:
                values = () if got is None else (got,) if isinstance(got, str) else tuple(got)
                matches = [any(test(str(value), item) for value in _listed(wanted)) for item in values]
                # ForAllValues: every request value matches (an empty or absent set included); ForAnyValue: one does
                if not (all(matches) if set_operator == "ForAllValues:" else any(matches)):
                    return False
                continue
            if isinstance(got, tuple):
                raise SimError(f"policy: {key!r} is multivalued in this request: {operator!r} needs a set operator "
                               f"(ForAllValues: or ForAnyValue:)")
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
                    and _conditions_hold(statement, request)):
                continue
            name = statement.get("Sid") or f"statement {index}"
            if statement.get("Effect") == "Deny":
                return False, f"explicitly denied by {name}"
            if statement.get("Effect") == "Allow":
                allowed_by = allowed_by or name
    if allowed_by:
        return True, f"allowed by {allowed_by}"
    return False, "no statement allows it (implicit deny)"

