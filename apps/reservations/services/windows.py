"""Lease windows: parsing and validation (RW-031, RW-032).

Accepted forms for `start` / `end`:

* ISO 8601 with an offset or ``Z`` (``2026-03-01T11:00:00+02:00``): converted to UTC;
* ``YYYY-MM-DD HH:MM`` or ISO 8601 without an offset: wall-clock time in the lease's `time_zone` (IANA name,
  default UTC), converted with the zone's rules for that date, so a window written across a daylight-saving change
  has its real length (Europe/Berlin 2026-03-28 12:00 → 2026-03-29 12:00 is 23 h). A wall-clock time that does
  not exist (spring-forward gap) or exists twice (fall-back) is refused: give an offset;
* ``now`` (start only, or end only when start is later): the current UTC time truncated to the minute
  (OpenStack Blazar's convention).

Rules: start may not be before the current minute (a start in the current minute is accepted); end must be
strictly after start; the window is at most RESERVATIONS_MAX_LEASE_DAYS long (so nobody holds a host for
centuries). Errors: 400 `invalid_lease_window` (field errors name `start` / `end` / `time_zone`; also an instant
outside the years 1-9999 in UTC, e.g. year 1 with a positive offset),
400 `lease_start_in_past`, 400 `lease_too_long`.
"""
from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apps.core import clock

from .. import conf
from ..errors import Code, InvalidWindow

FORMATS = ("%Y-%m-%d %H:%M",)


def zone_get(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidWindow(f"Unknown time zone {name!r}.", errors={"time_zone": ["unknown IANA time zone"]}) \
            from exc


def current_minute() -> dt.datetime:
    return clock.now().replace(second=0, microsecond=0)


def _localize(naive: dt.datetime, tz: ZoneInfo, field: str) -> dt.datetime:
    first, second = naive.replace(tzinfo=tz, fold=0), naive.replace(tzinfo=tz, fold=1)
    if first.utcoffset() != second.utcoffset():
        there = first.astimezone(dt.UTC).astimezone(tz).replace(tzinfo=None) == naive
        msg = "is ambiguous (it occurs twice)" if there else "does not exist (daylight-saving gap)"
        raise InvalidWindow(f"{field} {naive:%Y-%m-%d %H:%M} {msg} in {tz.key}; give a UTC offset.",
                            errors={field: [f"{msg} in {tz.key}"]})
    return _utc(first, field)


def _utc(value: dt.datetime, field: str) -> dt.datetime:
    try:
        return clock.to_utc(value)
    except OverflowError:
        raise InvalidWindow(f"{field} is outside the years 1 to 9999 in UTC.",
                            errors={field: ["outside the years 1 to 9999 in UTC"]}) from None


def parse_instant(value, tz: ZoneInfo, field: str) -> dt.datetime:
    """One instant (UTC, aware) from a datetime or one of the documented string forms."""
    if isinstance(value, dt.datetime):
        return _utc(value, field) if value.tzinfo else _localize(value, tz, field)
    text = str(value or "").strip()
    if text.lower() == "now":
        return current_minute()
    for fmt in FORMATS:
        try:
            return _localize(dt.datetime.strptime(text, fmt), tz, field)
        except ValueError:
            pass
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00")) if "T" in text or "+" in text else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise InvalidWindow(f"{field} must be 'YYYY-MM-DD HH:MM', ISO 8601 or 'now'.",
                            errors={field: ["format: 'YYYY-MM-DD HH:MM' (lease time zone), ISO 8601, or 'now'"]})
    return _utc(parsed, field) if parsed.tzinfo else _localize(parsed, tz, field)


def window_check(start: dt.datetime, end: dt.datetime, *, check_start: bool = True) -> None:
    if check_start and start < current_minute():
        raise InvalidWindow("Start date must not be earlier than the current minute.", code=Code.START_IN_PAST,
                            errors={"start": ["in the past"]})
    if end <= start:
        raise InvalidWindow("End must be after start (the window is [start, end)).",
                            errors={"end": ["must be after start"]})
    if end - start > dt.timedelta(days=conf.max_lease_days()):
        raise InvalidWindow(f"A lease may last at most {conf.max_lease_days()} days.", code=Code.TOO_LONG,
                            errors={"end": [f"at most {conf.max_lease_days()} days after start"]})


def window_parse(start, end, time_zone: str = "UTC") -> tuple[dt.datetime, dt.datetime]:
    """(start, end) in UTC from user input; raises 400 as documented in the module."""
    tz = zone_get(time_zone)
    s, e = parse_instant(start, tz, "start"), parse_instant(end, tz, "end")
    window_check(s, e)
    return s, e
