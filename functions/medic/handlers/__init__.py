"""The Lambda entry points (one module per function: the handler strings in infra/ name them).

Each handler module imports its flows inside ``with cold_start():``. Importing a handler builds about 50,000 objects
that live as long as the container (modules, classes, pydantic validators, boto3's and Powertools' own); CPython's
collector, seeing them allocated, walks them again and again while they are built, and a full collection over all of
them (~20 ms of a ~250 ms cold start, measured with ``python -X importtime`` and gc.callbacks) finds a few hundred
unreachable objects. ``gc.freeze()`` then moves what the imports built to the permanent generation, which no later
collection walks either (Python docs, gc.freeze: "ignore all the future collections"): the work is not deferred to the
first invocation, it is not done. Objects made per invocation are collected as usual.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cold_start() -> Iterator[None]:
    """No garbage collection while a handler's imports run; what they built is frozen after (see above).

    And no search for pydantic plugins: Medic uses none, and pydantic looks for them at its first model by reading the
    entry points of every installed distribution (pydantic/plugin/_loader.py, get_plugins: 8-12 ms in this repo's
    venv). Its documented switch is PYDANTIC_DISABLE_PLUGINS (pydantic docs, "Pydantic Plugins", "Disabling
    Plugins": https://docs.pydantic.dev/latest/concepts/plugins/); an environment that sets it keeps its own value."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
