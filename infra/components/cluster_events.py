from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_events as events
from constructs import Construct

from infra.components.function import MedicFunction
from infra.components.shared import Shared

CLUSTER_EVENT = "SageMaker HyperPod Cluster Event"
# Warn-level events matter when they are about a repair (EventBridge wildcards are case-sensitive).
REPAIR_WORDS = ["*eplace*", "*eboot*", "*epair*", "*ecover*", "*apacity*"]


class ClusterEvents(Construct):
    """HyperPod cluster events of the configured clusters (Error, and repair-related Warn) → recorded
    against the node's incident; a repair HyperPod could not complete closes Medic's action as failed."""

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared) -> None:
        super().__init__(scope, construct_id)
        self.handler = MedicFunction(
            self, "Handler", handler="medic.handlers.cluster_event.handler",
            description="Medic: record HyperPod cluster events (capacity, lifecycle scripts, failed repairs)",
            environment=shared.environment(), layers=list(shared.layers), key=shared.key,
            reserved_concurrency=shared.reserved("cluster_event"))
        shared.grant_ledger_paging_mode(self.handler.role)
        self.rule = events.Rule(
            self, "Rule",
            description="HyperPod cluster events (Error; Warn about repairs) of the clusters Medic manages",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"], detail_type=[CLUSTER_EVENT], account=[Aws.ACCOUNT_ID],
                detail={"EventDetails": {
                    "ClusterName": [cluster.name for cluster in shared.config.clusters],
                    "$or": [{"EventLevel": ["Error"]},
                            {"EventLevel": ["Warn"], "Description": [{"wildcard": w} for w in REPAIR_WORDS]}],
                }}),
        )
        self.handler.route(self.rule)
