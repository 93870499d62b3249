"""A node in a repair loop kept out of service on EKS (issue 32, quarantine_repeat_offenders): `quarantine_node`
cordons it, `release_node` uncordons it, each through one merge patch of the node.

Cordon is `spec.unschedulable: true`: "Mark node as unschedulable" (kubectl reference, "kubectl cordon"; "Safely
Drain a Node": cordoned, no new pod is scheduled there; pods already on it stay), and how AWS says to quarantine a
HyperPod EKS node ("Manually quarantine, replace, or reboot a node", SageMaker HyperPod developer guide:
`kubectl cordon <node-name>`). Medic marks its own cordon with the
annotation QUARANTINE_ANNOTATION (the time it set it), in the same patch, so that a release uncordons only a node
Medic cordoned: a node someone else cordoned (HyperPod marks nodes it will repair unschedulable too) is left as it
is. Each patch carries the resourceVersion the agent read: a node changed in between is a 409 Conflict, not a guess.
The only API calls: list nodes (already granted: the node report) and patch nodes.
"""

from __future__ import annotations

from datetime import datetime

from medic_agent.eks.commands import HoldNode
from medic_agent.eks.kube import Kube, KubeError
from medic_agent.eks.restart import EXECUTED, FAILED, Result

QUARANTINE_ANNOTATION = "medic.sagemaker-hyperpod/quarantined-since"


def hold_or_release(kube: Kube, action: HoldNode, now: datetime) -> Result:
    try:
        node = next((node for node in kube.list_nodes()
                     if (node.get("metadata") or {}).get("name") == action.node), None)
    except KubeError as error:
        return Result(FAILED, f"could not list nodes: {error}")
    if node is None:
        return Result(FAILED, f"no node {action.node} in the cluster: nothing changed")
    meta = node.get("metadata") or {}
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    ours = QUARANTINE_ANNOTATION in (meta.get("annotations") or {})
    mark = "set" if ours else "not set"
    seen = f"node {action.node}: unschedulable={str(cordoned).lower()}, Medic's quarantine {mark}"
    if action.kind == "quarantine_node":
        if cordoned and not ours:
            return Result(EXECUTED, f"{seen}; not quarantined: cordoned by someone else, left as it is", held=False)
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                              "annotations": {QUARANTINE_ANNOTATION: now.strftime("%Y-%m-%dT%H:%M:%SZ")}},
                 "spec": {"unschedulable": True}}
        done, held = "cordoned (spec.unschedulable true)", True
    else:
        if not ours:
            return Result(EXECUTED, f"{seen}; not uncordoned: not quarantined by Medic", resumed=False)
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                              "annotations": {QUARANTINE_ANNOTATION: None}},
                 "spec": {"unschedulable": None}}  # null: removed, as kubectl uncordon leaves it (false, omitted)
        done, held = "uncordoned", False
    try:
        kube.patch_node(action.node, patch)
    except KubeError as error:
        return Result(FAILED, f"{seen}; PATCH failed: {error}")
    return Result(EXECUTED, f"{seen}; {done}", **({"held": True} if held else {"resumed": True}))
