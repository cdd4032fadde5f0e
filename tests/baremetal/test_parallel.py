"""Races on the bare-metal unique rules, with real threads and connections (`tests.parallel`): one node per host;
one tenant instance per whole host."""
import pytest

from apps.baremetal.models import BaremetalNode
from apps.compute.models import Instance
from tests.parallel import outcome, post_parallel

from .conftest import bm_body, bm_host, drive, enroll

pytestmark = pytest.mark.django_db(transaction=True)
N = 6


def test_parallel_enrolls_of_one_host_make_one_node(world, bm_driver):
    host = bm_host()
    body = {"host": str(host.pk), "driver": "fake-hardware"}
    responses = post_parallel(world.staff_client, "/api/v1/bare-metal/nodes/", [body] * N)
    assert outcome(responses) == {(202, None): 1, (409, "node_exists"): N - 1}
    assert BaremetalNode.objects.filter(host=host).count() == 1


def test_parallel_creates_for_one_whole_host_place_one(world, bm_driver, bm_flavor):
    from apps.tenancy.models import Quota

    Quota.objects.filter(organization=world.org_a).update(limit=10**9)
    enroll(world.staff_client, bm_host())
    bodies = [bm_body(world, bm_flavor, name=f"bm-{i}") for i in range(N)]
    responses = post_parallel(world.client_a, "/api/v1/instances/", bodies)
    created = [r for r in responses if r.status_code == 202]
    for r in created:
        drive(r.data["operation"]["id"])
    active = Instance.objects.filter(status="active")
    assert active.count() == 1  # the host is whole: one tenant instance, never two on one host
    assert {r.status_code for r in responses} <= {202, 409}
