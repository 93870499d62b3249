"""Cluster memory: the reconciler's latest DescribeCluster, so the node path reads it with the ledger.

The breaker needs the cluster's size and the policy its NodeRecovery and Slurm controller groups. They
change slowly; the reconciler (every 5 minutes) describes each configured cluster and keeps the answer
here, and the node path reads it in the same `BatchGetItem` as the node's history, instead of a
`DescribeCluster` of its own. A snapshot older than `FRESH_FOR` is not used: the node path then asks
DescribeCluster itself (the adapter's short cache), as it did before the reconciler first ran.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from medic.core.models import ClusterInfo
from medic.ledger.table import Key, Table, expires

FRESH_FOR = timedelta(minutes=12)  # two missed sweeps and a margin; the adapter's own cache is 5 min


class ClusterInfoStore:
    def __init__(self, table: Table) -> None:
        self.table = table

    def key(self, cluster: str) -> Key:
        return self.table.key(f"cluster#{cluster}", "info")

    def save(self, cluster: str, info: ClusterInfo, now: datetime) -> None:
        item = {**self.key(cluster), "size": {"N": str(info.size)}, "seen_at": {"S": now.isoformat()},
                "controller_groups": {"L": [{"S": group} for group in sorted(info.controller_groups)]},
                "expires_at": expires(now, days=1)}
        if info.node_recovery is not None:
            item["node_recovery"] = {"S": info.node_recovery}
        if info.provisioning is not None:
            item["provisioning"] = {"S": info.provisioning}
        self.table.put(item)


def fresh_cluster_info(item: dict | None, now: datetime) -> ClusterInfo | None:
    """The snapshot an item holds, if the reconciler wrote it recently enough to decide with."""
    if not item or now - datetime.fromisoformat(item["seen_at"]["S"]) > FRESH_FOR:
        return None
    return ClusterInfo(size=int(item["size"]["N"]), node_recovery=item.get("node_recovery", {}).get("S"),
                       provisioning=item.get("provisioning", {}).get("S"),
                       controller_groups=frozenset(g["S"] for g in item.get("controller_groups", {}).get("L", [])))
