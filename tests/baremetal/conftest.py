"""Bare-metal test world: compute's (two organizations, clients, an image) plus a bare-metal flavor (a whole
H100 x8 host) and the in-memory `fake` bare-metal driver shared by the process. Operations are driven step by
step with the real runner (`drive`)."""
from __future__ import annotations

import uuid

import pytest

from apps.baremetal.services.driver import baremetal_driver, forget_driver
from apps.compute.models import Flavor
from apps.inventory.models import Nic
from tests.compute.conftest import create_body, drive, fake_driver, world  # noqa: F401  (fixtures)
from tests.scheduling import fleet


@pytest.fixture
def bm_driver(settings):
    settings.DRIVERS = {**getattr(settings, "DRIVERS", {}),
                        "baremetal": "apps.baremetal.drivers.fake:FakeBaremetalDriver"}
    settings.BAREMETAL_DEPLOY_POLL_S = 0.0
    forget_driver()
    yield baremetal_driver()
    forget_driver()


@pytest.fixture
def bm_flavor(db) -> Flavor:
    return Flavor.objects.create(name="bm-h100x8", kind="baremetal", vcpus=128, memory_mib=1024 * 1024,
                                 disk_gib=100, gpu_form="gpu", gpu_model="H100-SXM5-80GB", gpu_count=8)


def bm_host(state: str = "available"):
    """A bare-metal inventory host with 8 H100s and one NIC."""
    h = fleet.host(gpus=8, state=state)
    h.provisioning_kind = "baremetal"
    h.save(update_fields=["provisioning_kind"])
    Nic.objects.create(host=h, name="eno1", mac_address=":".join(f"{b:02x}" for b in uuid.uuid4().bytes[:6]))
    return h


def enroll(staff_client, host, driver: str = "fake-hardware", **extra):
    body = {"host": str(host.pk), "driver": driver, **extra}
    resp = staff_client.post("/api/v1/bare-metal/nodes/", body, format="json")
    assert resp.status_code == 202, resp.content
    return resp.data["node"]["id"], drive(resp.data["operation"]["id"])


def bm_body(w, flavor, name: str = "bm-1", **extra) -> dict:
    return create_body(w, flavor, name=name, **extra)
