"""Scenario files: JSON Lines with an optional comment header naming a title, a config, faults to
inject and the expected result, e.g.::

    # title: Storm: 30 failing nodes in ten minutes
    # config: dry-run.medic.yaml        (relative to the scenario file)
    # fault: sns:Publish=InternalError:10   (repeatable; as --fault, which adds to or overrides them)
    # expect: at most 4 executed, the rest suppressed, one summary page
    # check: records outcome=executed <= 4     (repeatable; sim/expect.py: what `sim demo` verifies)
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Iterator
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


def documents(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """The input's items, each with the number of its first line: a JSON Lines line as it is, or a JSON document
    spread over several lines (pretty-printed, as tests/fixtures/events/*.json are) as one compact line. Blank and
    comment lines between items, and a line that starts no JSON document, pass through for the replay to judge; a
    document that never parses passes through as its first line alone (the replay says it is not JSON), and the
    lines after it are read again. Lazy: a line is read only when the items before it are replayed (a caller may
    generate the next line from what the replay did), and a document's later lines only when it needs them."""
    source = enumerate(lines, 1)
    pending: deque[tuple[int, str]] = deque()  # lines read ahead for a document that did not parse

    def next_line() -> tuple[int, str] | None:
        return pending.popleft() if pending else next(source, None)

    while (item := next_line()) is not None:
        lineno, first = item
        buffer = first.strip()
        if not buffer.startswith(("{", "[")):
            yield lineno, first
            continue
        taken: list[tuple[int, str]] = []
        while True:
            try:
                parsed = json.loads(buffer)
            except json.JSONDecodeError as error:
                more = next_line() if error.pos >= len(buffer.rstrip()) else None  # it ran out: the document goes on
                if more is not None:
                    taken.append(more)
                    buffer += "\n" + more[1]
                    continue
                yield lineno, first
                pending.extendleft(reversed(taken))
                break
            yield lineno, json.dumps(parsed) if taken else first
            break
