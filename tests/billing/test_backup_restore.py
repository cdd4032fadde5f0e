"""The backup and restore runbook (docs/deployment.md, "Backup and restore") works: `pg_dump --format=custom` of a
database holding allocations, finalized invoices and a chained audit log, `pg_restore` into a fresh database,
and the restored database holds every row of every table unchanged, its audit chain verifies with
`manage.py audit_verify` at the same head, its guards still refuse to rewrite the audit log, a new event links on
to the restored head, and `migrate --check` finds nothing to apply."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from decimal import Decimal

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from apps.audit.selectors import audit_chain_verify
from apps.billing.models import Invoice
from apps.billing.services import invoice_run_execute
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim
from tests.scheduling import fleet as fleet_rows

from .conftest import H100, book, collect, make_org, utc

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(not (shutil.which("pg_dump") and shutil.which("pg_restore")),
                                 reason="pg_dump/pg_restore not installed (Debian: postgresql-client)")]


def _conninfo(name: str) -> dict:
    db = connection.settings_dict
    info = {"dbname": name, "host": db.get("HOST") or "127.0.0.1", "port": str(db.get("PORT") or 5432)}
    if db.get("USER"):
        info["user"] = db["USER"]
    if db.get("PASSWORD"):
        info["password"] = db["PASSWORD"]
    return info


def _url(info: dict) -> str:
    auth = f"{info['user']}:{info.get('password', '')}@" if "user" in info else ""
    return f"postgres://{auth}{info['host']}:{info['port']}/{info['dbname']}"


def _pg_env(info: dict) -> dict:
    env = dict(os.environ, PGHOST=info["host"], PGPORT=info["port"])
    if "user" in info:
        env["PGUSER"] = info["user"]
    if "password" in info:
        env["PGPASSWORD"] = info["password"]
    return env


def _fingerprint(info: dict) -> dict[str, tuple[int, str]]:
    """{table: (rows, md5 of its rows as text in sorted order)} for every table of the public schema, and
    {sequence: (last value, '')} for every sequence."""
    out = {}
    with psycopg.connect(**info, autocommit=True) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1").fetchall()]
        for t in tables:
            out[t] = conn.execute(
                f'SELECT count(*), md5(coalesce(string_agg(r::text, E\'\\n\' ORDER BY r::text), \'\'))'
                f' FROM "{t}" r').fetchone()
        for name, value in conn.execute("SELECT sequencename, last_value FROM pg_sequences"
                                        " WHERE schemaname = 'public'").fetchall():
            out[f"sequence:{name}"] = (value, "")
    return out


def _manage(info: dict, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, DATABASE_URL=_url(info), PYTHONPATH=str(settings.BASE_DIR))
    return subprocess.run([sys.executable, "manage.py", *args], cwd=settings.BASE_DIR, env=env,
                          capture_output=True, text=True, timeout=120)


def _business(tiers, fleet) -> None:
    """Allocations in the ledger, two months of finalized invoices (numbers from the gap-free sequence), and the
    audit events the services write on the way."""
    org, project = make_org("acme")
    book(utc(2024, 1, 1), {(H100, "standard", "on_demand"): "2.50"})
    fleet.run(org, project, "vm1", utc(2024, 1, 3), utc(2024, 2, 10))
    collect(utc(2024, 1, 1), utc(2024, 3, 1))
    invoice_run_execute(period="2024-01")
    invoice_run_execute(period="2024-02")
    h = fleet_rows.host(gpus=2)
    for gpu in h.gpus.all():
        allocations_claim(consumer=ConsumerRef(id=uuid.uuid4(), consumer_type="instance", project_id=project.id),
                          specs=[AllocationSpec(host_id=h.id, resource_class="gpu", gpu_id=gpu.id)])


def test_pg_dump_and_pg_restore_keep_ledger_invoices_and_audit_chain(tiers, fleet, tmp_path):
    _business(tiers, fleet)
    invoices = list(Invoice.objects.order_by("period").values_list("period", "status", "number", "total"))
    assert invoices == [("2024-01", "finalized", 1, Decimal("1740.00")), ("2024-02", "finalized", 2,
                                                                           Decimal("540.00"))]
    report = audit_chain_verify()
    assert report.ok and report.checked >= 3

    source = _conninfo(connection.settings_dict["NAME"])
    target = _conninfo(f"{source['dbname']}_restored")
    dump = tmp_path / "gpucloud.dump"
    subprocess.run(["pg_dump", "--format=custom", "--file", str(dump), source["dbname"]], env=_pg_env(source),
                   check=True, timeout=120)
    with psycopg.connect(**{**source, "dbname": "postgres"}, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{target["dbname"]}"')
        admin.execute(f'CREATE DATABASE "{target["dbname"]}"')
    try:
        subprocess.run(["pg_restore", "--exit-on-error", "--no-owner", "--dbname", target["dbname"], str(dump)],
                       env=_pg_env(target), check=True, timeout=120)
        before, after = _fingerprint(source), _fingerprint(target)
        assert after == before
        for table in ("scheduling_allocation", "billing_invoice", "billing_invoiceline", "audit_auditevent",
                      "audit_auditchainlink"):
            assert before[table][0] > 0, f"{table} is empty: the test proves nothing about it"

        verified = _manage(target, "audit_verify")
        assert verified.returncode == 0, verified.stderr
        assert verified.stdout.strip() == (f"audit chain intact: {report.checked} events, head seq "
                                           f"{report.head_seq} hash {report.head_hash}")
        check = _manage(target, "migrate", "--check")
        assert check.returncode == 0, check.stdout + check.stderr

        with psycopg.connect(**target, autocommit=True) as conn:   # the guards came back with the data
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="audit events are append-only"):
                conn.execute("UPDATE audit_auditevent SET action = 'x'")
            with pytest.raises(psycopg.errors.RestrictViolation, match="cannot change"):
                conn.execute("UPDATE billing_invoice SET total = 0 WHERE status = 'finalized'")
        appended = _manage(target, "shell", "-c", "from apps.audit.services import audit_record; "
                                                  "audit_record(actor=None, action='ops.restore.check')")
        assert appended.returncode == 0, appended.stderr
        verified = _manage(target, "audit_verify")
        assert verified.returncode == 0, verified.stderr
        assert f"audit chain intact: {report.checked + 1} events, head seq {report.head_seq + 1}" in verified.stdout
    finally:
        with psycopg.connect(**{**source, "dbname": "postgres"}, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{target["dbname"]}" WITH (FORCE)')
