"""Billing API.

Tenant (read): /usage, /invoices (+ /csv, /pdf), /credit-notes (+ /csv, /pdf), /sla-reports, /sla-tiers, /prices (its own).
Staff (admin billing portal; any staff reads, billing admins write — `IsStaffBillingAdmin`): /price-books
(+ /prices), every price in /prices, /sla-tiers writes, /billing-accounts, /tax-rates, /invoice-runs, /invoices/{id}/finalize|pay|void, /credit-notes (create),
/adjustments, /billing/rerate, /billing/reports/revenue, /billing/reports/utilization.
Querysets come from `apps.billing.selectors`, so another tenant's object is a 404 (in a body: "Not found.", a 400).
"""
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api import UUID_PATTERN, ApiViewMixin, validated
from apps.core.errors import NotFound
from apps.core.idempotency import IDEMPOTENCY_KEY_PARAMETER, idempotent_create
from apps.core.schema import problems
from apps.identity.permissions import IsStaffBillingAdmin
from apps.inventory.selectors import incident_list_visible_to

from .. import exports, reports, selectors, services
from ..models import Adjustment, BillingAccount, InvoiceRun, PriceBook
from . import filters
from . import serializers as s


class _Base(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    staff_actions: frozenset = frozenset()

    def get_permissions(self):
        if self.action in self.staff_actions:
            return [IsStaffBillingAdmin()]
        return [IsAuthenticated()]


class _StaffBase(_Base):
    def get_permissions(self):
        return [IsStaffBillingAdmin()]


class UsageRecordViewSet(_Base):
    """Metered usage: one record per resource, SKU and metering hour. Filter by project, SKU and period."""

    serializer_class = s.UsageRecordOutput
    filterset_class = filters.UsageRecordFilter

    def get_queryset(self):
        return selectors.usage_record_list_visible_to(self.request.user)


class InvoiceViewSet(_Base):
    """Invoices of the caller's organizations (owners, admins, billing members; drafts only for staff)."""

    serializer_class = s.InvoiceOutput
    filterset_class = filters.InvoiceFilter
    staff_actions = frozenset({"finalize", "pay", "void"})

    def get_queryset(self):
        return selectors.invoice_list_visible_to(self.request.user).prefetch_related("lines", "credit_notes")

    @extend_schema(parameters=[s.InvoicePreviewQuery], responses={200: s.InvoicePreviewOutput}, description=(
        "Month to date: the caller's organization's invoice for its current month (billing time zone) as the "
        "invoice run would compute it now, from the usage recorded so far (closed metering periods); computed on "
        "each call and never stored (`services.invoice_preview`). `organization` must be one whose bills the "
        "caller reads (owner, admin, billing member; staff any), else `Not found.` (400)."))
    @action(detail=False, methods=["get"])
    def preview(self, request):
        query = self._input(s.InvoicePreviewQuery, data=request.query_params)

        def serialize(invoice):
            invoice.usage_until = None
            return dict(s.InvoicePreviewOutput(invoice).data)

        return Response(services.invoice_preview(organization=query["organization"], serialize=serialize))

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR})
    @action(detail=True, methods=["get"])
    def csv(self, request, pk=None):
        invoice = self.get_object()
        response = HttpResponse(exports.invoice_csv(invoice), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="invoice-{invoice.period}-{invoice.pk}.csv"'
        return response

    @extend_schema(responses={(200, "application/pdf"): OpenApiTypes.BINARY})
    @action(detail=True, methods=["get"])
    def pdf(self, request, pk=None):
        invoice = self.get_object()
        response = HttpResponse(exports.invoice_pdf(invoice), content_type="application/pdf")
        response["Content-Disposition"] = f'attachment; filename="invoice-{invoice.period}-{invoice.pk}.pdf"'
        return response

    @extend_schema(request=None, responses={200: s.InvoiceOutput, **problems({
        409: "invalid_state: only a draft invoice is finalized (allowed_states); unpriced_usage: usage"
             " without a price in the price book; period_not_ended: the invoice's period has not ended yet"
             " (period_end)."})})
    @action(detail=True, methods=["post"])
    def finalize(self, request, pk=None):
        return self._out(services.invoice_finalize(actor=request.user, invoice=self.get_object()))

    @extend_schema(request=s.InvoicePayInput, responses={200: s.InvoiceOutput},
                   parameters=[IDEMPOTENCY_KEY_PARAMETER])  # @action replaces the inner decorator's schema
    @action(detail=True, methods=["post"])
    @idempotent_create
    def pay(self, request, pk=None):
        data = self._input(s.InvoicePayInput)
        return self._out(services.invoice_pay(actor=request.user, invoice=self.get_object(), **data))

    @extend_schema(request=s.InvoiceVoidInput, responses={200: s.InvoiceOutput})
    @action(detail=True, methods=["post"])
    def void(self, request, pk=None):
        data = self._input(s.InvoiceVoidInput)
        return self._out(services.invoice_void(actor=request.user, invoice=self.get_object(), **data))


class CreditNoteViewSet(_Base):
    """Credit notes against finalized invoices; billing admins issue them."""

    serializer_class = s.CreditNoteOutput
    filterset_class = filters.CreditNoteFilter
    staff_actions = frozenset({"create"})

    def get_queryset(self):
        return selectors.credit_note_list_visible_to(self.request.user).select_related("invoice__organization")

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR},
                   description="The credit note as CSV: the credit row, then amount, tax and total rows.")
    @action(detail=True, methods=["get"])
    def csv(self, request, pk=None):
        note = self.get_object()
        response = HttpResponse(exports.credit_note_csv(note), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="credit-note-{note.display_number}.csv"'
        return response

    @extend_schema(responses={(200, "application/pdf"): OpenApiTypes.BINARY},
                   description="The credit note as PDF: seller, buyer, issue date, the invoice it corrects, reason "
                               "and amounts.")
    @action(detail=True, methods=["get"])
    def pdf(self, request, pk=None):
        note = self.get_object()
        response = HttpResponse(exports.credit_note_pdf(note), content_type="application/pdf")
        response["Content-Disposition"] = f'attachment; filename="credit-note-{note.display_number}.pdf"'
        return response

    @extend_schema(request=s.CreditNoteCreateInput, responses={201: s.CreditNoteOutput})
    @idempotent_create
    def create(self, request):
        data = self._input(s.CreditNoteCreateInput)
        invoice = data.pop("invoice")
        note = services.credit_note_create(actor=request.user, invoice=invoice, **data)
        return self._out(note, status.HTTP_201_CREATED)


class SlaReportViewSet(_Base):
    """Monthly uptime and SLA credit per resource that had provider-caused downtime."""

    serializer_class = s.SlaReportOutput
    filterset_class = filters.SlaReportFilter

    def get_queryset(self):
        return selectors.sla_report_list_visible_to(self.request.user)


class SlaTierViewSet(ApiViewMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """SLA tiers (the public offer, a short list: no per-tier GET); billing admins create and edit them."""

    lookup_value_regex = UUID_PATTERN
    staff_actions = frozenset({"create", "partial_update"})
    get_permissions = _Base.get_permissions
    _input = _Base._input
    _out = _Base._out

    serializer_class = s.SlaTierOutput
    filterset_class = None

    def get_queryset(self):
        return selectors.sla_tier_list_visible_to(self.request.user)

    @extend_schema(request=s.SlaTierCreateInput, responses={201: s.SlaTierOutput})
    def create(self, request):
        tier = services.sla_tier_create(actor=request.user, **self._input(s.SlaTierCreateInput))
        return self._out(tier, status.HTTP_201_CREATED)

    @extend_schema(request=s.SlaTierUpdateInput, responses={200: s.SlaTierOutput})
    def partial_update(self, request, pk=None):
        tier = self.get_object()
        data = self._input(s.SlaTierUpdateInput)
        return self._out(services.sla_tier_update(actor=request.user, tier=tier, **data))


class PriceBookViewSet(_StaffBase):
    """Price books (effective-dated, per currency) and their prices."""

    serializer_class = s.PriceBookOutput
    filterset_class = None

    def get_queryset(self):
        return selectors.price_book_list_visible_to(self.request.user)

    @extend_schema(request=s.PriceBookCreateInput, responses={201: s.PriceBookOutput})
    def create(self, request):
        book = services.price_book_create(actor=request.user, **self._input(s.PriceBookCreateInput))
        return self._out(book, status.HTTP_201_CREATED)

    @extend_schema(request=s.PriceSetInput, responses={201: s.PriceOutput, 200: s.PriceOutput}, description=(
        "Set the price of (sku, sla_tier, pricing_model) in the book: 201 when the book had no price of that key, "
        "200 when it replaced the book's existing price of that key."))
    @action(detail=True, methods=["post"])
    def prices(self, request, pk=None):
        book = self.get_object()
        price, created = services.price_set(actor=request.user, book=book, **self._input(s.PriceSetInput))
        return self._out(price, status.HTTP_201_CREATED if created else status.HTTP_200_OK, cls=s.PriceOutput)


class PriceViewSet(_Base):
    """Prices. Staff: every price of every book. A tenant (any role, read scope enough): the price list that
    applies to its organizations, the prices in force now at each organization's currency and default SLA tier
    (docs/adr/0603-tenant-price-list.md). Filter by flavor, resource (SKU kind), SKU, tier, model, currency, book
    (staff)."""

    serializer_class = s.PriceOutput
    filterset_class = filters.PriceFilter

    def get_queryset(self):
        return selectors.price_list_visible_to(self.request.user).order_by("sku", "sla_tier", "pricing_model",
                                                                            "book__currency", "id")


class InvoiceRunViewSet(_StaffBase):
    """Invoice runs. POST requests one for a period: 202 with the run (`pending`) and `Location:
    /api/v1/operations/{id}`; a worker runs it batch by batch (poll the run or the operation). Safe to repeat once
    finished (finalized invoices are never touched again); 409 `invoice_run_in_progress` while one for the same
    period and `finalize` is unfinished; 400 `period_too_early` for a month that ended before the first price book
    started; 409 `period_not_started` for a month that has not started, and with `finalize` 409 `period_not_ended`
    for one that has not ended (UTC bounds)."""

    serializer_class = s.InvoiceRunOutput
    filterset_class = filters.InvoiceRunFilter
    queryset = InvoiceRun.objects.all()

    @extend_schema(request=s.InvoiceRunCreateInput, responses={202: s.InvoiceRunOutput, **problems({
        400: "validation_error: a malformed period (YYYY-MM); period_too_early (on `period`, with "
             "first_price_book_start, UTC): a month that ended before the first price book started.",
        409: "invoice_run_in_progress: a run for the same period and finalize is unfinished; period_not_started:"
             " the period has not started yet (period_start, UTC); period_not_ended: finalize for a period that has"
             " not ended yet (period_end, UTC)."})})
    @idempotent_create
    def create(self, request):
        run = services.invoice_run_request(actor=request.user, **self._input(s.InvoiceRunCreateInput))
        response = self._out(run, status.HTTP_202_ACCEPTED)
        response["Location"] = f"/api/v1/operations/{run.operation_id}"
        return response


class AdjustmentViewSet(mixins.DestroyModelMixin, _StaffBase):
    """Manual charges and credits on an organization's invoice for a period; one of an open period can be
    deleted."""

    serializer_class = s.AdjustmentOutput
    filterset_class = filters.AdjustmentFilter
    queryset = Adjustment.objects.all()

    @extend_schema(request=s.AdjustmentCreateInput, responses={201: s.AdjustmentOutput})
    @idempotent_create
    def create(self, request):
        data = self._input(s.AdjustmentCreateInput)
        adjustment = services.adjustment_create(actor=request.user, **data)
        return self._out(adjustment, status.HTTP_201_CREATED)

    @extend_schema(responses={204: None, **problems({
        409: "period_closed: the adjustment's period is invoiced (finalized or paid); issue a credit note"})})
    def destroy(self, request, pk=None):
        services.adjustment_delete(actor=request.user, adjustment=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class BillingAccountViewSet(_StaffBase):
    """Per-organization billing settings (tax rate as a fraction, tax id, address). POST creates or updates."""

    serializer_class = s.BillingAccountOutput
    filterset_class = None
    queryset = BillingAccount.objects.all()

    @extend_schema(request=s.BillingAccountSetInput, responses={201: s.BillingAccountOutput,
                                                                200: s.BillingAccountOutput}, description=(
        "Create or update the organization's billing account: 201 when it had none (created), 200 when its existing "
        "account was updated (fields left out keep their values)."))
    def create(self, request):
        data = self._input(s.BillingAccountSetInput)
        account, created = services.billing_account_update(actor=request.user, **data)
        return self._out(account, status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class TaxRateViewSet(_StaffBase):
    """Tax rates per billing country (and optional region), effective-dated; an invoice takes the rate of its
    billing account's country in force on its period's last day (docs/billing.md, "Tax"). 409
    `tax_rate_overlap` when the window overlaps another rate of the same country and region."""

    serializer_class = s.TaxRateOutput
    filterset_class = filters.TaxRateFilter

    def get_queryset(self):
        return selectors.tax_rate_list_visible_to(self.request.user)

    @extend_schema(request=s.TaxRateCreateInput, responses={201: s.TaxRateOutput})
    def create(self, request):
        tax_rate = services.tax_rate_create(actor=request.user, **self._input(s.TaxRateCreateInput))
        return self._out(tax_rate, status.HTTP_201_CREATED)


class BillingOpsViewSet(viewsets.GenericViewSet):
    """Staff operations and reports of the admin billing portal."""

    permission_classes = [IsStaffBillingAdmin]
    serializer_class = s.RerateInput
    queryset = PriceBook.objects.none()
    filterset_class = None
    pagination_class = None

    @extend_schema(request=s.RerateInput, responses={200: s.InvoiceRunOutput(many=True), **problems({
        409: "period_not_started: the window reaches into a month that has not started (period_start, UTC). "
             "(period_not_ended, which a finalizing run answers, never comes from a re-rate: it drafts only.)"})})
    @action(detail=False, methods=["post"])
    def rerate(self, request):
        data = s.RerateInput(data=request.data)
        validated(data)
        runs = services.usage_rerate(actor=request.user, window_start=data.validated_data["start"],
                                     window_end=data.validated_data["end"])
        return Response(s.InvoiceRunOutput(runs, many=True).data)

    @extend_schema(parameters=[s.RevenueQuery], responses={200: s.RevenueRow(many=True)},
                   description="Revenue (before tax) of finalized and paid invoices of the periods, net of their "
                               "credit notes, by organization or GPU model (credit notes, which name no model, net "
                               "under the empty key), per currency.")
    @action(detail=False, methods=["get"], url_path="reports/revenue")
    def revenue(self, request):
        query = validated(s.RevenueQuery(data=request.query_params))
        return Response(s.RevenueRow(reports.revenue_report(**query), many=True).data)

    @extend_schema(parameters=[s.UtilizationQuery], responses={200: s.UtilizationRow(many=True)},
                   description="GPU-hours by GPU model or organization.")
    @action(detail=False, methods=["get"], url_path="reports/utilization")
    def utilization(self, request):
        query = validated(s.UtilizationQuery(data=request.query_params))
        return Response(s.UtilizationRow(reports.utilization_report(**query), many=True).data)





class IncidentImpactView(APIView):
    """`GET /api/v1/incidents/{id}/impact/`: the downtime and SLA credits an incident caused (staff; tenants 404)."""

    permission_classes = [IsStaffBillingAdmin]
    serializer_class = s.IncidentImpactOutput

    @extend_schema(responses={200: s.IncidentImpactOutput, **problems({
        404: "not_found: no such incident, or the caller is not provider staff."})},
        summary="An incident's affected resources, downtime and SLA credits (staff)")
    def get(self, request, pk):
        incident = incident_list_visible_to(request.user).filter(pk=pk).first()
        if incident is None:
            raise NotFound()
        return Response(s.IncidentImpactOutput(selectors.incident_impact(incident)).data)
