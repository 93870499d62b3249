"""Medic's on-cluster agent for Slurm controllers."""

__version__ = "0.1.0"
