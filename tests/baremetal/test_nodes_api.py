"""Staff enroll hosts as bare-metal nodes through the API (fake driver, real runner): enroll → manage → inspect
→ provide, the host back in placement; an inspection that differs from the catalog holds the node with the
difference named; BMC credentials are encrypted at rest and never returned."""
from __future__ import annotations

import json

import pytest

from apps.audit.models import AuditEvent
from apps.baremetal.models import BaremetalNode
from apps.baremetal.services.secrets import credentials_decrypt
from apps.inventory.models import Host

from .conftest import bm_host, enroll

pytestmark = pytest.mark.django_db


def test_enroll_moves_the_node_to_available_and_returns_the_host_to_service(world, bm_driver):
    host = bm_host()
    node_id, op = enroll(world.staff_client, host, driver="redfish", bmc_address="https://10.0.0.17",
                         bmc_system_id="/redfish/v1/Systems/1", bmc_username="admin", bmc_password="s3cret-pw")
    assert (op.status, op.steps_done) == ("succeeded", ["enroll", "manage", "inspect", "provide",
                                                        "return_to_service"])
    node = BaremetalNode.objects.get(pk=node_id)
    assert (node.provision_state, node.maintenance, node.held_reason) == ("available", False, "")
    assert bm_driver.get(node.ironic_id).state.provision == "available"
    assert Host.objects.get(pk=host.pk).state == "available"
    assert node.inspection["cpus"] == host.cpu_threads
    # encrypted at rest, readable with the key, absent from every answer and from the audit trail
    assert "s3cret-pw" not in node.bmc_credentials_encrypted
    assert credentials_decrypt(node.bmc_credentials_encrypted) == {"username": "admin", "password": "s3cret-pw"}
    detail = world.staff_client.get(f"/api/v1/bare-metal/nodes/{node_id}/")
    listed = world.staff_client.get("/api/v1/bare-metal/nodes/")
    for body in (detail.content, listed.content):
        assert b"s3cret-pw" not in body and b"bmc_password" not in body and b"bmc_username" not in body
    assert detail.data["has_bmc_credentials"] is True
    assert not any("s3cret-pw" in json.dumps([e.before, e.after]) for e in AuditEvent.objects.all())


def test_inspection_mismatch_holds_the_node_with_the_difference_named(world, bm_driver, monkeypatch):
    host = bm_host()
    real_inspect = bm_driver.inspect

    def inspect_finds_less_memory(node, **kw):
        bm_driver.set_hardware(node, memory_mb=512 * 1024)
        return real_inspect(node, **kw)

    monkeypatch.setattr(bm_driver, "inspect", inspect_finds_less_memory)
    node_id, op = enroll(world.staff_client, host)
    assert (op.status, op.error_code) == ("failed", "inspection_mismatch")
    node = BaremetalNode.objects.get(pk=node_id)
    expected = f"memory_mib: expected {host.memory_mib}, found {512 * 1024}"
    assert expected in node.held_reason and expected in op.error_detail
    assert node.maintenance is True and expected in node.maintenance_reason  # Ironic keeps its hands off
    assert Host.objects.get(pk=host.pk).state == "maintenance"  # out of placement
    body = world.staff_client.get(f"/api/v1/bare-metal/nodes/{node_id}/").data
    assert expected in body["held_reason"]


def test_enroll_refuses_a_hypervisor_a_second_node_and_missing_bmc_fields(world, bm_driver):
    from tests.compute.conftest import gpu_host

    vm_host = gpu_host(gpus=8)
    resp = world.staff_client.post("/api/v1/bare-metal/nodes/", {"host": str(vm_host.pk), "driver": "fake-hardware"},
                                   format="json")
    assert (resp.status_code, resp.data["code"]) == (400, "host_not_baremetal")
    host = bm_host()
    missing = world.staff_client.post("/api/v1/bare-metal/nodes/", {"host": str(host.pk), "driver": "redfish"},
                                      format="json")
    assert missing.status_code == 400 and set(missing.data["errors"]) == {"bmc_address", "bmc_username",
                                                                          "bmc_password"}
    assert not BaremetalNode.objects.exists()
    enroll(world.staff_client, host)
    again = world.staff_client.post("/api/v1/bare-metal/nodes/", {"host": str(host.pk), "driver": "fake-hardware"},
                                    format="json")
    assert (again.status_code, again.data["code"]) == (409, "node_exists")
    assert BaremetalNode.objects.count() == 1


def test_tenants_cannot_enroll_or_list_nodes(world, bm_driver):
    host = bm_host()
    resp = world.client_a.post("/api/v1/bare-metal/nodes/", {"host": str(host.pk), "driver": "fake-hardware"},
                               format="json")
    assert resp.status_code == 404 and not BaremetalNode.objects.exists()   # as for what a tenant may not see
    assert world.client_a.get("/api/v1/bare-metal/nodes/").status_code == 404
