from __future__ import annotations

from aws_cdk import Acknowledgment, Aws, CfnOutput, Duration, Stack, Validations
from aws_cdk import aws_eks as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.function import DeadLetterQueue, MedicFunction
from infra.components.node_remediation import cluster_arn
from infra.components.shared import Shared
from medic.config import Cluster

# The node call after the drain: the action, and DescribeClusterNode to re-check a node HyperPod refused
# (InvalidInstanceStatus) before saying why.
DRAIN_FIRST_ACTIONS = ["sagemaker:DescribeClusterNode", "sagemaker:BatchRebootClusterNodes",
                       "sagemaker:BatchReplaceClusterNodes"]
REQUEUE_SOURCE = "medic.operator"
REQUEUE_DETAIL_TYPE = "Medic Requeue Job"
# `medic release NODE --cluster C`: a node Medic quarantined (quarantine_repeat_offenders) returned to service
RELEASE_DETAIL_TYPE = "Medic Release Node"
OPERATOR_DETAIL_TYPES = [REQUEUE_DETAIL_TYPE, RELEASE_DETAIL_TYPE]


# The EKS agent's Kubernetes identity (agent/kubernetes/): EKS Pod Identity gives its pods the agent role.
EKS_AGENT_NAMESPACE = "medic-agent"
EKS_AGENT_SERVICE_ACCOUNT = "medic-agent"


class AgentQueue(Construct):
    """One cluster's command queue for its agent, and the managed policy the agent needs: a Slurm agent's
    through the role of the cluster's controller group (a role of its own: docs/agents.md); an EKS agent's through
    its own role, which EKS Pod Identity gives the agent's pods (only its ServiceAccount's, on its cluster)."""

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared, cluster: Cluster) -> None:
        super().__init__(scope, construct_id)
        where = "Slurm controller" if cluster.orchestrator == "slurm" else "EKS cluster"
        name = cluster.name
        self.dead_letters = DeadLetterQueue(self, "DeadLetters", key=shared.key).queue
        self.queue = sqs.Queue(
            self, "Queue",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=shared.key,
            enforce_ssl=True,
            visibility_timeout=Duration.minutes(5),
            retention_period=Duration.days(1),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letters, max_receive_count=5),
        )
        # The agent may take commands from its own queue and write only under its own cluster's partition
        # keys: `agent#<cluster>` (heartbeat) and `agent#<cluster>#command#<id>` (claims, results). IAM cannot
        # constrain a sort key, so Medic writes none of its items there; cluster names cannot contain `#`, so
        # `agent#c1#command#*` never matches another cluster's keys (`agent#c1-b#...`).
        self.policy = iam.ManagedPolicy(
            self, "AgentPolicy",
            description=f"Medic agent on the {name} {where}: its command queue and ledger items",
            statements=[
                iam.PolicyStatement(
                    actions=["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility",
                             "sqs:GetQueueAttributes"],
                    resources=[self.queue.queue_arn]),
                # The key only through the two services the agent uses: reading its queue's messages (SQS
                # decrypts) and writing its ledger items (DynamoDB); never to decrypt Medic's data directly.
                iam.PolicyStatement(actions=["kms:Decrypt"], resources=[shared.key.key_arn],
                                    conditions={"StringEquals": {
                                        "kms:ViaService": f"sqs.{Aws.REGION}.{Aws.URL_SUFFIX}"}}),
                iam.PolicyStatement(actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"],
                                    resources=[shared.key.key_arn],
                                    conditions={"StringEquals": {
                                        "kms:ViaService": f"dynamodb.{Aws.REGION}.{Aws.URL_SUFFIX}"}}),
                iam.PolicyStatement(
                    actions=["dynamodb:PutItem"],
                    resources=[shared.table.table_arn],
                    conditions={"ForAllValues:StringLike": {
                        "dynamodb:LeadingKeys": [f"agent#{name}", f"agent#{name}#command#*"]}}),
                # Its claim is one TransactWriteItems: the Put above, and a ConditionCheck that Medic issued the
                # command (`command#<cluster>#<id>/issued` names this cluster, kind, target, incident). A transaction
                # is authorized per action: dynamodb:ConditionCheckItem for the check (DynamoDB Developer Guide,
                # "Using IAM with DynamoDB transactions"). A check reads nothing back and writes nothing, but whether
                # it passes tells of the item: only this cluster's commands (dynamodb:LeadingKeys, "Using IAM policy
                # conditions for fine-grained access control"), so an agent cannot probe another cluster's.
                iam.PolicyStatement(
                    actions=["dynamodb:ConditionCheckItem"],
                    resources=[shared.table.table_arn],
                    conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"command#{name}#*"]}}),
            ],
        )
        CfnOutput(self, "QueueUrl", value=self.queue.queue_url,
                  description=f"--queue-url for the medic agent on {name}")
        if cluster.orchestrator == "slurm":
            CfnOutput(self, "AgentPolicyArn", value=self.policy.managed_policy_arn,
                      description=f"attach to the {name} cluster's controller group's own role only "
                                  "(docs/agents.md)")
        else:
            self._pod_identity(cluster)

    def _pod_identity(self, cluster: Cluster) -> None:
        """The EKS agent's role: assumed by EKS Pod Identity only for the agent's ServiceAccount in its namespace (its
        session tags, Amazon EKS User Guide, "Create IAM role with trust policy required by EKS Pod Identity"); on
        the configured EKS cluster when eks_cluster_name is set, which also creates the Pod Identity association
        (else `aws eks create-pod-identity-association`, agent/README.md). With eks_oidc_issuer, IRSA too."""
        tags = {"aws:RequestTag/kubernetes-namespace": EKS_AGENT_NAMESPACE,
                "aws:RequestTag/kubernetes-service-account": EKS_AGENT_SERVICE_ACCOUNT}
        if cluster.eks_cluster_name:
            tags["aws:RequestTag/eks-cluster-name"] = cluster.eks_cluster_name
        self.role = iam.Role(
            self, "AgentRole",
            description=f"Medic agent on the {cluster.name} EKS cluster (EKS Pod Identity"
                        f"{' or IRSA' if cluster.eks_oidc_issuer else ''})",
            assumed_by=iam.PrincipalWithConditions(iam.ServicePrincipal("pods.eks.amazonaws.com"),
                                                   {"StringEquals": {**tags, "aws:SourceAccount": Aws.ACCOUNT_ID}}),
            managed_policies=[self.policy],
        )
        # Pod Identity tags the session: sts:TagSession beside sts:AssumeRole (same guide). The conditions above read
        # those tags (kubernetes-namespace, kubernetes-service-account, eks-cluster-name: "Enable or disable session
        # tags", Amazon EKS user guide): an association created with disableSessionTags gets no credentials here.
        self.role.assume_role_policy.add_statements(iam.PolicyStatement(
            actions=["sts:TagSession"], principals=[iam.ServicePrincipal("pods.eks.amazonaws.com")],
            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}))
        provider = cluster.eks_oidc_provider
        if provider:
            # IRSA: the pod's projected ServiceAccount token, exchanged by AssumeRoleWithWebIdentity with the EKS
            # cluster's IAM OIDC provider; only for the agent's ServiceAccount, only for STS as the audience (Amazon
            # EKS user guide, "Assign IAM roles to Kubernetes service accounts": the trust policy's `:sub` and `:aud`
            # conditions). The provider must exist in the account ("Create an IAM OIDC provider for your cluster").
            self.role.assume_role_policy.add_statements(iam.PolicyStatement(
                actions=["sts:AssumeRoleWithWebIdentity"],
                principals=[iam.FederatedPrincipal(
                    f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:oidc-provider/{provider}")],
                conditions={"StringEquals": {
                    f"{provider}:sub": f"system:serviceaccount:{EKS_AGENT_NAMESPACE}:{EKS_AGENT_SERVICE_ACCOUNT}",
                    f"{provider}:aud": "sts.amazonaws.com"}}))
        if cluster.eks_cluster_name:
            eks.CfnPodIdentityAssociation(self, "PodIdentity", cluster_name=cluster.eks_cluster_name,
                                          namespace=EKS_AGENT_NAMESPACE, service_account=EKS_AGENT_SERVICE_ACCOUNT,
                                          role_arn=self.role.role_arn)  # session tags on: the default
        CfnOutput(self, "AgentRoleArn", value=self.role.role_arn,
                  description=f"the Pod Identity role of the medic agent on {cluster.name} (agent/kubernetes)")


def allow_senders(queue: sqs.Queue, roles: list[iam.IRole]) -> None:
    """Only Medic's functions that issue commands may put one on an agent queue: a Deny for every other
    principal (an explicit Deny wins over any identity policy in the account that grants sqs:SendMessage)."""
    queue.add_to_resource_policy(iam.PolicyStatement(
        sid="OnlyMedicSends",
        effect=iam.Effect.DENY,
        principals=[iam.AnyPrincipal()],
        actions=["sqs:SendMessage"],
        resources=[queue.queue_arn],
        conditions={"ArnNotEquals": {"aws:PrincipalArn": [role.role_arn for role in roles]}},
    ))


class AgentChannel(Construct):
    """Slurm and EKS clusters: a command queue per cluster for the on-cluster agent; operator requeue requests
    (an EventBridge event) → the requeue function; the agents' results (ledger stream) → their record."""

    def __init__(self, scope: Construct, construct_id: str, *, shared: Shared) -> None:
        super().__init__(scope, construct_id)
        self.queues = {cluster.name: AgentQueue(self, f"Agent-{cluster.name}", shared=shared, cluster=cluster)
                       for cluster in shared.config.clusters}
        # Queue URLs are tokens until deploy: the stack renders the JSON with them resolved.
        queue_urls = Stack.of(self).to_json_string({name: agent.queue.queue_url for name, agent in self.queues.items()})

        self.requeue = MedicFunction(
            self, "RequeueHandler",
            handler="medic.handlers.requeue_request.handler",
            description="Medic: operator requests through the cluster's agent (requeue, restart, release a node)",
            environment={**shared.environment(), "AGENT_QUEUES": queue_urls},
            layers=list(shared.layers),
            key=shared.key,
            reserved_concurrency=shared.reserved("operator_request"),
        )
        shared.grant_ledger_paging_mode(self.requeue.role)
        self.requeue.role.add_to_policy(iam.PolicyStatement(
            actions=["sqs:SendMessage"], resources=[agent.queue.queue_arn for agent in self.queues.values()]))
        # Every request from the account, whatever it names: one for a cluster Medic does not manage is a `rejected`
        # record saying which clusters and jobs there are (flows/agent/restart.py), never an event no rule takes.
        self.rule = events.Rule(
            self, "RequeueRule",
            description="Operator requests: requeue a Slurm job or restart an EKS job; release a quarantined node",
            event_pattern=events.EventPattern(
                source=[REQUEUE_SOURCE], detail_type=OPERATOR_DETAIL_TYPES, account=[Aws.ACCOUNT_ID]),
        )
        self.requeue.route(self.rule)
        self.senders: list[iam.IRole] = [self.requeue.role]

        self.results = MedicFunction(
            self, "AgentResultsHandler",
            handler="medic.handlers.agent_results.handler",
            description="Medic: record the agents' command results and heartbeats",
            environment=shared.environment(),
            layers=list(shared.layers),
            key=shared.key,
            reserved_concurrency=shared.reserved("agent_results"),
        )
        shared.grant_ledger_paging_mode(self.results.role)
        slurm = [cluster for cluster in shared.config.clusters if cluster.orchestrator == "slurm"]
        if slurm:  # a node call that waited for the agent's drain is made from its result (flows/node/drain_first)
            self.results.role.add_to_policy(iam.PolicyStatement(
                actions=DRAIN_FIRST_ACTIONS, resources=[cluster_arn(cluster.id) for cluster in slurm]))
        self.results.role.add_to_policy(iam.PolicyStatement(
            actions=["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator",
                     "dynamodb:ListStreams"],
            resources=[shared.table.table_stream_arn]))
        # Where Lambda reports a batch of the ledger's stream it gave up on. It sends where the batch was (shard,
        # sequence numbers, stream), not the records: "The actual records aren't included, so you must process this
        # record and retrieve them from the stream before they expire" (Lambda developer guide, "Using AWS Lambda
        # with Amazon DynamoDB", Error handling); a stream keeps a record 24 hours (DynamoDB developer guide, "Change
        # data capture for DynamoDB Streams"). So a queue of its own, apart from the function's dead-letter queue
        # (whose messages are events to redrive as they are), with its own runbook: `medic stream-failures`.
        self.stream_failures = DeadLetterQueue(
            Construct(self, "ResultsStream"), "DeadLetters", key=shared.key,
            runbook="docs/runbooks/agent-results-stream.md ('medic stream-failures' within 24 hours)")
        self.results.function.add_event_source(sources.DynamoEventSource(
            shared.table,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=25,
            bisect_batch_on_error=True,
            retry_attempts=10,
            report_batch_item_failures=True,
            on_failure=sources.SqsDlq(self.stream_failures.queue),
            filters=[lambda_.FilterCriteria.filter({
                "eventName": lambda_.FilterRule.or_("INSERT", "MODIFY"),
                # every item the agents write, as it is written: their results and heartbeats (timed here by
                # DynamoDB) are recorded, and each gets an expiry when the agent's own does not bound it (an agent's
                # grant cannot require one: flows/agent/expiry.py). Medic writes nothing under `agent#` but that.
                "dynamodb": {"Keys": {"pk": {"S": lambda_.FilterRule.begins_with("agent#")}}}})],
        ))
        for action in ("kms:ReEncrypt*", "kms:GenerateDataKey*"):
            Validations.of(self.results.role).acknowledge(Acknowledgment(
                id=f"AwsSolutions::AwsSolutions-IAM5[Action::{action}]",
                reason="CDK's grant for the stream's on-failure queue; the statement names Medic's own key only."))
        stack = Stack.of(self)
        CfnOutput(stack, "AgentResultsStreamFailuresQueueUrl", value=self.stream_failures.queue.queue_url,
                  description="where Lambda reports the agent results' stream batches it gave up on (medic "
                              "stream-failures)")
        CfnOutput(stack, "AgentResultsFunctionName", value=self.results.function.function_name,
                  description="the agent results function (medic stream-failures re-delivers to it)")
        # medic history reads every *LogGroup output: operator requests (a `rejected` one included) and the agents'
        # results are records too
        CfnOutput(stack, "OperatorRequestsLogGroup", value=self.requeue.log_group.log_group_name)
        CfnOutput(stack, "AgentResultsLogGroup", value=self.results.log_group.log_group_name)


    def issue_node_commands(self, *functions: MedicFunction) -> None:
        """Functions that queue the commands around a node action (issue 16): the node path and the reconciler
        (drain_node; resume_node and job_states after the repair; and its restarts of EKS jobs whose pods are stuck
        Terminating). The results function requeues the jobs the repair hit. Each gets the queues, SendMessage on
        them, and a place among the allowed senders."""
        queue_urls = Stack.of(self).to_json_string({name: agent.queue.queue_url for name, agent in self.queues.items()})
        for function in (*functions, self.results):
            function.function.add_environment("AGENT_QUEUES", queue_urls)
            function.role.add_to_policy(iam.PolicyStatement(
                actions=["sqs:SendMessage"], resources=[agent.queue.queue_arn for agent in self.queues.values()]))
            self.senders.append(function.role)

    def restrict_senders(self, *roles: iam.IRole) -> None:
        """Every agent queue accepts SendMessage only from Medic's roles that issue commands: the requeue
        function's, the node commands' (issue_node_commands) and ``roles`` (the alarm handler's). Call once,
        after every sender exists."""
        for agent in self.queues.values():
            allow_senders(agent.queue, [*self.senders, *roles])
