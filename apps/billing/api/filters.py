"""FilterSets of the billing API (explicit fields)."""
import datetime as dt
import uuid

import django_filters
from django.db.models import DateTimeField, F, Func, Q, Value

from apps.core.filters import FilterSet, IsoDateTimeFilter
from apps.core.references import VisibleFilter
from apps.tenancy.selectors import organization_list_visible_to, project_list_visible_to

from .. import conf
from ..models import (
    Adjustment,
    CreditNote,
    Invoice,
    InvoiceRun,
    LateUsage,
    Price,
    SlaReport,
    TaxRate,
    UsageRecord,
)
from ..periods import parse_period
from ..selectors import invoice_line_list_visible_to, invoice_list_visible_to, price_book_list_visible_to
from ..skus import sku_for
from ..states import LineKind


class UsageRecordFilter(FilterSet):
    """`since`/`until`: usage overlapping [since, until); `period` (YYYY-MM): the billing month in the
    organization's billing time zone. `invoice_line`: the records behind a usage line of an invoice the caller may
    read — the line's organization, project, resource, SKU, pricing model and SLA tier with usage in the invoice's
    period as rating takes it (records starting less than one metering period before the period are clipped into
    it); for a late-usage line ("late usage of YYYY-MM: ...") the late records carried onto that invoice. A line
    split at a price change shares its records with the other part. An adjustment or SLA credit line has none; a
    line the caller cannot see is `Not found.` (400)."""

    since = IsoDateTimeFilter(field_name="end", lookup_expr="gt")
    until = IsoDateTimeFilter(field_name="start", lookup_expr="lt")
    period = django_filters.CharFilter(method="filter_period", help_text="YYYY-MM, billing month of the organization")
    organization = VisibleFilter(organization_list_visible_to)
    project = VisibleFilter(project_list_visible_to)
    invoice_line = VisibleFilter(invoice_line_list_visible_to, method="filter_invoice_line")

    class Meta:
        model = UsageRecord
        fields = ["organization", "project", "sku", "resource_type", "resource_id", "pricing_model", "since", "until",
                  "period", "invoice_line"]

    def filter_invoice_line(self, queryset, name, value: uuid.UUID):  # the hint types the schema; value: the line
        line, invoice = value, value.invoice
        if line.kind != LineKind.USAGE:
            return queryset.none()
        queryset = queryset.filter(organization_id=invoice.organization_id, project_id=line.project_id,
                                   resource_type=line.resource_type, resource_id=line.resource_id, sku=line.sku,
                                   pricing_model=line.pricing_model, sla_tier=line.sla_tier)
        if line.description.startswith("late usage of "):
            return queryset.filter(id__in=LateUsage.objects.filter(invoice=invoice).values("usage_record_id"))
        step = conf.get("BILLING_METERING_PERIOD_SECONDS")
        return queryset.filter(start__lt=invoice.period_end, end__gt=invoice.period_start,
                               start__gt=invoice.period_start - dt.timedelta(seconds=step))

    def filter_period(self, queryset, name, value):
        year, month = parse_period(value)
        nyear, nmonth = year + month // 12, month % 12 + 1
        start = Func(Value(year), Value(month), Value(1), Value(0), Value(0), Value(0),
                     F("organization__billing_timezone"), function="make_timestamptz", output_field=DateTimeField())
        end = Func(Value(nyear), Value(nmonth), Value(1), Value(0), Value(0), Value(0),
                   F("organization__billing_timezone"), function="make_timestamptz", output_field=DateTimeField())
        return queryset.filter(start__lt=end, end__gt=start)


class InvoiceFilter(FilterSet):
    organization = VisibleFilter(organization_list_visible_to)

    class Meta:
        model = Invoice
        fields = ["organization", "period", "status", "number"]


class CreditNoteFilter(FilterSet):
    organization = VisibleFilter(organization_list_visible_to)
    invoice = VisibleFilter(invoice_list_visible_to)

    class Meta:
        model = CreditNote
        fields = ["organization", "invoice"]


class SlaReportFilter(FilterSet):
    organization = VisibleFilter(organization_list_visible_to)
    project = VisibleFilter(project_list_visible_to)

    class Meta:
        model = SlaReport
        fields = ["organization", "project", "period", "resource_type", "resource_id", "sla_tier"]


class PriceFilter(FilterSet):
    """`flavor`: the prices an instance of that flavor is rated at (its on-demand SKU and, with a GPU model, the
    spot SKU of its GPUs); an id the caller cannot see is `Not found.` (400). `resource`: the SKU kind (`flavor`,
    `gpu`, `mig`, `vgpu`, `share`, `public_ip`, `lease`, `apps.billing.skus`). `currency`: ISO 4217."""

    book = VisibleFilter(price_book_list_visible_to)
    flavor = VisibleFilter("apps.compute.selectors.flavor_list_visible_to", method="filter_flavor")
    resource = django_filters.CharFilter(method="filter_resource", help_text="SKU kind, e.g. flavor, gpu, public_ip")
    currency = django_filters.CharFilter(field_name="book__currency")

    class Meta:
        model = Price
        fields = ["book", "flavor", "resource", "sku", "sla_tier", "pricing_model", "currency"]

    def filter_flavor(self, queryset, name, value: uuid.UUID):  # the hint types the schema; value: the Flavor
        # the SKUs compute rates a flavor's instances at (`apps.compute.billing.flavor_sku`; billing may not import
        # compute): on-demand ``flavor:name=<flavor>``, spot ``gpu:model=<model>``
        skus = {sku_for("flavor", name=value.name)}
        if value.gpu_model:
            skus.add(sku_for("gpu", model=value.gpu_model))
        return queryset.filter(sku__in=skus)

    def filter_resource(self, queryset, name, value):
        return queryset.filter(Q(sku=value) | Q(sku__startswith=f"{value}:"))


class InvoiceRunFilter(FilterSet):
    class Meta:
        model = InvoiceRun
        fields = ["period", "status"]


class TaxRateFilter(FilterSet):
    on = django_filters.DateFilter(method="filter_on", label="in force on this day")

    class Meta:
        model = TaxRate
        fields = ["country", "region"]

    def filter_on(self, queryset, name, value):
        return queryset.filter(Q(effective_to__isnull=True) | Q(effective_to__gt=value), effective_from__lte=value)


class AdjustmentFilter(FilterSet):
    organization = VisibleFilter(organization_list_visible_to)

    class Meta:
        model = Adjustment
        fields = ["organization", "period"]
