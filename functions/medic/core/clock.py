"""The one place handlers read the time (the replay harness moves it with each event's time), and times from the
epoch milliseconds AWS's job events carry (SageMaker training jobs, AWS Batch)."""

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)


def epoch_millis(value: str | int | float | None) -> datetime | None:
    try:
        millis = float(value) if value is not None and not isinstance(value, bool) else None
    except ValueError:
        return None
    if millis is None or not 0 < millis < 1e14:  # before year 5138: a time, not garbage
        return None
    return datetime.fromtimestamp(millis / 1000, UTC)
