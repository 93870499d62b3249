"""SNS: the one module that pages humans."""

from __future__ import annotations

from typing import Any

from medic.adapters.aws import client as make_client

SUBJECT_LIMIT = 100  # SNS: ASCII, no line breaks, at most 100 characters
ATTRIBUTE_LIMIT = 200_000


class Pager:
    def __init__(self, topic_arn: str, client: Any = None) -> None:
        self.topic_arn = topic_arn
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("sns")
        return self._client

    def page(self, subject: str, body: str, record_json: str) -> str:
        """Publish one page; returns the SNS message id. The record rides along as an attribute."""
        response = self.client.publish(
            TopicArn=self.topic_arn,
            Subject=_subject(subject),
            Message=body,
            MessageAttributes={"record": {"DataType": "String", "StringValue": record_json[:ATTRIBUTE_LIMIT]}},
        )
        return response["MessageId"]


def _subject(text: str) -> str:
    ascii_only = text.encode("ascii", "replace").decode("ascii")
    one_line = " ".join(ascii_only.split())
    return one_line if len(one_line) <= SUBJECT_LIMIT else one_line[: SUBJECT_LIMIT - 3] + "..."
