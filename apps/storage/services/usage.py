"""The metering intervals of volumes (`models.VolumeUsage`), written in the transaction of the state change they
follow; billing reads them through the usage source ``storage.volume`` (`selectors.volume_usage`)."""
from __future__ import annotations

from apps.core.clock import now

from ..models import Volume, VolumeUsage


def usage_close(volume: Volume, at=None) -> None:
    """End the volume's open interval at `at` (default now); nothing when none is open."""
    at = at or now()
    VolumeUsage.objects.filter(volume=volume, end__isnull=True, start__lt=at).update(end=at)
    VolumeUsage.objects.filter(volume=volume, end__isnull=True).delete()  # opened at this very instant


def usage_open(volume: Volume, at=None) -> None:
    """Start an interval at the volume's current size (closing any open one first)."""
    at = at or now()
    usage_close(volume, at)
    VolumeUsage.objects.create(volume=volume, project_id=volume.project_id,
                               volume_type_name=volume.volume_type.name, size_gib=volume.size_gib, start=at)
