"""Probe tests. The probe package lives in probe/ (training scripts install it on their own): put it on the path.

The fake CloudWatch client validates every call against botocore's model of PutMetricData and
refuses what CloudWatch refuses (NaN, +-inf, values beyond +-2^360), so a test passes only if the
real service would have taken the call.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.validate import validate_parameters

PROBE_DIR = Path(__file__).resolve().parents[2] / "probe"
if str(PROBE_DIR) not in sys.path:
    sys.path.insert(0, str(PROBE_DIR))

from medic_probe import Probe  # noqa: E402

_PUT_METRIC_DATA = botocore.session.get_session().get_service_model("cloudwatch").operation_model("PutMetricData")


class CloudWatchRejects(Exception):
    """What CloudWatch would answer with a 400."""


def check_value(value: float, where: str) -> None:
    if not math.isfinite(value) or abs(value) >= 2.0**360 or (value != 0 and abs(value) <= 2.0**-360):
        raise CloudWatchRejects(f"{where}: CloudWatch rejects {value!r}")


class FakeCloudWatch:
    """Records put_metric_data calls; raises the queued errors first (one per call), then succeeds."""

    def __init__(self, errors: list[BaseException] | None = None, always_fail: BaseException | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.attempts = 0
        self.errors = list(errors or [])
        self.always_fail = always_fail

    def put_metric_data(self, **kwargs: Any) -> dict:
        self.attempts += 1
        validate_parameters(kwargs, _PUT_METRIC_DATA.input_shape)
        assert len(kwargs["MetricData"]) <= 1000
        for i, datum in enumerate(kwargs["MetricData"]):
            assert ("Value" in datum) != ("StatisticValues" in datum), datum
            if "Value" in datum:
                check_value(datum["Value"], f"MetricData[{i}].Value")
            else:
                for key, value in datum["StatisticValues"].items():
                    check_value(value, f"MetricData[{i}].StatisticValues.{key}")
        if self.errors:
            raise self.errors.pop(0)
        if self.always_fail is not None:
            raise self.always_fail
        self.calls.append(kwargs)
        return {}


def by_metric(call: dict[str, Any]) -> dict[tuple[str, frozenset], dict[str, Any]]:
    """One PutMetricData call's entries keyed by (metric name, frozenset of (dimension, value))."""
    out: dict[tuple[str, frozenset], dict[str, Any]] = {}
    for datum in call["MetricData"]:
        key = (datum["MetricName"], frozenset((d["Name"], d["Value"]) for d in datum["Dimensions"]))
        assert key not in out, f"duplicate datum {key}"
        out[key] = datum
    return out


def dims(**pairs: str) -> frozenset:
    return frozenset(pairs.items())


@pytest.fixture
def fake() -> FakeCloudWatch:
    return FakeCloudWatch()


@pytest.fixture
def make_probe() -> Iterator[Any]:
    """Probes without their background thread (start=False) unless asked: the test calls flush(). Closed after."""
    probes: list[Probe] = []

    def make(job: str = "llama3-70b", **kwargs: Any) -> Probe:
        kwargs.setdefault("start", False)
        kwargs.setdefault("node", "ip-10-1-2-3")
        probe = Probe(job=job, **kwargs)
        probes.append(probe)
        return probe

    yield make
    for probe in probes:
        probe.close(timeout=1.0)


@pytest.fixture
def no_aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An environment where botocore's credential chain finds nothing, and finds it fast (no instance metadata)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                 "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture
def fake_aws_credentials(no_aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials botocore finds in the environment (for moto): nothing else leaks in from the machine."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
