"""Health event kinds, sources and effects (docs/health.md)."""

from django.db import models


class EventKind(models.TextChoices):
    XID = "xid", "NVIDIA XID error"
    ECC_DBE = "ecc_dbe", "ECC double-bit (uncorrectable) error"
    ECC_SBE = "ecc_sbe", "ECC single-bit (correctable) error"
    ROW_REMAP_FAILURE = "row_remap_failure", "HBM row remapping failure"
    NVLINK_DOWN = "nvlink_down", "NVLink down"
    PCIE_DEGRADED = "pcie_degraded", "PCIe link degraded"
    THERMAL = "thermal", "Thermal violation"
    FALLEN_OFF_BUS = "fallen_off_bus", "GPU fallen off the bus"
    IB_PORT_DOWN = "ib_port_down", "InfiniBand port down"
    HEARTBEAT_LOST = "heartbeat_lost", "Agent heartbeat lost"
    DEVICE_OP_FAILED = "device_op_failed", "Device operation failed"
    TENANT_REPORT = "tenant_report", "Tenant report"


class EventSource(models.TextChoices):
    AGENT = "agent", "Node agent"
    STAFF = "staff", "Staff (health_inject)"
    CONTROL_PLANE = "control_plane", "Control plane"


#: Effects a classification row may name. Applied now: the cordon/drain/fault ones (through inventory services)
#: and provider_at_fault (the incident billing reads). Recorded as pending hooks for remediation: the rest.
EFFECTS_APPLIED = ("cordon_gpu", "cordon_host", "drain_host", "provider_at_fault")
EFFECTS_HOOKS = ("reset_gpu", "reboot_host", "rma")
EFFECTS = EFFECTS_APPLIED + EFFECTS_HOOKS
