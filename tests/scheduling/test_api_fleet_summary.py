"""GET /api/v1/fleet/summary: the admin portal's heat map in one response, in a constant number of queries."""
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.identity.models import StaffRole, User
from apps.inventory.models import GpuInstance
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim
from tests.inventory.helpers import make_host

from . import fleet

pytestmark = pytest.mark.django_db

URL = "/api/v1/fleet/summary/"


def client_for(api_client, role):
    user = User.objects.create_user(f"{role or 'tenant'}@x.test", password="pw-long-enough", staff_role=role)
    api_client.force_authenticate(user)
    return api_client


def _hosts(body):
    return {h["name"]: h for r in body["regions"] for z in r["zones"] for k in z["racks"] for h in k["hosts"]}


def test_tree_states_and_mig_layout(api_client):
    project = fleet.project("a")
    busy = make_host("sum-busy", gpus=4)
    cordoned = make_host("sum-cordoned", state="cordoned", gpus=2, model="A100-SXM4-80GB")
    cordoned.spare = True  # in the provider's spare pool: the map marks it
    cordoned.save(update_fields=["spare"])
    make_host("sum-retired", state="retired", gpus=1)
    g0, g1, g2, g3 = busy.gpus.order_by("index")
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", project.id),
                      specs=[AllocationSpec(busy.id, "gpu", gpu_id=g0.id)])
    g1.scrub_state = "dirty"
    g1.save(update_fields=["scrub_state"])
    g2.health = "faulty"
    g2.save(update_fields=["health"])
    g3.mode = "mig"
    g3.save(update_fields=["mode"])
    for start in (0, 4):
        GpuInstance.objects.create(gpu=g3, profile_id=9, profile="3g.40gb", start=start, size=4)

    r = client_for(api_client, StaffRole.SUPPORT).get(URL)
    assert r.status_code == 200, r.content
    body = r.json()
    assert [z["name"] for z in body["regions"][0]["zones"]] == ["z1"]
    assert body["regions"][0]["zones"][0]["racks"][0]["name"] == "rack1"
    hosts = _hosts(body)
    assert set(hosts) == {"sum-busy", "sum-cordoned"}   # retired hosts are left out
    h = hosts["sum-busy"]
    assert [g["state"] for g in h["gpus"]] == ["allocated", "dirty", "faulty", "free"]
    assert h["gpus"][3]["mig"] == "3g.40gb×2" and h["gpus"][3]["mode"] == "mig" and h["mig"] == "3g.40gb×2"
    assert h["condition"] == "available" and h["gpu_model"] == "H100-SXM5-80GB" and "last_heartbeat_at" in h
    assert hosts["sum-cordoned"]["condition"] == "cordoned"
    assert (hosts["sum-cordoned"]["spare"], h["spare"]) == (True, False)
    assert body["host_count"] == 2 and body["gpu_count"] == 6
    assert body["gpu_states"] == {"faulty": 1, "scrub_failed": 0, "dirty": 1, "allocated": 1, "free": 3}
    assert body["host_conditions"] == {"available": 1, "cordoned": 1}
    assert body["gpu_models"] == ["A100-SXM4-80GB", "H100-SXM5-80GB"]


@pytest.mark.parametrize("role", [StaffRole.OPERATOR, StaffRole.BILLING_ADMIN, StaffRole.SUPPORT])
def test_every_staff_role_reads_it(api_client, role):
    make_host("sum-h", gpus=1)
    assert client_for(api_client, role).get(URL).status_code == 200


def test_a_tenant_gets_404(api_client):
    make_host("sum-h", gpus=1)
    r = client_for(api_client, StaffRole.NONE).get(URL)
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    assert "sum-h" not in r.content.decode()


def _queries(api_client) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert api_client.get(URL).status_code == 200
    return len(ctx.captured_queries)


def test_query_count_is_constant_in_host_count(api_client):
    project = fleet.project("a")
    c = client_for(api_client, StaffRole.OPERATOR)
    make_host("sum-q0", gpus=8)
    small = _queries(c)
    for i in range(1, 25):
        h = make_host(f"sum-q{i}", gpus=8, zone=f"z{i % 3}")
        allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", project.id),
                          specs=[AllocationSpec(h.id, "gpu", gpu_id=h.gpus.first().id)])
        GpuInstance.objects.create(gpu=h.gpus.last(), profile_id=19, profile="1g.10gb", start=0, size=1)
    assert _queries(c) == small
    assert c.get(URL).json()["host_count"] == 25
