"""PostgreSQL through Debian's PgBouncer in transaction pooling (ADR 1140): the application's transactions (ledger
row locks and exclusion constraints, the audit chain's deferred triggers and transaction-level advisory lock,
chunked reads without server-side cursors) run from more threads than the pool has server sessions and come out
right; beat's session-level lock does not survive a transaction pooler, which is why beat gets a connection of
its own (`BEAT_DATABASE_URL`)."""
from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from gpucloud.beat import SingletonScheduler
from tests.e2e.stack import poll
from tests.scheduling import fleet

PGBOUNCER = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None)
POOL_SIZE = 2
THREADS = 6
ROUNDS = 8

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(PGBOUNCER is None, reason="pgbouncer not installed (Debian: pgbouncer)")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def pgbouncer():
    """A PgBouncer in transaction pooling on a free port in front of the test database's server: `POOL_SIZE`
    server sessions per database and user; database `beatpool` is the test database with one server session.
    Yields (port, the user clients connect as)."""
    db = connection.settings_dict
    user = db.get("USER") or getpass.getuser()
    port = _free_port()
    workdir = Path(tempfile.mkdtemp(prefix="gpucloud-pgbouncer-"))
    (workdir / "users.txt").write_text(f'"{user}" ""\n')
    (workdir / "pgbouncer.ini").write_text(f"""[databases]
beatpool = host={db.get('HOST') or '127.0.0.1'} port={db.get('PORT') or 5432} dbname={db['NAME']} pool_size=1
* = host={db.get('HOST') or '127.0.0.1'} port={db.get('PORT') or 5432}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {workdir}/users.txt
admin_users = {user}
pool_mode = transaction
default_pool_size = {POOL_SIZE}
max_client_conn = 100
ignore_startup_parameters = extra_float_digits
logfile = {workdir}/pgbouncer.log
pidfile = {workdir}/pgbouncer.pid
""")
    cmd = [PGBOUNCER, str(workdir / "pgbouncer.ini")]
    if os.geteuid() == 0:   # PgBouncer refuses to run as root: drop to nobody, who must read and write workdir
        cmd[1:1] = ["-u", "nobody"]
        shutil.chown(workdir, "nobody")
        for f in workdir.iterdir():
            shutil.chown(f, "nobody")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = (workdir / "pgbouncer.log").read_text() if (workdir / "pgbouncer.log").exists() else ""
                    pytest.fail(f"pgbouncer did not start: {log[-2000:]}")
                time.sleep(0.1)
        yield port, user
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


def _admin(port: int, user: str, command: str) -> list[dict]:
    with psycopg.connect(host="127.0.0.1", port=port, user=user, dbname="pgbouncer", autocommit=True,
                         prepare_threshold=None) as conn:
        cur = conn.cursor()
        cur.execute(command)
        if cur.description is None:   # a command (KILL, PAUSE, ...): no rows
            return []
        names = [c.name for c in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def test_the_application_runs_through_pgbouncer_in_transaction_pooling(pgbouncer):
    port, user = pgbouncer
    fleet.project("pgb")
    host = fleet.host(gpus=2)
    url = f"postgres://{user}@127.0.0.1:{port}/{connection.settings_dict['NAME']}"
    env = dict(os.environ, DATABASE_URL=url, DB_TRANSACTION_POOLING="true", DB_CONN_MAX_AGE="60",
               PYTHONPATH=str(settings.BASE_DIR))
    done = subprocess.run([sys.executable, "-m", "tests.core.pgbouncer_workload", str(host.pk), str(ROUNDS),
                           str(THREADS)], cwd=settings.BASE_DIR, env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["errors"] == []
    assert out["claimed"] + out["refused"] == THREADS * ROUNDS and out["claimed"] >= ROUNDS
    assert out["chain_ok"] and out["chain_checked"] == THREADS * ROUNDS
    assert out["server_side_cursors_disabled"] is True and out["iterated"] == [True]
    assert out["timezones"] == ["UTC"]   # Django's per-session time zone follows each transaction's session
    from apps.scheduling.models import Allocation
    assert not Allocation.objects.filter(period__upper_inf=True).exists()   # every claim was released
    pools = [p for p in _admin(port, user, "SHOW POOLS") if p["database"] == connection.settings_dict["NAME"]]
    assert len(pools) == 1
    servers = [s for s in _admin(port, user, "SHOW SERVERS") if s["database"] == connection.settings_dict["NAME"]]
    assert 1 <= len(servers) <= POOL_SIZE   # 6 threads' transactions went through at most 2 server sessions
    stats = {s["database"]: s for s in _admin(port, user, "SHOW STATS")}
    assert stats[connection.settings_dict["NAME"]]["total_xact_count"] >= THREADS * ROUNDS * 3


def _beat() -> SingletonScheduler:
    """A beat scheduler's lock half alone (no Celery app): `_holds_lock()` as `tick()` calls it."""
    scheduler = SingletonScheduler.__new__(SingletonScheduler)
    scheduler._conn, scheduler._leader = None, False
    return scheduler


def _close(*beats: SingletonScheduler) -> None:
    for b in beats:
        if b._conn is not None:
            b._conn.close()
            b._conn = None


def test_beat_lock_needs_its_own_session_not_a_transaction_pooler(pgbouncer, settings):
    port, user = pgbouncer
    db = connection.settings_dict
    settings.BEAT_DATABASE_URL = f"postgres://{user}@127.0.0.1:{port}/beatpool"   # one pooled server session
    a, b = _beat(), _beat()
    try:
        # through the pooler both beats "hold" the lock: each one's statement ran on the same pooled server
        # session, which holds it (a session-level lock is re-entrant): both would send every periodic task
        assert a._holds_lock() is True and b._holds_lock() is True
    finally:
        _close(a, b)
    # both beats gone (their client connections closed), the pooled server session still holds the lock: a beat
    # connected straight to PostgreSQL would never take over
    settings.BEAT_DATABASE_URL = (f"postgres://{user}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/"
                                  f"{db['NAME']}")
    direct = _beat()
    try:
        assert direct._holds_lock() is False
    finally:
        _close(direct)
    _admin(port, user, "KILL beatpool")   # the operator's way out: drop the pooler's sessions of that database
    a, b = _beat(), _beat()
    try:
        poll(a._holds_lock, timeout=5, what="a beat to take the lock once the pooled session is gone")
        assert b._holds_lock() is False   # straight to PostgreSQL: one leader
        assert a._conn.info.port == int(db.get("PORT") or 5432)
        _close(a)   # the leader dies: the standby takes over once PostgreSQL has ended the leader's session
        poll(b._holds_lock, timeout=5, what="the standby to take the lock")
    finally:
        _close(a, b)
