"""Billing periods: calendar months in the organization's billing time zone (docs/billing.md).

A period is named "YYYY-MM"; its bounds are the UTC instants of local midnight on the 1st of the month and of the
next month (`zoneinfo`), so the month's length follows daylight-saving changes (e.g. March 2026 in
Europe/Berlin is 743 hours). Consecutive periods share a bound: none is skipped and none overlaps (RW-055).
"""
from __future__ import annotations

import datetime as dt
import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apps.core.errors import ValidationFailed

from .errors import Code

_LABEL = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")


#: Years a period may name: the month after must exist, and so must the instants 15 h around the month.
YEARS = (1970, 9998)


def parse_period(label: str) -> tuple[int, int]:
    """"YYYY-MM" -> (year, month). 400 `invalid_period` for another form or a year outside `YEARS`."""
    match = _LABEL.match(label or "")
    if not match:
        raise ValidationFailed(f"Period {label!r} is not YYYY-MM.", code=Code.INVALID_PERIOD)
    year = int(match.group(1))
    if not YEARS[0] <= year <= YEARS[1]:
        raise ValidationFailed(f"Period {label!r}: the year must be {YEARS[0]} to {YEARS[1]}.",
                               code=Code.INVALID_PERIOD)
    return year, int(match.group(2))


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationFailed(f"Unknown time zone {name!r}.", code=Code.INVALID_PERIOD) from None


def next_period(label: str) -> str:
    year, month = parse_period(label)
    return f"{year + month // 12}-{month % 12 + 1:02d}"


def previous_period(label: str) -> str:
    year, month = parse_period(label)
    return f"{year - 1}-12" if month == 1 else f"{year}-{month - 1:02d}"


def period_bounds(label: str, tz: str = "UTC") -> tuple[dt.datetime, dt.datetime]:
    """(start, end) in UTC of the month `label` in time zone `tz`, half-open."""
    year, month = parse_period(label)
    nyear, nmonth = parse_period(next_period(label))
    z = zone(tz)
    start = dt.datetime(year, month, 1, tzinfo=z).astimezone(dt.UTC)
    end = dt.datetime(nyear, nmonth, 1, tzinfo=z).astimezone(dt.UTC)
    return start, end


def period_of(instant: dt.datetime, tz: str = "UTC") -> str:
    """The period containing `instant` for an organization in `tz` (RW-056: 2024-02-29T16:00Z is March in Tokyo)."""
    local = instant.astimezone(zone(tz))
    return f"{local.year}-{local.month:02d}"
