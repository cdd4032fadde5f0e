"""Volume, attachment and snapshot states and their transition tables (applied by `apps.core.transitions`).

`status` of a volume follows Cinder's names: `creating` → `available` ⇄ `attaching`/`in-use`/`detaching`,
`available`/`in-use` → `extending` → `available`/`in-use` (a failed extend too: the disk is intact, the reason is
in `error_code` / `error_reason`), `available`/`error` → `deleting` → `deleted` (only without attachments),
`in-use`/`error` (attached) → `detaching`. A transient state
(`creating`, `attaching`, `detaching`, `extending`, `deleting`) belongs to exactly one running Operation; a
request in one of them is a 409 listing the allowed states.
"""
from django.db import models


class VolumeStatus(models.TextChoices):
    CREATING = "creating"
    AVAILABLE = "available"
    ATTACHING = "attaching"
    IN_USE = "in-use"
    DETACHING = "detaching"
    EXTENDING = "extending"
    DELETING = "deleting"
    DELETED = "deleted"
    ERROR = "error"


V = VolumeStatus
_TRANSIENT = {V.CREATING, V.ATTACHING, V.DETACHING, V.EXTENDING, V.DELETING}

# action: (allowed source statuses, target status)
VOLUME_TRANSITIONS = {
    "created": ({V.CREATING}, V.AVAILABLE),
    "attach": ({V.AVAILABLE}, V.ATTACHING),
    # a multi-attach type's volume attaches to one more instance while in use
    "attach_multi": ({V.AVAILABLE, V.IN_USE}, V.ATTACHING),
    # also from `error`: an attached volume whose last operation failed still has its disk in the domain, and
    # detaching it is the tenant's way out (a volume is deleted only once no attachment is left)
    "detach": ({V.IN_USE, V.ERROR}, V.DETACHING),
    # the end of an attach or detach: available when no attachment is left, else in-use
    "settle_available": ({V.ATTACHING, V.DETACHING, V.EXTENDING}, V.AVAILABLE),
    "settle_in_use": ({V.ATTACHING, V.DETACHING, V.EXTENDING}, V.IN_USE),
    # the reconciler found the volume's only instance deleted (its domain, and the disk with it, are gone)
    "released": ({V.IN_USE}, V.AVAILABLE),
    # an attached volume grows under its instance (the running guest's QEMU grows the image it holds)
    "extend": ({V.AVAILABLE, V.IN_USE}, V.EXTENDING),
    # a volume an instance create asked for, never made: the failed create does not keep it
    "abandon": ({V.CREATING}, V.DELETING),
    "delete": ({V.AVAILABLE, V.ERROR}, V.DELETING),
    "deleted": ({V.DELETING}, V.DELETED),
    "fail": (_TRANSIENT, V.ERROR),
}

LIVE_STATUSES = frozenset(set(V.values) - {V.DELETED})


class AttachmentStatus(models.TextChoices):
    """`reserved`: asked for by an instance create, made and attached by its step `prepare_volumes` before the
    domain is defined with it; then as an attach request: `attaching` → `attached` → `detaching`."""

    RESERVED = "reserved"
    ATTACHING = "attaching"
    ATTACHED = "attached"
    DETACHING = "detaching"


class SnapshotStatus(models.TextChoices):
    CREATING = "creating"
    AVAILABLE = "available"
    DELETING = "deleting"
    DELETED = "deleted"
    ERROR = "error"


S = SnapshotStatus
SNAPSHOT_TRANSITIONS = {
    "created": ({S.CREATING}, S.AVAILABLE),
    "delete": ({S.AVAILABLE, S.ERROR}, S.DELETING),
    "deleted": ({S.DELETING}, S.DELETED),
    "fail": ({S.CREATING, S.DELETING}, S.ERROR),
}


class Backend(models.TextChoices):
    """The storage driver family serving a volume type (`apps.storage.drivers`)."""

    LIBVIRT = "libvirt", "libvirt storage pool"
