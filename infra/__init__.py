"""Medic's CDK app: the stack and one construct per concern. Imports nothing from the handlers
except the shared config model (functions/medic/config.py)."""
