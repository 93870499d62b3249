"""Where Medic's own code (``functions/medic``) comes from: the CLI reuses its config model, ledger
and pure decision functions rather than copying them.

``functions/`` is the Lambda asset, not an installable package, so an editable install of the CLI
(``pip install -e ./cli``) finds it next to itself in the repository checkout.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository checkout the CLI is installed from
FUNCTIONS = ROOT / "functions"


class MedicNotFound(ImportError):
    pass


def ensure_medic() -> None:
    """Make ``import medic`` work: already importable, or the checkout's functions/ directory."""
    if importlib.util.find_spec("medic") is not None:
        return
    if (FUNCTIONS / "medic" / "__init__.py").is_file():
        sys.path.insert(0, str(FUNCTIONS))
        return
    raise MedicNotFound(
        f"cannot import Medic's shared code (functions/medic): expected it at {FUNCTIONS}. "
        "Install the CLI from a repository checkout with `pip install -e ./cli`.")


def ensure_infra() -> None:
    """Make ``import infra`` work (the stack's own config loader and checks, infra/config.py): the checkout's root."""
    ensure_medic()
    if importlib.util.find_spec("infra") is None:
        if not (ROOT / "infra" / "config.py").is_file():
            raise MedicNotFound(f"cannot import Medic's stack code (infra/): expected it at {ROOT / 'infra'}. "
                                "Install the CLI from a repository checkout with `pip install -e ./cli`.")
        sys.path.insert(0, str(ROOT))
