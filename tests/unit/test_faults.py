"""Specification: how a HyperPod health reason becomes a fault."""

import pytest

from medic.domain.faults import classify
from medic.domain.models import Fault
from tests.helpers import hma_reason


@pytest.mark.parametrize(
    ("status", "reason", "fault"),
    [
        ("Unhealthy", hma_reason("NvidiaErrorReboot"), Fault.GPU_REBOOT),
        ("Unhealthy", hma_reason("NvidiaErrorTerminate"), Fault.GPU_FATAL),
        ("Unhealthy", hma_reason("NeuronErrorReboot"), Fault.ACCELERATOR_REBOOT),
        ("Unhealthy", hma_reason("NeuronErrorTerminate"), Fault.HARDWARE_FATAL),
        ("Unhealthy", hma_reason("XidUserAppError"), Fault.USER_APP_ERROR),
        ("Unhealthy", "NVRM: Xid (PCI:0000:53:00): 79, GPU has fallen off the bus.", Fault.GPU_FATAL),
        ("Unhealthy", "Detected XID 48 double bit ECC error", Fault.GPU_FATAL),
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
