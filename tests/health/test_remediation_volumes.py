"""Volumes and self-healing (docs/storage.md, "Volumes and self-healing"): a VM with a volume on a shared tier
is re-created on another host by a remediation and keeps the volume (the attachment stays attached, the new
domain on the new host carries the same disk, the volume's pool is ensured there, the volume stays in-use); a
VM with a host-local volume is held with the documented reason; a VM with a zoned volume is re-created in that
zone only (it waits for capacity there rather than moving out of it). Compute and storage on their fakes, the
real ledger, placement, health ingest and step runner, driven as test_remediation.py does."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from apps.compute.drivers.fake import FakeDriver
from apps.compute.models import Flavor, Instance
from apps.health.models import Remediation
from apps.health.services.remediation import remediations_advance
from apps.inventory.models import Host
from apps.operations.models import Operation
from apps.storage.drivers import forget_drivers
from apps.storage.drivers.base import disk_serial
from apps.storage.drivers.fake import FakeStorageDriver
from apps.storage.models import Volume, VolumeAttachment, VolumeType
from apps.tenancy.models import Quota
from tests.compute.conftest import gpu_host
from tests.compute.test_instance_lifecycle import _agent_complete
from tests.scheduling import fleet

from .test_remediation import FAULT, T0, _finish, _policy, _xid79

pytestmark = pytest.mark.django_db
SHARED = "fake://shared-pool"  # the shared pools' own connection, none of the hypervisors
DUE = FAULT + dt.timedelta(minutes=10)  # the checkpoint notice's deadline (notice 600 s)


@pytest.fixture
def stack(world, tiers, settings, monkeypatch):  # noqa: F811
    """Two 8-GPU hypervisors in zone z1, a whole-host flavor, auto remediation with a 10 min notice, and three
    volume types: `ssd` (shared), `nvme-local` (host-local), `ssd-z1` (shared, served in z1 only)."""
    settings.DRIVERS = {**settings.DRIVERS, "storage": "apps.storage.drivers.fake:FakeStorageDriver"}
    monkeypatch.setenv("STORAGE_SHARED_POOL_URI", SHARED)
    FakeStorageDriver.reset()
    forget_drivers()
    hosts = [gpu_host(gpus=8) for _ in range(2)]
    Quota.objects.update_or_create(organization=world.org_a, project=None, resource="gpus", defaults={"limit": 16})
    flavor = Flavor.objects.create(name="h100-8x", vcpus=96, memory_mib=1024 * 512, gpu_form="gpu",
                                   gpu_model="H100-SXM5-80GB", gpu_count=8)
    ssd = VolumeType.objects.create(name="ssd", pool="ssd", pool_kind="netfs", pool_target_path="/srv/ssd",
                                    pool_source="nfs.example:/export/ssd", max_size_gib=100)
    local = VolumeType.objects.create(name="nvme-local", pool="nvme", pool_target_path="/srv/nvme", host_local=True)
    zoned = VolumeType.objects.create(name="ssd-z1", pool="ssd-z1", pool_target_path="/srv/ssd-z1", max_size_gib=100)
    zoned.zones.set([fleet.zone("z1")])
    _policy(world, "auto", notice=600)
    yield type("S", (), dict(hosts=hosts, flavor=flavor, ssd=ssd, local=local, zoned=zoned))
    FakeStorageDriver.reset()
    forget_drivers()


def _launch(world, s, vtype, name="train-0") -> Instance:
    body = {"project": str(world.project_a.pk), "name": name, "flavor": str(s.flavor.pk),
            "image": str(world.image.pk),
            "volumes": [{"name": f"{name}-data", "size_gib": 10, "volume_type": str(vtype.pk)}]}
    with time_machine.travel(T0, tick=False):
        r = world.client_a.post("/api/v1/instances/", body, format="json")
        assert r.status_code == 202, r.content
        op = _finish(r.data["operation"]["id"], s.hosts)
        assert op.status == "succeeded", (op.error_code, op.error_detail)
    return Instance.objects.select_related("host").get(pk=r.data["instance"]["id"])


def _disks(inst: Instance) -> list[tuple]:
    """The volume disks of the instance's domain as defined on its current host (device, serial, path)."""
    spec = FakeDriver(inst.host.libvirt_uri).host.specs[inst.pk]
    return [(d.target_dev, d.serial, d.path) for d in spec.volumes]


def _attachments(inst: Instance) -> list[tuple]:
    return list(VolumeAttachment.objects.filter(instance_id=inst.pk).values_list("volume__name", "device", "status"))


def _advance(hosts, at=DUE) -> Remediation:
    with time_machine.travel(at, tick=False):
        remediations_advance()
        rem = Remediation.objects.get()
        if rem.status == "running":
            op = _finish(rem.operation_id, hosts)
            assert op.status == "succeeded", (op.error_code, op.error_detail)
            remediations_advance()
    return Remediation.objects.get()


def test_a_shared_tier_volume_follows_the_vm_re_created_on_another_host(world, stack):
    s = stack
    inst = _launch(world, s, s.ssd)
    old_host = inst.host
    (new_host,) = [h for h in s.hosts if h.pk != old_host.pk]
    vol = Volume.objects.get(name="train-0-data")
    before = _disks(inst)
    assert before == [("vdb", disk_serial(vol.pk), "/srv/ssd/" + str(vol.pk))]
    assert "ssd" not in FakeStorageDriver(new_host.libvirt_uri).host.pools  # never needed there before

    _xid79(old_host)
    rem = _advance(s.hosts)
    inst.refresh_from_db()
    assert (rem.status, rem.to_host_id, inst.status, inst.host_id) == ("succeeded", new_host.pk, "active", new_host.pk)
    # the same attachment, still attached; the volume stays in-use; the new domain carries the same disk
    assert _attachments(inst) == [("train-0-data", "vdb", "attached")]
    assert Volume.objects.get(pk=vol.pk).status == "in-use"
    assert _disks(inst) == before
    # the shared pool was ensured (a netfs pool: mounted) on the new host before its domain was defined there
    assert FakeStorageDriver(new_host.libvirt_uri).host.pools["ssd"].kind == "netfs"
    seen = world.client_a.get(f"/api/v1/volumes/{vol.pk}/").json()
    assert (seen["status"], [(a["instance"], a["device"], a["status"]) for a in seen["attachments"]]) == (
        "in-use", [(str(inst.pk), "vdb", "attached")])


def test_a_host_local_volume_holds_the_vm_with_the_documented_reason(world, stack):
    s = stack
    inst = _launch(world, s, s.local)
    assert Volume.objects.get(name="train-0-data").host_id == inst.host_id
    (rem_id,) = _xid79(inst.host)["applied"]["remediations"]
    rem = Remediation.objects.get(pk=rem_id)
    assert (rem.status, rem.reason) == ("held", "a volume on a host-local tier cannot follow the VM")
    marked = world.client_a.get(f"/api/v1/instances/{inst.pk}/").json()["maintenance"]
    assert (marked["status"], marked["reason"]) == ("held", "a volume on a host-local tier cannot follow the VM")
    assert _advance(s.hosts, at=FAULT + dt.timedelta(days=1)).status == "held"
    assert Instance.objects.get(pk=inst.pk).host_id == inst.host_id
    assert _attachments(inst) == [("train-0-data", "vdb", "attached")]
    assert not Operation.objects.filter(kind="instance.recreate").exists()


def test_a_zoned_volume_keeps_the_re_create_in_its_zone(world, stack):
    s = stack
    elsewhere = gpu_host(gpus=8, zone_name="z2")  # free capacity, but outside the volume type's zone
    # both hosts of z1 are taken by VMs with a zoned volume: the move has room only in z2
    blocker = _launch(world, s, s.zoned, name="blocker")
    inst = _launch(world, s, s.zoned)
    old_host = inst.host
    assert {blocker.host_id, old_host.pk} == {h.pk for h in s.hosts}
    assert Volume.objects.get(name="train-0-data").zone.name == "z1"

    _xid79(old_host)
    rem = _advance(s.hosts + [elsewhere])
    inst.refresh_from_db()
    assert (rem.status, inst.status, inst.host_id) == ("notice", "active", old_host.pk)
    assert rem.reason.startswith("waiting for capacity"), rem.reason
    assert not Operation.objects.filter(kind="instance.recreate").exists()

    with time_machine.travel(DUE + dt.timedelta(minutes=5), tick=False):  # capacity in z1 comes back
        op = world.client_a.delete(f"/api/v1/instances/{blocker.pk}/").data["operation"]["id"]
        assert _finish(op, s.hosts).status == "succeeded"
        freed = Host.objects.get(pk=blocker.host_id)
        _agent_complete(freed, list(freed.agent_commands.filter(status="queued")))  # its GPUs' scrub
    rem = _advance(s.hosts + [elsewhere], at=DUE + dt.timedelta(minutes=10))
    inst.refresh_from_db()
    assert (rem.status, inst.host_id, inst.host.zone.name) == ("succeeded", blocker.host_id, "z1")
    assert _attachments(inst) == [("train-0-data", "vdb", "attached")]
