"""Instance and cluster states and their transition tables (applied by `apps.core.transitions.transition`).

Two axes (after Nova's vm_state/power_state): `status` is ours and changes only through
these tables; `observed_state` (`apps.compute.drivers.base.PowerState`) is what the hypervisor reported, written
only by workflow polls and the reconciler.
"""
from django.db import models


class InstanceStatus(models.TextChoices):
    PENDING = "pending"
    PROVISIONING = "provisioning"
    ACTIVE = "active"
    STOPPING = "stopping"
    STOPPED = "stopped"
    STARTING = "starting"
    REBOOTING = "rebooting"
    RESIZING = "resizing"
    REBUILDING = "rebuilding"
    DELETING = "deleting"
    DELETED = "deleted"
    ERROR = "error"


S = InstanceStatus
_BUSY = {S.PENDING, S.PROVISIONING, S.STOPPING, S.STARTING, S.REBOOTING, S.RESIZING, S.REBUILDING}

# action: (allowed source statuses, target status)
INSTANCE_TRANSITIONS = {
    "provision": ({S.PENDING}, S.PROVISIONING),
    "provisioned": ({S.PROVISIONING}, S.ACTIVE),
    "stop": ({S.ACTIVE}, S.STOPPING),
    "stopped": ({S.STOPPING}, S.STOPPED),
    "start": ({S.STOPPED}, S.STARTING),
    "started": ({S.STARTING}, S.ACTIVE),
    "reboot": ({S.ACTIVE}, S.REBOOTING),
    "rebooted": ({S.REBOOTING}, S.ACTIVE),
    "resize": ({S.STOPPED}, S.RESIZING),  # cold resize on the same host
    "resized": ({S.RESIZING}, S.STOPPED),
    # bare metal: the image is written again (a new config drive); the host and its allocation stay
    "rebuild": ({S.ACTIVE, S.STOPPED}, S.REBUILDING),
    "rebuilt": ({S.REBUILDING}, S.ACTIVE),
    "delete": ({S.ACTIVE, S.STOPPED, S.ERROR} | _BUSY, S.DELETING),
    "deleted": ({S.DELETING}, S.DELETED),
    "fail": (_BUSY | {S.ACTIVE, S.STOPPED, S.DELETING}, S.ERROR),
    # the reconciler saw an active instance's domain shut off (the guest powered itself off): like a stop,
    # the GPU stays held (Nova's power-state sync does the same)
    "sync_stopped": ({S.ACTIVE}, S.STOPPED),
    # a VM on a failed GPU or host is re-created on healthy capacity (instance.recreate, apps.health's
    # remediation): it is provisioning again until the new domain runs
    "recreate": ({S.ACTIVE}, S.PROVISIONING),
    # the re-create found no capacity before it left the old host: the VM runs there still
    "recreate_undone": ({S.PROVISIONING}, S.ACTIVE),
}

LIVE_STATUSES = frozenset(set(S.values) - {S.DELETED})
#: Deleted or on its way: nothing more to stop, delete or preempt.
GONE_STATUSES = frozenset({S.DELETING, S.DELETED})
#: Created but not yet on a host (the create operation has not placed it).
UNPLACED_STATUSES = frozenset({S.PENDING, S.PROVISIONING})


class ClusterStatus(models.TextChoices):
    PENDING = "pending"
    ACTIVE = "active"
    DELETING = "deleting"
    DELETED = "deleted"
    ERROR = "error"


C = ClusterStatus
CLUSTER_TRANSITIONS = {
    "activate": ({C.PENDING}, C.ACTIVE),
    "delete": ({C.PENDING, C.ACTIVE, C.ERROR}, C.DELETING),
    "deleted": ({C.DELETING}, C.DELETED),
    "fail": ({C.PENDING, C.ACTIVE}, C.ERROR),
}


class GpuForm(models.TextChoices):
    """How a flavor receives GPU capacity (one form per flavor)."""

    NONE = "none"
    GPU = "gpu", "Whole GPUs of a model"
    MIG = "mig", "One MIG GPU instance (MIG-backed vGPU)"
    VGPU = "vgpu", "One vGPU of a type"
    SHARE = "share", "A fractional GPU share"


class Visibility(models.TextChoices):
    PUBLIC = "public"
    ORGANIZATION = "organization", "Offered to listed organizations"


class ProvisioningKind(models.TextChoices):
    """What an instance of the flavor is: a VM on a hypervisor, or a whole bare-metal host (`apps.baremetal`:
    every GPU of the host, `gpu_form` `gpu` with `gpu_count` = the host's GPU count)."""

    VM = "vm"
    BAREMETAL = "baremetal", "A whole bare-metal host"
