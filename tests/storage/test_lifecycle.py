"""Volume and snapshot lifecycles through the API and the real step runner, on the in-memory storage fake."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
import time_machine

from apps.compute.models import Instance
from apps.core.clock import now
from apps.operations.models import Operation
from apps.storage.drivers import get_driver
from apps.storage.drivers.base import GIB, disk_serial
from apps.storage.models import Snapshot, Volume, VolumeAttachment, VolumeType, VolumeUsage
from apps.storage.services.backend import pool_spec, volume_spec
from apps.storage.services.reconcile import attachments_reconcile

from .conftest import SHARED_URI, boot, drive, instance, volume_body

pytestmark = pytest.mark.django_db


def _done(resp, status="succeeded") -> Operation:
    assert resp.status_code == 202, resp.content
    assert resp["Location"] == f"/api/v1/operations/{resp.json()['operation']['id']}"
    op = drive(resp.json()["operation"]["id"])
    assert op.status == status, (op.error_code, op.error_detail)
    return op


def _disks(inst) -> list[tuple[str, str]]:
    return [(d.target_dev, d.serial) for d in get_driver(inst.host.libvirt_uri).attached_disks(str(inst.pk))]


def test_create_attach_detach_extend_snapshot_restore_delete(world, storage_driver):
    inst = world.instance_a
    boot(inst)
    resp = world.client_a.post("/api/v1/volumes/", volume_body(world, "data", 10), format="json")
    assert resp.json()["volume"]["status"] == "creating"
    _done(resp)
    vol = Volume.objects.get(pk=resp.json()["volume"]["id"])
    backend = get_driver(SHARED_URI).volume_get("ssd", str(vol.pk))
    assert (vol.status, vol.backend_path, backend.capacity_bytes) == ("available", backend.path, 10 * GIB)

    attach = world.client_a.post(f"/api/v1/volumes/{vol.pk}/attach/", {"instance": str(inst.pk)}, format="json")
    assert attach.json()["volume"]["status"] == "attaching"
    _done(attach)
    got = world.client_a.get(f"/api/v1/volumes/{vol.pk}/").json()
    assert (got["status"], [(a["instance"], a["device"], a["status"]) for a in got["attachments"]]) == (
        "in-use", [(str(inst.pk), "vdb", "attached")])
    assert _disks(inst) == [("vdb", disk_serial(vol.pk))]
    listed = world.client_a.get(f"/api/v1/volumes/?instance={inst.pk}").json()["results"]
    assert [v["id"] for v in listed] == [str(vol.pk)]
    held = world.client_a.post("/api/v1/snapshots/", {"volume": str(vol.pk), "name": "s"}, format="json")
    assert (held.status_code, held.json()["code"], held.json()["instances"]) == (409, "volume_in_use", [str(inst.pk)])

    _done(world.client_a.post(f"/api/v1/volumes/{vol.pk}/detach/", {"instance": str(inst.pk)}, format="json"))
    vol.refresh_from_db()
    assert (vol.status, VolumeAttachment.objects.count(), _disks(inst)) == ("available", 0, [])

    _done(world.client_a.post(f"/api/v1/volumes/{vol.pk}/extend/", {"size_gib": 20}, format="json"))
    vol.refresh_from_db()
    assert (vol.status, vol.size_gib) == ("available", 20)
    assert get_driver(SHARED_URI).volume_get("ssd", str(vol.pk)).capacity_bytes == 20 * GIB
    assert [(u.size_gib, u.end is None) for u in VolumeUsage.objects.order_by("start")] == [(10, False), (20, True)]

    get_driver(SHARED_URI).write_bytes(vol.backend_path, 0, b"hello")
    snap_resp = world.client_a.post("/api/v1/snapshots/", {"volume": str(vol.pk), "name": "before"}, format="json")
    _done(snap_resp)
    snap = Snapshot.objects.get(pk=snap_resp.json()["snapshot"]["id"])
    assert (snap.status, snap.size_gib, snap.size_bytes) == ("available", 20, 20 * GIB)

    restore = world.client_a.post("/api/v1/volumes/", {"project": str(world.project_a.pk), "name": "restored",
                                                       "source_snapshot": str(snap.pk)}, format="json")
    assert (restore.json()["volume"]["size_gib"], restore.json()["volume"]["volume_type"]) == (20, str(world.ssd.pk))
    _done(restore)
    restored = Volume.objects.get(pk=restore.json()["volume"]["id"])
    assert get_driver(SHARED_URI).read_bytes(restored.backend_path, 0, 5) == b"hello"
    small = world.client_a.post("/api/v1/volumes/", {"project": str(world.project_a.pk), "name": "small",
                                                     "source_snapshot": str(snap.pk), "size_gib": 5}, format="json")
    assert (small.status_code, small.json()["errors"]) == (400, {"size_gib": ["20..1000"]})

    _done(world.client_a.delete(f"/api/v1/volumes/{vol.pk}/"))  # its snapshot is a full copy: it stays
    _done(world.client_a.delete(f"/api/v1/snapshots/{snap.pk}/"))
    vol.refresh_from_db()
    snap.refresh_from_db()
    assert (vol.status, snap.status) == ("deleted", "deleted")
    assert vol.deleted_at is not None and not VolumeUsage.objects.filter(volume=vol, end__isnull=True).exists()
    for key in (str(vol.pk), str(snap.pk)):
        with pytest.raises(Exception) as exc:
            get_driver(SHARED_URI).volume_get("ssd", key)
        assert exc.value.code == "volume_not_found"


def test_a_stopped_instance_gets_the_disk_in_its_definition(world, storage_driver):
    inst = instance(world.project_a, "vm-off", status="stopped", host=world.instance_a.host)
    boot(inst, running=False)
    resp = world.client_a.post("/api/v1/volumes/", volume_body(world, "cold"), format="json")
    _done(resp)
    vol_id = resp.json()["volume"]["id"]
    _done(world.client_a.post(f"/api/v1/volumes/{vol_id}/attach/", {"instance": str(inst.pk)}, format="json"))
    assert _disks(inst) == [("vdb", disk_serial(vol_id))]
    snap = world.client_a.post("/api/v1/snapshots/", {"volume": vol_id, "name": "cold-snap"}, format="json")
    _done(snap)  # every instance holding it is stopped


def test_a_failed_attach_leaves_the_volume_as_it_was(world, storage_driver):
    resp = world.client_a.post("/api/v1/volumes/", volume_body(world, "data"), format="json")
    _done(resp)
    vol_id = resp.json()["volume"]["id"]
    # instance A has no domain on its host: the attach step gets domain_not_found (terminal)
    op = _done(world.client_a.post(f"/api/v1/volumes/{vol_id}/attach/", {"instance": str(world.instance_a.pk)},
                                   format="json"), status="failed")
    vol = Volume.objects.get(pk=vol_id)
    assert (op.error_code, vol.status, vol.error_code, VolumeAttachment.objects.count()) == (
        "domain_not_found", "available", "domain_not_found", 0)


def test_a_failed_create_is_error_and_a_retried_step_finds_what_the_last_try_made(world, storage_driver):
    storage_driver.unreachable.add(SHARED_URI)
    resp = world.client_a.post("/api/v1/volumes/", volume_body(world, "data"), format="json")
    op_id = resp.json()["operation"]["id"]
    drive(op_id, max_steps=3)
    op = Operation.objects.get(pk=op_id)
    assert (op.status, op.attempts) == ("running", 3)  # host_unreachable is transient: retried
    storage_driver.unreachable.clear()
    vol = Volume.objects.get(pk=resp.json()["volume"]["id"])
    drv = get_driver(SHARED_URI)
    drv.pool_ensure(pool_spec(world.ssd))
    made = drv.volume_create(volume_spec(vol))  # as if a killed worker had made it before its commit
    assert drive(op_id).status == "succeeded"
    vol.refresh_from_db()
    assert (vol.status, vol.backend_path) == ("available", made.path)

    # the pool exists with another path now: a terminal conflict, the volume is `error`
    VolumeType.objects.filter(pk=world.ssd.pk).update(pool_target_path="/elsewhere")
    op = _done(world.client_a.post("/api/v1/volumes/", volume_body(world, "other"), format="json"), status="failed")
    other = Volume.objects.get(name="other")
    assert (op.error_code, other.status, other.error_code) == ("pool_definition_mismatch", "error",
                                                               "pool_definition_mismatch")
    assert world.client_a.delete(f"/api/v1/volumes/{other.pk}/").status_code == 202  # an error volume deletes


def test_host_local_volume_lives_on_the_instance_host(world, storage_driver):
    inst = instance(world.project_a, "vm-local")
    boot(inst)
    body = {**volume_body(world, "scratch", 50), "volume_type": str(world.local.pk), "instance": str(inst.pk)}
    resp = world.client_a.post("/api/v1/volumes/", body, format="json")
    _done(resp)
    vol_id = resp.json()["volume"]["id"]
    assert get_driver(inst.host.libvirt_uri).volume_get("nvme", vol_id).capacity_bytes == 50 * GIB
    _done(world.client_a.post(f"/api/v1/volumes/{vol_id}/attach/", {"instance": str(inst.pk)}, format="json"))
    assert _disks(inst) == [("vdb", disk_serial(vol_id))]


def test_multi_attach_volume_attaches_to_two_instances(world, storage_driver):
    world.ssd.multi_attach = True
    world.ssd.save()
    other = instance(world.project_a, "vm-2", host=world.instance_a.host)
    for inst in (world.instance_a, other):
        boot(inst)
    resp = world.client_a.post("/api/v1/volumes/", volume_body(world, "shared"), format="json")
    _done(resp)
    vol_id = resp.json()["volume"]["id"]
    for inst in (world.instance_a, other):
        _done(world.client_a.post(f"/api/v1/volumes/{vol_id}/attach/", {"instance": str(inst.pk)}, format="json"))
    assert Volume.objects.get(pk=vol_id).status == "in-use"
    _done(world.client_a.post(f"/api/v1/volumes/{vol_id}/detach/", {"instance": str(other.pk)}, format="json"))
    assert (Volume.objects.get(pk=vol_id).status, _disks(world.instance_a), _disks(other)) == (
        "in-use", [("vdb", disk_serial(vol_id))], [])


def test_deleted_instances_release_their_volumes(world, storage_driver):
    boot(world.instance_a)
    ids = []
    for name, dot in (("keep", False), ("scratch", True)):
        resp = world.client_a.post("/api/v1/volumes/", volume_body(world, name, delete_on_termination=dot),
                                   format="json")
        _done(resp)
        ids.append(resp.json()["volume"]["id"])
        _done(world.client_a.post(f"/api/v1/volumes/{ids[-1]}/attach/", {"instance": str(world.instance_a.pk)},
                                  format="json"))
    Instance.objects.filter(pk=world.instance_a.pk).update(status="deleted")
    result = attachments_reconcile()
    assert (len(result.released), result.deleted) == (2, [ids[1]])
    assert attachments_reconcile().released == []
    keep, scratch = (Volume.objects.get(pk=i) for i in ids)
    assert (keep.status, scratch.status, VolumeAttachment.objects.count()) == ("available", "deleting", 0)
    (op,) = Operation.objects.filter(target_id=scratch.pk, kind="volume.delete")
    assert drive(op.pk).status == "succeeded"


def test_volume_usage_is_metered_in_gib_per_type(world, storage_driver):
    from apps.billing.models import UsageRecord
    from apps.billing.services import usage_record_collect

    base = now().replace(minute=0, second=0, microsecond=0) + dt.timedelta(days=1)  # API tokens stay valid

    def utc(h, m=0):
        return base + dt.timedelta(hours=h - 10, minutes=m)

    with time_machine.travel(utc(10), tick=False):
        resp = world.client_a.post("/api/v1/volumes/", volume_body(world, "billed", 100), format="json")
        _done(resp)
    vol_id = resp.json()["volume"]["id"]
    with time_machine.travel(utc(11, 30), tick=False):
        _done(world.client_a.post(f"/api/v1/volumes/{vol_id}/extend/", {"size_gib": 200}, format="json"))
    with time_machine.travel(utc(12), tick=False):
        world.client_a.delete(f"/api/v1/volumes/{vol_id}/")
    assert usage_record_collect(window_start=utc(10), window_end=utc(13), sources=["storage.volume"]) == {
        "storage.volume": 3}
    rows = list(UsageRecord.objects.order_by("start").values_list("sku", "units", "start", "end", "resource_id"))
    assert rows == [("volume:type=ssd", Decimal(100), utc(10), utc(11), vol_id),
                    ("volume:type=ssd", Decimal(100), utc(11), utc(11, 30), vol_id),
                    ("volume:type=ssd", Decimal(200), utc(11, 30), utc(12), vol_id)]
    assert len({r.run_id for r in UsageRecord.objects.all()}) == 1


def test_a_restore_is_bootable_when_its_snapshot_volume_was(world, storage_driver):
    got = {}
    for name, bootable in (("system", True), ("blank", False)):
        resp = world.client_a.post("/api/v1/volumes/", volume_body(world, name), format="json")
        _done(resp)
        Volume.objects.filter(pk=resp.json()["volume"]["id"]).update(bootable=bootable)
        snap = world.client_a.post("/api/v1/snapshots/", {"volume": resp.json()["volume"]["id"], "name": name},
                                   format="json")
        _done(snap)
        restored = world.client_a.post("/api/v1/volumes/", {**volume_body(world, f"{name}-restored"),
                                                            "source_snapshot": snap.json()["snapshot"]["id"]},
                                       format="json")
        _done(restored)
        got[name] = world.client_a.get(f"/api/v1/volumes/{restored.json()['volume']['id']}/").json()["bootable"]
    assert got == {"system": True, "blank": False}
