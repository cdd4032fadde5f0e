"""Compute test world: two organizations, a fleet of real inventory rows, flavors and an image; the compute
driver is the in-memory `FakeDriver` unless a test says otherwise. Operations are driven step by step with
the real runner (`drive`), so no Celery worker is needed and waits are deterministic."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from apps.compute.drivers.fake import FakeDriver
from apps.compute.models import Flavor, Image
from apps.compute.services.hypervisor import forget_drivers
from apps.tenancy.models import OrgRole
from tests.operations.helpers import drive  # noqa: F401  (tests import it from here)
from tests.scheduling import fleet
from tests.tenancy.helpers import client_for, make_org, make_project, make_user, member, token_for

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExDrqrBxQMwu8GE5t92+fB5/rnDc4YqlLtsc5HrGCgc test@example"
# `ssh-keygen -lf` of the key above (OpenSSH 9.2):
ED25519_FP = "SHA256:gDaWWthFRjg5/UIKbaq6OCohUpxgfs8xDhsxYWcGAGM"


@dataclass
class World:
    org_a: object
    project_a: object
    org_b: object
    project_b: object
    member_a: object
    client_a: object
    client_b: object
    staff_client: object
    image: Image
    cpu: Flavor
    gpu1: Flavor
    mig: Flavor
    private_b: Flavor


@pytest.fixture
def fake_driver(settings):
    settings.DRIVERS = {**getattr(settings, "DRIVERS", {}), "compute": "apps.compute.drivers.fake:FakeDriver"}
    FakeDriver.reset()
    forget_drivers()
    yield FakeDriver
    FakeDriver.reset()
    forget_drivers()


def gpu_host(uri: str = "", **kw):
    h = fleet.host(**kw)
    h.libvirt_uri = uri or f"fake://{h.name}"
    h.provisioning_kind = "hypervisor"
    h.save(update_fields=["libvirt_uri", "provisioning_kind"])
    return h


@pytest.fixture
def world(db, fake_driver) -> World:
    org_a, org_b = make_org("compute-a"), make_org("compute-b")
    project_a, project_b = make_project(org_a, "pa"), make_project(org_b, "pb")
    user_a, user_b = make_user("a@example.com"), make_user("b@example.com")
    member(user_a, org_a, OrgRole.MEMBER)
    member(user_b, org_b, OrgRole.OWNER)
    staff = make_user("ops@example.com", staff_role="operator")
    image = Image.objects.create(name="ubuntu-24-04", os="ubuntu", os_version="24.04", source_url="https://x.test/u.img",
                                 checksum="sha256:" + "0" * 64)
    cpu = Flavor.objects.create(name="c2", vcpus=2, memory_mib=4096, disk_gib=20)
    gpu1 = Flavor.objects.create(name="g1-h100", vcpus=8, memory_mib=65536, disk_gib=100, gpu_form="gpu",
                                 gpu_model="H100-SXM5-80GB", gpu_count=1)
    mig = Flavor.objects.create(name="mig-3g40", vcpus=4, memory_mib=32768, gpu_form="mig",
                                gpu_model="H100-SXM5-80GB", mig_profile="3g.40gb")
    private_b = Flavor.objects.create(name="b-only", vcpus=2, memory_mib=4096, visibility="organization")
    private_b.organizations.set([org_b])
    return World(org_a, project_a, org_b, project_b, user_a, client_for(token_for(user_a, organization=org_a)),
                 client_for(token_for(user_b, organization=org_b)), client_for(token_for(staff, staff=True)), image,
                 cpu, gpu1, mig, private_b)


def create_body(w: World, flavor: Flavor, name: str = "vm-1", **extra) -> dict:
    return {"project": str(w.project_a.pk), "name": name, "flavor": str(flavor.pk), "image": str(w.image.pk),
            **extra}


def new_uuid() -> str:
    return str(uuid.uuid4())
