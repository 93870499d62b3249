"""Medic: event-driven auto-remediation for SageMaker HyperPod and training jobs."""
