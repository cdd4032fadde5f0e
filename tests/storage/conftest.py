"""Storage test world: two organizations, a shared and a host-local volume type, an instance on a host of each
organization. The storage driver is the in-memory `fake` adapter of `apps.storage.drivers` when a test asks for
`storage_driver`; operations are driven step by step with the real runner (`drive`)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from apps.compute.models import Flavor, Image, Instance
from apps.storage.models import VolumeType
from apps.tenancy.models import OrgRole
from tests.operations.helpers import drive  # noqa: F401  (tests import it from here)
from tests.scheduling import fleet
from tests.tenancy.helpers import client_for, make_org, make_project, make_user, member, token_for


@dataclass
class World:
    org_a: object
    project_a: object
    org_b: object
    project_b: object
    client_a: object
    client_b: object
    viewer_a: object
    staff_client: object
    ssd: VolumeType
    local: VolumeType
    instance_a: Instance
    instance_b: Instance


def instance(project, name="vm", status="active", host=None) -> Instance:
    image = Image.objects.get_or_create(name="ubuntu", defaults={
        "os": "ubuntu", "source_url": "https://x.test/u.img", "checksum": "sha256:" + "0" * 64})[0]
    flavor = Flavor.objects.get_or_create(name="c2", defaults={"vcpus": 2, "memory_mib": 4096})[0]
    host = host or fleet.host(gpus=0)
    if not host.libvirt_uri:
        host.libvirt_uri = f"fake://{host.name}"
        host.save(update_fields=["libvirt_uri"])
    return Instance.objects.create(project=project, name=name, flavor=flavor, image=image, status=status, host=host)


SHARED_URI = "fake://one"  # the hypervisor of instance A, also the shared pools' connection in these tests


@pytest.fixture
def storage_driver(settings, monkeypatch):
    """The in-memory storage and compute fakes (`apps.storage.drivers.fake`, which sees the compute fake's
    domains); shared pools are reached through `SHARED_URI`."""
    from apps.compute.drivers.fake import FakeDriver
    from apps.storage.drivers import forget_drivers
    from apps.storage.drivers.fake import FakeStorageDriver

    settings.DRIVERS = {**getattr(settings, "DRIVERS", {}), "storage": "apps.storage.drivers.fake:FakeStorageDriver",
                        "compute": "apps.compute.drivers.fake:FakeDriver"}
    monkeypatch.setenv("STORAGE_SHARED_POOL_URI", SHARED_URI)
    FakeStorageDriver.reset()
    FakeDriver.reset()
    forget_drivers()
    yield FakeStorageDriver
    FakeStorageDriver.reset()
    FakeDriver.reset()
    forget_drivers()


def boot(inst: Instance, *, running: bool = True) -> None:
    """Give `inst` a domain on its host in the compute fake (running, or shut off)."""
    from apps.compute.drivers.base import DomainSpec
    from apps.compute.drivers.fake import FakeDriver

    drv = FakeDriver(inst.host.libvirt_uri)
    drv.domain_define(DomainSpec(uuid=inst.pk, vcpus=2, memory_mib=2048))
    if running:
        drv.domain_start(inst.pk)


@pytest.fixture
def world(db) -> World:
    org_a, org_b = make_org("storage-a"), make_org("storage-b")
    project_a, project_b = make_project(org_a, "pa"), make_project(org_b, "pb")
    user_a, user_b, viewer = make_user("a@example.com"), make_user("b@example.com"), make_user("v@example.com")
    member(user_a, org_a, OrgRole.MEMBER)
    member(viewer, org_a, OrgRole.VIEWER)
    member(user_b, org_b, OrgRole.OWNER)
    staff = make_user("ops@example.com", staff_role="operator")
    ssd = VolumeType.objects.create(name="ssd", pool="ssd", pool_target_path="/srv/ssd", max_size_gib=1000)
    local = VolumeType.objects.create(name="nvme-local", pool="nvme", pool_target_path="/srv/nvme", host_local=True)
    return World(org_a, project_a, org_b, project_b, client_for(token_for(user_a, organization=org_a)),
                 client_for(token_for(user_b, organization=org_b)), client_for(token_for(viewer, organization=org_a)),
                 client_for(token_for(staff, staff=True)), ssd, local, instance(project_a, host=_host(SHARED_URI)),
                 instance(project_b, "vm-b"))


def _host(uri: str):
    host = fleet.host(gpus=0)
    host.libvirt_uri = uri
    host.save(update_fields=["libvirt_uri"])
    return host


def volume_body(w: World, name: str = "data", size_gib: int = 10, **extra) -> dict:
    return {"project": str(w.project_a.pk), "name": name, "size_gib": size_gib, "volume_type": str(w.ssd.pk),
            **extra}
