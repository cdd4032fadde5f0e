"""Beat schedule of the billing app (collected by gpucloud/celery.py).

Usage is collected once per metering period (BILLING_METERING_PERIOD_SECONDS), a twelfth of it after each of the
period's boundaries, so a closed period is recorded soon after it closes and a stop committed just before the
boundary is already visible: with the default hour that is hh:05, with 60 s every minute at ss = 05. A metering
period longer than an hour is still collected hourly at hh:05 (each collection records what has closed).
"""
from __future__ import annotations

import datetime as dt

from celery.schedules import crontab, schedstate
from celery.schedules import schedule as interval_schedule

from . import conf

#: The longest gap between two collections (a longer metering period is collected hourly).
COLLECT_AT_MOST_EVERY = 3600


class metering_boundaries(interval_schedule):  # noqa: N801 - named like Celery's schedules (crontab, solar)
    """Due `offset` seconds after every multiple of `run_every` seconds since the Unix epoch (UTC): the metering
    period's boundaries (`services.metering.last_closed_boundary`). Celery's `crontab` counts whole minutes
    only, so it cannot say "5 s after every minute". A run that was missed (beat stopped) is run once when beat
    is back; the next one is at the next boundary plus `offset`."""

    def __init__(self, run_every: float, offset: float, nowfun=None, app=None):
        super().__init__(run_every=run_every, nowfun=nowfun, app=app)
        self.offset = float(offset)

    def _latest(self, at: dt.datetime) -> float:
        """The latest due instant at or before `at` (Unix seconds)."""
        step = self.seconds
        return (at.timestamp() - self.offset) // step * step + self.offset

    def remaining_estimate(self, last_run_at: dt.datetime) -> dt.timedelta:
        now = self.maybe_make_aware(self.now())
        latest = self._latest(now)
        if self.maybe_make_aware(last_run_at).timestamp() < latest:
            return dt.timedelta(0)
        return dt.timedelta(seconds=latest + self.seconds - now.timestamp())

    def is_due(self, last_run_at: dt.datetime) -> schedstate:
        remaining = self.remaining_estimate(last_run_at).total_seconds()
        if remaining > 0:
            return schedstate(is_due=False, next=remaining)
        now = self.maybe_make_aware(self.now())
        return schedstate(is_due=True, next=self._latest(now) + self.seconds - now.timestamp())

    def __eq__(self, other) -> bool:
        return (isinstance(other, metering_boundaries) and self.run_every == other.run_every
                and self.offset == other.offset)

    def __hash__(self) -> int:
        return hash((self.run_every, self.offset))

    def __repr__(self) -> str:
        return f"<every {self.human_seconds}, {self.offset:g} s after the boundary>"

    def __reduce__(self):
        return self.__class__, (self.run_every.total_seconds(), self.offset, self.nowfun)


def collection_schedule() -> metering_boundaries:
    """The usage collection's schedule: every metering period (at most every hour), a twelfth of it after the
    boundary (hh:05 for an hour, ss = 05 for a minute)."""
    every = min(int(conf.get("BILLING_METERING_PERIOD_SECONDS")), COLLECT_AT_MOST_EVERY)
    return metering_boundaries(every, every / 12)


BEAT_SCHEDULE = {
    "billing-usage-collect": {"task": "billing.usage_record_collect_task", "schedule": collection_schedule(),
                              "options": {"queue": "billing"}},
    "billing-invoice-run-due": {"task": "billing.invoice_run_due_task", "schedule": crontab(minute=20),
                                "options": {"queue": "billing"}},
    "billing-invoice-preview": {"task": "billing.invoice_preview_task", "schedule": crontab(minute=40, hour=2),
                                "options": {"queue": "billing"}},
}
