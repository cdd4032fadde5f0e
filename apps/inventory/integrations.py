"""What inventory plugs into other apps, registered once from `InventoryConfig.ready`: the names tenancy's
quota resources may be qualified with, from the GPU catalog (`gpus:<model key>`, `mig_slices:<MIG profile>`,
`vgpus:<vGPU type>`), the fleet's capacity for quota warnings (`selectors.fleet_capacity`), and the
Prometheus collector of hosts and agents seen (`metrics.HostCollector`) in core's registry."""
from __future__ import annotations

from apps.core.metrics import register_collector
from apps.tenancy.quotas import register_fleet_capacity, register_quota_qualifiers

from . import metrics, selectors
from .catalog import gpu_model_list


def _gpu_models() -> set[str]:
    return {m.key for m in gpu_model_list()}


def _mig_profiles() -> set[str]:
    return {p.name for m in gpu_model_list() if m.mig for p in m.mig.profiles}


def _vgpu_types() -> set[str]:
    return {t.name for m in gpu_model_list() for t in m.vgpu_types}


def register() -> None:
    register_quota_qualifiers("gpus", _gpu_models)
    register_quota_qualifiers("mig_slices", _mig_profiles)
    register_quota_qualifiers("vgpus", _vgpu_types)
    register_fleet_capacity(selectors.fleet_capacity)
    register_collector(metrics.COLLECTOR)
