"""A Celery beat scheduler that runs the schedule in one beat process only, however many are started.

Each beat process holds a dedicated PostgreSQL connection and tries `pg_try_advisory_lock` before every tick:
the holder sends the due tasks; any other beat finds the lock taken, sends nothing and tries again after
`BEAT_STANDBY_RETRY_SECONDS`. The lock belongs to the connection, so a beat that dies (even by SIGKILL) or loses
its database connection releases it, and a standby takes over within the retry interval (ADR 1100).

Selected in the settings (`CELERY_BEAT_SCHEDULER`), so every `celery -A gpucloud beat` uses it.
"""

from __future__ import annotations

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
        except psycopg.Error as exc:
            if self._leader:
                log.warning("beat_lock_lost", extra={"error": str(exc)})
            self._leader = False
            if self._conn is not None:
                self._conn.close()
            self._conn = None
        return self._leader

    def tick(self, *args, **kwargs):
        if not self._holds_lock():
            return float(settings.BEAT_STANDBY_RETRY_SECONDS)
        return min(super().tick(*args, **kwargs), float(settings.BEAT_STANDBY_RETRY_SECONDS))

    def close(self):
        super().close()
        if self._conn is not None:
            self._conn.close()  # releases the lock at once for a standby
            self._conn = None
