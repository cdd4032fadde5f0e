"""Instance lifecycle through the API and the real step runner, on the fake driver and the real ledger."""
from __future__ import annotations

import pytest

from apps.compute.models import Instance
from apps.compute.services.hypervisor import driver_for_host
from apps.inventory.models import Host
from apps.operations.models import Operation
from apps.scheduling.models import Allocation
from apps.scheduling.selectors import quota_usage
from apps.tenancy.quotas import usage_of

from .conftest import create_body, drive, gpu_host

pytestmark = pytest.mark.django_db


def _live_allocations(inst_id) -> list[tuple[str, int]]:
    from apps.core.clock import now

    return sorted((a.resource_class, a.amount) for a in Allocation.objects.filter(consumer_id=inst_id,
                                                                                  period__contains=now()))


def test_create_stop_start_reboot_delete(world):
    host = gpu_host(gpus=8)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    assert resp.status_code == 202, resp.content
    inst_id, op_id = resp.data["instance"]["id"], resp.data["operation"]["id"]
    assert resp["Location"] == f"/api/v1/operations/{op_id}"
    assert resp.data["instance"]["status"] == "pending"

    op = drive(op_id)
    assert (op.status, op.step) == ("running", "wait_devices")  # HGX: the NVSwitch partition comes first
    (cmd,) = host.agent_commands.all()
    part = Instance.objects.get(pk=inst_id).devices["partition"]
    assert (cmd.kind, cmd.payload["partition_id"]) == ("activate_partition", part)
    _agent_complete(host, [cmd], {"active_partitions": [part]})
    op = drive(op_id)
    assert (op.status, op.steps_done) == ("succeeded", [
        "place_and_claim", "attach_networks", "prepare_volumes", "prepare_devices", "wait_devices", "define", "start",
        "wait_running"])
    inst = Instance.objects.get(pk=inst_id)
    assert (inst.status, inst.observed_state, inst.host_id) == ("active", "running", host.pk)
    assert inst.devices["pci"] == ["0000:00:00.0"] and inst.devices["numa_node"] == 0
    assert _live_allocations(inst_id) == [("gpu", 1), ("memory_mib", 65536), ("vcpu", 8)]
    assert driver_for_host(host).domain_get(inst.pk).power_state == "running"
    assert usage_of(organization=world.org_a, project=world.project_a, resource="gpus") == 1

    stop = world.client_a.post(f"/api/v1/instances/{inst_id}/stop/", {"hard": True}, format="json")
    assert stop.status_code == 202 and stop.data["instance"]["status"] == "stopping"
    assert drive(stop.data["operation"]["id"]).status == "succeeded"
    inst.refresh_from_db()
    assert (inst.status, inst.observed_state) == ("stopped", "shutoff")
    assert _live_allocations(inst_id) == [("gpu", 1), ("memory_mib", 65536), ("vcpu", 8)]  # GPU still held
    (deact,) = host.agent_commands.filter(kind="deactivate_partition")
    _agent_complete(host, [deact], {"active_partitions": []})

    start = world.client_a.post(f"/api/v1/instances/{inst_id}/start/")
    start_op = drive(start.data["operation"]["id"])
    assert (start_op.status, start_op.step) == ("running", "wait_devices")  # the partition is activated again
    (again,) = host.agent_commands.filter(kind="activate_partition", status="queued")
    _agent_complete(host, [again], {"active_partitions": [part]})
    assert drive(start.data["operation"]["id"]).status == "succeeded"
    reboot = world.client_a.post(f"/api/v1/instances/{inst_id}/reboot/", {"hard": False}, format="json")
    assert drive(reboot.data["operation"]["id"]).status == "succeeded"
    inst.refresh_from_db()
    assert inst.status == "active"

    delete = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
    assert delete.status_code == 202 and delete.data["instance"]["status"] == "deleting"
    again = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
    assert again.data["operation"]["id"] == delete.data["operation"]["id"]  # idempotent
    op = drive(delete.data["operation"]["id"])
    assert op.status == "succeeded"  # the scrub does not hold the delete: the GPU is dirty instead
    cmds = list(host.agent_commands.filter(status="queued").order_by("created_at"))
    assert [(c.kind, c.payload.get("gpu_index")) for c in cmds] == [("deactivate_partition", None),
                                                                    ("reset_gpu", 0)]
    gpu = host.gpus.get(index=0)
    assert (gpu.scrub_state, gpu.scrub_commands) == ("dirty", [str(c.pk) for c in cmds])
    _agent_complete(host, cmds[:1], {"active_partitions": []})
    gpu.refresh_from_db()
    assert gpu.scrub_state == "dirty"  # not placeable before the reset
    _agent_complete(host, cmds[1:])
    gpu.refresh_from_db()
    assert (gpu.scrub_state, gpu.scrub_commands) == ("clean", [])
    inst.refresh_from_db()
    assert (inst.status, inst.observed_state) == ("deleted", "missing")
    assert _live_allocations(inst_id) == []
    assert quota_usage("gpus", project=world.project_a) == 0
    assert usage_of(organization=world.org_a, project=world.project_a, resource="instances") == 0
    assert driver_for_host(host).domain_list() == []


def _agent_complete(host: Host, cmds, result=None):
    from apps.inventory.models import AgentCredential
    from apps.inventory.services.agent import agent_command_report

    cred = AgentCredential.objects.filter(host=host).first() or AgentCredential.objects.create(
        host=host, prefix=f"t{host.pk.hex[:12]}", secret_hash="x")
    for c in cmds:
        agent_command_report(credential=cred, command_id=c.pk, succeeded=True, result=result or {"health": "ok"})


def test_wrong_state_is_409_listing_allowed_states(world):
    gpu_host(gpus=8)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu), format="json")
    drive(resp.data["operation"]["id"])
    r = world.client_a.post(f"/api/v1/instances/{resp.data['instance']['id']}/start/")
    assert r.status_code == 409
    assert r["Content-Type"] == "application/problem+json"
    assert (r.json()["code"], r.json()["allowed_states"], r.json()["current_state"]) == (
        "invalid_state", ["stopped"], "active")
    assert Operation.objects.filter(kind="instance.start").count() == 0


def test_the_user_data_is_answered_as_its_digest_never_as_text(world):
    """A client that knows what it sent (the Terraform provider importing an instance) compares the SHA-256 of
    its user data with the API's; the text itself (it may hold secrets) is never answered."""
    import hashlib

    gpu_host(gpus=8)
    secret = "#cloud-config\npassword: hunter2\n"
    body = {**create_body(world, world.cpu), "user_data": secret}
    made = world.client_a.post("/api/v1/instances/", body, format="json").json()["instance"]
    plain = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu, name="vm-2"),
                                format="json").json()["instance"]
    got = world.client_a.get(f"/api/v1/instances/{made['id']}/").json()
    assert made["user_data_sha256"] == got["user_data_sha256"] == hashlib.sha256(secret.encode()).hexdigest()
    assert plain["user_data_sha256"] == hashlib.sha256(b"").hexdigest()
    listed = world.client_a.get("/api/v1/instances/").content.decode()
    assert "hunter2" not in listed and "hunter2" not in str(got)


def test_idempotency_key_replays_and_refuses_a_different_body(world):
    gpu_host(gpus=8)
    headers = {"HTTP_IDEMPOTENCY_KEY": "k-1"}
    first = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu), format="json", **headers)
    second = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu), format="json", **headers)
    assert first.status_code == second.status_code == 202
    assert second.data["instance"]["id"] == first.data["instance"]["id"]
    assert second.data["operation"]["id"] == first.data["operation"]["id"]
    assert Instance.objects.count() == 1
    other = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu, name="vm-2"), format="json",
                                **headers)
    assert (other.status_code, other.json()["code"]) == (422, "idempotency_key_reused")
    assert Instance.objects.count() == 1


def test_no_capacity_fails_the_create_and_holds_nothing(world):
    """No GPU host at all: the fleet could never hold the flavor, refused at once (the placement rule)."""
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    assert (resp.status_code, resp.json()["code"], resp.json()["reason"]) == (422, "unplaceable", "no_hosts")
    assert "could ever hold" in resp.json()["detail"]
    assert Instance.objects.count() == 0
    assert Allocation.objects.count() == 0


def test_unreachable_host_fails_over_after_cordon(world, fake_driver, monkeypatch):
    monkeypatch.setenv("COMPUTE_TRANSIENT_RETRIES", "2")
    h1, h2 = gpu_host(gpus=2), gpu_host(gpus=2)  # no NVSwitch: no agent step before define
    fake_driver.unreachable.update({h1.libvirt_uri, h2.libvirt_uri})
    first = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json",
                                HTTP_IDEMPOTENCY_KEY="a")
    op = drive(first.data["operation"]["id"])
    inst = Instance.objects.get(pk=first.data["instance"]["id"])
    bad = Host.objects.get(pk=inst.host_id)
    assert (op.status, op.error_code) == ("failed", "host_unreachable")
    assert (inst.status, inst.error_code) == ("error", "host_unreachable")
    assert "cannot connect" in inst.error_reason
    assert _live_allocations(inst.pk) == []
    assert (bad.state, bad.state_reason.startswith("compute: libvirt unreachable")) == ("cordoned", True)

    fake_driver.unreachable.clear()
    replay = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json",
                                 HTTP_IDEMPOTENCY_KEY="a")
    assert replay.data["instance"]["id"] == str(inst.pk)  # same key, same answer
    again = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, name="vm-2"), format="json",
                                HTTP_IDEMPOTENCY_KEY="b")
    assert drive(again.data["operation"]["id"]).status == "succeeded"
    other = Instance.objects.get(pk=again.data["instance"]["id"])
    assert other.status == "active" and other.host_id != bad.pk


def test_terminal_driver_error_releases_allocation(world, fake_driver):
    h = gpu_host(gpus=2)
    fake_driver.fail_define[h.libvirt_uri] = "invalid_domain_xml"
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    op = drive(resp.data["operation"]["id"])
    inst = Instance.objects.get(pk=resp.data["instance"]["id"])
    assert (op.status, inst.status, inst.error_code) == ("failed", "error", "invalid_domain_xml")
    assert _live_allocations(inst.pk) == []
    h.refresh_from_db()
    assert h.state == "available"  # a bad domain is not the host's fault


def test_delete_during_create_cancels_it_and_cleans_up(world):
    h = gpu_host(gpus=8)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu), format="json")
    from apps.operations.runner import operation_run_step

    create_op = resp.data["operation"]["id"]
    operation_run_step(create_op)  # place_and_claim
    operation_run_step(create_op)  # prepare_devices
    d = world.client_a.delete(f"/api/v1/instances/{resp.data['instance']['id']}/")
    assert d.status_code == 202
    assert Operation.objects.get(pk=create_op).status == "cancelled"
    assert drive(d.data["operation"]["id"]).status == "succeeded"
    assert Instance.objects.get(pk=resp.data["instance"]["id"]).status == "deleted"
    assert _live_allocations(resp.data["instance"]["id"]) == []
    assert driver_for_host(h).domain_list() == []


def test_resize_when_stopped_to_a_flavor_that_fits(world):
    from apps.compute.models import Flavor

    host = gpu_host(gpus=2, threads=32, memory_mib=229376)  # per NUMA node 16 threads, 112 GiB: the 12-vCPU 96 GiB flavor fits its GPU's node
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    drive(resp.data["operation"]["id"])
    inst_id = resp.data["instance"]["id"]
    bigger = Flavor.objects.create(name="g1-big", vcpus=12, memory_mib=98304, gpu_form="gpu",
                                   gpu_model="H100-SXM5-80GB", gpu_count=1)
    huge = Flavor.objects.create(name="g1-huge", vcpus=12, memory_mib=262144, gpu_form="gpu",
                                 gpu_model="H100-SXM5-80GB", gpu_count=1)
    url = f"/api/v1/instances/{inst_id}/resize/"
    active = world.client_a.post(url, {"flavor": str(bigger.pk)}, format="json")
    assert (active.status_code, active.json()["allowed_states"]) == (409, ["stopped"])
    drive(world.client_a.post(f"/api/v1/instances/{inst_id}/stop/", {"hard": True},
                              format="json").data["operation"]["id"])
    other_gpu = world.client_a.post(url, {"flavor": str(world.cpu.pk)}, format="json")
    assert (other_gpu.status_code, other_gpu.json()["code"]) == (409, "flavor_does_not_fit")
    too_big = world.client_a.post(url, {"flavor": str(huge.pk)}, format="json")
    assert (too_big.status_code, too_big.json()["code"]) == (409, "flavor_does_not_fit")
    # the tenant's words: what is short, never the host's identity or the ledger's set names
    assert too_big.json()["detail"] == (
        "The new flavor does not fit the NUMA nodes of the instance's GPUs on its host (a guest NUMA node on host "
        "node 0 needs 262144 MiB; the host node has 114688 MiB); choose a smaller flavor."), too_big.json()
    assert str(host.pk) not in too_big.content.decode()
    assert Instance.objects.get(pk=inst_id).status == "stopped"
    assert _live_allocations(inst_id) == [("gpu", 1), ("memory_mib", 65536), ("vcpu", 8)]

    ok = world.client_a.post(url, {"flavor": str(bigger.pk)}, format="json")
    assert ok.status_code == 202 and ok.data["instance"]["status"] == "resizing"
    assert drive(ok.data["operation"]["id"]).status == "succeeded"
    inst = Instance.objects.get(pk=inst_id)
    assert (inst.status, inst.flavor_id, inst.host_id) == ("stopped", bigger.pk, host.pk)
    assert _live_allocations(inst_id) == [("gpu", 1), ("memory_mib", 98304), ("vcpu", 12)]
    spec = driver_for_host(host).host.specs[inst.pk]
    assert (spec.vcpus, spec.memory_mib) == (12, 98304)


def test_delete_while_the_host_is_unreachable_releases_locally(world, fake_driver, monkeypatch):
    """RW-022: the allocation is released although the host does not answer; the host is cordoned so its GPU is
    not placed again before a health check; nothing re-creates the allocation when the host returns."""
    monkeypatch.setenv("COMPUTE_TRANSIENT_RETRIES", "2")
    host = gpu_host(gpus=2)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    drive(resp.data["operation"]["id"])
    inst_id = resp.data["instance"]["id"]
    fake_driver.unreachable.add(host.libvirt_uri)
    delete = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
    op = drive(delete.data["operation"]["id"])
    inst = Instance.objects.get(pk=inst_id)
    host.refresh_from_db()
    assert (op.status, inst.status, host.state) == ("succeeded", "deleted", "cordoned")
    assert inst.devices["local_delete"].startswith("host unreachable")
    assert _live_allocations(inst_id) == []
    (reset,) = host.agent_commands.all()  # the scrub is queued all the same (the agent is not libvirt)
    assert (reset.kind, host.gpus.get(index=0).scrub_state) == ("reset_gpu", "dirty")
    refused = world.staff_client.post(f"/api/v1/hosts/{host.pk}/mark-available/", {"reason": "back"},
                                      format="json")
    assert (refused.status_code, refused.data["code"]) == (409, "gpu_scrub_pending")
    assert refused.data["gpus"] == [{"index": 0, "scrub_state": "dirty",
                                     "scrub_reason": f"instance {inst_id} released its devices: "
                                                     "deleted (local delete: host unreachable)"}]
    host.refresh_from_db()
    assert host.state == "cordoned"
    fake_driver.unreachable.clear()
    from apps.compute.services.reconcile import instances_reconcile

    assert instances_reconcile().unknown == [inst_id]  # the leftover domain is reported, not resurrected
    assert _live_allocations(inst_id) == []
