"""Volumes an instance create asks for (`volumes` of `POST /api/v1/instances`; Nova's block device mappings):
compute's create hooks (`apps.compute.services.volumes.CreateVolumeHooks`), registered from `integrations`.

A request is a new volume (``size_gib``, ``volume_type``, optional ``name``, ``delete_on_termination``) or an
existing one of the project (``id``, optional ``delete_on_termination``, which changes on the volume when the
create attaches it and not if the create fails); ``boot: true`` makes it the boot disk
(device ``vda``, the image disk is left out; a new boot volume is a copy-on-write child of the instance's
image, at least `max(flavor.disk_gib, image.min_disk_gib)` GiB by default). Data volumes get ``vdb`` .. in the
order given, at most `MAX_ATTACHMENTS_PER_INSTANCE`.

1. `volumes_check` (before anything is written): 400 `validation_error` (a request that is neither new nor
   existing, two boot volumes, a repeated id or name, a size outside the type's range; "Not found." naming
   `volumes` for an id of another project, as for one that does not exist: ADR 0010), 400
   `volume_type_inactive`; 409 `volume_in_use` (an existing volume attached elsewhere, unless its type is
   multi-attach), `volume_not_bootable` (an existing boot volume that is not `bootable`: made empty),
   `invalid_state` (busy or failed), `name_taken`, `host_mismatch` / `zone_mismatch` (existing
   volumes on two hosts / zones); 422 `quota_exceeded` (``volumes``, ``volume_gib:<type>``, ``volume_gib``).
   It pins the placement: an existing host-local volume to its host, a zoned volume or type to its zone.
2. `volumes_reserve` (the create's transaction): new volumes `creating`, existing ones `attaching`, each with a
   `reserved` attachment.
3. `volumes_prepare` (the create's step `prepare_volumes`, after placement): new volumes are made (a host-local
   one on the chosen host), the attachments `attached`, the volumes `in-use`; the domain is then defined with
   them (the disk provider, `attachments.instance_volume_disks`).
4. `volumes_abandon` (the create failed, or a delete superseded it): the attachments go; an existing volume is
   `available` again (never deleted); a volume the create made is deleted when it has `delete_on_termination`,
   else kept (one never made is made by its own `volume.create` operation; a host-local one that never had a
   host is `error` `instance_create_failed`).
5. A VM that self-healing re-creates on another host (compute's `instance.recreate`) keeps its attachments: its
   placement follows them (`placement_pins`: a zoned volume keeps it in its zone; a host-local one would pin
   it to its old host, which is why remediation holds such a VM), and `volumes_prepare`, the re-create's step
   `prepare_volumes`, ensures each attached shared volume's pool on the new host before `define` carries the
   same disks (path and serial) into the new domain. The attachments stay `attached`, the volumes `in-use`.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from apps.audit.services import audit_record
from apps.core.db import unique_conflict
from apps.core.errors import Conflict, InvalidState, ValidationFailed
from apps.core.references import reference_not_found
from apps.core.transitions import transition
from apps.operations.runner import operation_start
from apps.tenancy.quotas import quota_check

from ..errors import Code
from ..models import Volume, VolumeAttachment
from ..models.volume import MAX_ATTACHMENTS_PER_INSTANCE
from ..states import VOLUME_TRANSITIONS, AttachmentStatus, VolumeStatus
from ._common import VOLUME_TARGET, validate_name
from .attachments import DEVICES, volume_settle
from .backend import driver_for, pool_spec
from .volumes import CREATE, DELETE, volume_backend_make

BOOT_DEVICE = "vda"


@dataclass(frozen=True)
class _New:
    name: str
    size_gib: int
    volume_type: object
    zone: object
    delete_on_termination: bool
    boot: bool
    device: str


@dataclass(frozen=True)
class _Existing:
    volume: Volume
    delete_on_termination: bool | None
    boot: bool
    device: str


def _invalid(detail: str, message: str) -> ValidationFailed:
    return ValidationFailed(detail, errors={"volumes": [message]})


def _pin(pins: dict, key: str, value, code: str, what: str) -> None:
    if value is None:
        return
    if pins.get(key) not in (None, value):
        raise Conflict(f"The volumes are on two different {what}s; an instance is on one.", code=code)
    pins[key] = value


def _check_existing(project, vol: Volume, boot: bool) -> None:
    if vol.project_id != project.pk:
        raise reference_not_found("volumes")
    multi = vol.volume_type.multi_attach and not boot
    if vol.status in (VolumeStatus.IN_USE, VolumeStatus.ATTACHING) and not multi:
        instances = sorted(str(i) for i in vol.attachments.values_list("instance_id", flat=True))
        raise Conflict(f"Volume {vol.name!r} is attached to another instance.", code=Code.VOLUME_IN_USE,
                       volume=str(vol.pk), instances=instances, current_state=vol.status,
                       allowed_states=["available", "in-use (multi-attach types)"] if multi else ["available"])
    if vol.status not in (VolumeStatus.AVAILABLE, VolumeStatus.IN_USE):
        raise InvalidState(f"Volume {vol.name!r} is {vol.status}; only an available volume attaches.",
                           volume=str(vol.pk), current_state=vol.status, allowed_states=["available"])
    if boot and not vol.bootable:
        raise Conflict(f"Volume {vol.name!r} holds no bootable system (made empty); a boot volume is made from an "
                       "image or restored from a snapshot of one.", code=Code.VOLUME_NOT_BOOTABLE,
                       volume=str(vol.pk))


def volumes_check(*, actor, project, image, flavor, requests, name: str = ""):
    """Compute's create check (module doc, 1.). Returns the `VolumePlan`. Writes nothing."""
    from apps.compute.services.volumes import VolumePlan

    if sum(1 for r in requests if r.get("boot")) > 1:
        raise _invalid("At most one boot volume.", "at most one volume has boot: true")
    if sum(1 for r in requests if not r.get("boot")) > MAX_ATTACHMENTS_PER_INSTANCE:
        raise Conflict(f"An instance has at most {MAX_ATTACHMENTS_PER_INSTANCE} data volumes.",
                       code=Code.ATTACHMENT_LIMIT_REACHED, limit=MAX_ATTACHMENTS_PER_INSTANCE)
    devices = iter(DEVICES)
    pins: dict = {}
    new: list[_New] = []
    existing: list[_Existing] = []
    seen_ids, seen_names = set(), set()
    for r in requests:
        boot = bool(r.get("boot"))
        device = BOOT_DEVICE if boot else next(devices)
        vol = r.get("id")
        if vol is not None:
            if any(r.get(k) is not None for k in ("size_gib", "volume_type", "name")):
                raise _invalid("An existing volume takes only id, boot and delete_on_termination.",
                               "give id (an existing volume) or size_gib and volume_type (a new one), not both")
            if vol.pk in seen_ids:
                raise _invalid("A volume is given twice.", f"{vol.pk} is given twice")
            seen_ids.add(vol.pk)
            _check_existing(project, vol, boot)
            _pin(pins, "host_id", vol.host_id, Code.HOST_MISMATCH, "host")
            _pin(pins, "zone", vol.zone.name if vol.zone_id else None, Code.ZONE_MISMATCH, "zone")
            existing.append(_Existing(vol, r.get("delete_on_termination"), boot, device))
            continue
        vtype = r.get("volume_type")
        if vtype is None:
            raise _invalid("A new volume needs volume_type.", "a new volume needs volume_type (and size_gib)")
        if not vtype.is_active:
            raise ValidationFailed(f"Volume type {vtype.name!r} is not offered.", code=Code.VOLUME_TYPE_INACTIVE,
                                   errors={"volumes": [f"volume type {vtype.name} is not offered"]})
        floor = max(flavor.disk_gib, image.min_disk_gib) if boot else 0
        low = max(floor, vtype.min_size_gib)
        size = r.get("size_gib") if r.get("size_gib") is not None else low
        if not low <= size <= vtype.max_size_gib:
            raise _invalid(f"size_gib must be {low}..{vtype.max_size_gib} GiB for this volume.",
                           f"size_gib {low}..{vtype.max_size_gib}")
        suffix = "boot" if boot else device
        vol_name = r.get("name") or f"{name[:62 - len(suffix)]}-{suffix}"  # a volume name has 63 characters
        validate_name(vol_name, field="volumes")
        if vol_name in seen_names:
            raise _invalid("Two new volumes have one name.", f"the name {vol_name} is given twice")
        seen_names.add(vol_name)
        if Volume.objects.filter(project=project, name=vol_name).exclude(status=VolumeStatus.DELETED).exists():
            raise Conflict(f"A volume named {vol_name!r} exists in this project.", code=Code.NAME_TAKEN,
                           errors={"volumes": [f"{vol_name} exists"]})
        zones = sorted(vtype.zones.all(), key=lambda z: z.name)
        zone = None
        if zones:
            zone = next((z for z in zones if z.name == pins.get("zone")), None) or zones[0]
            _pin(pins, "zone", zone.name, Code.ZONE_MISMATCH, "zone")
        new.append(_New(vol_name, size, vtype, zone, bool(r.get("delete_on_termination")), boot, device))
    _quota(project, new)
    return VolumePlan(host_id=pins.get("host_id"), zone=pins.get("zone", ""),
                      boot=any(x.boot for x in (*new, *existing)), payload=(tuple(new), tuple(existing)))


def _quota(project, new: list[_New]) -> None:
    if not new:
        return
    by_type: dict = defaultdict(int)
    for n in new:
        by_type[n.volume_type.name] += n.size_gib
    quota_check(scope=project, resource="volumes", requested=len(new))
    for type_name, gib in sorted(by_type.items()):
        quota_check(scope=project, resource=f"volume_gib:{type_name}", requested=gib)
    if len(by_type) > 1:
        quota_check(scope=project, resource="volume_gib", requested=sum(by_type.values()))


def volumes_reserve(*, actor, instance, plan, operation=None) -> None:
    """Compute's create reserve (module doc, 2.), in the create's transaction (the instance is `pending`)."""
    new, existing = plan.payload
    for n in new:
        with unique_conflict(f"A volume named {n.name!r} exists in this project.", code=Code.NAME_TAKEN):
            vol = Volume.objects.create(project=instance.project, name=n.name, size_gib=n.size_gib,
                                        volume_type=n.volume_type, zone=n.zone,
                                        source_image=instance.image if n.boot else None, bootable=n.boot,
                                        delete_on_termination=n.delete_on_termination)
        VolumeAttachment.objects.create(volume=vol, instance=instance, device=n.device, boot=n.boot,
                                        made_by_create=True, status=AttachmentStatus.RESERVED)
        audit_record(actor=actor, action="storage.volume.create", target=vol, after={
            "name": vol.name, "size_gib": vol.size_gib, "volume_type": n.volume_type.name,
            "instance": str(instance.pk), "device": n.device, "boot": n.boot,
            "source_image": instance.image.name if n.boot else None})
    for e in existing:
        vol = Volume.objects.select_for_update(of=("self",)).select_related("volume_type", "zone").get(pk=e.volume.pk)
        _check_existing(instance.project, vol, e.boot)  # again, under the row lock
        multi = vol.volume_type.multi_attach and not e.boot
        before = transition(vol, "attach_multi" if multi else "attach", VOLUME_TRANSITIONS)
        change = (e.delete_on_termination if e.delete_on_termination is not None
                  and e.delete_on_termination != vol.delete_on_termination else None)
        VolumeAttachment.objects.create(volume=vol, instance=instance, device=e.device, boot=e.boot,
                                        status=AttachmentStatus.RESERVED, delete_on_termination=change)
        audit_record(actor=actor, action="storage.volume.attach", target=vol, before={"status": before},
                     after={"status": vol.status, "instance": str(instance.pk), "device": e.device,
                            "boot": e.boot})


def _reserved(instance):
    return (VolumeAttachment.objects.select_for_update().filter(instance_id=instance.pk,
                                                                status=AttachmentStatus.RESERVED)
            .order_by("device"))


def _locked(volume_id) -> Volume:
    return Volume.objects.select_for_update(of=("self",)).select_related(
        "volume_type", "host", "zone", "source_image", "source_snapshot").get(pk=volume_id)


def volumes_prepare(*, instance) -> None:
    """Compute's create and re-create step (module doc, 3. and 5.): runs in the step's transaction holding the
    instance's row lock, once the instance has its host. Every driver call is keyed by the volume id (and
    `pool_ensure` is idempotent), so a retried step (a killed worker) finds what the last try made."""
    _attached_follow(instance)
    for att in _reserved(instance):
        vol = _locked(att.volume_id)
        if vol.status == VolumeStatus.CREATING:
            if vol.volume_type.host_local and vol.host_id is None:
                Volume.objects.filter(pk=vol.pk).update(host=instance.host, zone=instance.host.zone)
                vol = _locked(vol.pk)
            volume_backend_make(vol)
            transition(vol, "attach", VOLUME_TRANSITIONS)
        # the pool as the instance's host sees it (a shared one defined there; one not running started again)
        driver_for(instance.host).pool_ensure(pool_spec(vol.volume_type))
        VolumeAttachment.objects.filter(pk=att.pk).update(status=AttachmentStatus.ATTACHED)
        if att.delete_on_termination is not None:  # the create's change, now that the volume is attached
            Volume.objects.filter(pk=vol.pk).update(delete_on_termination=att.delete_on_termination)
            vol.delete_on_termination = att.delete_on_termination
        volume_settle(vol)


def _attached_follow(instance) -> None:
    """The volumes already attached to a VM being re-created on other capacity (module doc, 5.): the shared pool
    of each shared one is ensured on the instance's new host (a `netfs` pool is mounted there), so the domain
    that `define` makes there opens the same volume path. A host-local volume never gets here on another host:
    it pins the placement to its own (`placement_pins`)."""
    rows = (VolumeAttachment.objects.filter(instance_id=instance.pk, status=AttachmentStatus.ATTACHED,
                                            volume__host__isnull=True)
            .select_related("volume__volume_type").order_by("device"))
    types = {att.volume.volume_type_id: att.volume.volume_type for att in rows}
    for vtype in sorted(types.values(), key=lambda t: t.name):
        driver_for(instance.host).pool_ensure(pool_spec(vtype))


def volumes_abandon(*, instance) -> None:
    """Compute's create on_error, and its delete (module doc, 4.): the instance's domain, and the disks with it,
    are gone. Attachments of other kinds (an attach request's, attached ones of a running instance) are the
    delete hook's (`reconcile.instance_attachments_release`)."""
    from apps.compute.models import Instance

    failed = Instance.objects.filter(pk=instance.pk).values_list("status", flat=True).first() == "error"
    rows = VolumeAttachment.objects.filter(instance_id=instance.pk).order_by("device")
    if not failed:
        rows = rows.filter(status=AttachmentStatus.RESERVED)
    for att in rows.select_for_update():
        if att.status not in (AttachmentStatus.RESERVED, AttachmentStatus.ATTACHED):
            continue  # an attach or detach request's operation is in flight: it settles its own row
        vol = _locked(att.volume_id)
        att.delete()
        if att.status == AttachmentStatus.ATTACHED and att.delete_on_termination is not None:
            # the failed create had changed the flag when it attached the volume: as the tenant left it
            vol.delete_on_termination = not att.delete_on_termination
            Volume.objects.filter(pk=vol.pk).update(delete_on_termination=vol.delete_on_termination)
        _abandon(vol, att)


def _abandon(vol: Volume, att: VolumeAttachment) -> None:
    if vol.status == VolumeStatus.CREATING:  # never made
        if vol.delete_on_termination:
            transition(vol, "abandon", VOLUME_TRANSITIONS)
            op = operation_start(kind=DELETE, target_type=VOLUME_TARGET, target_id=vol.pk, project=vol.project,
                                 actor=None)
            after = {"status": vol.status, "operation": str(op.pk)}
        elif vol.volume_type.host_local and vol.host_id is None:
            transition(vol, "fail", VOLUME_TRANSITIONS, extra={
                "error_code": "instance_create_failed",
                "error_reason": "the instance create that asked for it failed before it had a host"})
            after = {"status": vol.status}
        else:
            op = operation_start(kind=CREATE, target_type=VOLUME_TARGET, target_id=vol.pk, project=vol.project,
                                 actor=None)
            after = {"status": vol.status, "operation": str(op.pk)}
        audit_record(actor=None, action="storage.volume.abandoned", target=vol,
                     before={"status": VolumeStatus.CREATING}, after=after)
        return
    if vol.status in (VolumeStatus.ATTACHING, VolumeStatus.IN_USE):
        before = vol.status
        if VolumeAttachment.objects.filter(volume=vol).exists():
            if vol.status == VolumeStatus.ATTACHING:
                transition(vol, "settle_in_use", VOLUME_TRANSITIONS)
        else:
            transition(vol, "settle_available" if vol.status == VolumeStatus.ATTACHING else "released",
                       VOLUME_TRANSITIONS)
        audit_record(actor=None, action="storage.volume.released", target=vol, before={"status": before},
                     after={"status": vol.status, "instance": str(att.instance_id)})
        if vol.status == VolumeStatus.AVAILABLE and att.made_by_create and vol.delete_on_termination:
            from .volumes import volume_delete

            volume_delete(actor=None, volume=vol)


def placement_pins(instance) -> dict:
    """Compute's placement pins for an instance being placed (created, or re-created on other capacity by
    self-healing) and for the admission check before a re-create: the host of a host-local volume it has (an
    existing one, or one attached before the re-create: a new one is made where the instance is placed) and
    the zone of a zoned one, whatever the attachment's status (reserved by the create or attached since)."""
    pins: dict = {}
    rows = VolumeAttachment.objects.filter(instance_id=instance.pk).select_related("volume__zone")
    for att in rows:
        vol = att.volume
        if vol.host_id is not None:
            pins["host_id"] = vol.host_id
        if vol.zone_id is not None:
            pins["zone"] = vol.zone.name
    return pins
