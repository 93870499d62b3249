"""The agent's Kubernetes API calls, each a typed call of the official Python client (kubernetes 36): no
kubectl, no shell, no path built from an unchecked value (every name was validated by commands.py, and the
client URL-encodes path parameters). Objects come back as plain dicts in the API's own JSON shape.

Every call and the RBAC verb it needs (agent/kubernetes/ grants exactly these):
  get_job        get     kubeflow.org pytorchjobs | sagemaker.amazonaws.com hyperpodpytorchjobs | batch jobs
                         (namespaced, resourceNames = the watched jobs)
  list_pods      list    "" pods (namespaced: the watched jobs' namespaces)
  delete_pod     delete  "" pods (namespaced), with a uid precondition: only the pod that was checked
  list_nodes     list    "" nodes (cluster-scoped: the only ClusterRole)
  patch_node     patch   "" nodes (same ClusterRole; only with quarantine_repeat_offenders): cordon / uncordon
  lease calls    get, update (resourceNames = the lease), create  coordination.k8s.io leases (its own namespace)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from medic_agent.eks.commands import JobKind

FORBIDDEN, NOT_FOUND, CONFLICT = 403, 404, 409


class KubeError(Exception):
    """An API call that failed: `status` is the HTTP status (0: no answer), `reason` the Status reason."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


def _error(error: Exception) -> KubeError:
    import json

    from kubernetes.client.exceptions import ApiException

    if isinstance(error, ApiException):
        reason, message = str(error.reason or ""), ""
        try:
            status = json.loads(error.body or "{}")
            reason, message = status.get("reason") or reason, status.get("message") or ""
        except (ValueError, AttributeError):
            message = str(error.body or "")[:300]
        return KubeError(int(error.status or 0), reason, message[:500])
    return KubeError(0, type(error).__name__, str(error)[:500])


@dataclass
class Kube:
    """The API calls; `api_client` is a kubernetes.client.ApiClient (in-cluster config, or the sim's)."""

    api_client: Any

    @classmethod
    def in_cluster(cls) -> Kube:
        from kubernetes import client, config

        config.load_incluster_config()  # the pod's ServiceAccount token and the API server's CA
        return cls(client.ApiClient())

    @classmethod
    def for_server(cls, host: str, token: str) -> Kube:
        """A client for an API server at `host` authenticating with a bearer token (tests and the sim)."""
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = host
        configuration.api_key = {"BearerToken": token}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        configuration.retries = 0
        return cls(client.ApiClient(configuration))

    def _plain(self, obj: Any) -> Any:
        return self.api_client.sanitize_for_serialization(obj)

    def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, _request_timeout=30, **kwargs)
        except Exception as error:  # ApiException, urllib3 errors: one KubeError with the status
            raise _error(error) from None

    # --- jobs and pods

    def get_job(self, spec: JobKind, namespace: str, name: str) -> dict:
        from kubernetes import client

        if spec.kind == "Job":
            return self._plain(self._call(client.BatchV1Api(self.api_client).read_namespaced_job, name, namespace))
        return self._call(client.CustomObjectsApi(self.api_client).get_namespaced_custom_object,
                          spec.group, spec.version, namespace, spec.plural, name)

    def list_pods(self, namespace: str, label_selector: str | None = None) -> list[dict]:
        from kubernetes import client

        kwargs = {"label_selector": label_selector} if label_selector else {}
        found = self._call(client.CoreV1Api(self.api_client).list_namespaced_pod, namespace, **kwargs)
        return list(self._plain(found).get("items") or [])

    def delete_pod(self, namespace: str, name: str, uid: str, grace_period_seconds: int | None = None) -> dict:
        """DELETE the pod, only if it still is the pod `uid` (a precondition: 409 Conflict otherwise)."""
        from kubernetes import client

        body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid),
                                      grace_period_seconds=grace_period_seconds)
        return self._plain(self._call(client.CoreV1Api(self.api_client).delete_namespaced_pod, name, namespace,
                                      body=body))

    def list_nodes(self) -> list[dict]:
        from kubernetes import client

        return list(self._plain(self._call(client.CoreV1Api(self.api_client).list_node)).get("items") or [])

    def patch_node(self, name: str, patch: dict) -> dict:
        """A JSON merge patch (RFC 7386: a null deletes a key) of the node. The client would send a dict as
        json-patch+json (its select_header_content_type picks the first type for a PATCH whose body is not a list),
        so the content type is given. A patch naming metadata.resourceVersion is refused 409 Conflict when the node
        changed since it was read (API Concepts, "Resource versions" / "Conflicts")."""
        from kubernetes import client

        return self._plain(self._call(client.CoreV1Api(self.api_client).patch_node, name, patch,
                                      _content_type="application/merge-patch+json"))

    # --- the Lease (leader election)

    def read_lease(self, namespace: str, name: str) -> dict:
        from kubernetes import client

        return self._plain(self._call(client.CoordinationV1Api(self.api_client).read_namespaced_lease,
                                      name, namespace))

    def create_lease(self, namespace: str, body: dict) -> dict:
        from kubernetes import client

        return self._plain(self._call(client.CoordinationV1Api(self.api_client).create_namespaced_lease,
                                      namespace, body))

    def replace_lease(self, namespace: str, name: str, body: dict) -> dict:
        """PUT with body.metadata.resourceVersion: 409 Conflict when someone else wrote it since it was read."""
        from kubernetes import client

        return self._plain(self._call(client.CoordinationV1Api(self.api_client).replace_namespaced_lease,
                                      name, namespace, body))
