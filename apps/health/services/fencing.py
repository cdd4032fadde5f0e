"""Fencing a silent host before its VMs are re-created elsewhere (ADR 0218, docs/health.md "Fencing").

A host whose agent went silent (`heartbeat_lost`) may still run its VMs: re-creating them elsewhere could run two
copies of one VM (two writers on a shared volume, two holders of one IP). A classification row naming
`fence_host` with `recreate_vm` therefore opens a **fence** at ingest (`fence_open`) instead of remediations:

- `fences_advance` (beat, every 15 s; rows locked with SKIP LOCKED) sends the BMC a power-off (Redfish
  ``ForceOff``) and reads the power state back on later runs; only ``off`` read back confirms it. The host's
  BMC: its `FenceDevice` (a hypervisor host), else its bare-metal node's BMC.
- confirmed: the host's VMs get their remediations (`vms_move_off`, fenced: an `auto` VM moves at once, as
  there is nothing left to checkpoint on a powered-off host; `propose` waits for approval; `off` stays held).
- not confirmed (no BMC with credentials, the BMC refused, or it did not read back ``off`` within
  `HEALTH_FENCE_CONFIRM_SECONDS`, 120 s): `failed`, the VMs are `held` ("not fenced: ...") and not moved; staff
  who checked the host is off confirm it by hand (`fence_confirm`, audited), which opens the remediations then.

The event's `applied.fence` says where it stands: ``{id, status, reason}``.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.drivers import DriverError, DriverTransientError
from apps.core.errors import InvalidState, ValidationFailed
from apps.inventory.models import Host

from ..drivers.base import POWER_OFF, BmcTarget, FenceDriver
from ..models import FenceDevice, HealthEvent, HostFence
from ..states import OPEN_FENCE, FenceMethod, FenceStatus

log = logging.getLogger("gpucloud.health")
F = FenceStatus


def confirm_window() -> dt.timedelta:
    """How long a power-off may take to read back ``off`` (`HEALTH_FENCE_CONFIRM_SECONDS`, default 120 s)."""
    return dt.timedelta(seconds=getattr(settings, "HEALTH_FENCE_CONFIRM_SECONDS", 120))


def fence_driver() -> FenceDriver:
    """The driver `HEALTH_FENCE_DRIVER` names: `redfish` (default) or `fake`."""
    name = getattr(settings, "HEALTH_FENCE_DRIVER", "redfish")
    if name == "fake":
        from ..drivers.fake import FakeFenceDriver

        return FakeFenceDriver()
    from ..drivers.redfish import RedfishFenceDriver

    return RedfishFenceDriver(timeout_s=float(getattr(settings, "HEALTH_FENCE_BMC_TIMEOUT_S", 10)))


def fence_target(host: Host) -> BmcTarget | None:
    """The BMC that fences `host`: its `FenceDevice`, else its bare-metal node's BMC (with credentials); None when
    it has neither."""
    from apps.baremetal.services.secrets import credentials_decrypt

    dev = FenceDevice.objects.filter(host=host).first()
    if dev is not None:
        creds = credentials_decrypt(dev.credentials_encrypted)
        return BmcTarget(dev.address, creds.get("username", ""), creds.get("password", ""), dev.system_id,
                         dev.verify_tls)
    from apps.baremetal.models import BaremetalNode

    node = BaremetalNode.objects.filter(host=host).exclude(bmc_address="").first()
    if node is not None and node.bmc_credentials_encrypted:
        creds = credentials_decrypt(node.bmc_credentials_encrypted)
        return BmcTarget(node.bmc_address, creds.get("username", ""), creds.get("password", ""),
                         node.bmc_system_id)
    return None


def fence_device_set(*, actor, host: Host, address: str, username: str, password: str, system_id: str = "",
                     verify_tls: bool = True) -> FenceDevice:
    """Staff record (or replace) the BMC that fences hypervisor host `host`; the credentials are stored encrypted.
    400 `invalid_bmc` for an address that is not an http(s) URL. Audited without the credentials."""
    from apps.baremetal.services.secrets import credentials_encrypt

    if not address.startswith(("https://", "http://")):
        raise ValidationFailed("address must be the BMC's http(s) URL.", code="invalid_bmc",
                               errors={"address": ["must start with https:// or http://"]})
    with transaction.atomic():
        dev, created = FenceDevice.objects.update_or_create(
            host=host,
            defaults={"address": address, "system_id": system_id, "verify_tls": verify_tls,
                      "credentials_encrypted": credentials_encrypt({"username": username, "password": password})},
        )
        audit_record(actor=actor, action="health.fence_device.set", target=dev,
                     after={"host": host.name, "address": address, "system_id": system_id,
                            "verify_tls": verify_tls, "created": created})
    return dev


def _record(fence: HostFence) -> None:
    """Mirror the fence's status on its event (`applied.fence`)."""
    event = HealthEvent.objects.select_for_update().get(pk=fence.event_id)
    event.applied["fence"] = {"id": str(fence.pk), "status": fence.status, "reason": fence.reason}
    event.save(update_fields=["applied"])


def fence_open(*, event: HealthEvent) -> HostFence:
    """Open the fence of the event's host (in the ingest's transaction); an open one is returned as it is."""
    fence = HostFence.objects.filter(host_id=event.host_id, status__in=OPEN_FENCE).first()
    if fence is None:
        fence = HostFence.objects.create(host_id=event.host_id, event=event, status=F.PENDING,
                                         deadline_at=now() + confirm_window())
    return fence


def _confirmed(fence: HostFence, *, method: str, actor=None, reason: str = "") -> None:
    from .remediation import vms_move_off

    fence.status, fence.method, fence.confirmed_at = F.CONFIRMED, method, now()
    fence.confirmed_by = actor
    fence.reason = reason[:500]
    fence.save()
    _record(fence)
    audit_record(actor=actor, action="health.fence.confirm", target=fence,
                 after={"host": fence.host.name, "method": method, "reason": fence.reason,
                        "power_state": fence.power_state})
    event = HealthEvent.objects.select_for_update().get(pk=fence.event_id)
    event.applied.update(vms_move_off(event=event, fenced=True))
    event.save(update_fields=["applied"])


def _failed(fence: HostFence, reason: str) -> None:
    from .remediation import remediations_open

    fence.status, fence.reason = F.FAILED, reason[:500]
    fence.save()
    _record(fence)
    audit_record(actor=None, action="health.fence.fail", target=fence,
                 after={"host": fence.host.name, "reason": fence.reason})
    event = HealthEvent.objects.get(pk=fence.event_id)
    held = remediations_open(
        event=event, held_reason=f"not fenced ({fence.reason}): the host may still run the VM, so it is not moved "
                                 "until staff confirm the host is off"
    )
    if held:
        HealthEvent.objects.filter(pk=event.pk).update(
            applied={**HealthEvent.objects.get(pk=event.pk).applied, "remediations": [str(r.pk) for r in held]}
        )


def _step(fence: HostFence, driver: FenceDriver) -> None:
    target = fence_target(fence.host)
    if target is None:
        _failed(fence, "the host has no BMC with credentials")
        return
    fence.bmc_address = target.address
    try:
        if fence.status == F.PENDING:
            fence.attempts += 1
            driver.power_off(target)
            fence.status = F.POWERING_OFF
        fence.power_state = driver.power_state(target)
    except DriverTransientError as exc:
        if now() >= fence.deadline_at:
            _failed(fence, f"the BMC did not answer within {int(confirm_window().total_seconds())} s: {exc}")
        else:
            fence.reason = str(exc)[:500]
            fence.save()
        return
    except DriverError as exc:
        _failed(fence, f"the BMC refused ({exc.code}): {exc}")
        return
    if fence.power_state == POWER_OFF:
        _confirmed(fence, method=FenceMethod.BMC, reason=f"the BMC read the power back {POWER_OFF}")
    elif now() >= fence.deadline_at:
        _failed(fence, f"the BMC did not read the power back off within {int(confirm_window().total_seconds())} s "
                       f"(last: {fence.power_state})")
    else:
        fence.save()


def fences_advance(*, limit: int = 100) -> dict:
    """Beat: move each open fence one step (send the power-off, read the power back), each row in its own
    transaction locked with SKIP LOCKED (so concurrent runs never send it twice). Returns counts
    {confirmed, failed}."""
    driver = fence_driver()
    counts = {"confirmed": 0, "failed": 0}
    for pk in list(HostFence.objects.filter(status__in=OPEN_FENCE).order_by("created_at")
                   .values_list("pk", flat=True)[:limit]):
        with transaction.atomic():
            fence = (HostFence.objects.select_for_update(skip_locked=True, of=("self",))
                     .select_related("host").filter(pk=pk, status__in=OPEN_FENCE).first())
            if fence is None:
                continue
            _step(fence, driver)
            if fence.status in (F.CONFIRMED, F.FAILED):
                counts[fence.status] += 1
    return counts


def fence_confirm(*, actor, fence: HostFence, reason: str) -> HostFence:
    """Staff confirm by hand that the fence's host is powered off (they checked it: the PDU, the BMC's own
    console, someone at the rack): the fence is `confirmed` (`method` manual) and the host's VMs get their
    remediations now. 400 `reason_required` without a reason; 409 `invalid_state` when confirmed already.
    Audited (`health.fence.confirm`)."""
    if not (reason or "").strip():
        raise ValidationFailed("Say how the host was found off.", code="reason_required",
                               errors={"reason": ["required"]})
    with transaction.atomic():
        row = HostFence.objects.select_for_update().select_related("host").get(pk=fence.pk)
        if row.status == F.CONFIRMED:
            raise InvalidState("The host is fenced already.", current_state=row.status,
                               allowed_states=[F.PENDING, F.POWERING_OFF, F.FAILED])
        _confirmed(row, method=FenceMethod.MANUAL, actor=actor, reason=reason.strip())
    return row


__all__ = ["fence_confirm", "fence_device_set", "fence_open", "fence_target", "fences_advance"]
