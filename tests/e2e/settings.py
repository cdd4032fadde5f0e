"""Settings of the end-to-end stack's processes: the product's own settings, with one driver swapped.

Block storage uses the in-memory `fake` storage driver (`apps.storage.drivers.fake`, per process: the stack's
Celery worker runs every storage step in one process, `--pool threads`). The hosts' libvirt here is
`test:///default`, whose test driver has no inactive pool XML, no volume resize and no disk attach, so the real
libvirt storage driver cannot make a pool on it. Volume creates, extends and deletes then run through the real
API, services and Operation steps; attaching fails (`domain_not_found`): the fake storage driver sees only the
compute fake's domains, not libvirt's. Compute, networking and everything else are unchanged.
"""
from gpucloud.settings import *  # noqa: F403

DRIVERS = {**globals().get("DRIVERS", {}), "storage": "apps.storage.drivers.fake:FakeStorageDriver"}
