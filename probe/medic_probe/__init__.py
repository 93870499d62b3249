"""Medic's training probe: a cheap per-step hook that publishes training progress to CloudWatch."""

from medic_probe.probe import DEFAULT_NAMESPACE, Probe

__version__ = "0.1.0"

__all__ = ["DEFAULT_NAMESPACE", "Probe", "__version__"]
