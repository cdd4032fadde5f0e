"""SLA: monthly uptime per resource from provider-fault downtime, and the credit its tier's schedule gives.

Rules (docs/billing.md): credits automatic, on the next invoice); RW-050 (uptime measured in minutes, lower bounds
inclusive: exactly 99.0000 % is not "below 99.0"; the credit base is recurring charges only).
"""
from __future__ import annotations

from decimal import Decimal

from django.db import connection

from apps.core.clock import now

from .. import wording

REPORTS_SQL = """
WITH h AS (
  SELECT u.invoice_id, u.organization_id, u.project_id, u.resource_type, u.resource_id, u.sla_tier, u.currency,
         range_agg(u.span) AS held
  FROM billing_u u
  WHERE u.late_period = '' AND EXISTS (SELECT 1 FROM billing_dt d WHERE d.resource_type = u.resource_type
                                                                      AND d.resource_id = u.resource_id)
  GROUP BY 1, 2, 3, 4, 5, 6, 7
), m AS (
  SELECT h.*, s.minor,
         (SELECT sum(extract(epoch FROM upper(x) - lower(x))) FROM unnest(h.held) x) / 60 AS held_min,
         -- whole-resource downtime inside the held time, plus each down part's share of the usage's units
         -- times its downtime inside that usage (the share rating leaves uncharged)
         ceil(((SELECT coalesce(sum(extract(epoch FROM upper(x) - lower(x))), 0)
                FROM billing_dt d, unnest(h.held * d.down) x
                WHERE d.resource_type = h.resource_type AND d.resource_id = h.resource_id AND d.units IS NULL)
             + (SELECT coalesce(sum(least(d.units / nullif(u.units, 0), 1) * extract(epoch FROM upper(x) - lower(x))), 0)
                FROM billing_u u JOIN billing_dt d ON d.resource_type = u.resource_type
                                                   AND d.resource_id = u.resource_id AND d.units IS NOT NULL,
                     unnest(multirange(u.span) * d.down) x
                WHERE u.invoice_id = h.invoice_id AND u.resource_type = h.resource_type
                  AND u.resource_id = h.resource_id AND u.sla_tier = h.sla_tier AND u.late_period = ''))
              / 60) AS down_min,
         (SELECT coalesce(sum(l.amount), 0) FROM billing_invoiceline l WHERE l.invoice_id = h.invoice_id
            AND l.kind = 'usage' AND l.resource_type = h.resource_type AND l.resource_id = h.resource_id
            AND l.sla_tier = h.sla_tier) AS billed
  FROM h JOIN billing_scope s ON s.invoice_id = h.invoice_id
), up AS (
  SELECT m.*, least(m.down_min, m.held_min) AS down_c,
         CASE WHEN m.held_min > 0 THEN 100 * (m.held_min - least(m.down_min, m.held_min)) / m.held_min
              ELSE 100 END AS uptime,
         t.target_uptime_pct, t.credit_schedule
  FROM m LEFT JOIN billing_slatier t ON t.code = m.sla_tier
), credited AS (
  SELECT up.*, coalesce((SELECT (e ->> 'credit_pct')::numeric FROM jsonb_array_elements(up.credit_schedule) e
                         WHERE up.uptime < (e ->> 'below')::numeric ORDER BY (e ->> 'below')::numeric LIMIT 1), 0)
                 AS pct
  FROM up
)
INSERT INTO billing_slareport (id, created_at, updated_at, organization_id, project_id, resource_type, resource_id,
  sla_tier, period, held_minutes, downtime_minutes, uptime_pct, target_uptime_pct, credit_pct, billed_amount,
  credit_amount, currency, source_invoice_id)
SELECT gen_random_uuid(), %(now)s, %(now)s, organization_id, project_id, resource_type, resource_id, sla_tier,
       %(period)s, round(held_min, 4), down_c, round(uptime, 8), coalesce(target_uptime_pct, 0), pct, billed,
       round(billed * pct / 100, minor), currency, invoice_id
FROM credited
ON CONFLICT (resource_type, resource_id, sla_tier, period, organization_id) DO UPDATE SET
  updated_at = EXCLUDED.updated_at, project_id = EXCLUDED.project_id, held_minutes = EXCLUDED.held_minutes,
  downtime_minutes = EXCLUDED.downtime_minutes, uptime_pct = EXCLUDED.uptime_pct,
  target_uptime_pct = EXCLUDED.target_uptime_pct, credit_pct = EXCLUDED.credit_pct,
  billed_amount = EXCLUDED.billed_amount, credit_amount = EXCLUDED.credit_amount, currency = EXCLUDED.currency,
  source_invoice_id = EXCLUDED.source_invoice_id
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


def sla_reports_compute(*, period: str) -> int:
    """Compute (or recompute) in one statement the SlaReport of every resource in `billing_scope` that had
    provider-fault downtime, from its lines on the draft invoice. The SQL applies the same rules as
    `uptime_pct`, `downtime_minutes` and `credit_pct_for` (tests hold both to the RW-050 boundaries)."""
    with connection.cursor() as cursor:
        cursor.execute(REPORTS_SQL, {"now": now(), "period": period})
        return cursor.rowcount


# A credit of period R goes to the organization's next invoice: the earliest invoice still to be issued of a period
# after R that has started. The draft being rated takes the credits still pending, and those another draft of a
# later period holds (a draft of a month after it, e.g. one drafted ahead of time): that draft is not the next
# invoice, and a credit left on a draft of a month far ahead would wait there for years. A draft of a period that has
# not started takes none, nor one with an earlier month after R still to be invoiced (ADR 0607): a draft of such a
# month, or the month just before the draft's while it has no finalized or paid invoice (the month in progress while
# last month is not invoiced yet: last month's closing run drafts it, as a candidate with a pending credit, and
# takes the credit; the month in progress's estimate must not subtract it meanwhile).
_ELIGIBLE = """r.organization_id = s.organization_id AND r.period < s.period AND r.credit_amount > 0
   AND r.currency = s.currency AND s.period_start <= %(now)s
   AND EXISTS (SELECT 1 FROM billing_invoice src WHERE src.id = r.source_invoice_id
                                                 AND src.status IN ('finalized', 'paid'))
   AND NOT EXISTS (SELECT 1 FROM billing_invoice q WHERE q.organization_id = s.organization_id
                     AND q.status = 'draft' AND q.period > r.period AND q.period < s.period)
   AND (to_char(to_date(s.period, 'YYYY-MM') - interval '1 month', 'YYYY-MM') <= r.period
        OR EXISTS (SELECT 1 FROM billing_invoice q WHERE q.organization_id = s.organization_id
                     AND q.period = to_char(to_date(s.period, 'YYYY-MM') - interval '1 month', 'YYYY-MM')
                     AND q.status IN ('finalized', 'paid')))"""

RELEASE_SQL = f"""
WITH taken AS (
  UPDATE billing_slareport r SET applied_invoice_id = NULL, updated_at = %(now)s
  FROM billing_scope s, billing_invoice held
  WHERE {_ELIGIBLE}
    AND held.id = r.applied_invoice_id AND held.id <> s.invoice_id AND held.status = 'draft'
    AND held.period > s.period
  RETURNING r.id AS report_id, held.id AS held_id
), gone AS (
  DELETE FROM billing_invoiceline l USING taken t WHERE l.sla_report_id = t.report_id AND l.invoice_id = t.held_id
  RETURNING l.invoice_id
)
SELECT DISTINCT invoice_id FROM gone
"""

CREDIT_LINES_SQL = f"""
WITH pending AS (
  SELECT s.invoice_id, s.minor, s.tax_rate, r.id AS report_id, r.credit_amount, r.project_id, r.resource_type,
         r.resource_id, r.sla_tier, r.period AS report_period, r.uptime_pct, r.credit_pct
  FROM billing_scope s
  JOIN billing_slareport r ON {_ELIGIBLE}
   AND (r.applied_invoice_id IS NULL OR r.applied_invoice_id = s.invoice_id)
), ins AS (
  INSERT INTO billing_invoiceline (id, invoice_id, kind, project_id, resource_type, resource_id, sku, pricing_model,
    sla_tier, gpu_model, description, billed_seconds, quantity, unit, unit_price, raw_amount, amount, tax_amount,
    sla_report_id)
  SELECT gen_random_uuid(), invoice_id, 'sla_credit', project_id, resource_type, resource_id, '', '', sla_tier, '',
         left(format('SLA credit for %%s: %%s, uptime %%s %%%% (credit %%s %%%%)', report_period, {{resource}},
                     trim_scale(round(uptime_pct, 4)), trim_scale(credit_pct)), 300),
         0, 1, 'each', -credit_amount, -credit_amount, -credit_amount, round(-credit_amount * tax_rate, minor),
         report_id
  FROM pending
  RETURNING sla_report_id, invoice_id
)
UPDATE billing_slareport r SET applied_invoice_id = ins.invoice_id FROM ins WHERE r.id = ins.sla_report_id;
""".replace("{resource}", wording.resource_sql())

# A credit a draft in scope held and no longer takes (an earlier month is now to be invoiced first): pending again.
UNHELD_SQL = """
UPDATE billing_slareport r SET applied_invoice_id = NULL, updated_at = %(now)s FROM billing_scope s
WHERE r.applied_invoice_id = s.invoice_id
  AND NOT EXISTS (SELECT 1 FROM billing_invoiceline l WHERE l.sla_report_id = r.id AND l.invoice_id = s.invoice_id)
"""


def sla_credit_lines_add() -> list:
    """Add the pending SLA credits of earlier (finalized) periods to the invoices in `billing_scope` whose period
    has started (docs/billing.md, "Downtime and SLA credits": the next invoice, once). A credit another draft of a
    later period holds moves here: its line leaves that draft. Returns the ids of the drafts that lost a credit
    line (their totals need recomputing)."""
    params = {"now": now()}
    with connection.cursor() as cursor:
        cursor.execute(RELEASE_SQL, params)
        released = [row[0] for row in cursor.fetchall()]
        cursor.execute(CREDIT_LINES_SQL, params)
        cursor.execute(UNHELD_SQL, params)
    return released
