"""Specification: how a HyperPod health reason becomes a fault."""

import pytest

from medic.core.models import Fault
from medic.flows.node.faults import XID_CATALOG, classify
from tests.helpers import hma_reason


@pytest.mark.parametrize(
    ("status", "reason", "fault"),
    [
        ("Unhealthy", hma_reason("NvidiaErrorReboot"), Fault.GPU_REBOOT),
        ("Unhealthy", hma_reason("NvidiaErrorTerminate"), Fault.GPU_FATAL),
        ("Unhealthy", hma_reason("NeuronErrorReboot"), Fault.ACCELERATOR_REBOOT),
        ("Unhealthy", hma_reason("NeuronErrorTerminate"), Fault.HARDWARE_FATAL),
        ("Unhealthy", hma_reason("XidUserAppError"), Fault.USER_APP_ERROR),
        ("Unhealthy", "NVRM: Xid (PCI:0000:53:00): 79, GPU has fallen off the bus.", Fault.GPU_REBOOT),
        ("Unhealthy", "Detected XID 48 double bit ECC error", Fault.GPU_REBOOT),
        ("Unhealthy", "xid=13 graphics engine exception", Fault.USER_APP_ERROR),
        ("Unhealthy", "Something we have never seen before", Fault.UNKNOWN),
        ("Unhealthy", "", Fault.UNKNOWN),
        ("Unhealthy", "Xid 999 unknown code", Fault.UNKNOWN),
        ("Healthy", "", Fault.HEALTHY),
        ("healthy", hma_reason("NvidiaErrorReboot"), Fault.HEALTHY),
    ],
)
def test_health_reasons_are_classified_leniently(status, reason, fault):
    # Given a health status and the free-text reason HMA wrote
    # When Medic classifies it
    # Then it finds the fault type wherever it appears, and anything unrecognized is unknown
    assert classify(status, reason) is fault


@pytest.mark.parametrize(("xid", "fault"), [
    (79, Fault.GPU_REBOOT),  # RESTART_BM: a reboot brings the GPU back; a replace would wipe the volumes
    (48, Fault.GPU_REBOOT),  # WORKFLOW_XID_48: a GPU reset remaps the row
    (95, Fault.GPU_REBOOT),  # RESET_GPU
    (119, Fault.GPU_REBOOT),  # RESET_GPU
    (74, Fault.GPU_REBOOT),  # WORKFLOW_NVLINK_ERR: reset first
    (54, Fault.GPU_FATAL),  # CHECK_MECHANICALS: service on the hardware
    (94, Fault.USER_APP_ERROR),  # RESTART_APP: a contained error, the node is fine
    (63, Fault.UNKNOWN),  # IGNORE: nothing for Medic to do to the node; a human looks
    (92, Fault.UNKNOWN),  # IGNORE
])
def test_an_xid_without_an_hma_token_follows_nvidias_resolution_bucket(xid, fault):
    # Given a health reason naming only an XID, as the driver logs it
    reason = f"NVRM: Xid (PCI:0000:53:00): {xid}, pid=1896"
    # Then the fault follows the catalog's immediate action: reset/reboot, service, or the application
    assert classify("Unhealthy", reason) is fault


def test_a_hardware_xid_alone_never_replaces_when_a_reboot_resets_the_gpu():
    # Given every XID whose catalog action is a GPU reset, a bare-metal or VM restart
    resets = [code for code, (fault, why) in XID_CATALOG.items()
              if any(bucket in why for bucket in ("RESET_GPU", "RESTART_BM", "RESTART_VM"))]
    # Then none of them replaces the node (that is for HMA's ...ErrorTerminate and repeat failures)
    assert resets and {XID_CATALOG[code][0] for code in resets} == {Fault.GPU_REBOOT}


def test_the_most_severe_xid_in_a_reason_decides():
    # Given Xid 45 (cleanup after another error) followed by the error that caused it
    assert classify("Unhealthy", "Xid 45 preemptive cleanup; Xid 79 GPU has fallen off the bus") is Fault.GPU_REBOOT
    assert classify("Unhealthy", "Xid 13 then Xid 54") is Fault.GPU_FATAL


def test_every_xid_entry_says_why():
    assert all(why.strip() for _, why in XID_CATALOG.values())


@pytest.mark.parametrize("digits", ["\u0667\u0669", "\uff17\uff19", "7\u0669"])
def test_an_xid_is_read_in_ascii_digits_only(digits):
    # Given a reason whose XID is written in other scripts' digits (Arabic-Indic, fullwidth): int() would read 79
    # Then it is no XID Medic knows: a human decides, no reboot
    assert classify("Unhealthy", f"NVRM: Xid (PCI:0000:53:00): {digits}, pid=1896") is Fault.UNKNOWN
