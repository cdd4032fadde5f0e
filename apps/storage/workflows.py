"""Volume and snapshot workflows on the Operation step runner (`apps.operations.runner`).

volume.create: create     volume.extend: resize (live when attached to a running guest)     volume.delete: delete
volume.attach: attach     volume.detach: detach
snapshot.create: create   snapshot.delete: delete

Every step runs in the transaction that holds the Operation's row lock and is idempotent: driver calls are keyed by
the volume's and snapshot's UUIDs (a create finds what the last try made; a delete of what is gone is a no-op),
and an attach first asks which disks the domain has. Lock order: operation row, instance, attachment, volume (as
the attach and detach requests: instance, attachment, volume).
"""
from __future__ import annotations

from apps.core.drivers import DriverConflict, DriverNotFound
from apps.core.transitions import transition
from apps.operations import workflows as wf

from .models import Snapshot, Volume, VolumeAttachment
from .services import attachments as attsvc
from .services import snapshots as snapsvc
from .services import usage as usagesvc
from .services import volumes as volsvc
from .services.backend import disk_attachment, driver_for, pool_spec
from .states import SNAPSHOT_TRANSITIONS, VOLUME_TRANSITIONS, AttachmentStatus, SnapshotStatus, VolumeStatus


def _volume(volume_id) -> Volume:
    return Volume.objects.select_for_update(of=("self",)).select_related(
        "volume_type", "host", "source_snapshot", "source_image").get(pk=volume_id)


def _fail_volume(op, code: str, detail: str) -> None:
    vol = _volume(op.target_id)
    if vol.status in VOLUME_TRANSITIONS["fail"][0]:
        transition(vol, "fail", VOLUME_TRANSITIONS, extra={"error_code": code[:64], "error_reason": detail[:1000]})


# ---- create / extend / delete -------------------------------------------------------------------------------
def create(op) -> None:
    """Make the backend volume (empty, a copy-on-write child of an image, or a snapshot's copy)."""
    volsvc.volume_backend_make(_volume(op.target_id))


def resize(op) -> None:
    """Grow the volume to its new `size_gib`: attached to a running domain, through that guest's QEMU
    (`disk_resize`, libvirt's blockResize: the guest sees the new capacity); else on its pool. Lock order as
    the attach steps: instance, then volume."""
    from apps.compute.selectors import instance_for_update

    att = VolumeAttachment.objects.filter(volume_id=op.target_id, status=AttachmentStatus.ATTACHED).first()
    inst = instance_for_update(att.instance_id) if att is not None else None
    vol = _volume(op.target_id)
    grown = False
    if inst is not None and inst.host_id is not None:
        try:
            driver_for(inst.host).disk_resize(str(inst.pk), att.device, vol.size_gib)
            grown = True
        except DriverConflict as exc:
            if exc.code not in ("domain_not_running", "disk_resize_unsupported"):
                raise
        except DriverNotFound:
            pass  # no domain (a deleted instance's) or no such disk: the pool's file is not held open
    if not grown:
        driver_for(vol.host).volume_resize(vol.volume_type.pool, str(vol.pk), vol.size_gib)
    attsvc.volume_settle(vol)
    usagesvc.usage_open(vol)  # metered at the new size from now on


def resize_failed(op, code: str, detail: str) -> None:
    """The volume did not grow (a full pool, a missing pool, a refused resize): its disk is as before and, when
    attached, still in its instance's domain, so the volume settles back to `available` or `in-use` (never
    `error`: an attached volume must stay detachable) at its size before the request (`size_gib` and the quota
    it holds), with the reason in `error_code` / `error_reason`."""
    vol = _volume(op.target_id)
    fields = {"error_code": code[:64], "error_reason": f"extend failed: {detail}"[:1000]}
    if vol.status == VolumeStatus.EXTENDING and op.state.get("from_size_gib"):
        fields["size_gib"] = vol.size_gib = op.state["from_size_gib"]
    Volume.objects.filter(pk=vol.pk).update(**fields)
    attsvc.volume_settle(vol)


def delete(op) -> None:
    vol = _volume(op.target_id)
    driver_for(vol.host).volume_delete(vol.volume_type.pool, str(vol.pk))
    volsvc.volume_mark_deleted(vol)


# ---- attach / detach ----------------------------------------------------------------------------------------
def _attachment(op) -> tuple[VolumeAttachment, object, Volume]:
    from apps.compute.selectors import instance_for_update

    instance_id = VolumeAttachment.objects.values_list("instance_id", flat=True).get(pk=op.state["attachment"])
    inst = instance_for_update(instance_id)  # the requests' order: instance, attachment, volume
    att = VolumeAttachment.objects.select_for_update().get(pk=op.state["attachment"])
    return att, inst, _volume(op.target_id)


def attach(op) -> None:
    """Add the disk to the instance's domain (live when the instance is active) unless it has it already."""
    att, inst, vol = _attachment(op)
    drv = driver_for(inst.host)
    if not any(d.target_dev == att.device for d in drv.attached_disks(str(inst.pk))):
        # the volume's pool as the instance's host sees it: a shared pool is defined there on first use, and a
        # pool that is not running (a host back from a repair) is started again
        drv.pool_ensure(pool_spec(vol.volume_type))
        info = driver_for(vol.host).volume_get(vol.volume_type.pool, str(vol.pk))
        drv.disk_attach(str(inst.pk), disk_attachment(vol, info.path, att.device), live=inst.status == "active")
    VolumeAttachment.objects.filter(pk=att.pk).update(status=AttachmentStatus.ATTACHED)
    attsvc.volume_settle(vol)


def attach_failed(op, code: str, detail: str) -> None:
    """The attach did not happen: the attachment row goes and the volume is as before (not `error`)."""
    VolumeAttachment.objects.filter(pk=op.state["attachment"]).delete()
    vol = _volume(op.target_id)
    Volume.objects.filter(pk=vol.pk).update(error_code=code[:64], error_reason=f"attach failed: {detail}"[:1000])
    attsvc.volume_settle(vol)


def detach(op) -> None:
    att, inst, vol = _attachment(op)
    try:
        driver_for(inst.host).disk_detach(str(inst.pk), att.device, live=inst.status == "active")
    except DriverNotFound:
        pass  # the domain or the disk is gone already
    VolumeAttachment.objects.filter(pk=att.pk).delete()
    attsvc.volume_settle(vol)


def detach_failed(op, code: str, detail: str) -> None:
    """The disk is still there: the attachment stays and the volume is `in-use` again."""
    VolumeAttachment.objects.filter(pk=op.state["attachment"]).update(status=AttachmentStatus.ATTACHED)
    vol = _volume(op.target_id)
    Volume.objects.filter(pk=vol.pk).update(error_code=code[:64], error_reason=f"detach failed: {detail}"[:1000])
    attsvc.volume_settle(vol)


# ---- snapshots ----------------------------------------------------------------------------------------------
def _snapshot(op) -> Snapshot:
    return Snapshot.objects.select_for_update(of=("self",)).select_related(
        "volume", "volume__volume_type", "volume__host").get(pk=op.target_id)


def snapshot_take(op) -> None:
    snap = _snapshot(op)
    vol = snap.volume
    info = driver_for(vol.host).snapshot_create(vol.volume_type.pool, str(vol.pk), str(snap.pk))
    transition(snap, "created", SNAPSHOT_TRANSITIONS, extra={"size_bytes": info.size_bytes})


def snapshot_remove(op) -> None:
    snap = _snapshot(op)
    driver_for(snap.volume.host).snapshot_delete(snap.volume.volume_type.pool, str(snap.pk))
    snapsvc.snapshot_mark_deleted(snap)


def snapshot_failed(op, code: str, detail: str) -> None:
    snap = _snapshot(op)
    if snap.status in (SnapshotStatus.CREATING, SnapshotStatus.DELETING):
        transition(snap, "fail", SNAPSHOT_TRANSITIONS, extra={"error_code": code[:64],
                                                              "error_reason": detail[:1000]})


wf.register(wf.Workflow(kind=volsvc.CREATE, steps=(("create", create),), on_error=_fail_volume,
                        queue="provisioning", deadline_seconds=1800.0, max_backoff_seconds=30.0))
wf.register(wf.Workflow(kind=volsvc.EXTEND, steps=(("resize", resize),), on_error=resize_failed,
                        deadline_seconds=600.0, max_backoff_seconds=30.0))
wf.register(wf.Workflow(kind=volsvc.DELETE, steps=(("delete", delete),), on_error=_fail_volume,
                        deadline_seconds=3600.0, max_backoff_seconds=30.0))
wf.register(wf.Workflow(kind=attsvc.ATTACH, steps=(("attach", attach),), on_error=attach_failed,
                        deadline_seconds=600.0, max_backoff_seconds=10.0))
wf.register(wf.Workflow(kind=attsvc.DETACH, steps=(("detach", detach),), on_error=detach_failed,
                        deadline_seconds=600.0, max_backoff_seconds=10.0))
wf.register(wf.Workflow(kind=snapsvc.CREATE, steps=(("create", snapshot_take),), on_error=snapshot_failed,
                        deadline_seconds=1800.0, max_backoff_seconds=30.0))
wf.register(wf.Workflow(kind=snapsvc.DELETE, steps=(("delete", snapshot_remove),), on_error=snapshot_failed,
                        deadline_seconds=1800.0, max_backoff_seconds=30.0))

