"""The stack's paging topic from the operator's side (issue 29, item 5): who would receive a page, and a test page.

SNS marks a subscription its endpoint has not confirmed yet by the SubscriptionArn ``PendingConfirmation`` in
ListSubscriptionsByTopic (SNS API reference, ListSubscriptionsByTopic / Subscription: "SubscriptionArn ... If the
subscription is pending confirmation, the value is PendingConfirmation"; an email endpoint gets nothing until its
owner follows the link in AWS's confirmation mail, and "Amazon SNS automatically deletes unconfirmed subscriptions
after 48 hours": SNS developer guide, "Deleting an Amazon SNS subscription and topic"). The results come in pages of
100 with NextToken.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from medic_cli.context import CliError, Context
from medic_cli.render import when

PENDING = "PendingConfirmation"


@dataclass(frozen=True)
class Subscription:
    protocol: str
    endpoint: str
    confirmed: bool

    def as_json(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "endpoint": self.endpoint, "confirmed": self.confirmed}


@dataclass(frozen=True)
class Subscriptions:
    topic: str
    found: list[Subscription]
    problem: str = ""  # why they could not be listed

    @property
    def pending(self) -> list[Subscription]:
        return [s for s in self.found if not s.confirmed]

    def as_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "subscriptions": [s.as_json() for s in self.found],
                "pending_confirmation": len(self.pending), "problem": self.problem or None}

    def lines(self) -> list[str]:
        """What `status` and `test-page` print about them."""
        if self.problem:
            return [f"  cannot list the subscriptions of {self.topic}: {self.problem}"]
        if not self.found:
            return [f"  NO subscription on {self.topic}: a page reaches nobody (medic.yaml notify:, then deploy)"]
        shown = [f"  {'ok' if s.confirmed else 'NO':<3} {s.protocol:<6} {s.endpoint}"
                 + ("" if s.confirmed else "  (pending confirmation: its owner must follow the link in AWS's "
                                           "confirmation message; it receives nothing until then)")
                 for s in self.found]
        confirmed = len(self.found) - len(self.pending)
        return [*shown, f"  {confirmed} confirmed, {len(self.pending)} pending confirmation"
                        + ("" if confirmed else ": NO page reaches anyone yet")]


def topic_arn(ctx: Context) -> str:
    arn = ctx.outputs.get("PagingTopicArn")
    if not arn:
        problem = ctx.stack_problem or f"stack {ctx.stack!r} has no PagingTopicArn output"
        raise CliError(f"cannot find the paging topic: {problem}")
    return arn


def subscriptions(ctx: Context, topic: str) -> Subscriptions:
    """Every subscription of the topic (ListSubscriptionsByTopic, all pages); a refusal is shown, not raised."""
    found: list[Subscription] = []
    try:
        for page in ctx.client("sns").get_paginator("list_subscriptions_by_topic").paginate(TopicArn=topic):
            found += [Subscription(s.get("Protocol", "?"), s.get("Endpoint", "?"), s.get("SubscriptionArn") != PENDING)
                      for s in page.get("Subscriptions", [])]
    except (ClientError, BotoCoreError) as error:
        details = error.response.get("Error", {}) if isinstance(error, ClientError) else {}
        return Subscriptions(topic, [], f"{details.get('Code', type(error).__name__)}: {details.get('Message', error)}")
    return Subscriptions(topic, found)


def test_page(ctx: Context, topic: str, who: str, now: datetime, note: str = "") -> str:
    """Publish one page marked as a test through the stack's topic, as Medic's functions publish (a subject, the
    lines, a `record` attribute: here `{"test": true, ...}`); returns SNS's message id."""
    import json

    stamp = when(now)
    lines = [
        "THIS IS A TEST PAGE. Nothing is wrong, and Medic did nothing.",
        "",
        f"Stack:          {ctx.stack} ({topic})",
        f"Sent by:        {who}, with `medic test-page`, at {stamp} UTC",
        *( [f"Note:           {' '.join(note.split())[:300]}"] if note else []),
        "",
        "What to do:     Nothing. If you read this, Medic's pages reach you.",
    ]
    response = ctx.client("sns").publish(
        TopicArn=topic, Subject=f"[Medic] TEST page from stack {ctx.stack} (no incident)"[:100],
        Message="\n".join(lines),
        MessageAttributes={"record": {"DataType": "String", "StringValue": json.dumps(
            {"test": True, "stack": ctx.stack, "sent_by": who, "sent_at": now.isoformat()})}})
    return response["MessageId"]
