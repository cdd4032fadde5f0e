"""Invoice runs, finalization with gap-free numbers, payment, void, credit notes, adjustments, re-rating.

Rules (docs/billing.md): (invoices per organization per calendar month in its billing time zone; draft → finalized →
paid | void; idempotent runs); RW-055 (no period skipped or overlapping); RW-056 (the once-per-period guard uses
the customer's time zone: one invoice per (organization, local month), enforced by a unique index).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal

from django.db import DatabaseError, connection, transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.errors import Conflict, ValidationFailed
from apps.core.ids import uuid7
from apps.core.transitions import transition

from .. import conf
from ..errors import Code
from ..models import Adjustment, CreditNote, Invoice, InvoiceLine, InvoiceRun
from ..money import amount_validate, currency_validate, line_tax, minor_units, round_money
from ..periods import parse_period, period_bounds, period_of
from ..states import INVOICE_TRANSITIONS, InvoiceStatus, RunStatus
from . import rating, sla
from .metering import downtime_sync, usage_record_collect_closed, window_validate

# Test seam: called after each committed batch with (run, batch_number); raising simulates a crash mid-run.
after_batch_hook: Callable[[InvoiceRun, int], None] | None = None

CANDIDATES_SQL = """
SELECT o.id FROM tenancy_organization o
WHERE (EXISTS (SELECT 1 FROM billing_usagerecord r WHERE r.organization_id = o.id
               AND r.start < make_timestamptz(%(ny)s, %(nm)s, 1, 0, 0, 0, o.billing_timezone)
               AND r.start > make_timestamptz(%(y)s, %(m)s, 1, 0, 0, 0, o.billing_timezone)
                             - %(step)s * interval '1 second'
               AND r."end" > make_timestamptz(%(y)s, %(m)s, 1, 0, 0, 0, o.billing_timezone))
    OR EXISTS (SELECT 1 FROM billing_adjustment a WHERE a.organization_id = o.id AND a.period = %(period)s)
    OR EXISTS (SELECT 1 FROM billing_slareport s WHERE s.organization_id = o.id AND s.period < %(period)s
               AND s.credit_amount > 0
               AND (s.applied_invoice_id IS NULL
                    OR EXISTS (SELECT 1 FROM billing_invoice h WHERE h.id = s.applied_invoice_id
                               AND h.status = 'draft' AND h.period > %(period)s))))
  AND NOT EXISTS (SELECT 1 FROM billing_invoice i WHERE i.organization_id = o.id AND i.period = %(period)s
                  AND i.status IN ('finalized', 'paid'))
  AND (%(orgs)s::uuid[] IS NULL OR o.id = ANY(%(orgs)s::uuid[]))
  AND make_timestamptz(%(y)s, %(m)s, 1, 0, 0, 0, o.billing_timezone) <= %(now)s
  AND (NOT %(closing)s OR make_timestamptz(%(ny)s, %(nm)s, 1, 0, 0, 0, o.billing_timezone) <= %(now)s)
ORDER BY o.id
"""

# Tax of a draft (docs/billing.md, "Tax"): the billing account's own `tax_rate` overrides; an account without a
# country takes BILLING_DEFAULT_TAX_RATE; a buyer with a tax id in another country than the seller's
# (BILLING_SELLER_COUNTRY) is reverse charge (0 %); else the TaxRate of its region, or of its whole country, in
# force on the period's last local day, else 0.
_REVERSE_SQL = ("(ba.tax_rate IS NULL AND coalesce(ba.country, '') <> '' AND coalesce(ba.tax_id, '') <> '' "
                "AND %(seller_country)s <> '' AND ba.country <> %(seller_country)s)")
_TAX_RATE_SQL = f"""CASE
    WHEN ba.tax_rate IS NOT NULL THEN ba.tax_rate
    WHEN coalesce(ba.country, '') = '' THEN %(tax)s
    WHEN {_REVERSE_SQL} THEN 0
    ELSE coalesce((SELECT t.rate / 100 FROM billing_taxrate t
                   WHERE t.country = ba.country AND t.region IN ('', ba.region)
                     AND t.effective_from <= make_date(%(ny)s, %(nm)s, 1) - 1
                     AND (t.effective_to IS NULL OR t.effective_to > make_date(%(ny)s, %(nm)s, 1) - 1)
                   ORDER BY t.region DESC, t.effective_from DESC LIMIT 1), 0)
  END"""

DRAFTS_SQL = f"""
INSERT INTO billing_invoice (id, created_at, updated_at, organization_id, period, period_start, period_end, timezone,
  currency, status, tax_rate, reverse_charge, subtotal, credits, tax, total, credited, unpriced_seconds, run_id,
  payment_reference)
SELECT t.id, %(now)s, %(now)s, o.id, %(period)s, make_timestamptz(%(y)s, %(m)s, 1, 0, 0, 0, o.billing_timezone),
       make_timestamptz(%(ny)s, %(nm)s, 1, 0, 0, 0, o.billing_timezone), o.billing_timezone, upper(o.currency),
       'draft', {_TAX_RATE_SQL}, {_REVERSE_SQL}, 0, 0, 0, 0, 0, 0, %(run)s, ''
FROM unnest(%(ids)s::uuid[], %(orgs)s::uuid[]) AS t(id, org_id)
JOIN tenancy_organization o ON o.id = t.org_id
LEFT JOIN billing_billingaccount ba ON ba.organization_id = o.id
ON CONFLICT (organization_id, period) WHERE status <> 'void' DO NOTHING;

UPDATE billing_invoice i SET timezone = o.billing_timezone, currency = upper(o.currency),
  tax_rate = {_TAX_RATE_SQL}, reverse_charge = {_REVERSE_SQL}, run_id = %(run)s, updated_at = %(now)s,
  period_start = make_timestamptz(%(y)s, %(m)s, 1, 0, 0, 0, o.billing_timezone),
  period_end = make_timestamptz(%(ny)s, %(nm)s, 1, 0, 0, 0, o.billing_timezone)
FROM tenancy_organization o LEFT JOIN billing_billingaccount ba ON ba.organization_id = o.id
WHERE i.organization_id = o.id AND o.id = ANY(%(orgs)s::uuid[]) AND i.period = %(period)s AND i.status = 'draft';

DELETE FROM billing_lateusage l USING billing_invoice i
WHERE l.invoice_id = i.id AND i.organization_id = ANY(%(orgs)s::uuid[]) AND i.period = %(period)s
  AND i.status = 'draft';

DELETE FROM billing_invoiceline l USING billing_invoice i
WHERE l.invoice_id = i.id AND i.organization_id = ANY(%(orgs)s::uuid[]) AND i.period = %(period)s
  AND i.status = 'draft';
"""

_TOTALS = """
UPDATE billing_invoice i SET
  subtotal = coalesce(x.subtotal, 0), credits = coalesce(x.credits, 0), tax = coalesce(x.tax, 0),
  total = coalesce(x.subtotal, 0) + coalesce(x.credits, 0) + coalesce(x.tax, 0), updated_at = %(now)s
FROM ({scope}) s LEFT JOIN (
  SELECT invoice_id, sum(amount) FILTER (WHERE kind <> 'sla_credit') AS subtotal,
         sum(amount) FILTER (WHERE kind = 'sla_credit') AS credits, sum(tax_amount) AS tax
  FROM billing_invoiceline WHERE invoice_id IN ({scope}) GROUP BY 1
) x USING (invoice_id)
WHERE i.id = s.invoice_id AND i.status = 'draft';
"""
TOTALS_SQL = _TOTALS.format(scope="SELECT invoice_id FROM billing_scope")
# the drafts of later periods an SLA credit moved away from (`sla.sla_credit_lines_add`)
TOTALS_OF_SQL = _TOTALS.format(scope="SELECT unnest(%(released)s::uuid[]) AS invoice_id")

FINALIZE_SQL = """
WITH numbered AS (
  SELECT i.id, %(first)s + row_number() OVER (ORDER BY i.organization_id) - 1 AS number
  FROM billing_invoice i JOIN billing_scope s ON s.invoice_id = i.id
  WHERE i.status = 'draft' AND i.unpriced_seconds = 0
)
UPDATE billing_invoice i SET status = 'finalized', number = numbered.number, finalized_at = %(now)s,
  updated_at = %(now)s
FROM numbered WHERE i.id = numbered.id
"""


def _month_params(period: str) -> dict:
    year, month = parse_period(period)
    return {"period": period, "y": year, "m": month, "ny": year + month // 12, "nm": month % 12 + 1}


def _sequence_lock(cursor, name: str) -> int:
    """Lock the gap-free counter row `name` (creating it at 1) and return its next value."""
    cursor.execute("INSERT INTO billing_numbersequence (name, next_value) VALUES (%s, 1) ON CONFLICT DO NOTHING",
                   [name])
    cursor.execute("SELECT next_value FROM billing_numbersequence WHERE name = %s FOR UPDATE", [name])
    return cursor.fetchone()[0]


def _scope_fill(cursor, params: dict) -> None:
    cursor.execute(rating.SCOPE_DDL)
    cursor.execute("""
        INSERT INTO billing_scope (invoice_id, organization_id, period, period_start, period_end, currency, minor,
                                   tax_rate)
        SELECT id, organization_id, period, period_start, period_end, currency, 2, tax_rate FROM billing_invoice
        WHERE organization_id = ANY(%(orgs)s::uuid[]) AND period = %(period)s AND status = 'draft'""", params)
    cursor.execute("SELECT DISTINCT currency FROM billing_scope")
    for (currency,) in cursor.fetchall():
        cursor.execute("UPDATE billing_scope SET minor = %s WHERE currency = %s", [minor_units(currency), currency])
    cursor.execute("ANALYZE billing_scope")


def _batch_process(run: InvoiceRun, org_ids: list, finalize: bool) -> tuple[int, int]:
    """One transaction: draft, rate, SLA, credits, totals and (optionally) finalize the invoices of `org_ids`."""
    stamp = now()
    params = {**_month_params(run.period), "orgs": org_ids, "ids": [uuid7() for _ in org_ids], "now": stamp,
              "tax": conf.get("BILLING_DEFAULT_TAX_RATE"), "run": run.id,
              "seller_country": conf.get("BILLING_SELLER_COUNTRY").upper()}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL work_mem = '256MB'")  # the GROUP BYs of a 2000-organization batch stay in memory
        cursor.execute(DRAFTS_SQL, params)
        _scope_fill(cursor, params)
        rating.rate_scope()
        sla.sla_reports_compute(period=run.period)
        released = sla.sla_credit_lines_add()
        cursor.execute(TOTALS_SQL, params)
        if released:
            cursor.execute(TOTALS_OF_SQL, {"released": released, "now": stamp})
        cursor.execute("SELECT count(*) FROM billing_scope")
        drafted = cursor.fetchone()[0]
        finalized = 0
        if finalize:
            first = _sequence_lock(cursor, "invoice")
            cursor.execute(FINALIZE_SQL, {"first": first, "now": stamp})
            finalized = cursor.rowcount
            cursor.execute("UPDATE billing_numbersequence SET next_value = %s WHERE name = 'invoice'",
                           [first + finalized])
    return drafted, finalized


def _session_tune() -> None:
    """Give this session's temporary tables room (temp_buffers can only change before the session's first temporary
    table; a worker whose connection already used one keeps its setting)."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET temp_buffers = '256MB'")
    except DatabaseError:
        pass


def _utc_words(instant: dt.datetime) -> str:
    """An instant as people read it: "2027-01-01 00:00 UTC"."""
    return instant.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def run_period_floor_check(period: str) -> None:
    """Refuse a run for a month that ended before the first price book started (nothing could be priced in it: a
    typo such as "1999-01" or "2062-01" for "2026-01"); judged at the period's UTC end. 400 `period_too_early` on
    `period`, with `first_price_book_start` (UTC, ISO 8601). Without any price book there is no floor."""
    from ..models import PriceBook

    first = PriceBook.objects.order_by("effective_from").values_list("effective_from", flat=True).first()
    if first is not None and period_bounds(period, "UTC")[1] <= first:
        first_month = period_of(first, "UTC")
        raise ValidationFailed(f"The period {period} ended before the first price book started on "
                               f"{_utc_words(first)}; invoice runs start at {first_month}.",
                               code=Code.PERIOD_TOO_EARLY, first_price_book_start=first.isoformat(),
                               errors={"period": [f"before the first price book ({first_month})"]})


def run_period_check(period: str, finalize: bool) -> None:
    """Refuse a run for a month that has not started, or a finalizing run for one that has not ended, judged at the
    period's UTC bounds (the beat's runs name UTC months; within a run each organization is drafted once its own
    local month has started and finalized once it has ended). An invoice drafted ahead of its month would take the
    organization's pending SLA credits from its real next invoice; a finalizing run before the month's end would
    finalize nothing. 400 `invalid_period` for a malformed period; 409 `period_not_started` with `period_start`
    (UTC, ISO 8601); 409 `period_not_ended` with `period_end`, as finalizing one draft by hand answers (the details
    say the instants in words, "2027-01-01 00:00 UTC")."""
    start, end = period_bounds(period, "UTC")
    if now() < start:
        raise Conflict(f"The month {period} starts on {_utc_words(start)}; an invoice run drafts a month once it "
                       "has started.", code=Code.PERIOD_NOT_STARTED, period_start=start.isoformat())
    if finalize and now() < end:
        raise Conflict(f"The month {period} ends on {_utc_words(end)}; invoices are finalized once their month has "
                       "ended. To refresh the drafts of the month in progress now, untick Finalize (a run with "
                       "`finalize` false).", code=Code.PERIOD_NOT_ENDED, period_end=end.isoformat())


def invoice_run_execute(*, actor=None, period: str, finalize: bool = True,
                        organization_ids: list | None = None) -> InvoiceRun:
    """Invoice every organization with activity in `period` ("YYYY-MM", local month of each organization), now,
    in this process (the beat's tasks and the shell; the API runs the same steps as an operation, see
    `invoice_run_request`).

    Per batch of BILLING_RUN_BATCH_SIZE organizations (ordered by id), in one transaction: create or refresh
    the draft, replace its lines from the usage records (late records in a still-open period are picked up here),
    compute SLA reports, add pending SLA credits of earlier months, compute totals, and when `finalize` number
    the invoices gap-free (the counter row is locked FOR UPDATE) — except drafts with unpriced usage, which stay
    drafts and are listed in `held_invoices`. Finalized invoices are never touched again, so running twice, or
    rerunning after a crash, yields the same invoices, numbers and totals. With `finalize`, only organizations
    whose local month has ended are included (RW-056: an organization east or west of UTC is invoiced once, for
    its own month); without it, drafts are computed for open months too (a running preview). Either way an
    organization is drafted only once its own local month has started.

    409 `period_not_started` for a period that has not started (UTC); 409 `period_not_ended` with `finalize` for
    one that has not ended (UTC) (`run_period_check`).
    """
    run_period_check(period, finalize)
    run = InvoiceRun.objects.create(period=period, finalize=finalize, requested_by=_user(actor))
    org_ids = invoice_run_prepare(run, actor=actor, organization_ids=organization_ids)
    size = conf.get("BILLING_RUN_BATCH_SIZE")
    try:
        for number, i in enumerate(range(0, len(org_ids), size)):
            invoice_run_batch(run, org_ids[i:i + size], number)
    except Exception as exc:  # the counts of the committed batches are already saved
        InvoiceRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, error=repr(exc)[:2000],
                                                    finished_at=now())
        raise
    with transaction.atomic():
        invoice_run_complete(run, actor=actor)
    return run


def invoice_run_prepare(run: InvoiceRun, *, actor=None, organization_ids: list | None = None) -> list:
    """First part of a run: collect the closed usage and the downtime around `run.period`, then return the ids of
    the organizations to invoice (ordered). Idempotent (usage records and downtime are recorded once). Reads only
    `run.period` and `run.finalize` (an unsaved run will do)."""
    start, end = period_bounds(run.period, "UTC")
    # Every local month lies within [UTC month - 15 h, UTC month + 13 h) (UTC-12 .. UTC+14 time zones).
    window_start, window_end = start - dt.timedelta(hours=15), end + dt.timedelta(hours=13)
    usage_record_collect_closed(actor=actor, window_start=window_start, window_end=window_end)
    downtime_sync(window_start=window_start, window_end=window_end)
    with connection.cursor() as cursor:
        cursor.execute(CANDIDATES_SQL, {**_month_params(run.period), "closing": run.finalize, "now": now(),
                                        "step": conf.get("BILLING_METERING_PERIOD_SECONDS"),
                                        "orgs": [str(o) for o in organization_ids] if organization_ids else None})
        return [row[0] for row in cursor.fetchall()]


def invoice_run_batch(run: InvoiceRun, org_ids: list, number: int) -> None:
    """One batch of a run in one transaction (see `invoice_run_execute`); adds its counts to `run` (saved)."""
    _session_tune()
    with transaction.atomic():
        drafted, finalized = _batch_process(run, org_ids, run.finalize)
        run.invoices_drafted += drafted
        run.invoices_finalized += finalized
        InvoiceRun.objects.filter(pk=run.pk).update(invoices_drafted=run.invoices_drafted,
                                                    invoices_finalized=run.invoices_finalized)
    if after_batch_hook:
        after_batch_hook(run, number)


def invoice_run_complete(run: InvoiceRun, *, actor=None) -> None:
    """Last part of a run (call inside a transaction): list the held drafts, mark it completed, audit it."""
    run.held_invoices = [str(i) for i in Invoice.objects.filter(
        period=run.period, status=InvoiceStatus.DRAFT, unpriced_seconds__gt=0).values_list("id", flat=True)[:1000]]
    run.status, run.finished_at = RunStatus.COMPLETED, now()
    run.save()
    audit_record(actor=actor, action="billing.invoice_run.execute", target=run,
                 after={"period": run.period, "drafted": run.invoices_drafted, "finalized": run.invoices_finalized})


def invoice_run_request(*, actor, period: str, finalize: bool = True) -> InvoiceRun:
    """Start a run as an operation (`billing.invoice_run`: prepare, one step per batch, complete) and return it
    pending; a worker runs it (`GET /api/v1/invoice-runs/{id}` or the operation shows progress). One transaction.

    409 `invoice_run_in_progress` while an operation-run for the same period and `finalize` is unfinished (its
    id is in the detail); 400 `validation_error` for a malformed period; 400 `period_too_early` for a month before
    the first price book (`run_period_floor_check`); 409 `period_not_started` and `period_not_ended` as
    `run_period_check` says."""
    from apps.operations.models import TERMINAL
    from apps.operations.runner import operation_start

    from ..workflows import INVOICE_RUN

    run_period_floor_check(period)
    run_period_check(period, finalize)
    with transaction.atomic():
        with connection.cursor() as cursor:  # two concurrent requests for one period: the second waits, then sees it
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"billing.invoice_run:{period}"])
        busy = (InvoiceRun.objects.filter(period=period, finalize=finalize, operation__kind=INVOICE_RUN)
                .exclude(operation__status__in=TERMINAL).values_list("id", flat=True).first())
        if busy:
            raise Conflict(f"An invoice run for {period} is in progress ({busy}); wait for it to finish.",
                           code=Code.INVOICE_RUN_IN_PROGRESS)
        run = InvoiceRun.objects.create(period=period, finalize=finalize, status=RunStatus.PENDING,
                                        requested_by=_user(actor))
        run.operation = operation_start(kind=INVOICE_RUN, target_type="billing.invoicerun", target_id=run.id,
                                        actor=_user(actor))
        run.save(update_fields=["operation"])
        audit_record(actor=actor, action="billing.invoice_run.request", target=run,
                     after={"period": period, "finalize": finalize, "operation": str(run.operation_id)})
    return run


def _user(actor):
    """`actor` when it is a stored user (None for the system and anonymous callers)."""
    return actor if getattr(actor, "pk", None) else None


def invoice_run_fail(run_id, detail: str) -> None:
    """Mark an operation-run failed (its operation failed: deadline or a terminal error)."""
    InvoiceRun.objects.filter(pk=run_id).exclude(status=RunStatus.COMPLETED).update(
        status=RunStatus.FAILED, error=detail[:2000], finished_at=now())


class _PreviewDone(Exception):
    """Leaves the preview's transaction (rolled back) with what it computed."""

    def __init__(self, preview: dict):
        super().__init__()
        self.preview = preview


def invoice_preview(*, organization, serialize: Callable[[Invoice], dict]) -> dict:
    """What `organization`'s invoice for its current month (billing time zone) comes to so far: the invoice run's
    own steps (draft, rating, SLA credits, totals; `_batch_process` without finalizing) over the usage recorded
    until now, computed in a transaction that is rolled back — it writes nothing, and the stored draft and the
    daily preview run are untouched. `serialize(invoice)` turns the computed invoice (with its lines) into the
    answer inside that transaction. Usage is recorded over closed metering periods only
    (BILLING_METERING_PERIOD_SECONDS, hourly by default), a twelfth of a period after each boundary
    (`schedule.collection_schedule`), so the estimate trails the clock by at most 13/12 of a period; when the
    month's invoice is already finalized or paid, that invoice is serialized instead. Downtime is brought up to
    date first, in the same rolled-back transaction (`downtime_sync` over the month, as an invoice run does in
    `invoice_run_prepare`): the time a resource spent on a provider-at-fault incident, closed or still open (until
    now), is not charged in the estimate from the moment the incident is recorded, with no nightly run between.
    Closed incidents synced since they closed are skipped (`stale_only`), so a call costs the new, open and
    changed incidents only. The sync's row writes are rolled back with the rest, so the GET writes nothing; its
    row locks on the month's downtime rows make concurrent previews (and a run's sync) wait for each other
    briefly, in one order (`downtime_sync` walks the incidents by start and id).

    Returns ``serialize(invoice)`` plus ``usage_until``: the end of the latest usage record of the month (ISO 8601,
    UTC) or None."""
    from ..models import UsageRecord

    period = period_of(now(), organization.billing_timezone)
    start, end = period_bounds(period, organization.billing_timezone)
    latest = (UsageRecord.objects.filter(organization=organization, start__lt=end, end__gt=start)
              .order_by("-end").values_list("end", flat=True).first())
    final = (Invoice.objects.filter(organization=organization, period=period,
                                    status__in=[InvoiceStatus.FINALIZED, InvoiceStatus.PAID])
             .prefetch_related("lines").first())
    if final is not None:
        return {**serialize(final), "usage_until": latest}
    try:
        with transaction.atomic():
            downtime_sync(window_start=start, window_end=end, stale_only=True)
            run = InvoiceRun.objects.create(period=period, finalize=False)
            _batch_process(run, [organization.id], finalize=False)
            invoice = (Invoice.objects.filter(organization=organization, period=period, status=InvoiceStatus.DRAFT)
                       .prefetch_related("lines").get())
            raise _PreviewDone({**serialize(invoice), "usage_until": latest})
    except _PreviewDone as done:
        return done.preview


def invoice_finalize(*, actor, invoice: Invoice) -> Invoice:
    """Finalize one draft (staff): assigns the next gap-free number. 409 `invalid_state`, 409 `unpriced_usage`;
    409 `period_not_ended` (with the period's `period_end`, UTC ISO 8601) while the invoice's period has not ended
    (a draft of the month in progress is a running preview: its total would freeze before the month's usage is in).

    A draft is re-rated first, so it is never frozen at what the last invoice run computed: the closed usage and
    downtime around its period are collected (`invoice_run_prepare`) and the invoice run's own batch step
    (`_batch_process`, without its finalizing) recomputes the draft's lines, SLA credits and totals from every
    usage record of its period, in the finalize's transaction; the `unpriced_usage` check reads the re-rated
    draft. The re-rating is recorded as an invoice run of the one organization (``finalize`` false), created in
    the finalize's transaction: a refused finalize rolls it back with the re-rating, so it leaves no run behind
    (never one `running` forever)."""
    current = Invoice.objects.get(pk=invoice.pk)
    rerate = current.status == InvoiceStatus.DRAFT and current.period_end <= now()
    if rerate:  # collected and committed on their own: usage records and downtime are recorded once
        invoice_run_prepare(InvoiceRun(period=current.period, finalize=False), actor=actor,
                            organization_ids=[current.organization_id])
    with transaction.atomic():
        invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
        if invoice.status == InvoiceStatus.DRAFT and invoice.period_end > now():
            raise Conflict(f"The month {invoice.period} ends on {_utc_words(invoice.period_end)}; an invoice is "
                           "finalized once its month has ended.", code=Code.PERIOD_NOT_ENDED,
                           period_end=invoice.period_end.isoformat())
        if rerate and invoice.status == InvoiceStatus.DRAFT:
            run = InvoiceRun.objects.create(period=invoice.period, finalize=False, requested_by=_user(actor))
            _batch_process(run, [invoice.organization_id], finalize=False)
            invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
            run.invoices_drafted = 1
            run.status, run.finished_at = RunStatus.COMPLETED, now()
            run.save()
        if invoice.status == InvoiceStatus.DRAFT and invoice.unpriced_seconds > 0:
            raise Conflict("The invoice has usage without a price; add the price and rerun.",
                           code=Code.UNPRICED_USAGE)
        with connection.cursor() as cursor:
            number = _sequence_lock(cursor, "invoice")
            transition(invoice, "finalize", INVOICE_TRANSITIONS, extra={"number": number, "finalized_at": now()})
            cursor.execute("UPDATE billing_numbersequence SET next_value = %s WHERE name = 'invoice'", [number + 1])
        audit_record(actor=actor, action="billing.invoice.finalize", target=invoice,
                     organization=invoice.organization_id, after={"number": number})
    return invoice


def invoice_pay(*, actor, invoice: Invoice, amount: Decimal, reference: str = "") -> Invoice:
    """Record full payment of a finalized invoice. `amount` must equal the balance due (total − credit notes):
    400 `payment_amount_mismatch`; 409 `invalid_state` unless finalized."""
    amount_validate(amount)
    with transaction.atomic():
        invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
        if invoice.status == InvoiceStatus.FINALIZED and Decimal(amount) != invoice.balance_due:
            raise ValidationFailed(f"Amount {amount} does not match the balance due {invoice.balance_due}.",
                                   code=Code.PAYMENT_AMOUNT_MISMATCH)
        transition(invoice, "pay", INVOICE_TRANSITIONS, extra={"paid_at": now(), "payment_reference": reference})
        audit_record(actor=actor, action="billing.invoice.pay", target=invoice, organization=invoice.organization_id,
                     after={"amount": str(amount), "reference": reference})
    return invoice


def invoice_void(*, actor, invoice: Invoice, reason: str) -> Invoice:
    """Void a finalized, unpaid invoice (its number stays used; a rerun then drafts a replacement). Its SLA
    credits return to pending. 409 `invalid_state`; 409 `invoice_has_credit_notes` (with `credit_notes`, their
    numbers) when credit notes were issued against it: they would correct an invoice that no longer stands."""
    from ..models import SlaReport

    with transaction.atomic():
        invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
        notes = [n.display_number for n in CreditNote.objects.filter(invoice=invoice).order_by("number")]
        if notes:
            raise Conflict("Credit notes were issued against this invoice; an invoice with credit notes is not "
                           "voided (credit the rest instead).", code=Code.INVOICE_HAS_CREDIT_NOTES,
                           credit_notes=notes)
        transition(invoice, "void", INVOICE_TRANSITIONS, extra={"voided_at": now()})
        SlaReport.objects.filter(applied_invoice=invoice).update(applied_invoice=None)
        audit_record(actor=actor, action="billing.invoice.void", target=invoice, organization=invoice.organization_id,
                     after={"reason": reason})
    return invoice


def credit_note_create(*, actor, invoice: Invoice, amount: Decimal, reason: str) -> CreditNote:
    """Issue a credit note of `amount` (before tax; tax at the invoice's rate is added) against a finalized or
    paid invoice. 400 when amount ≤ 0 or the credit would exceed the invoice total (`credit_note_exceeds_balance`);
    409 `invalid_state` for drafts and void invoices."""
    amount = round_money(amount_validate(amount), invoice.currency)
    if amount <= 0:
        raise ValidationFailed("A credit note amount must be positive.", errors={"amount": ["must be positive"]})
    with transaction.atomic():
        invoice = Invoice.objects.select_for_update().get(pk=invoice.pk)
        if invoice.status not in (InvoiceStatus.FINALIZED, InvoiceStatus.PAID):
            raise Conflict("Credit notes apply to finalized or paid invoices.", code="invalid_state",
                           current_state=invoice.status)
        tax = line_tax(amount, invoice.tax_rate, invoice.currency)
        if invoice.credited + amount + tax > invoice.total:
            raise ValidationFailed("The credit notes would exceed the invoice total.",
                                   code=Code.CREDIT_NOTE_EXCEEDS_BALANCE)
        with connection.cursor() as cursor:
            number = _sequence_lock(cursor, "credit_note")
            cursor.execute("UPDATE billing_numbersequence SET next_value = %s WHERE name = 'credit_note'",
                           [number + 1])
        note = CreditNote.objects.create(invoice=invoice, organization_id=invoice.organization_id, number=number,
                                         currency=invoice.currency, amount=amount, tax=tax, total=amount + tax,
                                         reason=reason, created_by=actor if getattr(actor, "pk", None) else None)
        Invoice.objects.filter(pk=invoice.pk).update(credited=invoice.credited + amount + tax)
        audit_record(actor=actor, action="billing.credit_note.create", target=note,
                     organization=invoice.organization_id, after={"number": number, "total": str(amount + tax)})
    return note


def adjustment_create(*, actor, organization, period: str, amount: Decimal, description: str,
                      recurring: bool = False) -> Adjustment:
    """Add a manual charge (> 0) or credit (< 0) to `organization`'s invoice for `period`; it appears when the
    draft is (re)computed. 409 `period_closed` when that invoice is already finalized."""
    parse_period(period)
    currency_validate(organization.currency)
    amount_validate(amount)
    if round_money(Decimal(amount), organization.currency) == 0:
        raise ValidationFailed("An adjustment is a charge (> 0) or a credit (< 0), not zero.", code=Code.ZERO_AMOUNT,
                               errors={"amount": ["must not be zero"]})
    if Invoice.objects.filter(organization=organization, period=period,
                              status__in=[InvoiceStatus.FINALIZED, InvoiceStatus.PAID]).exists():
        raise Conflict(f"The invoice for {period} is finalized; issue a credit note or adjust a later period.",
                       code=Code.PERIOD_CLOSED)
    with transaction.atomic():
        adjustment = Adjustment.objects.create(organization=organization, period=period,
                                               amount=round_money(Decimal(amount), organization.currency),
                                               description=description, recurring=recurring,
                                               created_by=actor if getattr(actor, "pk", None) else None)
        audit_record(actor=actor, action="billing.adjustment.create", target=adjustment, organization=organization,
                     after={"period": period, "amount": str(adjustment.amount)})
    return adjustment


def adjustment_delete(*, actor, adjustment: Adjustment) -> None:
    """Delete an adjustment of an open period (staff): its line leaves the period's draft, whose totals are
    recomputed by the next invoice run or preview. 409 `period_closed` once that period's invoice is finalized
    (issue a credit note instead)."""
    with transaction.atomic():
        adjustment = Adjustment.objects.select_for_update().get(pk=adjustment.pk)
        invoices = Invoice.objects.select_for_update().filter(organization_id=adjustment.organization_id,
                                                              period=adjustment.period)
        if any(i.status in (InvoiceStatus.FINALIZED, InvoiceStatus.PAID) for i in invoices):
            raise Conflict(f"The invoice for {adjustment.period} is finalized; issue a credit note instead.",
                           code=Code.PERIOD_CLOSED)
        # only drafts (and void invoices, which keep no open lines) can hold its line now
        InvoiceLine.objects.filter(adjustment=adjustment, invoice__status=InvoiceStatus.DRAFT).delete()
        InvoiceLine.objects.filter(adjustment=adjustment).update(adjustment=None)
        audit_record(actor=actor, action="billing.adjustment.delete", target=adjustment,
                     organization=adjustment.organization_id,
                     before={"period": adjustment.period, "amount": str(adjustment.amount)})
        adjustment.delete()


def usage_rerate(*, actor, window_start: dt.datetime, window_end: dt.datetime) -> list[InvoiceRun]:
    """Re-rate a window: recompute the drafts of every still-open period it touches (RW-059: the window must be
    aligned to the metering period, else 400 `window_not_aligned`). Finalized periods are left alone. 409
    `period_not_started` (nothing re-rated) when the window reaches into a month that has not started."""
    window_validate(window_start, window_end)
    periods = sorted({period_of(window_start, "UTC"), period_of(window_end - dt.timedelta(microseconds=1), "UTC")})
    for p in periods:
        run_period_check(p, finalize=False)
    return [invoice_run_execute(actor=actor, period=p, finalize=False) for p in periods]
