from django.urls import re_path

from apps.core.routers import ApiRouter

from . import views

router = ApiRouter()
router.register("usage", views.UsageRecordViewSet, basename="usage")
router.register("invoices", views.InvoiceViewSet, basename="invoice")
router.register("credit-notes", views.CreditNoteViewSet, basename="credit-note")
router.register("sla-reports", views.SlaReportViewSet, basename="sla-report")
router.register("sla-tiers", views.SlaTierViewSet, basename="sla-tier")
router.register("price-books", views.PriceBookViewSet, basename="price-book")
router.register("prices", views.PriceViewSet, basename="price")
router.register("invoice-runs", views.InvoiceRunViewSet, basename="invoice-run")
router.register("adjustments", views.AdjustmentViewSet, basename="adjustment")
router.register("billing-accounts", views.BillingAccountViewSet, basename="billing-account")
router.register("tax-rates", views.TaxRateViewSet, basename="tax-rate")
router.register("billing", views.BillingOpsViewSet, basename="billing")

urlpatterns = [
    re_path(r"^incidents/(?P<pk>[0-9a-fA-F-]{36})/impact/?$", views.IncidentImpactView.as_view(), name="incident-impact"),
    *router.urls,
]
