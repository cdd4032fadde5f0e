"""Demo catalog for `manage.py demo_load` (idempotent): public flavors for the inventory sample fleet (HGX H100,
H200 in MIG mode, L40S in vGPU mode, CPU only) and one Ubuntu cloud image; and the demo tenant's closed months
(`demo_months`): one instance that ran through the two calendar months before the load's, whose GPU had one
provider-fault incident in the first of them, so billing's demo (`apps.billing.demo`) meters real usage and an SLA
credit from them.

The image's checksum is left empty: the demo fleet's hosts run libvirt's `test:///default` driver and boot
nothing. An operator registering a real image gives its `sha256:` checksum (POST /api/v1/images)."""
from __future__ import annotations

import dataclasses
import datetime as dt

from django.db import transaction
from django.db.models import Q

from apps.billing.periods import period_bounds, period_of, previous_period
from apps.core.clock import now

from .models import Flavor, Image, Instance
from .states import InstanceStatus

FLAVORS = [
    {"name": "cpu-2", "vcpus": 2, "memory_mib": 4096, "disk_gib": 20},
    {"name": "h100-1x", "vcpus": 26, "memory_mib": 229376, "disk_gib": 500, "gpu_form": "gpu",
     "gpu_model": "H100-SXM5-80GB", "gpu_count": 1},
    {"name": "h100-8x", "vcpus": 208, "memory_mib": 1835008, "disk_gib": 4000, "gpu_form": "gpu",
     "gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "hugepages": True},
    {"name": "h100-mig-3g40", "vcpus": 8, "memory_mib": 65536, "disk_gib": 100, "gpu_form": "mig",
     "gpu_model": "H100-SXM5-80GB", "mig_profile": "3g.40gb"},
    {"name": "h200-mig-3g71", "vcpus": 8, "memory_mib": 98304, "disk_gib": 100, "gpu_form": "mig",
     "gpu_model": "H200-SXM-141GB", "mig_profile": "3g.71gb"},
    {"name": "l40s-vgpu-4q", "vcpus": 4, "memory_mib": 16384, "disk_gib": 50, "gpu_form": "vgpu",
     "gpu_model": "L40S", "vgpu_type": "L40S-4Q"},
]
IMAGE = {"name": "ubuntu-24-04", "os": "ubuntu", "os_version": "24.04", "arch": "x86_64", "cloud_init": True,
         "source_url": "https://cloud-images.ubuntu.com/releases/24.04/release/ubuntu-24.04-server-cloudimg-amd64.img",
         "checksum": "", "disk_format": "qcow2", "min_disk_gib": 4}


def load_demo(stdout) -> None:
    with transaction.atomic():
        created = [f["name"] for f in FLAVORS if Flavor.objects.get_or_create(name=f["name"], defaults=f)[1]]
        image_created = Image.objects.get_or_create(name=IMAGE["name"], defaults=IMAGE)[1]
    stdout.write(f"compute: {len(created)} demo flavors and {int(image_created)} image created "
                 f"({len(FLAVORS)} flavors in the demo catalog)\n")
    demo_months(stdout)


#: the demo tenant's instance of its closed months, and its GPU's incident: from the 10th of the first month,
#: 03:00 UTC, for 9 hours (below the standard tier's 99 % in any month, so it earns that tier's 10 % credit)
NAME_PREFIX = "demo-trainer-"
MONTHS_FLAVOR = "h100-1x"
FAULT_AFTER = dt.timedelta(days=9, hours=3)
FAULT_LASTS = dt.timedelta(hours=9)
FAULT_REASON = "XID 79: GPU fell off the bus (demo: the provider's fault, reseated)"
REPAIR_REASON = "GPU reseated, diagnostics passed (demo)"


def demo_months_window(at: dt.datetime | None = None) -> tuple[str, str, dt.datetime, dt.datetime]:
    """(first month, last month, start, end) of the demo tenant's closed months at `at` (default now): the two
    calendar months (UTC) before the one `at` is in, e.g. ("2026-10", "2026-11", 2026-10-01, 2026-12-01) on
    2026-12-05; start and end in UTC, half-open."""
    last = previous_period(period_of(at or now()))
    first = previous_period(last)
    return first, last, period_bounds(first)[0], period_bounds(last)[1]


def demo_months(stdout) -> Instance | None:
    """Give the demo project (`demo/demo`) an instance `demo-trainer-<last month>` of `h100-1x` that ran from the
    start of the first of its closed months (`demo_months_window`) to the end of the last, placed over that window by
    the placement engine and claimed in the allocation ledger like any instance (so compute's usage source and
    placement resolver give its usage and placements), then deleted; and one provider-fault incident of its GPU in
    the first month, opened and closed through inventory's GPU fault services (`gpu_mark_faulty`,
    `gpu_mark_healthy`, at the past instants). A load finding a demo instance that ran after the start of the first
    month (its own, or an earlier month's load's) adds nothing and returns that one; None without the demo project."""
    from apps.inventory.models import Gpu, Incident
    from apps.inventory.services.hosts import gpu_mark_faulty, gpu_mark_healthy
    from apps.scheduling.ledger import ConsumerRef
    from apps.scheduling.services import placement_claim
    from apps.tenancy.models import Project

    from .services.placement import CONSUMER_TYPE, placement_request_for

    project = Project.objects.filter(organization__slug="demo", slug="demo").first()
    if project is None:
        return None
    first, last, start, end = demo_months_window()
    name = f"{NAME_PREFIX}{last}"
    inst = (Instance.objects.filter(project=project, name__startswith=NAME_PREFIX, deleted_at__gt=start)
            .order_by("-deleted_at").first())
    if inst is not None:  # this month's load, or an earlier one whose instance ran into these months: once
        stdout.write(f"compute: demo instance {inst.name} present (ran until {inst.deleted_at:%Y-%m-%d})\n")
        return inst
    flavor = Flavor.objects.get(name=MONTHS_FLAVOR)
    with transaction.atomic():
        inst = Instance.objects.create(project=project, name=name, flavor=flavor, image=Image.objects.get(
            name=IMAGE["name"]), status=InstanceStatus.DELETED, launched_at=start, deleted_at=end,
            holds_gpu_quota=False, created_at=start)
        request = dataclasses.replace(placement_request_for(flavor, project.pk), start=start, end=end)
        placed = placement_claim(actor=None, request=request, consumers=ConsumerRef(
            id=inst.pk, consumer_type=CONSUMER_TYPE, project_id=project.pk))
        choice = placed.candidate.hosts[0]
        Instance.objects.filter(pk=inst.pk).update(host_id=choice.host_id, devices={"placement": choice.as_dict()})
        gpu = Gpu.objects.get(pk=next(s.gpu_id for s in choice.specs if s.gpu_id))
        fault_start = start + FAULT_AFTER
        if not Incident.objects.filter(Q(end__isnull=True) | Q(end__gt=fault_start), gpu=gpu).exists():
            gpu_mark_faulty(actor=None, gpu=gpu, reason=FAULT_REASON, at=fault_start)
            gpu_mark_healthy(actor=None, gpu=gpu, reason=REPAIR_REASON, at=fault_start + FAULT_LASTS)
    hours = FAULT_LASTS // dt.timedelta(hours=1)
    stdout.write(f"compute: demo instance {name} ran {first} and {last} on {choice.host_name} "
                 f"(gpu{gpu.index} down {hours} h on {fault_start:%Y-%m-%d}, the provider's fault)\n")
    return inst
