"""A tenant's bare-metal instance through the same /instances API as VMs (fake bare-metal driver, real runner,
real ledger): deploy with a config drive, reboot, stop/start, rebuild, delete with cleaning and a signed exit
receipt; a failed deploy leaves no allocation and the node recovers to available; a BMC down during delete does
not lose it; another tenant neither sees nor deletes it."""
from __future__ import annotations

import base64
import json

import pytest

from apps.baremetal.models import BaremetalNode, ExitReceipt
from apps.baremetal.services.receipts import receipt_verify
from apps.compute.models import Instance, SshKey
from apps.core.clock import now
from apps.inventory.models import Host
from apps.operations.models import Operation
from apps.scheduling.models import Allocation

from .conftest import bm_body, bm_host, drive, enroll

pytestmark = pytest.mark.django_db
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExDrqrBxQMwu8GE5t92+fB5/rnDc4YqlLtsc5HrGCgc test@example"


def _live(inst_id) -> list[tuple[str, int]]:
    return sorted((a.resource_class, a.amount) for a in Allocation.objects.filter(consumer_id=inst_id,
                                                                                  period__contains=now()))


def _gpus(inst_id) -> int:
    return sum(amount for rc, amount in _live(inst_id) if rc == "gpu")


@pytest.fixture
def node(world, bm_driver):
    host = bm_host()
    node_id, op = enroll(world.staff_client, host)
    assert op.status == "succeeded"
    return BaremetalNode.objects.select_related("host").get(pk=node_id)


def _create(world, flavor, **extra):
    resp = world.client_a.post("/api/v1/instances/", bm_body(world, flavor, **extra), format="json")
    assert resp.status_code == 202, resp.content
    return resp.data["instance"]["id"], resp.data["operation"]["id"]


def test_deploy_reboot_stop_start_rebuild_delete_with_a_verified_receipt(world, bm_driver, bm_flavor, node):
    key = SshKey.objects.create(project=world.project_a, name="k1", public_key=ED25519, fingerprint="SHA256:x")
    inst_id, op_id = _create(world, bm_flavor, ssh_keys=[str(key.pk)], user_data="#cloud-config\n{}\n")
    op = drive(op_id)
    assert (op.status, op.kind, op.steps_done) == ("succeeded", "baremetal.instance.create",
                                                   ["place_and_claim", "attach_networks", "deploy", "wait_active"])
    inst = Instance.objects.get(pk=inst_id)
    assert (inst.status, inst.host_id, inst.observed_state) == ("active", node.host_id, "on")
    assert _gpus(inst_id) == 8  # the whole host: all its GPUs in the ledger
    seen = bm_driver.get(node.ironic_id)
    assert (seen.state.provision, seen.instance_id) == ("active", inst_id)
    drive_info = bm_driver.instance_info(node.ironic_id)
    meta = drive_info["configdrive"]["meta_data"]
    assert (meta["uuid"], meta["hostname"], meta["public_keys"]) == (inst_id, "bm-1", {"k1": ED25519})
    assert drive_info["configdrive"]["user_data"] == "#cloud-config\n{}\n"
    (link,) = drive_info["configdrive"]["network_data"]["links"]
    assert link["ethernet_mac_address"] == node.host.nics.get().mac_address
    assert drive_info["image_source"] == world.image.source_url
    got = world.client_a.get(f"/api/v1/instances/{inst_id}/").data
    assert got["status"] == "active"

    reboot = world.client_a.post(f"/api/v1/instances/{inst_id}/reboot/", {"hard": True}, format="json")
    assert reboot.status_code == 202 and drive(reboot.data["operation"]["id"]).status == "succeeded"
    stop = world.client_a.post(f"/api/v1/instances/{inst_id}/stop/", {"hard": True}, format="json")
    assert drive(stop.data["operation"]["id"]).status == "succeeded"
    assert bm_driver.get(node.ironic_id).state.power == "off"
    assert Instance.objects.get(pk=inst_id).status == "stopped" and _gpus(inst_id) == 8
    start = world.client_a.post(f"/api/v1/instances/{inst_id}/start/")
    assert drive(start.data["operation"]["id"]).status == "succeeded"
    rebuild = world.client_a.post(f"/api/v1/instances/{inst_id}/rebuild/", {}, format="json")
    assert rebuild.status_code == 202 and rebuild.data["instance"]["status"] == "rebuilding"
    assert drive(rebuild.data["operation"]["id"]).status == "succeeded"
    assert Instance.objects.get(pk=inst_id).status == "active"

    delete = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
    assert delete.status_code == 202
    op = drive(delete.data["operation"]["id"])
    assert (op.status, op.steps_done) == ("succeeded", [
        "undeploy", "detach_networks", "verify_fabric", "clean_start", "wait_cleaned", "erase_read_back",
        "gpu_checks", "return_to_service", "sign_receipt", "release_allocations"])
    # the host's own work ran as its own operation (the delete's host steps found it started and did nothing)
    clean = Operation.objects.get(pk=op.state["clean_operation"])
    assert (clean.kind, str(clean.target_id), clean.project_id, clean.status, clean.steps_done) == (
        "baremetal.node.clean", str(node.pk), None, "succeeded",
        ["wait_cleaned", "erase_read_back", "gpu_checks", "return_to_service", "sign_receipt"])
    assert Instance.objects.get(pk=inst_id).status == "deleted" and _live(inst_id) == []
    seen = bm_driver.get(node.ironic_id)
    assert (seen.state.provision, seen.instance_id) == ("available", "")
    assert Host.objects.get(pk=node.host_id).state == "available"

    # the receipt: listed for the tenant, verifiable with the published key, naming the node and every step
    listed = world.client_a.get(f"/api/v1/bare-metal/exit-receipts/?instance={inst_id}")
    assert listed.status_code == 200, listed.content
    listed = listed.data["results"]
    (receipt,) = listed
    from rest_framework.test import APIClient

    key = APIClient().get("/api/v1/bare-metal/receipt-key/")
    assert key.status_code == 200 and key.data["algorithm"] == "Ed25519"
    assert receipt["key_id"] == key.data["key_id"]
    assert receipt_verify(payload=receipt["payload"], signature=receipt["signature"],
                          public_key_pem=key.data["public_key_pem"])
    doc = json.loads(receipt["payload"])
    assert doc["node"] == {"id": node.ironic_id, "name": node.host.name, "host": str(node.host_id),
                           "hardware_type": "fake-hardware"}
    assert doc["instance"]["id"] == inst_id
    assert [(s["step"], s["result"], s["how"]) for s in doc["steps"]] == [
        ("undeploy", "succeeded", "executed"),
        ("automated_cleaning", "succeeded", "simulated by fake-hardware"),
        ("disk_erase_read_back", "not_run", "skipped: fake-hardware has no disks"),
        ("gpu_reset", "not_run", "skipped: fake-hardware has no server behind the node, so no node agent runs on it"),
        ("gpu_validation", "not_run",
         "skipped: fake-hardware has no server behind the node, so no node agent runs on it"),
        ("tenant_networks_detached", "succeeded", "skipped: the instance had no tenant network")]


def test_a_forged_receipt_fails_verification(world, bm_driver, bm_flavor, node):
    inst_id, op_id = _create(world, bm_flavor)
    drive(op_id)
    drive(world.client_a.delete(f"/api/v1/instances/{inst_id}/").data["operation"]["id"])
    receipt = ExitReceipt.objects.get(instance_id=inst_id)
    from apps.baremetal.services.secrets import public_key_info

    pem = public_key_info()["public_key_pem"]
    assert receipt_verify(payload=receipt.payload, signature=receipt.signature, public_key_pem=pem)
    doc = json.loads(receipt.payload)
    doc["steps"][1]["how"] = "executed"  # claim a real erase that never ran
    forged = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    assert not receipt_verify(payload=forged, signature=receipt.signature, public_key_pem=pem)
    # signed by another key: fails with the deployment's
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    other = base64.b64encode(Ed25519PrivateKey.generate().sign(forged.encode())).decode()
    assert not receipt_verify(payload=forged, signature=other, public_key_pem=pem)
    assert not receipt_verify(payload=receipt.payload, signature="not base64!", public_key_pem=pem)


def test_a_deploy_that_fails_midway_leaves_no_allocation_and_the_node_recovers(world, bm_driver, bm_flavor,
                                                                              node):
    bm_driver.fail_next(node.ironic_id, "deploy", "image checksum mismatch")
    inst_id, op_id = _create(world, bm_flavor)
    op = drive(op_id)
    assert (op.status, op.error_code) == ("failed", "baremetal_failed_state")
    inst = Instance.objects.get(pk=inst_id)
    assert inst.status == "error" and "image checksum mismatch" in inst.error_reason
    assert _live(inst_id) == []  # nothing of the host held for it
    (recover,) = Operation.objects.filter(kind="baremetal.node.recover", target_id=node.pk)
    assert Host.objects.get(pk=node.host_id).state == "maintenance"  # out of placement while recovering
    assert drive(recover.pk).status == "succeeded"
    seen = bm_driver.get(node.ironic_id)
    assert (seen.state.provision, seen.state.maintenance, seen.instance_id) == ("available", False, "")
    node.refresh_from_db()
    assert (node.provision_state, node.held_reason) == ("available", "")
    assert Host.objects.get(pk=node.host_id).state == "available"
    # and the host serves the next tenant
    again, again_op = _create(world, bm_flavor, name="bm-2")
    assert drive(again_op).status == "succeeded" and _gpus(again) == 8


def test_a_bmc_down_during_delete_does_not_lose_the_delete(world, bm_driver, bm_flavor, node):
    inst_id, op_id = _create(world, bm_flavor)
    drive(op_id)
    bm_driver.bmc_down(node.ironic_id, calls=3)
    delete = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
    op_id = delete.data["operation"]["id"]
    from apps.operations.runner import operation_run_step

    for _ in range(3):
        operation_run_step(op_id)
        op = Operation.objects.get(pk=op_id)
        assert (op.status, op.step) == ("running", "undeploy") and "does not answer" in op.error_detail
    assert Operation.objects.get(pk=op_id).attempts == 3  # retried with backoff, not failed
    op = drive(op_id)
    assert op.status == "succeeded"
    assert Instance.objects.get(pk=inst_id).status == "deleted" and _live(inst_id) == []
    assert bm_driver.get(node.ironic_id).state.provision == "available"
    assert ExitReceipt.objects.filter(instance_id=inst_id).count() == 1


def test_another_tenant_neither_sees_nor_deletes_it(world, bm_driver, bm_flavor, node):
    inst_id, op_id = _create(world, bm_flavor)
    drive(op_id)
    assert world.client_b.get(f"/api/v1/instances/{inst_id}/").status_code == 404
    assert world.client_b.delete(f"/api/v1/instances/{inst_id}/").status_code == 404
    assert world.client_b.post(f"/api/v1/instances/{inst_id}/rebuild/", {}, format="json").status_code == 404
    assert inst_id not in [i["id"] for i in world.client_b.get("/api/v1/instances/").data["results"]]
    assert Instance.objects.get(pk=inst_id).status == "active"
    assert bm_driver.get(node.ironic_id).state.provision == "active"
    drive(world.client_a.delete(f"/api/v1/instances/{inst_id}/").data["operation"]["id"])
    receipt = ExitReceipt.objects.get(instance_id=inst_id)
    assert world.client_b.get(f"/api/v1/bare-metal/exit-receipts/{receipt.pk}/").status_code == 404
    assert world.client_b.get(f"/api/v1/bare-metal/exit-receipts/?instance={inst_id}").data["results"] == []
    assert world.client_a.get(f"/api/v1/bare-metal/exit-receipts/{receipt.pk}/").status_code == 200


def test_no_node_ready_no_deploy_and_a_vm_cannot_be_rebuilt(world, bm_driver, bm_flavor):
    host = bm_host(state="enrolling")  # not enrolled as a node yet: not placeable
    resp = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor), format="json")
    assert resp.status_code in (409, 422) and not Instance.objects.exists()
    assert Host.objects.get(pk=host.pk).state == "enrolling"
    vm = world.client_a.post("/api/v1/instances/", bm_body(world, world.cpu, name="vm"), format="json")
    from tests.compute.conftest import gpu_host

    gpu_host(gpus=0)
    vm = world.client_a.post("/api/v1/instances/", bm_body(world, world.cpu, name="vm"), format="json")
    assert vm.status_code == 202
    refused = world.client_a.post(f"/api/v1/instances/{vm.data['instance']['id']}/rebuild/", {}, format="json")
    assert (refused.status_code, refused.data["code"]) == (409, "not_supported_for_flavor_kind")


def test_a_bare_metal_cluster_bigger_than_the_fleet_is_refused_before_anything_is_written(world, bm_driver,
                                                                                         bm_flavor, node):
    """Two whole hosts asked, one bare-metal host in the fleet: 422 `unplaceable` (clusters: test_clusters.py)."""
    from apps.compute.models import Cluster
    from apps.tenancy.models import Quota

    for resource, limit in (("gpus", 64), ("vcpus", 10**6), ("memory_mib", 10**9)):
        Quota.objects.update_or_create(organization=world.org_a, project=None, resource=resource,
                                       defaults={"limit": limit})
    body = {**bm_body(world, bm_flavor, name="train"), "size": 2}
    resp = world.client_a.post("/api/v1/clusters/", body, format="json")
    assert (resp.status_code, resp.data["code"]) == (422, "unplaceable"), resp.content
    assert not Cluster.objects.exists() and not Instance.objects.exists()


def test_a_delete_while_ironic_is_still_deploying_waits_for_the_deploy_then_cleans(world, bm_driver, bm_flavor,
                                                                                    node):
    """Ironic refuses an undeploy while a node is `deploying` (it allows one from `wait call-back`, `active`, a
    failed deploy): the delete waits for the deploy to end instead of failing the tenant's delete."""
    from dataclasses import replace

    inst_id, op_id = _create(world, bm_flavor)
    drive(op_id)
    row = bm_driver._row(node.ironic_id)
    row["state"] = replace(row["state"], provision="deploying", target_provision="active")  # still writing
    delete = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
    assert delete.status_code == 202
    op = drive(delete.data["operation"]["id"], max_steps=6)
    assert op.status == "running", (op.status, op.error_code, op.error_detail)
    assert Instance.objects.get(pk=inst_id).status == "deleting" and _live(inst_id) == []  # not billed meanwhile
    row["state"] = replace(row["state"], provision="active", target_provision=None)  # the deploy ended
    op = drive(delete.data["operation"]["id"])
    assert op.status == "succeeded", (op.error_code, op.error_detail)
    assert Instance.objects.get(pk=inst_id).status == "deleted"
    assert (bm_driver.get(node.ironic_id).state.provision, bm_driver.get(node.ironic_id).instance_id) == (
        "available", "")
    assert Host.objects.get(pk=node.host_id).state == "available"
    assert ExitReceipt.objects.filter(instance_id=inst_id).count() == 1


def test_an_instance_is_active_only_powered_on_even_where_ironic_leaves_the_node_off(world, bm_driver, bm_flavor,
                                                                                       node):
    """Ironic's fake-hardware (and a deploy interface that does not boot the instance) ends a deploy or rebuild
    with the node off or its power unknown: `active` must still mean the server runs, so the last step powers it
    on (otherwise reconcile later calls it a power-off nobody asked for, and `start` is refused on an `active`)."""
    from dataclasses import replace

    inst_id, op_id = _create(world, bm_flavor)
    drive(op_id)
    stop = world.client_a.post(f"/api/v1/instances/{inst_id}/stop/", {}, format="json")
    assert drive(stop.data["operation"]["id"]).status == "succeeded"
    rebuild = world.client_a.post(f"/api/v1/instances/{inst_id}/rebuild/", {}, format="json")
    assert rebuild.status_code == 202
    op = drive(rebuild.data["operation"]["id"], max_steps=1)
    assert op.steps_done == ["rebuild"] and op.status == "running"
    row = bm_driver._row(node.ironic_id)
    row["state"] = replace(row["state"], power="off")  # as fake-hardware leaves a node that was off
    assert drive(rebuild.data["operation"]["id"]).status == "succeeded"
    got = world.client_a.get(f"/api/v1/instances/{inst_id}/").data
    assert (got["status"], got["observed_state"]) == ("active", "on")
    assert bm_driver.get(node.ironic_id).state.power == "on"


def test_a_host_marked_available_while_its_last_tenant_is_still_being_cleaned_gets_nobody(world, bm_driver,
                                                                                         bm_flavor, node):
    """Staff marking the host `available` by hand while the previous tenant's delete still runs (cleaning, the
    erase read-back, the GPU checks) must not hand it to the next tenant: the create fails with
    `baremetal_node_not_available` before anything is asked of Ironic, and the delete ends as usual."""
    from dataclasses import replace

    inst_a, op_id = _create(world, bm_flavor, name="bm-a")
    drive(op_id)
    delete = world.client_a.delete(f"/api/v1/instances/{inst_a}/")
    op = drive(delete.data["operation"]["id"], max_steps=2)
    assert op.steps_done == ["undeploy"], op.steps_done
    row = bm_driver._row(node.ironic_id)
    row["state"] = replace(row["state"], provision="cleaning", target_provision="available")  # Ironic cleans
    op = drive(delete.data["operation"]["id"], max_steps=12)
    # the tenant's delete is done; the host's own cleaning (its own operation) still runs
    clean = Operation.objects.get(pk=op.state["clean_operation"])
    assert (op.status, clean.status) == ("succeeded", "running")
    assert Host.objects.get(pk=node.host_id).state == "maintenance"
    marked = world.staff_client.post(f"/api/v1/hosts/{node.host_id}/mark-available/", {"reason": "looks done"},
                                     format="json")
    assert marked.status_code == 200, marked.content

    resp = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor, name="bm-b"), format="json")
    assert resp.status_code == 202, resp.content
    op_b = drive(resp.data["operation"]["id"])
    assert (op_b.status, op_b.error_code) == ("failed", "baremetal_node_not_available")
    assert bm_driver.get(node.ironic_id).instance_id in ("", None)  # nothing deployed for the second tenant
    assert _live(resp.data["instance"]["id"]) == []

    row["state"] = replace(row["state"], provision="available", target_provision=None)  # cleaning ended
    assert drive(delete.data["operation"]["id"]).status == "succeeded"
    assert BaremetalNode.objects.get(pk=node.pk).held_reason == ""
    assert Host.objects.get(pk=node.host_id).state == "available"
