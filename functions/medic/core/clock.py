"""The one place handlers read the time (the replay harness moves it with each event's time)."""

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)
