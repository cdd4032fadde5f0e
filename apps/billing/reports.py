"""Staff reports (the admin billing portal): revenue and utilization by GPU model and organization.

Revenue: the amounts of finalized and paid invoices (lines, before tax) for periods in [from, to], net of the credit
notes issued against those invoices (their amount before tax, counted in the period of the invoice they correct),
grouped by GPU model or organization, per currency. A credit note names no GPU model, so by GPU model it nets in the
row with the empty key (with the lines that name none: adjustments, public IPs); either way the rows add up to the
net revenue. Utilization: GPU-hours (usage seconds × `gpu_equivalents` / 3600) of usage records starting in
[since, until), grouped the same way. Both are GROUP BY queries.
"""
from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import Decimal

from django.db import connection
from django.db.models import Sum

from apps.core.errors import ValidationFailed

from .errors import Code
from .models import CreditNote, InvoiceLine
from .states import InvoiceStatus

GROUPS = {"gpu_model": "gpu_model", "organization": "organization"}
BILLED = (InvoiceStatus.FINALIZED, InvoiceStatus.PAID)


def revenue_report(*, period_from: str, period_to: str, group_by: str) -> list[dict]:
    """``[{"key", "currency", "amount"}]`` ordered by key and currency: invoice lines minus credit notes (module
    doc); `key` is the organization's slug or the GPU model ("" for what names none)."""
    if period_from > period_to:
        raise ValidationFailed(f"period_from {period_from} is after period_to {period_to}.", code=Code.INVALID_PERIOD,
                               errors={"period_to": ["must not be before period_from"]})
    invoices = {"invoice__status__in": BILLED, "invoice__period__gte": period_from,
                "invoice__period__lte": period_to}
    key = "gpu_model" if group_by == "gpu_model" else "invoice__organization__slug"
    totals: dict = defaultdict(Decimal)
    for row in (InvoiceLine.objects.filter(**invoices).values(key, "invoice__currency")
                .annotate(amount=Sum("amount")).order_by()):
        totals[(row[key] or "", row["invoice__currency"])] += row["amount"]
    note_key = "organization__slug" if group_by != "gpu_model" else None
    for row in (CreditNote.objects.filter(**invoices).values(*filter(None, [note_key]), "currency")
                .annotate(amount=Sum("amount")).order_by()):
        totals[(row[note_key] if note_key else "", row["currency"])] -= row["amount"]
    return [{"key": k, "currency": currency, "amount": amount} for (k, currency), amount in sorted(totals.items())]


def utilization_report(*, since: dt.datetime, until: dt.datetime, group_by: str) -> list[dict]:
    column = "r.gpu_model" if group_by == "gpu_model" else "o.slug"
    sql = f"""
        SELECT {column} AS key, sum(extract(epoch FROM r."end" - r.start) * r.gpu_equivalents) / 3600 AS hours
        FROM billing_usagerecord r JOIN tenancy_organization o ON o.id = r.organization_id
        WHERE r.start >= %s AND r.start < %s GROUP BY 1 ORDER BY 1"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [since, until])
        return [{"key": key or "", "gpu_hours": round(hours or 0, 4)} for key, hours in cursor.fetchall()]
