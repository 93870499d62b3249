"""The cluster's command queue (SQS): long-poll, delete once the result is in the ledger, release on stop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Message:
    message_id: str
    receipt_handle: str
    body: str
    receive_count: int = 1


class Queue:
    def __init__(self, url: str, client_factory: Callable[[], Any], *, wait_seconds: int = 20,
                 visibility_timeout: int = 120, max_messages: int = 10) -> None:
        self.url = url
        self.wait_seconds = wait_seconds
        self.visibility_timeout = visibility_timeout
        self.max_messages = max(1, min(10, max_messages))
        self._client_factory = client_factory
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def receive(self) -> list[Message]:
        response = self.client.receive_message(
            QueueUrl=self.url, MaxNumberOfMessages=self.max_messages, WaitTimeSeconds=self.wait_seconds,
            VisibilityTimeout=self.visibility_timeout, MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        return [
            Message(message_id=raw["MessageId"], receipt_handle=raw["ReceiptHandle"], body=raw.get("Body", ""),
                    receive_count=int(raw.get("Attributes", {}).get("ApproximateReceiveCount", "1")))
            for raw in response.get("Messages", [])
        ]

    def delete(self, message: Message) -> None:
        self.client.delete_message(QueueUrl=self.url, ReceiptHandle=message.receipt_handle)

    def release(self, message: Message) -> None:
        """Make a message visible again now (the agent is stopping before it got to it)."""
        self.client.change_message_visibility(QueueUrl=self.url, ReceiptHandle=message.receipt_handle,
                                              VisibilityTimeout=0)
