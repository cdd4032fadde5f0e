"""Rating: usage records × effective-dated prices − downtime → invoice lines, as set-based SQL.

Works on the temporary table `billing_scope` (one row per draft invoice being computed: invoice, organization,
period bounds in UTC, currency, minor unit, tax rate) that `invoicing` fills. Every statement handles all the
invoices of a batch at once (INSERT ... SELECT ... GROUP BY), never one usage record per Python step.

Rules (docs/billing.md and the billing cases of docs/cases.md):
- each usage record is clipped to the invoice period, then split at every price change (price books overlay:
  a price holds from its book's `effective_from` until the next book of that currency listing the same key; RW-068);
- provider-fault downtime is cut out (multirange difference) and not charged; downtime of a part of a resource (one
  allocation row of a lease) leaves only that part's share of the record's units uncharged (`UP_SECONDS`);
- per run (one start of a resource), line and size (the records' `units`, e.g. 8 GPUs on a per-GPU SKU; a lease
  that grew has one size per step), the seconds are rounded up to the price's increment and to at least its
  minimum (RW-052), and only then multiplied by the units: the resource's time is rounded, not its unit-seconds
  (docs/billing.md, "The rounding rule, exactly"); unit `hour`: amount = seconds × price / 3600; unit `month`:
  amount = seconds × price / seconds of the whole billing period (RW-053);
- reserved commitments: amount = committed price × covered seconds / seconds of the commitment window, whether
  used or not (RW-053);
- every line's amount is rounded once, half-up to the currency's minor unit, from the full-precision sum of its
  pieces (RW-070 (d)); tax is computed per rounded line and rounded the same way (RW-070 (a)-(c)).
"""
from __future__ import annotations

from django.db import connection

from .. import conf, wording

SCOPE_DDL = """
DROP TABLE IF EXISTS billing_seg, billing_dt, billing_u, billing_scope;
CREATE TEMP TABLE billing_scope (
  invoice_id uuid PRIMARY KEY, organization_id uuid NOT NULL, period text NOT NULL,
  period_start timestamptz NOT NULL, period_end timestamptz NOT NULL, currency text NOT NULL,
  minor int NOT NULL, tax_rate numeric NOT NULL
) ON COMMIT DROP;
CREATE INDEX ON billing_scope (organization_id);
"""

USAGE_SQL = """
CREATE TEMP TABLE billing_u ON COMMIT DROP AS
SELECT s.invoice_id, s.organization_id, s.currency, r.project_id, r.resource_type, r.resource_id, r.sku,
       r.pricing_model, r.sla_tier, r.gpu_model, r.run_id, r.units, r.commitment_amount, r.commitment_start,
       r.commitment_end,
       tstzrange(greatest(r.start, s.period_start), least(r."end", s.period_end)) AS span,
       ''::text AS late_period, r.id AS record_id, NULL::uuid AS late_source
FROM billing_scope s
JOIN billing_usagerecord r ON r.organization_id = s.organization_id
 AND r.start < s.period_end AND r."end" > s.period_start
 AND r.start > s.period_start - %(step)s * interval '1 second';  -- records never exceed one metering period

-- late records: recorded after the invoice of their (earlier) period was finalized, not yet carried elsewhere
INSERT INTO billing_u
SELECT s.invoice_id, s.organization_id, s.currency, r.project_id, r.resource_type, r.resource_id, r.sku,
       r.pricing_model, r.sla_tier, r.gpu_model, r.run_id, r.units, NULL, NULL, NULL,
       tstzrange(greatest(r.start, prev.period_start), least(r."end", prev.period_end)), prev.period, r.id, prev.id
FROM billing_scope s
JOIN billing_invoice prev ON prev.organization_id = s.organization_id AND prev.status IN ('finalized', 'paid')
 AND prev.period_end <= s.period_start AND prev.period_start >= s.period_start - %(lookback)s * interval '1 day'
JOIN billing_usagerecord r ON r.organization_id = s.organization_id AND r.start < prev.period_end
 AND r."end" > prev.period_start AND r.start > prev.period_start - %(step)s * interval '1 second'
 AND r.recorded_at > prev.finalized_at AND r.commitment_amount IS NULL
WHERE NOT EXISTS (SELECT 1 FROM billing_lateusage lu JOIN billing_invoice li ON li.id = lu.invoice_id
                  WHERE lu.usage_record_id = r.id AND lu.source_invoice_id = prev.id AND li.status <> 'void'
                    AND li.id <> s.invoice_id);

-- one row per resource and part that was down (part '' / units NULL: the whole resource), intervals merged
CREATE TEMP TABLE billing_dt ON COMMIT DROP AS
SELECT d.resource_type, d.resource_id, d.part, d.units, range_agg(tstzrange(d.start, d."end")) AS down
FROM billing_downtimeinterval d
WHERE d.start < (SELECT max(period_end) FROM billing_scope)
  AND d."end" > (SELECT min(period_start) FROM billing_scope) - %(lookback)s * interval '1 day'
  AND EXISTS (SELECT 1 FROM billing_u u WHERE u.resource_type = d.resource_type AND u.resource_id = d.resource_id)
GROUP BY 1, 2, 3, 4;
CREATE INDEX ON billing_dt (resource_type, resource_id);
ANALYZE billing_u;
"""

#: Seconds of the range `{span}` of a usage record of `{units}` units that are charged: its length less, for each
#: part of the resource that was down, the part's share of the units (a whole-resource row: all of it) times its
#: downtime inside the range. Equals the plain multirange difference when only whole-resource downtime exists.
UP_SECONDS = """greatest(coalesce(extract(epoch FROM upper({span}) - lower({span})), 0) - coalesce((
  SELECT sum(CASE WHEN d.units IS NULL THEN 1 ELSE least(d.units / nullif({units}, 0), 1) END
             * (SELECT coalesce(sum(extract(epoch FROM upper(x) - lower(x))), 0)
                FROM unnest(multirange({span}) * d.down) AS x))
  FROM billing_dt d WHERE d.resource_type = {rtype} AND d.resource_id = {rid}), 0), 0)"""

SEGMENTS_SQL = """
CREATE TEMP TABLE billing_seg ON COMMIT DROP AS
WITH ps AS (
  SELECT b.currency, p.sku, p.sla_tier, p.pricing_model, p.unit, p.unit_price,
         p.billing_increment_seconds AS incr, p.minimum_seconds AS mins,
         tstzrange(b.effective_from, lead(b.effective_from) OVER (
           PARTITION BY b.currency, p.sku, p.sla_tier, p.pricing_model ORDER BY b.effective_from)) AS valid
  FROM billing_price p JOIN billing_pricebook b ON b.id = p.book_id
), piece AS (
  SELECT u.invoice_id, u.project_id, u.resource_type, u.resource_id, u.sku, u.pricing_model, u.sla_tier,
         u.gpu_model, u.run_id, u.units, u.late_period, ps.unit, ps.unit_price, ps.incr, ps.mins,
         u.span * ps.valid AS part
  FROM billing_u u
  JOIN ps ON ps.currency = u.currency AND ps.sku = u.sku AND ps.sla_tier = u.sla_tier
         AND ps.pricing_model = u.pricing_model AND ps.valid && u.span
  WHERE u.commitment_amount IS NULL
)
SELECT invoice_id, project_id, resource_type, resource_id, sku, pricing_model, sla_tier, gpu_model, run_id,
       units, late_period, unit, unit_price, incr, mins,
       extract(epoch FROM upper(part) - lower(part)) AS priced_secs,
       {up} AS secs
FROM piece;
""".replace("{up}", UP_SECONDS.format(span="piece.part", units="piece.units", rtype="piece.resource_type",
                                     rid="piece.resource_id"))

LINES_SQL = """
WITH runs AS (
  SELECT invoice_id, project_id, resource_type, resource_id, sku, pricing_model, sla_tier, gpu_model, unit,
         unit_price, run_id, late_period, units,
         units * CASE WHEN sum(secs) > 0 THEN greatest(ceil(sum(secs) / max(incr)) * max(incr), max(mins))
                      ELSE 0 END AS billed
  FROM billing_seg
  GROUP BY invoice_id, project_id, resource_type, resource_id, sku, pricing_model, sla_tier, gpu_model, unit,
           unit_price, run_id, late_period, units
), grouped AS (
  SELECT r.invoice_id, r.project_id, r.resource_type, r.resource_id, r.sku, r.pricing_model, r.sla_tier,
         r.gpu_model, r.unit, r.unit_price, r.late_period, sum(r.billed) AS billed, min(r.units) AS units_min,
         max(r.units) AS units_max, s.organization_id,
         extract(epoch FROM s.period_end - s.period_start) AS period_secs, s.minor, s.tax_rate
  FROM runs r JOIN billing_scope s USING (invoice_id)
  GROUP BY r.invoice_id, r.project_id, r.resource_type, r.resource_id, r.sku, r.pricing_model, r.sla_tier,
           r.gpu_model, r.unit, r.unit_price, r.late_period, s.organization_id, s.period_start, s.period_end,
           s.minor, s.tax_rate
), priced AS (
  SELECT *, CASE WHEN unit = 'hour' THEN billed * unit_price / 3600 ELSE billed * unit_price / period_secs END
              AS raw,
         CASE WHEN unit = 'hour' THEN billed / 3600 ELSE billed / period_secs END AS qty
  FROM grouped
)
INSERT INTO billing_invoiceline (id, invoice_id, kind, project_id, resource_type, resource_id, sku, pricing_model,
  sla_tier, gpu_model, description, billed_seconds, quantity, unit, unit_price, raw_amount, amount, tax_amount)
SELECT gen_random_uuid(), invoice_id, 'usage', project_id, resource_type, resource_id, sku, pricing_model, sla_tier,
       gpu_model, {description}, billed, round(qty, 6), unit,
       unit_price, round(raw, 12), round(raw, minor), round(round(raw, minor) * tax_rate, minor)
FROM priced JOIN tenancy_organization o ON o.id = priced.organization_id;
""".replace("{description}", wording.usage_sql(
    prefix="CASE WHEN late_period <> '' THEN 'Late usage of ' || late_period || ': ' ELSE '' END",
    units=("units_min", "units_max"), default_tier="o.default_sla_tier"))

COMMITMENT_SQL = """
WITH c AS (
  SELECT u.invoice_id, u.project_id, u.resource_type, u.resource_id, u.sku, u.pricing_model, u.sla_tier,
         u.gpu_model, u.commitment_amount AS amount,
         extract(epoch FROM u.commitment_end - u.commitment_start) AS term_secs,
         u.units, u.span * tstzrange(u.commitment_start, u.commitment_end) AS part
  FROM billing_u u
  WHERE u.commitment_amount IS NOT NULL
), secs AS (
  SELECT *, {up} AS secs
  FROM c
), grouped AS (
  SELECT x.invoice_id, x.project_id, x.resource_type, x.resource_id, x.sku, x.pricing_model, x.sla_tier,
         x.gpu_model, x.amount, x.term_secs, sum(x.secs) AS billed, min(x.units) AS units_min,
         max(x.units) AS units_max, s.organization_id, s.minor, s.tax_rate
  FROM secs x JOIN billing_scope s USING (invoice_id)
  GROUP BY x.invoice_id, x.project_id, x.resource_type, x.resource_id, x.sku, x.pricing_model, x.sla_tier,
           x.gpu_model, x.amount, x.term_secs, s.organization_id, s.minor, s.tax_rate
  HAVING sum(x.secs) > 0
)
INSERT INTO billing_invoiceline (id, invoice_id, kind, project_id, resource_type, resource_id, sku, pricing_model,
  sla_tier, gpu_model, description, billed_seconds, quantity, unit, unit_price, raw_amount, amount, tax_amount)
SELECT gen_random_uuid(), invoice_id, 'usage', project_id, resource_type, resource_id, sku, pricing_model, sla_tier,
       gpu_model, {description}, billed,
       round(billed / 3600, 6), 'hour', round(amount * 3600 / term_secs, 6),
       round(amount * billed / term_secs, 12), round(amount * billed / term_secs, minor),
       round(round(amount * billed / term_secs, minor) * tax_rate, minor)
FROM grouped JOIN tenancy_organization o ON o.id = grouped.organization_id;
""".replace("{description}", wording.usage_sql(prefix="'Reserved commitment: '", units=("units_min", "units_max"),
                                               default_tier="o.default_sla_tier")).replace(
    "{up}", UP_SECONDS.format(span="c.part", units="c.units", rtype="c.resource_type", rid="c.resource_id"))

UNPRICED_SQL = """
UPDATE billing_invoice i SET unpriced_seconds = coalesce(t.total, 0) - coalesce(p.priced, 0)
FROM billing_scope s
LEFT JOIN (SELECT invoice_id, sum(extract(epoch FROM upper(span) - lower(span))) AS total
           FROM billing_u WHERE commitment_amount IS NULL GROUP BY 1) t USING (invoice_id)
LEFT JOIN (SELECT invoice_id, sum(priced_secs) AS priced FROM billing_seg GROUP BY 1) p USING (invoice_id)
WHERE i.id = s.invoice_id;
"""

ADJUSTMENTS_SQL = """
INSERT INTO billing_invoiceline (id, invoice_id, kind, description, billed_seconds, quantity, unit, unit_price,
  raw_amount, amount, tax_amount, adjustment_id, resource_type, resource_id, sku, pricing_model, sla_tier, gpu_model)
SELECT gen_random_uuid(), s.invoice_id, 'adjustment', a.description, 0, 1, 'each', a.amount, a.amount,
       round(a.amount, s.minor), round(round(a.amount, s.minor) * s.tax_rate, s.minor), a.id,
       '', '', '', '', '', ''
FROM billing_scope s JOIN billing_adjustment a ON a.organization_id = s.organization_id AND a.period = s.period;
"""


LATE_LINKS_SQL = """
INSERT INTO billing_lateusage (id, usage_record_id, source_invoice_id, invoice_id)
SELECT gen_random_uuid(), record_id, late_source, invoice_id FROM billing_u WHERE late_source IS NOT NULL
ON CONFLICT (usage_record_id, source_invoice_id) DO UPDATE SET invoice_id = EXCLUDED.invoice_id;
"""


def rate_scope() -> None:
    """Fill the usage and adjustment lines of every invoice in `billing_scope` (their old lines must be gone).

    Late records (recorded after their period's invoice was finalized, looked for BILLING_LATE_LOOKBACK_DAYS back)
    are carried onto this invoice as separate lines ("late usage of YYYY-MM"), at the prices of their own time;
    `LateUsage` links make sure each is carried once."""
    lookback = {"lookback": conf.get("BILLING_LATE_LOOKBACK_DAYS"),
                "step": conf.get("BILLING_METERING_PERIOD_SECONDS")}
    with connection.cursor() as cursor:
        cursor.execute(USAGE_SQL, lookback)
        cursor.execute(LATE_LINKS_SQL)
        cursor.execute(SEGMENTS_SQL)
        cursor.execute(LINES_SQL)
        cursor.execute(COMMITMENT_SQL)
        cursor.execute(UNPRICED_SQL)
        cursor.execute(ADJUSTMENTS_SQL)
