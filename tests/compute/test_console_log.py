"""The serial console log of an instance whose domain is gone (lost with a restarted test hypervisor, deleted by
hand on a real one) was a 500 a tenant could reach; it is a 409 naming the state, and a hypervisor that cannot be
asked is a 503, both problem+json."""
import pytest

from apps.compute.models import Instance

from .conftest import gpu_host

pytestmark = pytest.mark.django_db


def _instance(world, host) -> Instance:
    return Instance.objects.create(project=world.project_a, name="vm", flavor=world.cpu, image=world.image,
                                   status="error", host=host)


def test_console_log_of_a_vanished_domain_is_409(world):
    inst = _instance(world, gpu_host(gpus=0))
    r = world.client_a.get(f"/api/v1/instances/{inst.pk}/console-log/")
    assert (r.status_code, r["Content-Type"], r.json()["code"]) == (409, "application/problem+json",
                                                                    "domain_vanished")


def test_console_log_of_a_host_without_a_hypervisor_uri_is_503(world):
    from tests.scheduling import fleet

    inst = _instance(world, fleet.host(gpus=0))
    r = world.client_a.get(f"/api/v1/instances/{inst.pk}/console-log/")
    assert (r.status_code, r.json()["code"]) == (503, "service_unavailable")
