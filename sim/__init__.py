"""Local replay: the synthesized Medic stack in emulated AWS (moto), with the real handlers.

``python -m sim replay FILE`` feeds EventBridge events (and world-setup directives) through the
stack's own rules and handlers and prints every remediation record and every page as JSON Lines.
``python -m sim demo`` replays the bundled scenarios and prints a readable table.
"""
