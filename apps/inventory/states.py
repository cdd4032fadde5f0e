"""Host, GPU and agent-command states, and the host condition TRANSITIONS table.

Host lifecycle (docs/fleet.md): ``enrolling -> available <-> cordoned -> draining ->
maintenance -> available``; any non-retired state -> ``faulty``; ``faulty -> available`` (closes the incident);
any state -> ``retired``. Applied with `apps.core.transitions.transition(host, action, HOST_TRANSITIONS,
field="state")`.
"""
from django.db import models


class HostState(models.TextChoices):
    ENROLLING = "enrolling", "Enrolling"
    AVAILABLE = "available", "Available"
    CORDONED = "cordoned", "Cordoned"
    DRAINING = "draining", "Draining"
    MAINTENANCE = "maintenance", "Maintenance"
    FAULTY = "faulty", "Faulty"
    RETIRED = "retired", "Retired"


class ProvisioningKind(models.TextChoices):
    HYPERVISOR = "hypervisor", "Hypervisor (runs VMs)"
    BAREMETAL = "baremetal", "Bare metal (leased whole)"


class GpuMode(models.TextChoices):
    EXCLUSIVE = "exclusive", "Exclusive (whole GPU)"
    MIG = "mig", "MIG"
    VGPU = "vgpu", "vGPU"
    SHARED = "shared", "Shared (time-sliced)"


class GpuHealth(models.TextChoices):
    OK = "ok", "OK"
    DEGRADED = "degraded", "Degraded"
    FAULTY = "faulty", "Faulty"
    UNKNOWN = "unknown", "Unknown"


class GpuScrub(models.TextChoices):
    """Whether a GPU may be handed to a tenant (docs/compute.md, "Scrub"; ADR 0501).

    ``dirty``: it held a tenant and the agent has not yet destroyed that tenant's MIG GPU instance / deactivated
    its NVSwitch partition, reset the GPU and passed the health check; ``scrub_failed``: one of those commands
    failed (or the health check did not pass). Only ``clean`` GPUs are placed.
    """

    CLEAN = "clean", "Clean"
    DIRTY = "dirty", "Dirty (scrub queued)"
    FAILED = "scrub_failed", "Scrub failed"


class VgpuTypeKind(models.TextChoices):
    """A catalog vGPU type's kind (`apps.inventory.catalog.VgpuType.kind`)."""

    TIME_SLICED = "time_sliced", "Time-sliced"
    MIG_BACKED = "mig_backed", "MIG-backed"


class FabricKind(models.TextChoices):
    INFINIBAND = "infiniband", "InfiniBand"
    ETHERNET = "ethernet", "Ethernet"


class SwitchRole(models.TextChoices):
    LEAF = "leaf", "Leaf"
    SPINE = "spine", "Spine"
    CORE = "core", "Core"


class SubnetManagerRole(models.TextChoices):
    PRIMARY = "primary", "Primary (master)"
    STANDBY = "standby", "Standby"


class VgpuBacking(models.TextChoices):
    MDEV = "mdev", "Mediated device"
    SRIOV_VF = "sriov_vf", "SR-IOV virtual function"


class CommandKind(models.TextChoices):
    APPLY_MIG_LAYOUT = "apply_mig_layout", "Apply MIG layout"
    CREATE_GPU_INSTANCE = "create_gpu_instance", "Create GPU instance"
    DESTROY_GPU_INSTANCE = "destroy_gpu_instance", "Destroy GPU instance"
    RESET_GPU = "reset_gpu", "Reset GPU and health check"
    RESET_VF = "reset_vf", "Reset SR-IOV VF (vGPU) and health check"
    SET_VF_VGPU_TYPE = "set_vf_vgpu_type", "Set an SR-IOV VF's vGPU type"
    SET_HCA_VF_GUID = "set_hca_vf_guid", "Set (or clear) an HCA SR-IOV VF's node and port GUID"
    ACTIVATE_PARTITION = "activate_partition", "Activate NVSwitch partition"
    DEACTIVATE_PARTITION = "deactivate_partition", "Deactivate NVSwitch partition"
    REBOOT_HOST = "reboot_host", "Reboot the host (repair)"
    RUN_DIAGNOSTICS = "run_diagnostics", "Run the return-to-service check (DCGM diagnostics or the validation command)"
    RESTORE_DEVICES = "restore_devices", "Restore SR-IOV VFs and vfio-pci bindings after a host reboot"


class CommandStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    DISPATCHED = "dispatched", "Dispatched to agent"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


_ANY_LIVE = {HostState.ENROLLING, HostState.AVAILABLE, HostState.CORDONED, HostState.DRAINING,
             HostState.MAINTENANCE}

#: action -> (allowed source states, target state)
HOST_TRANSITIONS = {
    "enroll_complete": ({HostState.ENROLLING}, HostState.AVAILABLE),
    "cordon": ({HostState.AVAILABLE}, HostState.CORDONED),
    "drain": ({HostState.AVAILABLE, HostState.CORDONED}, HostState.DRAINING),
    "maintenance": ({HostState.AVAILABLE, HostState.CORDONED, HostState.DRAINING, HostState.FAULTY},
                    HostState.MAINTENANCE),
    "mark_faulty": (_ANY_LIVE, HostState.FAULTY),
    "mark_available": ({HostState.ENROLLING, HostState.CORDONED, HostState.DRAINING, HostState.MAINTENANCE,
                        HostState.FAULTY}, HostState.AVAILABLE),
    "retire": (_ANY_LIVE | {HostState.FAULTY}, HostState.RETIRED),
}

#: States in which new placements may land on a host.
PLACEABLE_HOST_STATES = frozenset({HostState.AVAILABLE})

#: the staff host actions (`POST /hosts/{id}/<path>/`) -> their HOST_TRANSITIONS key
HOST_ACTION_PATHS = {"cordon": "cordon", "drain": "drain", "maintenance": "maintenance", "mark-faulty": "mark_faulty",
                     "mark-available": "mark_available", "retire": "retire"}


def host_actions_from(state: str) -> list[str]:
    """The host actions (their paths) whose transition starts from `state`, in HOST_ACTION_PATHS order."""
    return [path for path, key in HOST_ACTION_PATHS.items() if state in HOST_TRANSITIONS[key][0]]
