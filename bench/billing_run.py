"""Benchmark: rate and invoice 10,000 organizations with 1,000,000 usage records (target < 60 s).

Usage: python bench/billing_run.py [--orgs 10000] [--records-per-org 100] [--keep]
Creates a separate database (BENCH_DATABASE_URL, default postgres://127.0.0.1:5432/gpucloud_bench_billing), migrates
it, seeds it with set-based INSERT ... SELECT (not timed): organizations in four billing time zones (UTC,
Europe/Berlin, Asia/Tokyo, America/New_York; 10 % bill in EUR, a third on the premium tier), one project each,
ten resources per organization each running ten metering hours in March 2026 on one of four SKUs, two price books
per currency (the price changes on 2026-03-15, so usage is split), and two hours of provider downtime on 10 % of
the organizations. Then it times one invoice run for 2026-03 (rating, SLA, credits, totals, gap-free numbering)
and a second run (idempotency: nothing new). Last stdout line: one JSON object with `seconds` (the first run).
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
BENCH_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://127.0.0.1:5432/gpucloud_bench_billing")
os.environ["DATABASE_URL"] = BENCH_URL

SKUS = ["gpu:gpu_count=1,model=H100-SXM5-80GB", "gpu:gpu_count=8,model=H100-SXM5-80GB",
        "mig:model=H100-SXM5-80GB,profile=3g.40gb", "public_ip"]
PRICES = {  # USD per hour before and after 2026-03-15; EUR prices are 0.9x
    SKUS[0]: ("2.49", "2.29"), SKUS[1]: ("19.92", "18.32"), SKUS[2]: ("0.93", "0.87"), SKUS[3]: ("0.005", "0.005")}


def recreate_database() -> None:
    import psycopg

    name = BENCH_URL.rsplit("/", 1)[1]
    admin = BENCH_URL.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


USAGE_SQL = """
INSERT INTO billing_usagerecord (id, organization_id, project_id, resource_type, resource_id, sku, pricing_model,
  sla_tier, start, "end", run_id, source, source_key, gpu_model, gpu_equivalents, units, recorded_at)
SELECT gen_random_uuid(), o.id, p.id, 'instance', o.slug || '-vm-' || (g / 10), (%(skus)s::text[])[1 + (g / 10) %% 4],
       'on_demand', o.default_sla_tier,
       timestamptz '2026-03-01 00:00+00' + (g / 10) * interval '62 hours' + (g %% 10) * interval '1 hour',
       timestamptz '2026-03-01 01:00+00' + (g / 10) * interval '62 hours' + (g %% 10) * interval '1 hour',
       'bench:' || o.slug || ':' || (g / 10), 'bench', 'bench:' || o.slug || ':' || g, 'H100-SXM5-80GB',
       (ARRAY[1, 8, 0.375, 0])[1 + (g / 10) %% 4], 1, now()
FROM tenancy_organization o JOIN tenancy_project p ON p.organization_id = o.id
CROSS JOIN generate_series(0, %(per_org)s - 1) AS g
"""

DOWNTIME_SQL = """
INSERT INTO billing_downtimeinterval (id, resource_type, resource_id, start, "end", source, source_key, reason)
SELECT gen_random_uuid(), 'instance', o.slug || '-vm-0', timestamptz '2026-03-01 03:00+00',
       timestamptz '2026-03-01 05:00+00', 'bench', 'bench:' || o.slug, 'bench host fault'
FROM tenancy_organization o WHERE right(o.slug, 1) = '1'
"""


def seed(orgs: int, per_org: int) -> None:
    """Set-based seeding (not timed): Django bulk_create for 10k organizations/projects, INSERT ... SELECT for the
    usage records and downtime, then ANALYZE."""
    import datetime as dt
    from decimal import Decimal

    from django.db import connection

    from apps.billing.models import Price, PriceBook
    from apps.tenancy.models import Organization, Project

    zones = ["UTC", "Europe/Berlin", "Asia/Tokyo", "America/New_York"]
    organizations = [Organization(slug=f"bench-{i:05d}", name=f"Bench {i}", billing_timezone=zones[i % 4],
                                  currency="EUR" if i % 10 == 0 else "USD",
                                  default_sla_tier="premium" if i % 3 == 0 else "standard") for i in range(orgs)]
    Organization.objects.bulk_create(organizations, batch_size=2000)
    Project.objects.bulk_create([Project(organization=o, slug="main", name="Main") for o in organizations],
                                batch_size=2000)
    for currency, factor in (("USD", Decimal(1)), ("EUR", Decimal("0.9"))):
        for index, start in enumerate((dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 3, 15, tzinfo=dt.UTC))):
            book = PriceBook.objects.create(name=f"bench {index}", currency=currency, effective_from=start)
            Price.objects.bulk_create([Price(book=book, sku=sku, sla_tier=tier, pricing_model="on_demand",
                                             unit_price=Decimal(PRICES[sku][index]) * factor * (
                                                 Decimal("1.2") if tier == "premium" else 1))
                                       for sku in SKUS for tier in ("standard", "premium")])
    with connection.cursor() as cursor:
        cursor.execute(USAGE_SQL, {"skus": SKUS, "per_org": per_org})
        cursor.execute(DOWNTIME_SQL)
        cursor.execute("ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--orgs", type=int, default=10_000)
    parser.add_argument("--records-per-org", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="keep the bench database afterwards")
    args = parser.parse_args()
    recreate_database()
    import django

    django.setup()
    from django.core.management import call_command

    t0 = time.perf_counter()
    call_command("migrate", verbosity=0)
    seed(args.orgs, args.records_per_org)
    seeding = time.perf_counter() - t0

    from apps.billing.models import Invoice, InvoiceLine, SlaReport
    from apps.billing.services import invoice_run_execute

    start = time.perf_counter()
    run = invoice_run_execute(period="2026-03")
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    rerun = invoice_run_execute(period="2026-03")
    rerun_seconds = time.perf_counter() - start
    result = {
        "seconds": round(seconds, 2), "rerun_seconds": round(rerun_seconds, 2), "seed_seconds": round(seeding, 2),
        "organizations": args.orgs, "usage_records": args.orgs * args.records_per_org,
        "invoices_finalized": run.invoices_finalized, "rerun_finalized": rerun.invoices_finalized,
        "invoice_lines": InvoiceLine.objects.count(), "sla_reports": SlaReport.objects.count(),
        "invoice_total_usd": str(sum(Invoice.objects.filter(currency="USD").values_list("total", flat=True))),
    }
    from django.db import connections

    connections.close_all()
    if not args.keep:
        recreate_database()
    print(f"rated and invoiced {result['organizations']} organizations / {result['usage_records']} usage records "
          f"in {result['seconds']} s (rerun {result['rerun_seconds']} s)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
