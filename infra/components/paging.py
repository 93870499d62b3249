from __future__ import annotations

from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.components.function import DeadLetterQueue
from medic.config import Notify


class PagingTopic(Construct):
    """The topic Medic pages humans through, with the subscriptions from ``notify``."""

    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey, notify: Notify) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Topic", display_name="Medic pages", master_key=key, enforce_ssl=True)
        # Pages SNS could not deliver (endpoint down, address gone) wait here instead of vanishing.
        self.undelivered = DeadLetterQueue(self, "Undelivered", key=key).queue
        for email in notify.emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email, dead_letter_queue=self.undelivered))
        for url in notify.https:
            self.topic.add_subscription(subscriptions.UrlSubscription(
                url, protocol=sns.SubscriptionProtocol.HTTPS, dead_letter_queue=self.undelivered))
