"""Leader election through a coordination.k8s.io/v1 Lease, as client-go's leaderelection package does it
(k8s.io/client-go/tools/leaderelection, LeaseLock): one Lease object, `holderIdentity` = the pod's name,
`renewTime` written by the holder every cycle, `leaseDurationSeconds` after which others may take it over.

Safety comes from the API server's optimistic concurrency: every write is an update carrying the
resourceVersion that was read (or a create, which fails with 409 AlreadyExists when another replica created it
first); two replicas racing for an expired lease cannot both succeed, the loser gets 409 Conflict and stays a
follower. Like client-go, a follower decides that a lease expired by its *own* clock, from when it last saw the
lease record change (not from the holder's renewTime), so clock skew between nodes does not matter.
Whatever happens here, a command still runs at most once: the ledger's claim is conditional.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from medic_agent.eks.kube import CONFLICT, NOT_FOUND, Kube, KubeError

LEASE_NAME = "medic-agent"
LEASE_SECONDS = 60


def micro_time(moment: datetime) -> str:
    """A metav1.MicroTime as the API server parses it: RFC3339Micro, "2006-01-02T15:04:05.000000Z07:00", exactly
    six fractional digits (k8s.io/apimachinery pkg/apis/meta/v1/micro_time.go, UnmarshalJSON)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _micro(value: object) -> object:
    """A time read back through the client (Python's isoformat: no fraction when it is 0) as MicroTime again."""
    if not isinstance(value, str):
        return value
    try:
        return micro_time(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return value


@dataclass(frozen=True)
class Leadership:
    leader: bool
    holder: str | None  # who holds the lease (None: nobody / unknown)
    reason: str


class LeaseElector:
    def __init__(self, kube: Kube, namespace: str, identity: str, clock: Callable[[], datetime], *,
                 name: str = LEASE_NAME, lease_seconds: int = LEASE_SECONDS) -> None:
        self.kube = kube
        self.namespace = namespace
        self.identity = identity
        self.clock = clock
        self.name = name
        self.lease_seconds = lease_seconds
        self._observed: tuple[str, datetime] | None = None  # (resourceVersion, when this agent first saw it)

    def check(self) -> Leadership:
        """Acquire or renew the lease; never raises (an API error → not leader, with the reason)."""
        try:
            return self._check()
        except KubeError as error:
            return Leadership(False, None, f"standing by: the lease could not be read or written ({error})")

    def _check(self) -> Leadership:
        now = self.clock()
        try:
            lease = self.kube.read_lease(self.namespace, self.name)
        except KubeError as error:
            if error.status != NOT_FOUND:
                raise
            return self._create(now)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or None
        version = str((lease.get("metadata") or {}).get("resourceVersion", ""))
        if self._observed is None or self._observed[0] != version:
            self._observed = (version, now)
        duration = int(spec.get("leaseDurationSeconds") or self.lease_seconds)
        expired = (now - self._observed[1]).total_seconds() >= duration
        if holder == self.identity:
            return self._write(lease, now, renew=True)
        if holder and not expired:
            return Leadership(False, holder, f"standing by: {holder} holds the lease {self.namespace}/{self.name}")
        return self._write(lease, now, renew=False)

    def _create(self, now: datetime) -> Leadership:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_seconds,
                         "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": 0}}
        try:
            created = self.kube.create_lease(self.namespace, body)
        except KubeError as error:
            if error.status == CONFLICT:  # AlreadyExists: another replica created it first
                return Leadership(False, None, "standing by: another replica created the lease first")
            raise
        self._observed = (str(created.get("metadata", {}).get("resourceVersion", "")), now)
        return Leadership(True, self.identity, "this replica holds the lease (created it)")

    def _write(self, lease: dict, now: datetime, *, renew: bool) -> Leadership:
        spec = dict(lease.get("spec") or {})
        for key in ("acquireTime", "renewTime"):
            if key in spec:
                spec[key] = _micro(spec[key])
        previous = spec.get("holderIdentity")
        spec.update({"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_seconds,
                     "renewTime": micro_time(now)})
        if not renew:
            spec["acquireTime"] = micro_time(now)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if previous else 0)
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "resourceVersion": lease.get("metadata", {}).get("resourceVersion")},
                "spec": spec}
        try:
            written = self.kube.replace_lease(self.namespace, self.name, body)
        except KubeError as error:
            if error.status == CONFLICT:  # someone else wrote it since it was read: they won
                self._observed = None
                return Leadership(False, None, "standing by: another replica wrote the lease first")
            raise
        self._observed = (str(written.get("metadata", {}).get("resourceVersion", "")), now)
        if renew:
            return Leadership(True, self.identity, "this replica holds the lease")
        taken = f" (taken over from {previous}, whose lease expired)" if previous else ""
        return Leadership(True, self.identity, f"this replica holds the lease{taken}")
