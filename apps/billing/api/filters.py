"""FilterSets of the billing API (explicit fields)."""
import django_filters

from ..models import Adjustment, CreditNote, Invoice, InvoiceRun, Price, SlaReport, UsageRecord


class UsageRecordFilter(django_filters.FilterSet):
    """`since`/`until`: usage overlapping [since, until); `period` (YYYY-MM, UTC month)."""

    since = django_filters.IsoDateTimeFilter(field_name="end", lookup_expr="gt")
    until = django_filters.IsoDateTimeFilter(field_name="start", lookup_expr="lt")

    class Meta:
        model = UsageRecord
        fields = ["organization", "project", "sku", "resource_type", "resource_id", "pricing_model", "since", "until"]


class InvoiceFilter(django_filters.FilterSet):
    class Meta:
        model = Invoice
        fields = ["organization", "period", "status", "number"]


class CreditNoteFilter(django_filters.FilterSet):
    class Meta:
        model = CreditNote
        fields = ["organization", "invoice"]


class SlaReportFilter(django_filters.FilterSet):
    class Meta:
        model = SlaReport
        fields = ["organization", "project", "period", "resource_type", "resource_id", "sla_tier"]


class PriceFilter(django_filters.FilterSet):
    class Meta:
        model = Price
        fields = ["book", "sku", "sla_tier", "pricing_model"]


class InvoiceRunFilter(django_filters.FilterSet):
    class Meta:
        model = InvoiceRun
        fields = ["period", "status"]


class AdjustmentFilter(django_filters.FilterSet):
    class Meta:
        model = Adjustment
        fields = ["organization", "period"]
