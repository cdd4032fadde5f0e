"""Demo catalog for `manage.py demo_load` (idempotent): public flavors for the inventory sample fleet (HGX H100,
H200 in MIG mode, L40S in vGPU mode, CPU only) and one Ubuntu cloud image.

The image's checksum is left empty: the demo fleet's hosts run libvirt's `test:///default` driver and boot
nothing. An operator registering a real image gives its `sha256:` checksum (POST /api/v1/images)."""
from __future__ import annotations

from django.db import transaction

from .models import Flavor, Image

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
