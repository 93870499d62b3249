"""Plain-text tables and times for the terminal; JSON for everything else."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns sized to their content; the last column is never padded or cut."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)]
    lines = [_line(headers, widths), _line(["-" * width for width in widths], widths)]
    lines += [_line(row, widths) for row in cells]
    return "\n".join(lines)


def _line(values: Sequence[str], widths: Sequence[int]) -> str:
    padded = [value.ljust(width) for value, width in zip(values[:-1], widths[:-1], strict=True)]
    return "  ".join([*padded, values[-1]]).rstrip()


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, datetime):
        return when(value)
    return str(value).replace("\n", " ")


def when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def parse_time(value: Any) -> datetime | None:
    """An ISO time (a naive one is UTC) or epoch milliseconds; None when unreadable."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1000, UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        try:  # the Powertools logger's own format: 2026-11-20 08:14:05,123+0000
            moment = datetime.strptime(value, "%Y-%m-%d %H:%M:%S,%f%z")
        except ValueError:
            return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def json_line(value: Any) -> str:
    return json.dumps(value, default=_default, sort_keys=False)


def json_block(value: Any) -> str:
    return json.dumps(value, default=_default, indent=2)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return str(value)
