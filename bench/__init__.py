"""Benchmarks: how fast and how cheap Medic is (``make bench`` = ``python -m bench``).

Each module measures one thing and exposes ``run(...) -> dict``; ``python -m bench.<module> --json``
runs it alone and prints that dict as one JSON line. ``python -m bench`` runs them all, each in its own
interpreter, prints a table, and rewrites the ``<!-- bench:start -->`` block of docs/benchmarks.md with the results;
``bench.recovery`` (recovery time per failure class, with and without Medic) has its own block,
``<!-- bench:recovery:start -->``. They report; they never fail a build on a missed target.
"""
