"""SLA: monthly uptime per resource from provider-fault downtime, and the credit its tier's schedule gives.

SOURCE: issue 9 (credits automatic, on the next invoice); RW-050 (uptime measured in minutes, lower bounds
inclusive: exactly 99.0000 % is not "below 99.0"; the credit base is recurring charges only).
"""
from __future__ import annotations

from decimal import Decimal

from django.db import connection

from ..models import SlaReport, SlaTier
from ..money import round_money

HELD_SQL = """
WITH h AS (
  SELECT u.invoice_id, u.organization_id, u.project_id, u.resource_type, u.resource_id, u.sla_tier, u.currency,
         range_agg(u.span) AS held
  FROM billing_u u JOIN billing_dt dt ON dt.resource_type = u.resource_type AND dt.resource_id = u.resource_id
  GROUP BY 1, 2, 3, 4, 5, 6, 7
)
SELECT h.invoice_id, h.organization_id, h.project_id, h.resource_type, h.resource_id, h.sla_tier, h.currency,
       (SELECT sum(extract(epoch FROM upper(x) - lower(x))) FROM unnest(h.held) x) AS held_secs,
       (SELECT coalesce(sum(extract(epoch FROM upper(x) - lower(x))), 0) FROM unnest(h.held * dt.down) x)
         AS down_secs,
       (SELECT coalesce(sum(l.amount), 0) FROM billing_invoiceline l WHERE l.invoice_id = h.invoice_id
          AND l.kind = 'usage' AND l.resource_type = h.resource_type AND l.resource_id = h.resource_id
          AND l.sla_tier = h.sla_tier) AS billed
FROM h JOIN billing_dt dt ON dt.resource_type = h.resource_type AND dt.resource_id = h.resource_id
"""


def uptime_pct(held_minutes: Decimal, downtime_minutes: Decimal) -> Decimal:
    """100 × (held − down) / held, exact Decimal (no rounding before comparing with the schedule)."""
    if held_minutes <= 0:
        return Decimal(100)
    return Decimal(100) * (held_minutes - downtime_minutes) / held_minutes


def credit_pct_for(schedule: list[dict], uptime: Decimal) -> Decimal:
    """The credit percentage for `uptime`: the entry with the lowest `below` that uptime is strictly under;
    0 when uptime is at or above every `below` (RW-050: 99.0000 % with "below 99.0 → 25 %" is not under)."""
    matching = [entry for entry in schedule if uptime < Decimal(str(entry["below"]))]
    if not matching:
        return Decimal(0)
    return Decimal(str(min(matching, key=lambda entry: Decimal(str(entry["below"])))["credit_pct"]))


def downtime_minutes(seconds: Decimal) -> Decimal:
    """Minutes of downtime, each started minute counted whole (in the tenant's favour)."""
    seconds = Decimal(seconds)
    return -((-seconds) // 60)


def sla_reports_compute(*, period: str) -> int:
    """Compute (or recompute) the SlaReport of every resource in `billing_scope` that had provider-fault downtime,
    from its lines on the draft invoice. Returns how many reports were written."""
    tiers = {tier.code: tier for tier in SlaTier.objects.all()}
    with connection.cursor() as cursor:
        cursor.execute(HELD_SQL)
        rows = cursor.fetchall()
    for (invoice_id, org_id, project_id, rtype, rid, tier_code, currency, held_secs, down_secs, billed) in rows:
        tier = tiers.get(tier_code)
        held_min = Decimal(held_secs) / 60
        down_min = min(downtime_minutes(down_secs), held_min)
        uptime = uptime_pct(held_min, down_min)
        pct = credit_pct_for(tier.credit_schedule, uptime) if tier else Decimal(0)
        SlaReport.objects.update_or_create(
            organization_id=org_id, resource_type=rtype, resource_id=rid, sla_tier=tier_code, period=period,
            defaults={"project_id": project_id, "held_minutes": held_min, "downtime_minutes": down_min,
                      "uptime_pct": uptime.quantize(Decimal("1e-8")),
                      "target_uptime_pct": tier.target_uptime_pct if tier else Decimal(0),
                      "credit_pct": pct, "billed_amount": billed,
                      "credit_amount": round_money(Decimal(billed) * pct / 100, currency),
                      "currency": currency, "source_invoice_id": invoice_id})
    return len(rows)


CREDIT_LINES_SQL = """
WITH pending AS (
  SELECT s.invoice_id, s.minor, s.tax_rate, r.id AS report_id, r.credit_amount, r.project_id, r.resource_type,
         r.resource_id, r.sla_tier, r.period AS report_period, r.uptime_pct, r.credit_pct
  FROM billing_scope s
  JOIN billing_slareport r ON r.organization_id = s.organization_id AND r.period < s.period
   AND r.credit_amount > 0 AND r.currency = s.currency
   AND (r.applied_invoice_id IS NULL OR r.applied_invoice_id = s.invoice_id)
  JOIN billing_invoice src ON src.id = r.source_invoice_id AND src.status IN ('finalized', 'paid')
), ins AS (
  INSERT INTO billing_invoiceline (id, invoice_id, kind, project_id, resource_type, resource_id, sku, pricing_model,
    sla_tier, gpu_model, description, billed_seconds, quantity, unit, unit_price, raw_amount, amount, tax_amount,
    sla_report_id)
  SELECT gen_random_uuid(), invoice_id, 'sla_credit', project_id, resource_type, resource_id, '', '', sla_tier, '',
         left(format('SLA credit %s: %s %s uptime %s%% -> %s%%', report_period, resource_type, resource_id,
                     round(uptime_pct, 4), credit_pct), 300),
         0, 1, 'each', -credit_amount, -credit_amount, -credit_amount, round(-credit_amount * tax_rate, minor),
         report_id
  FROM pending
  RETURNING sla_report_id, invoice_id
)
UPDATE billing_slareport r SET applied_invoice_id = ins.invoice_id FROM ins WHERE r.id = ins.sla_report_id;
"""


def sla_credit_lines_add() -> None:
    """Add the pending SLA credits of earlier (finalized) periods to the invoices in `billing_scope`."""
    with connection.cursor() as cursor:
        cursor.execute(CREDIT_LINES_SQL)
