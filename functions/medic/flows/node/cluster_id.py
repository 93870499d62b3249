"""A cluster id that is not the cluster's (issue 29, item 2): HyperPod's own event names a configured cluster, in the
stack's partition, account and region, under another id than medic.yaml's `clusters[].id`.

The event stays `rejected` (Medic acts only on the cluster it was configured for, and IAM grants the node actions on
the configured id's ARN alone), but this is a configuration error, not a forgery: `aws.*` sources are AWS's own
("All events sourced from within AWS begin with "aws." Customer-generated events can have any value here, as long as
it doesn't begin with "aws."": EventBridge's event structure, `source`), and an event of another account or region is
never one.
Without a page every node event of the cluster would be rejected in silence. One page per cluster per UTC day
(its claim `incident#cluster:<name>:cluster_id:<day>`), counted in the `config` page window, naming the id to set.
"""

from __future__ import annotations

from datetime import timedelta

from medic.config_core import Cluster
from medic.core.pages import PageSource, PageText, PageWindow, console_link
from medic.core.record import Record
from medic.deps import Deps
from medic.outbox.pages import page_incident

ONE_DAY = timedelta(days=1)


def cluster_id_reason(cluster: Cluster, arn_id: str) -> str:
    return (f"HyperPod's event names cluster {cluster.name} with id {arn_id}, but medic.yaml says id {cluster.id}: "
            f"a configuration error (a mistyped id, or the cluster was created again under the same name). Every "
            f"event of this cluster is rejected until clusters[{cluster.name}].id is {arn_id} and the stack is "
            f"deployed again.")


def page_cluster_id(deps: Deps, record: Record, cluster: Cluster, arn_id: str) -> bool:
    """The day's one page about the cluster's id (a dry run pages nobody, as every record's page)."""
    day = deps.now().strftime("%Y-%m-%d")
    # One page per window (before_summary 0: the page is the window's summary, saying until when it holds), and a
    # claim per UTC day: a second event the same day does not even count; one the next day within 24 h is held.
    window = PageWindow(PageSource.CONFIG, f"cluster {cluster.name}", before_summary=0, length=ONE_DAY)
    return page_incident(deps, deps.table, record, _page(record, cluster, arn_id, deps.region),
                         claim=f"cluster:{cluster.name}:cluster_id:{day}", window=window)


def _page(record: Record, cluster: Cluster, arn_id: str, region: str) -> PageText:
    subject = f"[Medic] {cluster.name}: clusters[].id in medic.yaml is not the cluster's id"
    lines = (
        f"Cluster:        {cluster.name}",
        f"Configured id:  {cluster.id}",
        f"HyperPod's id:  {arn_id} (the event's ClusterArn, in this stack's account and region)",
        "",
        f"What happened:  {record['reason']}",
        "",
        f"What to do:     Set id: {arn_id} for cluster {cluster.name} in medic.yaml (or its full ClusterArn) and "
        "deploy again; `medic status` compares each id with DescribeCluster.",
        f"Console:        {console_link(region, cluster.name)}",
        f"Incident:       {record['incident']} (event {record['event_id']}, mode {record['mode']})",
    )
    return PageText(subject[:100], lines)
