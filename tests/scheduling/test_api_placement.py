"""Staff API: POST /api/v1/placement/candidates (dry run) and GET /api/v1/allocations."""
import uuid

import pytest

from apps.identity.models import StaffRole, User
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim
from apps.scheduling.models import Allocation, Consumer
from apps.scheduling.placement.topology import topology_cache_clear

from . import fleet

pytestmark = pytest.mark.django_db

URL = "/api/v1/placement/candidates"


def client_for(api_client, role):
    user = User.objects.create_user(f"{role or 'tenant'}@x.test", password="pw-long-enough", staff_role=role)
    api_client.force_authenticate(user)
    return api_client


def test_dry_run_returns_ranked_candidates_and_writes_nothing(api_client):
    p = fleet.project("a")
    h = fleet.host()
    c = client_for(api_client, StaffRole.OPERATOR)
    r = c.post(URL, {"project": str(p.id), "gpus_per_host": 4, "vcpus": 16, "memory_mib": 65536}, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["placeable"] is True and body["code"] is None
    host = body["candidates"][0]["hosts"][0]
    assert host["host_id"] == str(h.id) and host["gpu_indexes"] == [0, 1, 2, 3]
    assert host["nvswitch_partition"] == 1
    assert [x["resource_class"] for x in host["resources"]] == ["gpu"] * 4 + ["vcpu", "memory_mib"]
    assert body["explanation"]["hosts_considered"] == 1
    assert not Allocation.objects.exists() and not Consumer.objects.exists()


def test_dry_run_unplaceable_explains_each_filter(api_client):
    p = fleet.project("a")
    fleet.host(state="cordoned")
    fleet.host(state="faulty")
    busy = fleet.host(gpus=1, nvswitch="")
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", p.id),
                      specs=[AllocationSpec(busy.id, "gpu", gpu_id=busy.gpus.get().id)])
    c = client_for(api_client, StaffRole.OPERATOR)
    r = c.post(URL, {"project": str(p.id), "gpus_per_host": 1}, format="json")
    body = r.json()
    assert r.status_code == 200 and body["placeable"] is False and body["code"] == "capacity_unavailable"
    f = {x["filter"]: x for x in body["explanation"]["filters"]}
    assert f["host_state"]["removed"] == 2
    assert f["host_state"]["reasons"] == {"cordoned": 1, "faulty": 1}
    assert f["gpu_capacity"]["removed"] == 1


def test_dry_run_names_topology_constraint(api_client):
    topology_cache_clear()
    p = fleet.project("a")
    for name in ("su1", "su2"):
        su, leaves = fleet.su_with_leaves(name, rails=2)
        for _ in range(2):
            fleet.cable(fleet.host(su=su), leaves)
    c = client_for(api_client, StaffRole.OPERATOR)
    r = c.post(URL, {"project": str(p.id), "gpus_per_host": 8, "hosts": 4,
                     "topology": {"max_leaves_per_rail": 1}}, format="json")
    body = r.json()
    assert body["placeable"] is False
    topo = next(x for x in body["explanation"]["filters"] if x["filter"] == "topology")
    assert "max_leaves_per_rail" in topo["note"] and topo["removed"] == 4
    topology_cache_clear()


@pytest.mark.parametrize("payload,field", [
    ({"gpus_per_host": 1, "mig_profile": "1g.10gb"}, "gpus_per_host"),
    ({"gpus_per_host": -1}, "gpus_per_host"),
    ({"share_milli": 1000}, "share_milli"),
    ({"gpus_per_host": 1, "policy": "random"}, "policy"),
])
def test_bad_input_is_a_400_problem(api_client, payload, field):
    p = fleet.project("a")
    c = client_for(api_client, StaffRole.OPERATOR)
    r = c.post(URL, {"project": str(p.id), **payload}, format="json")
    assert r.status_code == 400 and r["Content-Type"].startswith("application/problem+json")
    assert field in r.json()["errors"]


@pytest.mark.parametrize("share_milli", [0, -1, 1000])
def test_bad_share_milli_is_a_field_validation_error(api_client, share_milli):
    """A share is 1..999 milli-GPU when given (omit share_milli for no share), answered like any bad field."""
    p = fleet.project("a")
    c = client_for(api_client, StaffRole.OPERATOR)
    r = c.post(URL, {"project": str(p.id), "share_milli": share_milli}, format="json")
    assert r.status_code == 400 and r["Content-Type"].startswith("application/problem+json")
    body = r.json()
    assert body["code"] == "validation_error" and list(body["errors"]) == ["share_milli"]


@pytest.mark.parametrize("payload,field", [
    ({"gpus_per_host": 1, "vcpus": 2**63}, "vcpus"),
    ({"gpus_per_host": 1, "vcpus": 2**31}, "vcpus"),
    ({"share_milli": 500, "memory_mib": 2**63}, "memory_mib"),
])
def test_huge_quantities_are_a_field_validation_error(api_client, payload, field):
    """Values no host column can hold are refused up front, not answered as capacity_unavailable (or a 500)."""
    p = fleet.project("a")
    fleet.host()
    c = client_for(api_client, StaffRole.OPERATOR)
    r = c.post(URL, {"project": str(p.id), **payload}, format="json")
    assert r.status_code == 400 and r["Content-Type"].startswith("application/problem+json")
    body = r.json()
    assert body["code"] == "validation_error" and list(body["errors"]) == [field]


@pytest.mark.parametrize("role,code", [(None, 401), ("", 404), (StaffRole.SUPPORT, 403),
                                       (StaffRole.BILLING_ADMIN, 403), (StaffRole.OPERATOR, 200)])
def test_only_operators_may_ask(api_client, role, code):
    p = fleet.project("a")
    c = api_client if role is None else client_for(api_client, role)
    r = c.post(URL, {"project": str(p.id), "gpus_per_host": 1}, format="json")
    assert r.status_code == code


def test_allocation_list_is_staff_read_only(api_client):
    p = fleet.project("a")
    h = fleet.host(gpus=1, nvswitch="")
    rows = allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", p.id),
                             specs=[AllocationSpec(h.id, "gpu", gpu_id=h.gpus.get().id)])
    c = client_for(api_client, StaffRole.SUPPORT)
    r = c.get("/api/v1/allocations", {"host": str(h.id)})
    assert r.status_code == 200
    item = r.json()["results"][0]
    assert item["id"] == str(rows[0].id) and item["slices"] == [0, 8] and item["end"] is None
    assert c.get(f"/api/v1/allocations/{rows[0].id}").status_code == 200
    assert c.post("/api/v1/allocations", {}, format="json").status_code in (403, 405)
    tenant = client_for(api_client, "")
    assert tenant.get("/api/v1/allocations").status_code == 404
