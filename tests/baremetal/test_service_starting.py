"""While the provisioning service (Ironic) does not answer - `make run` starts it in the background, after the
API is ready - new bare-metal work is refused with 503 `baremetal_unavailable` and `Retry-After`, nothing written;
once it answers, the same requests are accepted. VMs are not affected."""
from __future__ import annotations

import pytest

from apps.baremetal.models import BaremetalNode
from apps.compute.models import Flavor, Instance
from apps.operations.models import Operation

from .conftest import bm_body, bm_host, enroll

pytestmark = pytest.mark.django_db


def test_bare_metal_requests_answer_503_until_the_service_is_up(world, bm_driver, bm_flavor):
    host = bm_host()
    bm_driver.service_up = False  # Ironic is still starting
    before = Operation.objects.count()
    resp = world.staff_client.post("/api/v1/bare-metal/nodes/", {"host": str(host.pk), "driver": "fake-hardware"},
                                   format="json")
    assert resp.status_code == 503, resp.content
    assert resp["Content-Type"].startswith("application/problem+json") and resp["Retry-After"] == "5"
    assert resp.json()["code"] == "baremetal_unavailable"
    assert not BaremetalNode.objects.filter(host=host).exists() and Operation.objects.count() == before

    resp = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor, name="bm-early"), format="json")
    assert (resp.status_code, resp.json()["code"]) == (503, "baremetal_unavailable")
    assert not Instance.objects.filter(name="bm-early").exists() and Operation.objects.count() == before

    vm = Flavor.objects.create(name="cpu-2", vcpus=2, memory_mib=4096, disk_gib=20)
    resp = world.client_a.post("/api/v1/instances/", bm_body(world, vm, name="vm-meanwhile"), format="json")
    assert resp.status_code != 503, resp.content  # a VM does not wait for Ironic (here: placement answers)

    bm_driver.service_up = True  # Ironic answers now
    node_id, op = enroll(world.staff_client, host)
    assert op.status == "succeeded"
    resp = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor, name="bm-later"), format="json")
    assert resp.status_code == 202, resp.content


def test_an_ironic_that_accepts_but_never_answers_is_not_available():
    """A hung Ironic (it accepts the connection and says nothing) is `available() == False` after the driver's
    short timeout, so a tenant's create gets its 503 instead of waiting on the hung service."""
    import socket
    import threading

    from apps.baremetal.drivers.ironic import IronicDriver

    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)  # connections queue in the backlog; nobody reads or answers them
        driver = IronicDriver(endpoint=f"http://127.0.0.1:{hung.getsockname()[1]}")
        answer = []
        probe = threading.Thread(target=lambda: answer.append(driver.available()), daemon=True)
        probe.start()
        probe.join(timeout=30)
        assert answer == [False], "available() did not return for a service that never answers"
