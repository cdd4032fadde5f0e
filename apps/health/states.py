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
    IB_LINK_FLAP = "ib_link_flap", "InfiniBand link flap"
    IB_PORT_ERRORS = "ib_port_errors", "InfiniBand port error counters"
    IB_RATE_DEGRADED = "ib_rate_degraded", "InfiniBand port below the host's rate"
    NVSWITCH_FATAL = "nvswitch_fatal", "NVSwitch fatal SXid error"
    NVSWITCH_NONFATAL = "nvswitch_nonfatal", "NVSwitch non-fatal SXid error"
    FABRIC_INCOMPLETE = "fabric_incomplete", "GPU fabric registration not completed"
    FABRIC_MANAGER_DOWN = "fabric_manager_down", "Fabric Manager not running"
    HEARTBEAT_LOST = "heartbeat_lost", "Agent heartbeat lost"
    DEVICE_OP_FAILED = "device_op_failed", "Device operation failed"
    TENANT_REPORT = "tenant_report", "Tenant report"


#: kinds whose events carry a number in `xid` (required): the XID, or the NVSwitch's SXid
XID_KINDS = (EventKind.XID, EventKind.NVSWITCH_FATAL, EventKind.NVSWITCH_NONFATAL)
#: kinds about one NVSwitch (its PCI address in `nvswitch` required; `nvswitch_port` the port the driver names)
NVSWITCH_KINDS = (EventKind.NVSWITCH_FATAL, EventKind.NVSWITCH_NONFATAL)


class EventSource(models.TextChoices):
    AGENT = "agent", "Node agent"
    STAFF = "staff", "Staff (health_inject)"
    CONTROL_PLANE = "control_plane", "Control plane"


#: Effects a classification row may name. Applied now: the cordon/drain/fault ones (through inventory services)
#: and provider_at_fault (the incident billing reads). Recorded as pending hooks for remediation: the rest.
EFFECTS_APPLIED = ("cordon_gpu", "cordon_host", "drain_host", "provider_at_fault")
EFFECTS_HOOKS = ("reset_gpu", "reboot_host", "rma")
EFFECTS = EFFECTS_APPLIED + EFFECTS_HOOKS


#: Effects that move tenant workloads off the faulty device (apps.health.services.remediation).
EFFECTS_REMEDIATION = ("recreate_vm",)
#: Fence the host (power it off through its BMC, read it back) before its VMs move (ADR 0218): a row naming it
#: with `recreate_vm` opens the remediations only once the fence is confirmed.
EFFECTS_FENCE = ("fence_host",)
EFFECTS = EFFECTS + EFFECTS_REMEDIATION + EFFECTS_FENCE


class FenceStatus(models.TextChoices):
    PENDING = "pending", "The power-off is to be sent to the BMC"
    POWERING_OFF = "powering_off", "The BMC accepted the power-off; waiting for it to read back off"
    CONFIRMED = "confirmed", "The host is off (the BMC read it back, or staff confirmed it)"
    FAILED = "failed", "Not fenced (no BMC, refused, or never read back off): the VMs are held"


class FenceMethod(models.TextChoices):
    BMC = "bmc", "The BMC read the power back off"
    MANUAL = "manual", "Staff confirmed the host is off"


OPEN_FENCE = (FenceStatus.PENDING, FenceStatus.POWERING_OFF)


class ConsentMode(models.TextChoices):
    """What a project lets the control plane do with its VMs on a failed device (docs/health.md)."""

    AUTO = "auto", "Move after the checkpoint notice's deadline"
    PROPOSE = "propose", "Move only once the tenant approves"
    OFF = "off", "Never move; tell the tenant"


class RemediationStatus(models.TextChoices):
    NOTICE = "notice", "Checkpoint notice sent; moves at the deadline (auto)"
    PROPOSED = "proposed", "Waiting for the tenant's approval (propose)"
    APPROVED = "approved", "Approved; moves when capacity allows"
    RUNNING = "running", "The re-create operation runs"
    SUCCEEDED = "succeeded", "Re-created on healthy capacity"
    FAILED = "failed", "The re-create failed"
    HELD = "held", "Not moved (consent off, a host-local volume, or the breaker)"
    CANCELLED = "cancelled", "The instance was deleted or stopped first"


OPEN_REMEDIATION = (
    RemediationStatus.NOTICE,
    RemediationStatus.PROPOSED,
    RemediationStatus.APPROVED,
    RemediationStatus.RUNNING,
)

R = RemediationStatus
_OPEN = {R.NOTICE, R.PROPOSED, R.APPROVED}
REMEDIATION_TRANSITIONS = {
    "approve": ({R.NOTICE, R.PROPOSED}, R.APPROVED),
    "start": ({R.NOTICE, R.APPROVED}, R.RUNNING),
    "succeed": ({R.RUNNING}, R.SUCCEEDED),
    "fail": ({R.RUNNING}, R.FAILED),
    # the re-create found no capacity before it left the old host (the VM runs there still): wait again
    "requeue": ({R.RUNNING}, R.APPROVED),
    "cancel": (_OPEN | {R.RUNNING}, R.CANCELLED),
}


class RepairKind(models.TextChoices):
    REPAIR = "repair", "Repair after a fault (reset or reboot, then the check)"
    ACCEPTANCE = "acceptance", "Acceptance of a newly enrolled host (the check only)"


class RepairAction(models.TextChoices):
    RESET_GPU = "reset_gpu", "GPU reset"
    REBOOT_HOST = "reboot_host", "Host reboot"
    NONE = "none", "None (the check only)"


class RepairStatus(models.TextChoices):
    WAITING = "waiting", "Waiting for the device to hold no tenant"
    REPAIRING = "repairing", "The reset or reboot is queued for the agent"
    CHECKING = "checking", "The return-to-service check is queued for the agent"
    PASSED = "passed", "Passed: back in service"
    FAILED = "failed", "Failed (the next attempt, or an RMA, follows)"
    CANCELLED = "cancelled", "Cancelled (the host was retired)"


OPEN_REPAIR = (RepairStatus.WAITING, RepairStatus.REPAIRING, RepairStatus.CHECKING)


class RmaPart(models.TextChoices):
    GPU = "gpu", "GPU"
    HOST = "host", "Host (server)"


class RmaOutcome(models.TextChoices):
    REPLACED = "replaced", "The vendor replaced the part"
    REPAIRED = "repaired", "The vendor repaired the part"
    REJECTED = "rejected", "The vendor found no fault"
