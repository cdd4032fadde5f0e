"""The one clock of gpucloud.

All code takes the current time from `now()` so tests can move it (time-machine patches
`datetime.datetime.now` and `time.time`, which this reads). Returns a timezone-aware UTC datetime.
"""
import datetime as dt


def now() -> dt.datetime:
    """Current time, timezone-aware, in UTC."""
    return dt.datetime.now(dt.UTC)
