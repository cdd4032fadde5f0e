"""Billing test helpers: real rows, the real recorder and invoice run; usage comes from a *registered test usage
source* and placements from a registered test resolver (compute does not exist yet; no production source is
faked)."""
from __future__ import annotations

import datetime as dt
import importlib
from decimal import Decimal

import pytest

from apps.billing import registry
from apps.billing.registry import Placement, UsageInterval
from apps.billing.services import price_book_create, price_set, usage_record_collect
from apps.billing.skus import sku_for
from apps.tenancy.models import Organization, Project

UTC = dt.UTC
H100 = sku_for("gpu", model="H100-SXM5-80GB", gpu_count=1)


def utc(*args) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def pdf_text(pdf: bytes) -> str:
    """The text of every page of `pdf` as PDFium reads it (what a reader copies out of the document; the PDFs
    embed their font, so their bytes do not hold the text)."""
    import pypdfium2 as pdfium

    return "\n".join(page.get_textpage().get_text_range() for page in pdfium.PdfDocument(pdf))


class FakeFleet:
    """The test usage source and placement resolver: intervals and placements the test declares."""

    def __init__(self):
        self.intervals: list[UsageInterval] = []
        self.placements: list[tuple] = []  # (host_id, gpu_id, Placement)

    def source(self, start, end):
        return [i for i in self.intervals if i.start < end and (i.end is None or i.end > start)]

    def resolver(self, host_id, gpu_id, start, end):
        return [p for (h, g, p) in self.placements
                if h == host_id and (gpu_id is None or g == gpu_id) and p.start < end
                and (p.end is None or p.end > start)]

    def run(self, org, project, resource_id, start, end, *, sku=H100, model="on_demand", tier="", key=None,
            **extra) -> UsageInterval:
        interval = UsageInterval(key=key or f"{resource_id}:{start.isoformat()}", organization_id=org.id,
                                 project_id=project.id, resource_type=extra.pop("resource_type", "instance"),
                                 resource_id=str(resource_id), sku=sku, pricing_model=model, start=start, end=end,
                                 sla_tier=tier, gpu_model=extra.pop("gpu_model", "H100-SXM5-80GB"), **extra)
        self.intervals.append(interval)
        return interval

    def place(self, host_id, resource_id, start, end=None, gpu_id=None, resource_type="instance", project=None):
        self.placements.append((host_id, gpu_id, Placement(resource_type, str(resource_id), start, end,
                                                            project_id=str(project.pk) if project else "")))


@pytest.fixture
def fleet():
    fake = FakeFleet()
    registry.register_usage_source("test.fleet", fake.source)
    registry.register_placement_resolver("test.fleet", fake.resolver)
    yield fake
    registry.unregister_usage_source("test.fleet")
    registry.unregister_placement_resolver("test.fleet")


@pytest.fixture
def tiers(db):
    """The default tiers as migration 0002 ships them (re-seeded: a transactional test may have flushed them)."""
    migration = importlib.import_module("apps.billing.migrations.0002_defaults_and_guards")
    from django.apps import apps

    migration.seed(apps, None)


def collect(start: dt.datetime, end: dt.datetime) -> dict:
    return usage_record_collect(window_start=start, window_end=end, sources=["test.fleet"])


def make_org(slug: str, *, tz: str = "UTC", currency: str = "USD", tier: str = "standard"):
    org = Organization.objects.create(slug=slug, name=slug, billing_timezone=tz, currency=currency,
                                      default_sla_tier=tier)
    return org, Project.objects.create(organization=org, slug="p1", name="P1")


def book(effective_from: dt.datetime, prices: dict, *, currency: str = "USD", name: str = "list"):
    """prices: {(sku, tier, model): unit_price or dict(unit_price=..., unit=..., ...)}."""
    b = price_book_create(actor=None, name=name, currency=currency, effective_from=effective_from)
    for (sku, tier, model), spec in prices.items():
        spec = spec if isinstance(spec, dict) else {"unit_price": Decimal(str(spec))}
        price_set(actor=None, book=b, sku=sku, sla_tier=tier, pricing_model=model, **spec)
    return b


@pytest.fixture
def host(db):
    from apps.inventory.models import Host, Region, Zone

    zone = Zone.objects.create(region=Region.objects.create(name="r1"), name="r1-a")

    def make(name: str):
        return Host.objects.create(name=name, zone=zone, serial=f"SN-{name}")
    return make


def incident(host, start, end, *, at_fault=True, gpu=None):
    from apps.inventory.models import Incident

    return Incident.objects.create(host=host, gpu=gpu, start=start, end=end, reason="host fault",
                                   provider_at_fault=at_fault)
