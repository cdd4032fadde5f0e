"""Flavor and image writes (provider staff: operator)."""
from __future__ import annotations

import re

from django.db import IntegrityError, transaction

from apps.audit.services import audit_record
from apps.core.errors import Conflict, ValidationFailed
from apps.inventory.catalog import gpu_model_get
from apps.tenancy.authz import authorize_staff

from ..errors import Code
from ..models import Flavor, Image
from ..states import GpuForm, ProvisioningKind

FLAVOR_FIELDS = ("name", "description", "kind", "vcpus", "memory_mib", "disk_gib", "gpu_form", "gpu_model", "gpu_count",
                 "mig_profile", "vgpu_type", "share_milli", "hugepages", "visibility", "is_active")
CHECKSUM = re.compile(r"^sha256:[0-9a-f]{64}$")


def _validate_gpu_spec(f: dict) -> None:
    """The GPU fields must name one form that the GPU model catalog knows (apps/inventory/catalog)."""
    form = f.get("gpu_form", GpuForm.NONE)
    errors: dict[str, list[str]] = {}
    spec = gpu_model_get(f.get("gpu_model", "")) if f.get("gpu_model") else None
    if form != GpuForm.NONE and f.get("gpu_model") and spec is None:
        errors["gpu_model"] = [f"unknown GPU model {f.get('gpu_model')!r}"]
    if form == GpuForm.GPU and f.get("gpu_count", 0) < 1:
        errors["gpu_count"] = ["at least 1 for whole GPUs"]
    if form == GpuForm.MIG:
        if spec is None or spec.mig is None or spec.mig.profile(f.get("mig_profile", "")) is None:
            errors["mig_profile"] = ["not a MIG profile of this GPU model"]
    if form == GpuForm.VGPU and spec is not None and f.get("vgpu_type") not in {t.name for t in spec.vgpu_types}:
        errors["vgpu_type"] = ["not a vGPU type of this GPU model"]
    if form == GpuForm.SHARE and not 1 <= f.get("share_milli", 0) <= 999:
        errors["share_milli"] = ["1..999 milli-GPU"]
    if f.get("hugepages") and f.get("memory_mib", 0) % 1024:
        errors["memory_mib"] = ["a whole number of GiB when hugepages is on (1 GiB pages)"]
    if f.get("kind") == ProvisioningKind.BAREMETAL and (form != GpuForm.GPU or f.get("hugepages")):
        errors["kind"] = ["a bare-metal flavor is a whole host: gpu_form gpu, gpu_count = the host's GPUs"]
    if errors:
        raise ValidationFailed("Invalid GPU spec.", code=Code.INVALID_FLAVOR, errors=errors)


def flavor_create(*, actor, organizations=(), **fields) -> Flavor:
    """Create a flavor (staff operator). 400 `invalid_flavor` on a GPU spec the catalog does not know, or a
    `kind` `baremetal` flavor that is not whole GPUs (it stands for a whole host: `gpu_count` of `gpu_model`);
    409 `name_taken`."""
    authorize_staff(actor)
    fields = {k: v for k, v in fields.items() if k in FLAVOR_FIELDS}
    _validate_gpu_spec(fields)
    with transaction.atomic():
        try:
            with transaction.atomic():
                flavor = Flavor.objects.create(**fields)
        except IntegrityError as exc:
            raise Conflict(f"Flavor {fields.get('name')!r} exists or is inconsistent.", code=Code.NAME_TAKEN) from exc
        flavor.organizations.set(organizations)
        audit_record(actor=actor, action="compute.flavor.create", target=flavor,
                     after={**fields, "organizations": [o.pk for o in organizations]})
    return flavor


def image_create(*, actor, **fields) -> Image:
    """Register an image (staff operator). 400 when the checksum is not ``sha256:<hex>``; 409 `name_taken`."""
    authorize_staff(actor)
    if not CHECKSUM.match(fields.get("checksum", "")):
        raise ValidationFailed("checksum must be sha256:<64 lower-case hex digits>.",
                               errors={"checksum": ["sha256:<64 hex>"]})
    with transaction.atomic():
        if Image.objects.filter(name=fields["name"]).exists():
            raise Conflict(f"Image {fields['name']!r} exists.", code=Code.NAME_TAKEN)
        image = Image.objects.create(**fields)
        audit_record(actor=actor, action="compute.image.create", target=image, after=fields)
    return image
