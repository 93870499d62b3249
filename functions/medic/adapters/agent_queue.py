"""SQS: the command queues the on-cluster agents long-poll (a Slurm cluster's on its controller node, an EKS
cluster's in its Deployment)."""

from __future__ import annotations

import json
from typing import Any

from medic.adapters.aws import client as make_client
from medic.core.agent_command import AgentCommand


class NoAgentQueue(LookupError):
    """The cluster has no agent queue (not a Slurm cluster, or not deployed with one)."""


class AgentQueues:
    def __init__(self, queue_urls: dict[str, str], client: Any = None) -> None:
        self.queue_urls = dict(queue_urls)
        self._client = client

    @classmethod
    def from_json(cls, text: str | None) -> AgentQueues:
        """The AGENT_QUEUES environment variable: a JSON object, cluster name → queue URL. Unset: no queues."""
        if not text or not text.strip():
            return cls({})
        try:
            urls = json.loads(text)
        except ValueError as error:
            raise ValueError(f"AGENT_QUEUES is not JSON: {error}") from None
        if not isinstance(urls, dict) or not all(
                isinstance(name, str) and isinstance(url, str) and url.startswith("https://")
                for name, url in urls.items()):
            raise ValueError("AGENT_QUEUES must be a JSON object of cluster name to https:// queue URL")
        return cls(urls)

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("sqs")
        return self._client

    def has_queue(self, cluster: str) -> bool:
        return cluster in self.queue_urls

    def send(self, command: AgentCommand) -> str:
        url = self.queue_urls.get(command.cluster)
        if url is None:
            raise NoAgentQueue(command.cluster)
        response = self.client.send_message(QueueUrl=url, MessageBody=json.dumps(command.body()))
        return response["MessageId"]
