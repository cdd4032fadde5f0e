"""The product layer on a real OpenStack Ironic (standalone, `fake-hardware`; started once per session by
`tests/drivers/contract/ironic_standalone.py`): staff enroll a host through the API, a tenant deploys a bare-metal
instance with a config drive through /instances, reboots and deletes it, and gets a receipt that verifies.
Marked slow; skipped only when var/ironic/venv is missing (`make ironic`)."""
from __future__ import annotations

import json
import time

import pytest

from apps.baremetal.models import BaremetalNode, ExitReceipt
from apps.baremetal.services.driver import baremetal_driver, forget_driver
from apps.baremetal.services.receipts import receipt_verify
from apps.baremetal.services.secrets import public_key_info
from apps.compute.models import Instance
from apps.inventory.models import Host
from apps.operations.models import TERMINAL, Operation
from apps.operations.runner import operation_run_step
from tests.drivers.contract.ironic_standalone import ironic_endpoint  # noqa: F401  (session fixture)

from .conftest import bm_body, bm_host

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


@pytest.fixture
def ironic(settings, request):
    endpoint = request.getfixturevalue("ironic_endpoint")
    settings.DRIVERS = {**getattr(settings, "DRIVERS", {}),
                        "baremetal": "apps.baremetal.drivers.ironic:IronicDriver"}
    settings.BAREMETAL_IRONIC_ENDPOINT = endpoint
    settings.BAREMETAL_DEPLOY_POLL_S = 0.25
    forget_driver()
    yield baremetal_driver()
    forget_driver()


def _run(op_id, timeout: float = 180.0) -> Operation:
    """Run the operation's steps with the real runner until it finishes (waits are real here), then the host's
    cleaning a delete started (`clean_operation`, which signs the receipt)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        op = Operation.objects.get(pk=op_id)
        if op.status in TERMINAL:
            if op.state.get("clean_operation"):
                _run(op.state["clean_operation"], timeout=max(1.0, end - time.monotonic()))
            return op
        operation_run_step(op_id)
        time.sleep(0.25)
    return Operation.objects.get(pk=op_id)


def test_enroll_deploy_reboot_delete_on_real_ironic(world, ironic, bm_flavor):
    host = bm_host()
    resp = world.staff_client.post("/api/v1/bare-metal/nodes/", {"host": str(host.pk), "driver": "fake-hardware"},
                                   format="json")
    assert resp.status_code == 202, resp.content
    op = _run(resp.data["operation"]["id"])
    assert op.status == "succeeded", (op.error_code, op.error_detail)
    node = BaremetalNode.objects.get(pk=resp.data["node"]["id"])
    assert node.provision_state == "available" and ironic.get(node.ironic_id).state.provision == "available"
    assert Host.objects.get(pk=host.pk).state == "available"
    try:
        create = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor), format="json")
        assert create.status_code == 202, create.content
        inst_id = create.data["instance"]["id"]
        op = _run(create.data["operation"]["id"])
        assert op.status == "succeeded", (op.error_code, op.error_detail)
        seen = ironic.get(node.ironic_id)
        assert (seen.state.provision, seen.instance_id) == ("active", inst_id)
        assert Instance.objects.get(pk=inst_id).status == "active"

        reboot = world.client_a.post(f"/api/v1/instances/{inst_id}/reboot/", {"hard": True}, format="json")
        assert _run(reboot.data["operation"]["id"]).status == "succeeded"

        delete = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
        op = _run(delete.data["operation"]["id"])
        assert op.status == "succeeded", (op.error_code, op.error_detail)
        seen = ironic.get(node.ironic_id)
        assert (seen.state.provision, seen.instance_id) == ("available", "")
        assert Host.objects.get(pk=host.pk).state == "available"
        receipt = ExitReceipt.objects.get(instance_id=inst_id)
        assert receipt_verify(payload=receipt.payload, signature=receipt.signature,
                              public_key_pem=public_key_info()["public_key_pem"])
        assert json.loads(receipt.payload)["node"]["id"] == node.ironic_id
    finally:
        node.refresh_from_db()
        seen = ironic.get(node.ironic_id)
        if seen.state.provision == "active":
            ironic.undeploy(node.ironic_id)
        ironic.delete(node.ironic_id)


def _deploy_then_delete(world, bm_flavor, name: str) -> dict:
    """A tenant's instance deployed and deleted through the API; returns its receipt's steps by name."""
    create = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor, name=name), format="json")
    assert create.status_code == 202, create.content
    op = _run(create.data["operation"]["id"])
    assert op.status == "succeeded", (op.error_code, op.error_detail)
    inst_id = create.data["instance"]["id"]
    op = _run(world.client_a.delete(f"/api/v1/instances/{inst_id}/").data["operation"]["id"])
    assert op.status == "succeeded", (op.error_code, op.error_detail)
    receipt = ExitReceipt.objects.get(instance_id=inst_id)
    assert receipt_verify(payload=receipt.payload, signature=receipt.signature,
                          public_key_pem=public_key_info()["public_key_pem"])
    return {s["step"]: s for s in json.loads(receipt.payload)["steps"]}


def test_the_receipt_says_whether_ironic_cleaned_the_node(world, ironic, bm_flavor):
    """Ironic here runs with `[conductor]automated_clean = false`: cleaning happens because the product enrolls
    nodes with their own `automated_clean` on, and the receipt reads back what Ironic did (its node history), so an
    operator switching cleaning off for the node in Ironic gets a receipt that says it was skipped."""
    host = bm_host()
    resp = world.staff_client.post("/api/v1/bare-metal/nodes/", {"host": str(host.pk), "driver": "fake-hardware"},
                                   format="json")
    assert _run(resp.data["operation"]["id"]).status == "succeeded"
    node = BaremetalNode.objects.get(pk=resp.data["node"]["id"])
    try:
        assert ironic.get(node.ironic_id).automated_clean is True
        before = {e.id for e in ironic.history(node.ironic_id)}
        steps = _deploy_then_delete(world, bm_flavor, "bm-cleaned")
        cleaned = [e for e in ironic.history(node.ironic_id)
                   if e.id not in before and e.event_type.startswith("automated_cleaning_")]
        assert [e.event_type for e in cleaned] == ["automated_cleaning_start", "automated_cleaning_end"]
        step = steps["automated_cleaning"]
        assert (step["result"], step["how"]) == ("succeeded", "simulated by fake-hardware")
        assert "vendor.log_passthrough" in step["detail"]  # the clean step fake-hardware's conductor ran
        assert (step["started_at"], step["finished_at"]) == (cleaned[0].created_at, cleaned[1].created_at)

        ironic.api.patch_node(node.ironic_id, [{"op": "add", "path": "/automated_clean", "value": False}])
        before = {e.id for e in ironic.history(node.ironic_id)}
        steps = _deploy_then_delete(world, bm_flavor, "bm-not-cleaned")
        assert not [e for e in ironic.history(node.ironic_id)
                    if e.id not in before and e.event_type.startswith("automated_cleaning_")]
        step = steps["automated_cleaning"]
        assert (step["result"], step["how"], step["started_at"]) == (
            "not_run", "skipped: automated cleaning is disabled for this node", None)
    finally:
        seen = ironic.get(node.ironic_id)
        if seen.state.provision == "active":
            ironic.undeploy(node.ironic_id)
        ironic.delete(node.ironic_id)


def test_a_lease_of_a_bare_metal_host_ends_with_an_undeploy_and_cleaning_on_real_ironic(world, ironic, bm_flavor):
    """A tenant's lease of one whole host, a bare-metal instance `market: lease` in it, the lease cancelled (its
    end's path): Ironic undeploys and cleans the node, the receipt says so, the host is back in the pool."""
    import datetime as dt

    from apps.core.clock import now
    from apps.reservations.services.leases import lease_create, leases_advance
    from apps.tenancy.models import Quota

    Quota.objects.update_or_create(organization=world.org_a, project=None, resource="gpus", defaults={"limit": 64})
    host = bm_host()
    resp = world.staff_client.post("/api/v1/bare-metal/nodes/", {"host": str(host.pk), "driver": "fake-hardware"},
                                   format="json")
    assert _run(resp.data["operation"]["id"]).status == "succeeded"
    node = BaremetalNode.objects.get(pk=resp.data["node"]["id"])
    try:
        le = lease_create(actor=None, project=world.project_a, name="bm", start=now(),
                          end=now() + dt.timedelta(hours=2), kind="hosts", gpu_model=bm_flavor.gpu_model, count=1)
        assert le.status == "confirmed", (le.reason, le.explanation)
        leases_advance()
        create = world.client_a.post("/api/v1/instance-requests", {
            "project": str(world.project_a.pk), "name": "bm-l", "flavor": str(bm_flavor.pk),
            "image": str(world.image.pk), "market": "lease", "lease": str(le.pk)}, format="json")
        assert create.status_code == 202, create.content
        inst_id = create.json()["instance"]["id"]
        op = _run(create.json()["operation"]["id"])
        assert op.status == "succeeded", (op.error_code, op.error_detail)
        assert ironic.get(node.ironic_id).instance_id == inst_id

        assert world.client_a.post(f"/api/v1/leases/{le.pk}/cancel/").status_code == 200
        assert Host.objects.get(pk=host.pk).state == "maintenance"
        delete = Operation.objects.get(target_id=inst_id, kind="baremetal.instance.delete")
        op = _run(delete.pk)
        assert op.status == "succeeded", (op.error_code, op.error_detail)
        seen = ironic.get(node.ironic_id)
        assert (seen.state.provision, seen.instance_id) == ("available", "")
        assert Host.objects.get(pk=host.pk).state == "available"
        steps = {s["step"]: s for s in json.loads(ExitReceipt.objects.get(instance_id=inst_id).payload)["steps"]}
        assert (steps["undeploy"]["result"], steps["automated_cleaning"]["result"],
                steps["automated_cleaning"]["how"]) == ("succeeded", "succeeded", "simulated by fake-hardware")
    finally:
        node.refresh_from_db()
        seen = ironic.get(node.ironic_id)
        if seen.state.provision == "active":
            ironic.undeploy(node.ironic_id)
        ironic.delete(node.ironic_id)
