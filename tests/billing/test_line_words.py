"""Invoice line descriptions read as words a customer understands (`apps.billing.wording`), on the invoice, the
month-to-date preview and the PDF alike: never the raw `resource_type resource_id sku` the rating joined."""
from decimal import Decimal

import pytest

from apps.billing.models import Invoice
from apps.billing.services import invoice_run_execute
from apps.billing.skus import sku_for

from .conftest import H100, book, collect, make_org, utc

pytestmark = pytest.mark.django_db
VM = "0190a3b4-1111-7000-8000-00000000beef"
IP = "0190a3b5-2222-7000-8000-00000000cafe"
FLAVOR = sku_for("flavor", name="h100-mig-3g40")
LEASE = "lease:model=H100,unit=node"


def test_usage_lines_read_as_words(tiers, fleet):
    org, project = make_org("acme")
    book(utc(2026, 1, 1), {(FLAVOR, "standard", "on_demand"): "0.99", (H100, "standard", "spot"): "1.00",
                           ("public_ip", "standard", "on_demand"): "0.01",
                           (LEASE, "standard", "reserved"): {"unit_price": Decimal("0"), "minimum_seconds": 0}})
    fleet.run(org, project, VM, utc(2026, 2, 1), utc(2026, 2, 1, 2), sku=FLAVOR)
    fleet.run(org, project, VM, utc(2026, 2, 3), utc(2026, 2, 3, 1), sku=H100, model="spot", key="spot")
    fleet.run(org, project, IP, utc(2026, 2, 1), utc(2026, 2, 1, 2), sku="public_ip",
              resource_type="networking.public_ip")
    fleet.run(org, project, "0190a3b6-lease", utc(2026, 2, 1), utc(2026, 3, 1), sku=LEASE, model="reserved",
              resource_type="lease", commitment_amount=Decimal("280"), commitment_start=utc(2026, 2, 1),
              commitment_end=utc(2026, 3, 1))
    collect(utc(2026, 2, 1), utc(2026, 3, 1))
    invoice_run_execute(period="2026-02")
    lines = sorted(Invoice.objects.get(organization=org).lines.values_list("description", flat=True))
    assert lines == [
        "Instance 0000beef (1 × H100-SXM5-80GB GPU), spot",
        "Instance 0000beef (h100-mig-3g40), on demand",
        "Public IP address 0000cafe, on demand",
        "Reserved commitment: Lease b6-lease (H100 GPUs), reserved",
    ]
    assert not any(VM in d or "flavor:" in d or "networking." in d for d in lines)


def test_resources_made_together_read_apart(tiers, fleet):
    """UUIDv7 ids made in the same millisecond share their first characters: the short id is their random end."""
    org, project = make_org("acme")
    book(utc(2026, 1, 1), {(FLAVOR, "standard", "on_demand"): "0.99"})
    for vm in ("01a23f20-0000-7000-8000-00000000aaaa", "01a23f20-0001-7000-8000-00000000bbbb"):
        fleet.run(org, project, vm, utc(2026, 2, 1), utc(2026, 2, 1, 1), sku=FLAVOR)
    collect(utc(2026, 2, 1), utc(2026, 2, 2))
    invoice_run_execute(period="2026-02")
    assert sorted(Invoice.objects.get(organization=org).lines.values_list("description", flat=True)) == [
        "Instance 0000aaaa (h100-mig-3g40), on demand", "Instance 0000bbbb (h100-mig-3g40), on demand"]


def test_a_lease_line_names_its_gpus_and_a_tier_other_than_the_default(tiers, fleet):
    """A lease is priced per GPU (`gpu:model=...`, its GPUs in `units`): its line names how many GPUs it held
    (`8–16` for one that grew, GPU equivalents for MIG instances) as an instance line names its count, and the SLA
    tier when it is not the organization's default; a line at the default tier says nothing of it."""
    org, project = make_org("acme")  # default tier: standard
    per_gpu = sku_for("gpu", model="H100-SXM5-80GB")
    book(utc(2026, 1, 1), {(per_gpu, "premium", "reserved"): "2.20", (per_gpu, "standard", "reserved"): "2.00",
                           (H100, "standard", "on_demand"): "1.00"})
    lease = {"sku": per_gpu, "model": "reserved", "resource_type": "lease"}
    fleet.run(org, project, "0190a3b6-0000-7000-8000-000000120064", utc(2026, 2, 1), utc(2026, 2, 1, 2),
              units=Decimal(16), tier="premium", **lease)
    grown = "0190a3b6-0000-7000-8000-000000120065"
    fleet.run(org, project, grown, utc(2026, 2, 2), utc(2026, 2, 2, 1), units=Decimal(8), run_key="g", key="g1",
              **lease)
    fleet.run(org, project, grown, utc(2026, 2, 2, 1), utc(2026, 2, 2, 2), units=Decimal(16), run_key="g",
              key="g2", **lease)
    fleet.run(org, project, "0190a3b6-0000-7000-8000-000000120066", utc(2026, 2, 3), utc(2026, 2, 3, 1),
              units=Decimal(9) / Decimal(7), **lease)
    fleet.run(org, project, VM, utc(2026, 2, 1), utc(2026, 2, 1, 1), sku=H100)
    collect(utc(2026, 2, 1), utc(2026, 3, 1))
    invoice_run_execute(period="2026-02")
    lines = dict(Invoice.objects.get(organization=org).lines.values_list("description", "amount"))
    assert lines == {
        "Lease 00120064 (16 × H100-SXM5-80GB GPU), reserved, Premium SLA": Decimal("70.40"),  # 32 GPU-h x 2.20
        "Lease 00120065 (8–16 × H100-SXM5-80GB GPU), reserved": Decimal("48.00"),
        "Lease 00120066 (1.29 × H100-SXM5-80GB GPU), reserved": Decimal("2.57"),
        "Instance 0000beef (1 × H100-SXM5-80GB GPU), on demand": Decimal("1.00"),
    }
