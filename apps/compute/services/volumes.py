"""The integration point with block storage (apps.storage), which registers these hooks from its
`integrations.register`; compute never imports storage.

* disk providers, ``fn(instance) -> Iterable[VolumeDisk]``: the volumes attached to an instance, which every
  definition of its domain carries (`instance_volume_disks`), so a redefine (resize) keeps them;
* delete hooks, ``fn(*, instance) -> None``: run by the instance's delete workflow (step `release_volumes`,
  after the domain is gone, in the step's transaction, holding the instance's row lock) to release the
  instance's volumes (the attachments go, `delete_on_termination` volumes are deleted);
* the create's volume hooks (`CreateVolumeHooks`, one set): the volumes a create body asks for (new ones and
  existing ones, `volumes` of `POST /api/v1/instances`) are checked before anything is written, reserved in the
  create's transaction, made and attached by the create's step `prepare_volumes` (after placement, before the
  domain is defined) and released again when the create fails; the placement of such an instance follows its
  volumes (a host-local volume pins its host, a zoned one its zone: `instance_placement_pins`). A re-create on
  other capacity (`instance.recreate`) runs the same `prepare` step after its placement, which makes the
  instance's attached volumes reachable from the new host, and places by the same pins.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from apps.core.errors import ValidationFailed

from ..drivers.base import VolumeDisk
from ..states import ProvisioningKind

_DISK_PROVIDERS: list = []
_DELETE_HOOKS: list = []


@dataclass(frozen=True)
class VolumePlan:
    """What the create's volume check decided: the instance must be placed on `host_id` (an existing host-local
    volume; None: anywhere) and in zone `zone` ('' = any); `boot`: a volume replaces the image as its boot disk;
    `payload` is the storage app's own (what `reserve` makes)."""

    host_id: uuid.UUID | None = None
    zone: str = ""
    boot: bool = False
    payload: object = field(default=None, compare=False)


@dataclass(frozen=True)
class CreateVolumeHooks:
    """``check(*, actor, project, image, flavor, requests, name) -> VolumePlan`` raises the create's refusals for the
    volumes (400, 409, 422) and writes nothing (`name`: the instance's); ``reserve(*, actor, instance, plan,
    operation)`` writes the volume rows
    and attachments in the create's transaction; ``prepare(*, instance)`` (the create's step) makes the new
    volumes on the chosen host and marks the attachments attached, idempotently; ``abandon(*, instance)``
    (the create's on_error) releases what the create reserved; ``pins(instance) -> dict`` the placement pins of
    an instance being placed (``host_id``, ``zone``): created, or re-created on other capacity, where `prepare`
    also makes its attached volumes reachable from the new host."""

    check: Callable
    reserve: Callable
    prepare: Callable
    abandon: Callable
    pins: Callable


_CREATE_HOOKS: list[CreateVolumeHooks] = []


def register_disk_provider(fn) -> None:
    if fn not in _DISK_PROVIDERS:
        _DISK_PROVIDERS.append(fn)


def register_delete_hook(fn) -> None:
    if fn not in _DELETE_HOOKS:
        _DELETE_HOOKS.append(fn)


def register_create_hooks(hooks: CreateVolumeHooks) -> None:
    """Storage's create hooks (one set; a second registration replaces the first)."""
    _CREATE_HOOKS[:] = [hooks]


def instance_volume_disks(instance) -> tuple[VolumeDisk, ...]:
    """The attached volumes of `instance` for its domain spec, ordered by device (a boot volume is ``vda``)."""
    disks = [disk for fn in _DISK_PROVIDERS for disk in fn(instance)]
    return tuple(sorted(disks, key=lambda d: (len(d.target_dev), d.target_dev)))


def instance_volumes_release(*, instance) -> None:
    """Release what other apps attached to the deleted `instance` (see `register_delete_hook`)."""
    for fn in _DELETE_HOOKS:
        fn(instance=instance)


def instance_volumes_check(*, actor, project, image, flavor, requests: Sequence[dict], name: str = "") -> VolumePlan:
    """The create's volume refusals (see `CreateVolumeHooks.check`); an empty plan without `requests`.
    400 `validation_error` naming `volumes` when no storage app is installed or the flavor is not a VM's."""
    if not requests:
        return VolumePlan()
    if not _CREATE_HOOKS:
        raise ValidationFailed("Volumes are not offered.", errors={"volumes": ["block storage is not installed"]})
    if flavor.kind != ProvisioningKind.VM:  # a volume is a virtio disk of a domain
        raise ValidationFailed("Volumes attach to virtual machines only.",
                               errors={"volumes": [f"not for a {flavor.kind} flavor"]})
    return _CREATE_HOOKS[0].check(actor=actor, project=project, image=image, flavor=flavor, requests=requests,
                                  name=name)


def instance_volumes_reserve(*, actor, instance, plan: VolumePlan, operation=None) -> None:
    if plan.payload is not None and _CREATE_HOOKS:
        _CREATE_HOOKS[0].reserve(actor=actor, instance=instance, plan=plan, operation=operation)


def instance_volumes_prepare(*, instance) -> None:
    for hooks in _CREATE_HOOKS:
        hooks.prepare(instance=instance)


def instance_volumes_abandon(*, instance) -> None:
    for hooks in _CREATE_HOOKS:
        hooks.abandon(instance=instance)


def instance_placement_pins(instance) -> dict:
    """``{"host_id": ..., "zone": ...}`` (only what is pinned) for the placement of `instance`."""
    pins: dict = {}
    for hooks in _CREATE_HOOKS:
        pins.update(hooks.pins(instance))
    return pins
