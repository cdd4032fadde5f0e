"""Demo storage catalog for `manage.py demo_load` (idempotent): one shared volume type, `ssd`, whose pool is a
`dir` pool of the libvirt that `STORAGE_SHARED_POOL_URI` names (`make run` sets `test:///default`, the demo
fleet's in-process test driver: 100 GiB of pool there, docs/storage.md)."""
from __future__ import annotations

from .models import VolumeType

VOLUME_TYPE = {"name": "ssd", "description": "SSD, shared (demo: libvirt's test driver)", "pool": "gpucloud-demo-ssd",
               "pool_kind": "dir", "pool_target_path": "/var/lib/gpucloud/demo-ssd", "iops_class": "standard",
               "max_size_gib": 100}


def load_demo(stdout) -> None:
    _row, created = VolumeType.objects.get_or_create(name=VOLUME_TYPE["name"], defaults=VOLUME_TYPE)
    stdout.write(f"storage: {int(created)} demo volume type created (ssd)\n")
