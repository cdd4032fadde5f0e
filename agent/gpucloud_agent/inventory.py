"""Build the inventory document the control plane syncs (`apps.inventory.services.agent.host_inventory_sync`)."""
from __future__ import annotations

from .backends.base import GpuBackend


def collect(backend: GpuBackend) -> dict:
    """{"host": {...facts, "boot_id", "booted_at"}, "gpus": [...], "hca_ports": [...], "nvswitch": {"active_partitions": [...]}}."""
    partitions = backend.partitions() or {}
    doc = {"host": backend.host_facts(), "gpus": [g.as_dict() for g in backend.gpus()],
           "hca_ports": backend.hca_ports(), "nvswitch": {}}
    if partitions:
        doc["nvswitch"] = {"active_partitions": partitions.get("active", [])}
    try:
        doc["host"]["boot_id"] = backend.boot_id()  # a new one tells the control plane the host rebooted
        doc["host"]["booted_at"] = backend.booted_at()  # ISO 8601: VMs shut off since then were the reboot's
    except (OSError, AttributeError):
        pass
    for g in doc["gpus"]:
        g["driver_version"] = doc["host"].get("driver_version", "")
    return doc
