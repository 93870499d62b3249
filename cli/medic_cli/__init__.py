"""``medic``: the operators' command line for Medic (status, history, pause/resume/mode, explain)."""
