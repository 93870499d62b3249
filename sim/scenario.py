"""Scenario files: JSON Lines with an optional comment header naming a title, a config, faults to
inject and the expected result, e.g.::

    # title: Storm: 30 failing nodes in ten minutes
    # config: dry-run.medic.yaml        (relative to the scenario file)
    # fault: sns:Publish=InternalError:10   (repeatable; as --fault, which adds to or overrides them)
    # expect: at most 4 executed, the rest suppressed, one summary page
    # check: records outcome=executed <= 4     (repeatable; sim/expect.py: what `sim demo` verifies)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

SCENARIOS = Path(__file__).parent / "scenarios"
DEMO_CONFIG = SCENARIOS / "demo.medic.yaml"
_HEADER = re.compile(r"^#\s*(title|config|expect|fault|check)\s*:\s*(.+?)\s*$")


@dataclass
class Scenario:
    path: Path
    lines: list[str]
    title: str
    config: Path | None
    expect: str
    faults: list[str] = field(default_factory=list)  # --fault specs from '# fault:' lines
    checks: list[str] = field(default_factory=list)  # '# check:' lines (sim/expect.py), in order


def read_scenario(path: Path) -> Scenario:
    path = Path(path)
    lines = path.read_text().splitlines()
    header: dict[str, str] = {}
    faults: list[str] = []
    checks: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        if not line.lstrip().startswith("#"):
            break
        match = _HEADER.match(line.strip())
        if match and match.group(1) == "fault":
            faults.append(match.group(2))
        elif match and match.group(1) == "check":
            checks.append(match.group(2))
        elif match:
            header.setdefault(match.group(1), match.group(2))
    config = (path.parent / header["config"]) if "config" in header else None
    return Scenario(path, lines, header.get("title", path.stem), config, header.get("expect", ""), faults,
                    checks)


def bundled() -> list[Path]:
    return sorted(SCENARIOS.glob("*.jsonl"))

