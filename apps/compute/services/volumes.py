"""The integration point with block storage (apps.storage), which registers both hooks from its
`integrations.register`; compute never imports storage.

* disk providers, ``fn(instance) -> Iterable[VolumeDisk]``: the volumes attached to an instance, which every
  definition of its domain carries (`instance_volume_disks`), so a redefine (resize) keeps them;
* delete hooks, ``fn(*, instance) -> None``: run by the instance's delete workflow (step `release_volumes`,
  after the domain is gone, in the step's transaction, holding the instance's row lock) to release the
  instance's volumes (the attachments go, `delete_on_termination` volumes are deleted).
"""

from __future__ import annotations

from ..drivers.base import VolumeDisk

_DISK_PROVIDERS: list = []
_DELETE_HOOKS: list = []


def register_disk_provider(fn) -> None:
    if fn not in _DISK_PROVIDERS:
        _DISK_PROVIDERS.append(fn)


def register_delete_hook(fn) -> None:
    if fn not in _DELETE_HOOKS:
        _DELETE_HOOKS.append(fn)


def instance_volume_disks(instance) -> tuple[VolumeDisk, ...]:
    """The attached volumes of `instance` for its domain spec, ordered by device."""
    disks = [disk for fn in _DISK_PROVIDERS for disk in fn(instance)]
    return tuple(sorted(disks, key=lambda d: (len(d.target_dev), d.target_dev)))


def instance_volumes_release(*, instance) -> None:
    """Release what other apps attached to the deleted `instance` (see `register_delete_hook`)."""
    for fn in _DELETE_HOOKS:
        fn(instance=instance)
