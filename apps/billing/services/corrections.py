"""Corrections of what billing derives from: an inventory incident's window or fault changed after it was billed.

Rules: docs/adr/0606-incident-corrections-after-billing.md. Billed on a finalized (or paid) invoice: the change is
refused (409 `incident_already_credited`; a credit note corrects a finalized invoice). Billed on drafts only: the
drafts it touches are re-rated in the change's transaction, so the SLA report, the credit and the incident's
impact agree at once.
"""
from __future__ import annotations

import datetime as dt

from django.db.models import Q

from apps.core.clock import now
from apps.core.errors import Conflict

from ..errors import Code
from ..models import DowntimeInterval, Invoice, UsageRecord
from ..states import InvoiceStatus
from .invoicing import invoice_run_execute
from .metering import downtime_sync


def _downtime(incident_id) -> list[tuple[str, str, dt.datetime, dt.datetime]]:
    return list(DowntimeInterval.objects.filter(incident_id=incident_id)
                .values_list("resource_type", "resource_id", "start", "end"))


def _billed_invoices(spans: list[tuple[str, str, dt.datetime, dt.datetime]]):
    """The invoices (any status but void) of the organizations whose resources were down in `spans`, whose
    period overlaps the resource's downtime there."""
    owners: dict[tuple[str, str], set] = {}
    resources = {(t, r) for t, r, _, _ in spans}
    q = Q()
    for rtype, rid in resources:
        q |= Q(resource_type=rtype, resource_id=rid)
    for rtype, rid, org in UsageRecord.objects.filter(q).values_list(
            "resource_type", "resource_id", "organization_id").distinct():
        owners.setdefault((rtype, rid), set()).add(org)
    q = Q()
    for rtype, rid, start, end in spans:
        for org in owners.get((rtype, rid), ()):
            q |= Q(organization_id=org, period_start__lt=end, period_end__gt=start)
    if not q:
        return Invoice.objects.none()
    return Invoice.objects.filter(q).exclude(status=InvoiceStatus.VOID).order_by("period", "number")


def incident_correction_apply(actor, was, incident) -> None:
    """Hook of `apps.inventory.services.incident_update` (inside its transaction, after the change is saved):
    `was` the incident before, `incident` after. Brings the incident's downtime up to date; then 409
    `incident_already_credited` (with `invoices`, their numbers) when an invoice that is finalized or paid billed
    the resources' usage during the incident's old or new window (its SLA report and credit were computed from
    it), else re-rates each draft of those months (an invoice run of the month, `finalize` false, for those
    organizations)."""
    clock = now()
    before = _downtime(incident.pk)
    lo, hi = min(was.start, incident.start), max(was.end or clock, incident.end or clock)
    downtime_sync(window_start=lo, window_end=hi)
    invoices = list(_billed_invoices(before + _downtime(incident.pk)))
    final = [i for i in invoices if i.status in (InvoiceStatus.FINALIZED, InvoiceStatus.PAID)]
    if final:
        numbers = [i.display_number for i in final]
        raise Conflict(f"This incident's downtime and SLA credit are on finalized invoice {', '.join(numbers)}; its "
                       "start, end and provider fault can no longer be changed. Issue a credit note on the "
                       "invoice instead.", code=Code.INCIDENT_ALREADY_CREDITED, invoices=numbers)
    periods: dict[str, set] = {}
    for inv in invoices:
        periods.setdefault(inv.period, set()).add(inv.organization_id)
    for period, orgs in sorted(periods.items()):
        invoice_run_execute(actor=actor, period=period, finalize=False, organization_ids=sorted(orgs, key=str))
