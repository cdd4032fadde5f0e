"""A Celery beat scheduler that runs the schedule in one beat process only, however many are started.

Each beat process holds a dedicated PostgreSQL connection and tries `pg_try_advisory_lock` before every tick:
the holder sends the due tasks; any other beat finds the lock taken, sends nothing and tries again after
`BEAT_STANDBY_RETRY_SECONDS`. The lock belongs to the connection, so a beat that dies (even by SIGKILL) or loses
its database connection releases it, and a standby takes over within the retry interval (ADR 1100).

The leader records when it last sent each entry (table `core_beat_last_run`, `apps.core.models.BeatLastRun`); a
beat that takes the lock over starts every entry from those times, so a task whose previous leader was killed a
moment after sending it is not sent again before its period is up.

Selected in the settings (`CELERY_BEAT_SCHEDULER`), so every `celery -A gpucloud beat` uses it.
"""

from __future__ import annotations

import datetime as dt
import logging

import environ
import psycopg
from celery.beat import PersistentScheduler
from django.conf import settings

log = logging.getLogger("gpucloud.beat")
#: pg_advisory_lock key: the bytes "gpucbeat" as a signed 64-bit integer (any constant shared by all beats)
LOCK_KEY = int.from_bytes(b"gpucbeat", "big", signed=True)


def _connect() -> psycopg.Connection:
    """A session of its own on PostgreSQL: `BEAT_DATABASE_URL` when set, else the default database. Never through
    a transaction pooler (PgBouncer `pool_mode = transaction`): the lock would stay on a pooled server session
    that other clients, other beats among them, then use (ADR 1140)."""
    db = environ.Env.db_url_config(settings.BEAT_DATABASE_URL) if settings.BEAT_DATABASE_URL \
        else settings.DATABASES["default"]
    params = {
        "dbname": db["NAME"],
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
        "host": db.get("HOST") or None,
        "port": db.get("PORT") or None,
        "autocommit": True,
        "connect_timeout": 5,
        "application_name": "gpucloud-beat",
    }
    return psycopg.connect(**{k: v for k, v in params.items() if v is not None})


class SingletonScheduler(PersistentScheduler):
    """`PersistentScheduler` whose tick runs only while this process holds the beat advisory lock."""

    def __init__(self, *args, **kwargs):
        self._conn: psycopg.Connection | None = None
        self._leader = False
        super().__init__(*args, **kwargs)

    def _holds_lock(self) -> bool:
        try:
            if self._conn is None or self._conn.closed:
                self._conn, self._leader = _connect(), False
            if self._leader:
                self._conn.execute("SELECT 1")  # the lock lives as long as this connection does
            else:
                self._leader = bool(
                    self._conn.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_KEY]).fetchone()[0]
                )
                if self._leader:
                    log.info("beat_lock_acquired")
                    self._load_last_runs()
        except psycopg.Error as exc:
            if self._leader:
                log.warning("beat_lock_lost", extra={"error": str(exc)})
            self._leader = False
            if self._conn is not None:
                self._conn.close()
            self._conn = None
        return self._leader

    def _load_last_runs(self) -> None:
        """Start each entry from the time the previous leader last sent it, when that is later than this beat's
        own record. Without the record (a failed read: logged) the entries keep this beat's own times; without a
        schedule yet (the lock taken before the schedule store is open) there is nothing to move."""
        if getattr(self, "_store", None) is None:
            return
        try:
            stored = dict(self._conn.execute("SELECT name, last_run_at FROM core_beat_last_run").fetchall())
        except psycopg.Error as exc:
            log.warning("beat_last_run_not_read", extra={"error": str(exc)})
            return
        moved = []
        for name, entry in self.schedule.items():
            at = stored.get(name)
            own = entry.last_run_at
            if own is not None and own.tzinfo is None:
                own = own.replace(tzinfo=dt.timezone.utc)
            if at is not None and (own is None or at > own):
                entry.last_run_at = at
                moved.append(name)
        if moved:
            self._heap = None  # rebuilt from the entries' new times on the next tick
            log.info("beat_schedule_taken_over", extra={"entries": len(moved)})

    def reserve(self, entry):
        """Record the send for a later leader (see the module docstring). A failed write is logged and the task
        still goes out: a takeover may then send it once early, as before the record existed."""
        new_entry = super().reserve(entry)
        at = new_entry.last_run_at
        if at.tzinfo is None:
            at = at.replace(tzinfo=dt.timezone.utc)
        if self._conn is not None:
            try:
                self._conn.execute(
                    "INSERT INTO core_beat_last_run (name, last_run_at) VALUES (%s, %s) ON CONFLICT (name)"
                    " DO UPDATE SET last_run_at = GREATEST(core_beat_last_run.last_run_at, EXCLUDED.last_run_at)",
                    [new_entry.name, at],
                )
            except psycopg.Error as exc:
                log.warning("beat_last_run_not_recorded", extra={"entry": entry.name, "error": str(exc)})
        return new_entry

    def tick(self, *args, **kwargs):
        if not self._holds_lock():
            return float(settings.BEAT_STANDBY_RETRY_SECONDS)
        return min(super().tick(*args, **kwargs), float(settings.BEAT_STANDBY_RETRY_SECONDS))

    def close(self):
        super().close()
        if self._conn is not None:
            self._conn.close()  # releases the lock at once for a standby
            self._conn = None
