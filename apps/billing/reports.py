"""Staff reports (the admin billing portal): revenue and utilization by GPU model and organization.

Revenue: the amounts of finalized and paid invoices (lines, before tax) for periods in [from, to], grouped by GPU
model or organization, per currency. Utilization: GPU-hours (usage seconds × `gpu_equivalents` / 3600) of usage
records starting in [since, until), grouped the same way. Both are single GROUP BY queries.
"""
from __future__ import annotations

import datetime as dt

from django.db import connection
from django.db.models import Sum

from .models import InvoiceLine

GROUPS = {"gpu_model": "gpu_model", "organization": "organization"}


def revenue_report(*, period_from: str, period_to: str, group_by: str) -> list[dict]:
    key = "gpu_model" if group_by == "gpu_model" else "invoice__organization__slug"
    rows = (InvoiceLine.objects.filter(invoice__status__in=["finalized", "paid"], invoice__period__gte=period_from,
                                       invoice__period__lte=period_to)
            .values(key, "invoice__currency").annotate(amount=Sum("amount")).order_by(key, "invoice__currency"))
    return [{"key": row[key] or "", "currency": row["invoice__currency"], "amount": row["amount"]} for row in rows]


def utilization_report(*, since: dt.datetime, until: dt.datetime, group_by: str) -> list[dict]:
    column = "r.gpu_model" if group_by == "gpu_model" else "o.slug"
    sql = f"""
        SELECT {column} AS key, sum(extract(epoch FROM r."end" - r.start) * r.gpu_equivalents) / 3600 AS hours
        FROM billing_usagerecord r JOIN tenancy_organization o ON o.id = r.organization_id
        WHERE r.start >= %s AND r.start < %s GROUP BY 1 ORDER BY 1"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [since, until])
        return [{"key": key or "", "gpu_hours": round(hours or 0, 4)} for key, hours in cursor.fetchall()]
