"""Text Medic writes around words it does not own: shortened, on one line, quoted. Untrusted text (event fields,
failure messages, agent output) is always shown through `quoted`, never as if Medic said it."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from pydantic import ValidationError

MAX_REASON_CHARS = 300


def short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def one_line(text: str, limit: int = 300) -> str:
    """Output as part of a one-sentence reason: whitespace collapsed, shortened."""
    return short(" ".join(text.split()), limit)


def one_line_text(value: str) -> str:
    """Text a sender controls, made safe to show on one line: any whitespace (line breaks included) becomes
    one space; other control and format characters (ANSI escapes, bidi overrides, NULs) are dropped."""
    kept = "".join(" " if ch.isspace() else ch for ch in value if ch.isspace() or unicodedata.category(ch)[0] != "C")
    return " ".join(kept.split())


def single_line(text: str) -> str:
    """One line of a page: every line break (LF, CR, VT, FF, NEL, U+2028, ...) and tab becomes a space, other control
    and format characters (ANSI escapes, bidi overrides, zero-width characters) are dropped; spaces are kept (a
    page's columns). A value inside the line can never start a line of its own."""
    return "".join(" " if ch.isspace() else ch for ch in text if ch.isspace() or unicodedata.category(ch)[0] != "C")


class MedicText(str):
    """Words Medic wrote itself, passed where a page shows someone else's words (a health reason, an alarm's
    reason): shown as they are. Any other text in such a place is untrusted and shown only `quoted`."""

    __slots__ = ()


def untrusted(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """Text for a page's line: `quoted` (one line, bounded, escaped, in double quotes) unless Medic wrote it."""
    return single_line(text) if isinstance(text, MedicText) else quoted(text, limit)


def quoted(text: str, limit: int = MAX_REASON_CHARS, *, ascii_only: bool = False) -> str:
    """Someone else's words inside Medic's sentence: one line, bounded, in double quotes (JSON string escaping).
    ``ascii_only`` shows every character outside ASCII escaped (``\\u001b``): nothing is dropped, nothing renders;
    otherwise control and format characters (ANSI escapes, bidi overrides) are dropped and the rest is kept."""
    flat = one_line(text, limit) if ascii_only else short(one_line_text(text), limit)
    return json.dumps(flat, ensure_ascii=ascii_only)


def shown(value: Any, limit: int = 40) -> str:
    """A value as it may appear in a reason: quoted (newlines escaped) and truncated."""
    text = value if isinstance(value, str) else repr(value)
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def validation_problems(error: ValidationError, limit: int = 5) -> str:
    """A pydantic error as one line naming each bad field (at most ``limit`` of them): `detail.ClusterName: ...`."""
    return "; ".join(f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}"
                     for item in error.errors()[:limit])
