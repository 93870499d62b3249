"""Classify a HyperPod health reason (free text naming the HMA fault type) into a fault.

The HMA reasons are not a documented enum, so this is lenient: it looks for the fault type
tokens (``NvidiaErrorReboot``, ``NeuronErrorTerminate``, ...) and NVIDIA XID codes anywhere in
the text, and anything it does not recognize is ``unknown`` (page a human, take no action).
"""

from __future__ import annotations

import re

from medic.domain.models import Action, Fault

# NVIDIA XIDs that mean the GPU or its links are broken: reboot will not help, replace.
# 48 DBE ECC, 61/62 internal micro-controller halt, 63/64 row-remapping failure, 74 NVLink,
# 79 fallen off the bus, 92 high single-bit ECC rate, 94/95 contained/uncontained ECC,
# 119/120 GSP errors, 140 unrecovered ECC.
HARDWARE_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
# XIDs caused by the application (illegal address, MMU fault from user code, ...).
USER_XIDS = frozenset({13, 31, 43, 45, 68})

_FAULT_TYPE = re.compile(r"\b([A-Z][A-Za-z]*?)Error(Reboot|Terminate|Replace)\b")
# "Xid 79", "XID=48", and the driver's own "NVRM: Xid (PCI:0000:53:00): 79, ..." form.
_XID = re.compile(r"\bxid\b(?:\s*\([^)]{0,64}\))?[\s:=#,-]*(\d{1,3})\b", re.IGNORECASE)

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
    for code in (int(found) for found in _XID.findall(reason)):
        if code in HARDWARE_XIDS:
            return Fault.GPU_FATAL
        if code in USER_XIDS:
            return Fault.USER_APP_ERROR
    return Fault.UNKNOWN
