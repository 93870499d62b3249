"""What must hold in AWS for Medic to work on each configured cluster, read from DescribeCluster (and, for EKS,
CloudWatch ListMetrics), and what DescribeCluster cannot tell. The judgement is pure (``assess``); ``read`` asks
AWS, one DescribeCluster per cluster."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from medic.config import Cluster, MedicConfig
from medic_cli.render import when

HOLDS, FAILS, UNKNOWN = "ok", "NO", "unknown"
INSIGHTS_NAMESPACE = "ContainerInsights"
INSIGHTS_METRIC = "cluster_failed_node_count"  # EKS Container Insights, dimension ClusterName


@dataclass(frozen=True)
class Check:
    name: str
    state: str  # ok | NO | unknown
    detail: str

    def as_json(self) -> dict[str, str]:
        return {"check": self.name, "state": self.state, "detail": self.detail}


@dataclass(frozen=True)
class ClusterPreconditions:
    cluster: str
    summary: str  # id, status and creation time as DescribeCluster gives them
    checks: tuple[Check, ...]

    def as_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "summary": self.summary, "checks": [c.as_json() for c in self.checks]}


def assess(cluster: Cluster, described: dict | None, problem: str = "",
           insights: tuple[str | None, bool | None, str] = (None, None, "")) -> ClusterPreconditions:
    """The preconditions of one configured cluster from its DescribeCluster response (None: unreadable, with
    ``problem``), and for EKS the Container Insights reading ``(eks cluster name, metric found, problem)``."""
    if described is None:
        return ClusterPreconditions(cluster.name, f"id {cluster.id}", (
            Check("DescribeCluster", FAILS, f"cannot read the cluster: {problem}"),))
    created = described.get("CreationTime")
    summary = (f"{described.get('ClusterArn', cluster.id)}, {described.get('ClusterStatus', '?')}"
               + (f", created {when(created)} UTC" if created else ""))
    checks = [_cluster_id(cluster, described), _orchestrator(cluster, described), _cluster_events(described),
              _node_recovery(cluster, described),
              _batch_node_apis(described)]
    if cluster.orchestrator == "eks":
        checks.append(_container_insights(*insights))
    return ClusterPreconditions(cluster.name, summary, tuple(checks))


def _cluster_id(cluster: Cluster, described: dict) -> Check:
    # DescribeCluster's ClusterArn ends in the cluster's id (botocore's ClusterArn pattern: ...:cluster/[a-z0-9]{12});
    # IAM grants Medic's node actions on the configured id's ARN, and an event under another id is rejected.
    arn = described.get("ClusterArn") or ""
    actual = arn.rsplit("cluster/", 1)[-1] if "cluster/" in arn else ""
    if not actual:
        return Check("cluster id", UNKNOWN, f"DescribeCluster returned no ClusterArn; config says id {cluster.id}")
    if actual == cluster.id:
        return Check("cluster id", HOLDS, f"{cluster.id}, as configured")
    return Check("cluster id", FAILS,
                 f"the cluster's id is {actual} (ClusterArn {arn}), the config says {cluster.id}: set clusters[].id "
                 f"to {actual} and deploy (until then every event of the cluster is rejected, and IAM refuses Medic's "
                 "calls on it)")


def _orchestrator(cluster: Cluster, described: dict) -> Check:
    actual = sorted((described.get("Orchestrator") or {}).keys())
    if not actual:
        return Check("orchestrator", UNKNOWN,
                     f"DescribeCluster names no orchestrator; config says {cluster.orchestrator}")
    named = actual[0].lower()
    if named == cluster.orchestrator:
        return Check("orchestrator", HOLDS, f"{actual[0]}, as configured")
    return Check("orchestrator", FAILS, f"the cluster is {actual[0]}, the config says {cluster.orchestrator}: fix "
                                        "clusters[].orchestrator (Medic's commands and alarms depend on it)")


def _cluster_events(described: dict) -> Check:
    # HyperPod sends "SageMaker HyperPod Cluster Event" only for clusters with NodeProvisioningMode=Continuous.
    mode = described.get("NodeProvisioningMode")
    if mode == "Continuous":
        return Check("cluster events", HOLDS, "NodeProvisioningMode Continuous: HyperPod sends cluster events")
    return Check("cluster events", FAILS,
                 f"NodeProvisioningMode {mode or 'not set'}: HyperPod sends no cluster events for this cluster (only "
                 "Continuous clusters get them); Medic sees failed repairs only through the reconciler's sweeps")


def _node_recovery(cluster: Cluster, described: dict) -> Check:
    actual = described.get("NodeRecovery")  # Automatic | None
    if actual is None:
        return Check("node recovery", UNKNOWN,
                     f"DescribeCluster returned no NodeRecovery; config says {cluster.node_recovery}")
    if actual.lower() == cluster.node_recovery:
        return Check("node recovery", HOLDS, f"HyperPod {actual}, config {cluster.node_recovery}")
    who = "HyperPod repairs failed nodes itself" if actual == "Automatic" else "only Medic repairs failed nodes"
    return Check("node recovery", FAILS,
                 f"HyperPod {actual}, config {cluster.node_recovery}: they disagree. The cluster's setting is the "
                 f"truth ({who}); set clusters[].node_recovery to {actual.lower()}")


def _batch_node_apis(described: dict) -> Check:
    # BatchRebootClusterNodes/BatchReplaceClusterNodes (API reference): "If you want to invoke this API on an existing
    # cluster, you'll first need to patch the cluster by running the UpdateClusterSoftware API." DescribeCluster has
    # no field saying whether that was done or is needed: show what it does say.
    groups = described.get("InstanceGroups") or []
    versions = sorted({g.get("CurrentImageReleaseVersion") or g.get("CurrentImageId") or "?" for g in groups})
    updates = sorted({g["SoftwareUpdateStatus"] for g in groups if g.get("SoftwareUpdateStatus")})
    facts = [f"platform image {', '.join(versions) if versions else 'not shown'}",
             f"last software update {', '.join(updates) if updates else 'none shown'}"]
    return Check("Batch node APIs", UNKNOWN,
                 "DescribeCluster cannot tell whether the cluster's platform software supports BatchRebootClusterNodes"
                 " and BatchReplaceClusterNodes (" + "; ".join(facts) + "). A cluster created before those APIs needs "
                 "UpdateClusterSoftware once, or Medic's reboot and replace calls fail")


def _container_insights(eks_cluster: str | None, found: bool | None, problem: str) -> Check:
    if eks_cluster is None:
        return Check("Container Insights", UNKNOWN,
                     "no EKS cluster name (clusters[].eks_cluster_name, or DescribeCluster Orchestrator.Eks)")
    if found is None:
        return Check("Container Insights", UNKNOWN, f"cannot list CloudWatch metrics: {problem}")
    if found:
        return Check("Container Insights", HOLDS,
                     f"{INSIGHTS_NAMESPACE} {INSIGHTS_METRIC} for ClusterName={eks_cluster} is published")
    return Check("Container Insights", FAILS,
                 f"no {INSIGHTS_NAMESPACE} {INSIGHTS_METRIC} for ClusterName={eks_cluster} in the last two weeks "
                 "(ListMetrics): the EKS failed-node alarm on it has nothing to watch until Container Insights is "
                 "installed on the EKS cluster")


def read(ctx: Any, config: MedicConfig) -> list[ClusterPreconditions]:
    """One DescribeCluster per configured cluster (and one ListMetrics per EKS cluster); errors are shown, not
    raised: status still prints the rest."""
    results = []
    for cluster in config.clusters:
        try:
            described = ctx.client("sagemaker").describe_cluster(ClusterName=cluster.name)
        except (ClientError, BotoCoreError) as error:
            results.append(assess(cluster, None, problem=_message(error)))
            continue
        insights: tuple[str | None, bool | None, str] = (None, None, "")
        if cluster.orchestrator == "eks":
            insights = _read_insights(ctx, cluster.eks_cluster_name or _eks_name(described))
        results.append(assess(cluster, described, insights=insights))
    return results


def _eks_name(described: dict) -> str | None:
    arn = ((described.get("Orchestrator") or {}).get("Eks") or {}).get("ClusterArn")
    return arn.rsplit("/", 1)[-1] if arn else None


def _read_insights(ctx: Any, eks_cluster: str | None) -> tuple[str | None, bool | None, str]:
    if eks_cluster is None:
        return None, None, ""
    try:
        metrics = ctx.client("cloudwatch").list_metrics(
            Namespace=INSIGHTS_NAMESPACE, MetricName=INSIGHTS_METRIC,
            Dimensions=[{"Name": "ClusterName", "Value": eks_cluster}])["Metrics"]
    except (ClientError, BotoCoreError) as error:
        return eks_cluster, None, _message(error)
    return eks_cluster, bool(metrics), ""


def _message(error: Exception) -> str:
    if isinstance(error, ClientError):
        details = error.response.get("Error", {})
        return f"{details.get('Code', 'error')}: {details.get('Message', error)}"
    return str(error)
