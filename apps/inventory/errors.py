"""Inventory error codes (stable snake_case) and the exceptions services raise."""
from enum import StrEnum

from apps.core.errors import Conflict, NotFound, ValidationFailed


class Code(StrEnum):
    FLEET_INVALID = "fleet_invalid"
    MIG_LAYOUT_REJECTED = "mig_layout_rejected"
    MIG_NOT_ENABLED = "mig_not_enabled"
    PARTITION_UNKNOWN = "nvswitch_partition_unknown"
    PARTITION_CONFLICT = "nvswitch_partition_conflict"
    PARTITION_NOT_ACTIVE = "nvswitch_partition_not_active"
    GPU_NOT_FOUND = "gpu_not_found"
    GPU_INSTANCE_NOT_FOUND = "gpu_instance_not_found"
    ENROLLMENT_TOKEN_INVALID = "enrollment_token_invalid"
    COMMAND_NOT_FOUND = "agent_command_not_found"
    COMMAND_INVALID = "agent_command_invalid"
    GPU_SCRUB_PENDING = "gpu_scrub_pending"
    GPU_SCRUB_NOT_FAILED = "gpu_scrub_not_failed"
    GPU_ALLOCATED = "gpu_allocated"
    VF_ALLOCATED = "vf_allocated"
    MIG_LAYOUT_MISMATCH = "mig_layout_mismatch"


class FleetInvalid(ValidationFailed):
    code = Code.FLEET_INVALID


class MigLayoutRejected(ValidationFailed):
    """The MIG planner rejected a layout; `rejections` lists each reason (code, message, details)."""

    code = Code.MIG_LAYOUT_REJECTED


class PartitionConflict(Conflict):
    code = Code.PARTITION_CONFLICT


class GpuNotFound(NotFound):
    code = Code.GPU_NOT_FOUND


class GpuScrubPending(Conflict):
    """The host has GPUs that are not `clean` (their scrub is queued or failed); `gpus` lists them."""

    code = Code.GPU_SCRUB_PENDING


class GpuAllocated(Conflict):
    """A change of the GPU's slicing or mode while an allocation in the ledger holds it; `holders` lists them."""

    code = Code.GPU_ALLOCATED


class VfAllocated(Conflict):
    """A staff command on an SR-IOV VF (a GPU's or an HCA's) that an instance holds; `vf_address`, `holders`
    (instance ids) say which."""

    code = Code.VF_ALLOCATED
