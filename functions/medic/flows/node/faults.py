"""Classify a HyperPod health reason (free text naming the HMA fault type) into a fault.

The HMA reasons are not a documented enum, so this is lenient: it looks for the fault type
tokens (``NvidiaErrorReboot``, ``NeuronErrorTerminate``, ...) and NVIDIA XID codes anywhere in
the text, and anything it does not recognize is ``unknown`` (page a human, take no action).
"""

from __future__ import annotations

import re

from medic.core.models import Action, Fault

# NVIDIA XIDs by the "Resolution Bucket (Immediate Action)" of NVIDIA's Xid catalog
# (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, Ampere and newer), for reasons that
# name an XID but no HMA fault-type token. HyperPod offers reboot and replace only: RESET_GPU, RESTART_BM and
# RESTART_VM (and the catalog's reset-first workflows) become a reboot, which resets every GPU and keeps the
# node's volumes; replace wipes them, so Medic replaces only when a rebooted node fails again within
# reboot_escalation_hours (the catalog's investigatory "CONTACT_SUPPORT": service required) or HMA says
# ...ErrorTerminate. RESTART_APP means the application, not the node. A code the catalog says to IGNORE, or
# one not listed here, takes no node action and pages a human (Fault.UNKNOWN).
XID_CATALOG: dict[int, tuple[Fault, str]] = {
    # reboot: the catalog's immediate action resets the GPU or restarts the machine
    46: (Fault.GPU_REBOOT, "GPU stopped processing: RESET_GPU"),
    48: (Fault.GPU_REBOOT, "double-bit ECC error: WORKFLOW_XID_48 (a GPU reset remaps the row)"),
    62: (Fault.GPU_REBOOT, "internal micro-controller halt: RESET_GPU"),
    64: (Fault.GPU_REBOOT, "memory remapping failure: RESET_GPU, then support if it recurs"),
    74: (Fault.GPU_REBOOT, "NVLink error: WORKFLOW_NVLINK_ERR (reset, then support if it persists)"),
    79: (Fault.GPU_REBOOT, "GPU has fallen off the bus: RESTART_BM"),
    95: (Fault.GPU_REBOOT, "uncontained memory error: RESET_GPU"),
    109: (Fault.GPU_REBOOT, "context switch timeout: RESET_GPU"),
    110: (Fault.GPU_REBOOT, "security fault: RESET_GPU"),
    119: (Fault.GPU_REBOOT, "GSP RPC timeout: RESET_GPU"),
    120: (Fault.GPU_REBOOT, "GSP error: RESET_GPU"),
    136: (Fault.GPU_REBOOT, "NVLink training failed: RESET_GPU"),
    140: (Fault.GPU_REBOOT, "unrecovered ECC error: RESET_GPU"),
    143: (Fault.GPU_REBOOT, "GPU initialization error: RESET_GPU"),
    **{code: (Fault.GPU_REBOOT, "NVLink5 error: WORKFLOW_NVLINK5_ERR (fatal ones: RESET_GPU)")
       for code in range(144, 151)},
    151: (Fault.GPU_REBOOT, "key rotation error: RESTART_VM"),
    155: (Fault.GPU_REBOOT, "NVLink software-defined error: RESET_GPU"),
    156: (Fault.GPU_REBOOT, "resource retirement event: RESET_GPU"),
    158: (Fault.GPU_REBOOT, "GPU fatal timeout: RESET_GPU"),
    # replace: the catalog's immediate action is service on the hardware
    54: (Fault.GPU_FATAL, "auxiliary power not connected to the GPU board: CHECK_MECHANICALS"),
    # no node action: the catalog's immediate action restarts the application
    **{code: (Fault.USER_APP_ERROR, "RESTART_APP: the application's error, not the node's")
       for code in (8, 11, 13, 25, 31, 32, 39, 40, 41, 60, 68, 69, 70, 71, 72, 75, 76, 77, 80, 82, 83, 84,
                    85, 86, 88, 89, 94, *range(96, 106), *range(126, 136), 139)},
    45: (Fault.USER_APP_ERROR, "preemptive cleanup after another error: WORKFLOW_XID_45 (the other Xid decides)"),
}

_FAULT_TYPE = re.compile(r"\b([A-Z][A-Za-z]*?)Error(Reboot|Terminate|Replace)\b")
# "Xid 79", "XID=48", and the driver's own "NVRM: Xid (PCI:0000:53:00): 79, ..." form. ASCII digits only: `\d` would
# take any Unicode digit ("٧٩", Arabic-Indic), which int() reads as 79.
_XID = re.compile(r"\bxid\b(?:\s*\([^)]{0,64}\))?[\s:=#,-]*([0-9]{1,3})\b", re.IGNORECASE)

ACTION_FOR_FAULT = {
    Fault.GPU_REBOOT: Action.REBOOT_NODE,
    Fault.ACCELERATOR_REBOOT: Action.REBOOT_NODE,
    Fault.GPU_FATAL: Action.REPLACE_NODE,
    Fault.HARDWARE_FATAL: Action.REPLACE_NODE,
}


def classify(health_status: str, reason: str) -> Fault:
    if health_status.strip().lower() in {"healthy", "schedulable"}:
        return Fault.HEALTHY
    if "XidUserAppError" in reason:
        return Fault.USER_APP_ERROR
    match = _FAULT_TYPE.search(reason)
    if match:
        vendor, verb = match.group(1), match.group(2)
        gpu = vendor == "Nvidia"
        if verb == "Reboot":
            return Fault.GPU_REBOOT if gpu else Fault.ACCELERATOR_REBOOT
        return Fault.GPU_FATAL if gpu else Fault.HARDWARE_FATAL
    # Several XIDs in one reason (45 follows the error that caused it): the most severe bucket decides.
    faults = [XID_CATALOG[code][0] for code in (int(found) for found in _XID.findall(reason)) if code in XID_CATALOG]
    return min(faults, key=_SEVERITY.index, default=Fault.UNKNOWN)


_SEVERITY = [Fault.GPU_FATAL, Fault.GPU_REBOOT, Fault.USER_APP_ERROR]
