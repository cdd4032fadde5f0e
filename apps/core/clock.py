"""The one clock of gpucloud.

All code takes the current time from `now()` so tests can move it (time-machine patches
`datetime.datetime.now` and `time.time`, which this reads). Returns a timezone-aware UTC datetime.
"""
import datetime as dt


def now() -> dt.datetime:
    """Current time, timezone-aware, in UTC."""
    return dt.datetime.now(dt.UTC)


def to_utc(value: dt.datetime) -> dt.datetime:
    """An aware datetime as the same instant in UTC (a naive one is taken as UTC).

    Raises `OverflowError` when the instant has no UTC representation in years 1-9999 (e.g. year 1 with a
    positive offset); callers turn that into their 400.
    """
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)
