"""MedicStack: composes one construct per concern from the validated config."""

from __future__ import annotations

from aws_cdk import Annotations, CfnOutput, Stack, Token, Validations
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from constructs import Construct

from infra.components.agent_channel import AgentChannel
from infra.components.boto3_layer import Boto3Layer
from infra.components.canary import Canary
from infra.components.cluster_events import ClusterEvents
from infra.components.encryption import MedicKey
from infra.components.event_archive import EventArchive
from infra.components.function import REDRIVE_RUNBOOK, DeadLetterQueue, MedicFunction
from infra.components.ledger import LedgerTable
from infra.components.managed_job_restarts import ManagedJobRestarts
from infra.components.mode import ModeParameter, ModeWatch
from infra.components.node_remediation import NodeRemediation
from infra.components.operations import Operations
from infra.components.operator_access import OperatorPolicies
from infra.components.paging import PagingTopic
from infra.components.powertools import PowertoolsLayer
from infra.components.reconciler import Reconciler
from infra.components.shared import Shared
from infra.components.training_alarms import AlarmResponse, TrainingAlarms
from infra.components.training_job_restarts import TrainingJobRestarts
from infra.config import config_warnings
from infra.event_patterns import check_event_patterns
from medic.config import MedicConfig


class MedicStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: MedicConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, description="Medic: auto-remediation for HyperPod and training jobs",
                         **kwargs)
        Validations.of(self).add_plugins(AwsSolutionsChecks(), ServerlessChecks())
        key = MedicKey(self, "Encryption").key
        shared = Shared(
            config=config,
            key=key,
            table=LedgerTable(self, "Ledger", key=key).table,
            topic=PagingTopic(self, "Paging", key=key, notify=config.notify).topic,
            mode=ModeParameter(self, "Mode", initial_mode=config.mode).parameter,
            layers=(PowertoolsLayer(self, "Powertools").layer, Boto3Layer(self, "Boto3").layer),
        )
        self.node_remediation = NodeRemediation(self, "NodeRemediation", shared=shared)
        self.cluster_events = ClusterEvents(self, "ClusterEvents", shared=shared)
        self.reconciler = Reconciler(self, "Reconciler", shared=shared)
        # The reconciler's canary through a rule to the node remediation function: the pipeline proven end to end.
        self.canary = Canary(self, "Canary", shared=shared, sender=self.reconciler.handler,
                             receiver=self.node_remediation.handler)
        # Every cluster, Slurm or EKS, gets a command queue for its on-cluster agent. The construct id is the one
        # it was first deployed under (when only Slurm had agents): a new id would replace its queues and function.
        self.agent_channel = AgentChannel(self, "SlurmJobRequeue", shared=shared)
        self.training_alarms = TrainingAlarms(self, "TrainingAlarms", shared=shared)
        agents = self.agent_channel.queues
        self.alarm_response = AlarmResponse(
            self, "AlarmResponse", shared=shared, alarms=self.training_alarms,
            agent_queues={name: agent.queue.queue_url for name, agent in agents.items()},
            agent_queue_arns=[agent.queue.queue_arn for agent in agents.values()],
        ) if self.training_alarms.names else None
        # after every function that queues agent commands exists: the node path and the reconciler (around node
        # actions, and the reconciler's restarts of EKS jobs with pods stuck Terminating), the alarm handler
        self.agent_channel.issue_node_commands(self.node_remediation.handler, self.reconciler.handler)
        self.agent_channel.restrict_senders(*([self.alarm_response.handler.role] if self.alarm_response else []))
        self.training_job_restarts = (
            TrainingJobRestarts(self, "TrainingJobRestarts", shared=shared) if config.training_jobs else None)
        self.managed_job_restarts = (
            ManagedJobRestarts(self, "ManagedJobRestarts", shared=shared)
            if config.batch_jobs or config.bedrock_jobs else None)

        self.event_archive = EventArchive(self, "EventArchive", shared=shared)  # every kind of event the rules take
        # After the archive: a change of the mode is paged, not a remediation event a backtest would replay.
        self.mode_watch = ModeWatch(self, "ModeWatch", shared=shared)

        # Last: it looks after every function and dead-letter queue the constructs above created.
        self.operations = Operations(
            self, "Operations", topic=shared.topic, mode_parameter=shared.mode.parameter_name,
            functions=[c for c in self.node.find_all() if isinstance(c, MedicFunction)],
            dead_letter_queues={_short_path(c): c.queue for c in self.node.find_all()
                                if isinstance(c, DeadLetterQueue)},
            jobs=[job.name for job in config.jobs],
            runbooks={_short_path(c): c.runbook for c in self.node.find_all()
                      if isinstance(c, DeadLetterQueue) and c.runbook != REDRIVE_RUNBOOK})

        # Ready-made policies for who runs the medic CLI (read-only; operator), as outputs to attach.
        functions = [c for c in self.node.find_all() if isinstance(c, MedicFunction)]
        self.operator_policies = OperatorPolicies(
            self, "OperatorAccess", shared=shared, functions=functions, archive=self.event_archive,
            config_functions=[construct.handler for construct in (self.node_remediation, self.training_job_restarts,
                                                                  self.managed_job_restarts, self.alarm_response)
                              if construct is not None])

        CfnOutput(self, "LedgerTableName", value=shared.table.table_name)
        CfnOutput(self, "PagingTopicArn", value=shared.topic.topic_arn)
        CfnOutput(self, "ModeParameterName", value=shared.mode.parameter_name)
        for name, construct in (("NodeRemediation", self.node_remediation), ("ClusterEvents", self.cluster_events),
                                ("Reconciler", self.reconciler),
                                ("TrainingJobRestarts", self.training_job_restarts),
                                ("ManagedJobRestarts", self.managed_job_restarts),
                                ("AlarmResponse", self.alarm_response), ("ModeWatch", self.mode_watch)):
            if construct is not None:
                CfnOutput(self, f"{name}LogGroup", value=construct.handler.log_group.log_group_name)
                CfnOutput(self, f"{name}DeadLetterQueueUrl", value=construct.handler.dead_letters.queue_url)
                CfnOutput(self, f"{name}FunctionName", value=construct.handler.function.function_name)

        # No deploy that EventBridge would refuse: every rule's and the archive's pattern within its quota.
        check_event_patterns(self)
        # What synthesizes but may not do what its author means: CDK prints each at synth (`medic validate` too).
        account = None if Token.is_unresolved(self.account) else self.account
        for index, warning in enumerate(config_warnings(config, account)):
            Annotations.of(self).add_warning_v2(f"medic:config:{index}", f"medic.yaml: {warning}")


def _short_path(construct: DeadLetterQueue) -> str:
    """The DLQ's owner, e.g. NodeRemediation-Handler (stable, readable in alarm names and widgets)."""
    parts = construct.node.path.split("/")[1:-1]
    return "-".join(parts)
