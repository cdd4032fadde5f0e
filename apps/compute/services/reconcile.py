"""The compute reconciler: compare instances in the database with the domains on each host and repair drift
through transitions.

Per libvirt URI (hosts may share one: the demo fleet uses `test:///default` for every host):
- an instance with an unfinished operation is left alone (its workflow owns it);
- the domain's power state is written to `observed_state` when it changed;
- an `active` instance whose domain is shut off becomes `stopped` (the guest powered off; the GPU stays held);
- a domain that vanished: `observed_state = missing` at once; after `COMPUTE_VANISHED_GRACE_S` the instance
  goes to `error` (code `domain_vanished`), the scrub of its GPUs is queued (`devices_scrub`: they are `dirty`
  until the agent destroyed its MIG GPU instance / deactivated its partition and reset them) and its
  allocations are released;
- a domain we do not know (no instance row, or a deleted one) is reported to staff as an audit event
  `compute.reconcile.unknown_domain` (once an hour per domain), never deleted;
- a stale domain: one of a live instance that now belongs to another host (it was re-created elsewhere,
  `instance.recreate`, while this host did not answer) is removed (`compute.reconcile.stale_domain_removed`),
  so the host coming back never runs a second copy of the VM.
A host whose libvirt does not answer is skipped (reported in the result).
Before all that, the VMs of hosts that rebooted are settled (`host_reboot.hosts_rebooted_reconcile`).
"""
from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from dataclasses import dataclass, field

from django.core.cache import cache
from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.drivers import DriverError
from apps.core.transitions import transition
from apps.inventory.models import Host
from apps.inventory.states import HostState, ProvisioningKind
from apps.operations.selectors import targets_with_unfinished_operations

from .. import conf
from ..drivers.base import PowerState
from ..errors import Code
from ..models import Instance
from ..states import INSTANCE_TRANSITIONS, InstanceStatus
from .devices import devices_scrub
from .host_reboot import hosts_rebooted_reconcile
from .hypervisor import driver_for_uri
from .instances import TARGET
from .placement import instance_allocations_release

log = logging.getLogger("gpucloud.compute.reconcile")
NEEDS_DOMAIN = {InstanceStatus.ACTIVE, InstanceStatus.STOPPED}


@dataclass
class ReconcileReport:
    uris: int = 0
    observed: int = 0
    stopped: int = 0
    missing: int = 0
    errored: int = 0
    unknown: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    stale_removed: list[str] = field(default_factory=list)
    after_reboot: dict = field(default_factory=dict)


def _busy_ids(ids) -> set:
    return targets_with_unfinished_operations(target_type=TARGET, target_ids=ids)


def _report_unknown(uri: str, host_ids: list, info) -> None:
    if not cache.add(f"compute:unknown-domain:{uri}:{info.uuid}", 1, timeout=3600):
        return
    audit_record(actor=None, action="compute.reconcile.unknown_domain", target_type="inventory.host",
                 target_id=str(host_ids[0]), after={"uri": uri, "domain_uuid": str(info.uuid), "name": info.name,
                                                    "power_state": str(info.power_state), "managed": info.managed})


def instance_observe(instance: Instance, power_state: str, *, at: dt.datetime | None = None) -> None:
    """Record the power state a driver reported for `instance` (`observed_state`, a `PowerState` value of the
    provisioner that read it, e.g. libvirt's ``shutoff`` or Ironic's ``power off``) and when (`observed_at`,
    default now). A plain column write, no transition and no audit; the one way another app (bare metal's
    workflows and reconciler) updates these columns. `instance` is updated in memory too."""
    at = at or now()
    Instance.objects.filter(pk=instance.pk).update(observed_state=power_state, observed_at=at)
    instance.observed_state, instance.observed_at = power_state, at


def _vanished(inst: Instance, at: dt.datetime, report: ReconcileReport) -> None:
    if inst.observed_state != PowerState.MISSING:
        instance_observe(inst, PowerState.MISSING, at=at)
        report.missing += 1
        return
    if inst.observed_at and (at - inst.observed_at).total_seconds() < conf.vanished_grace_seconds():
        return
    with transaction.atomic():
        reason = f"the domain vanished from its host (missing since {inst.observed_at.isoformat()})"
        transition(inst, "fail", INSTANCE_TRANSITIONS, extra={"error_code": Code.DOMAIN_VANISHED,
                                                              "error_reason": reason})
        devices_scrub(inst, reason="its domain vanished")
        instance_allocations_release(instance=inst)
        audit_record(actor=None, action="compute.reconcile.domain_vanished", target=inst, after={"reason": reason})
    report.errored += 1


def _sync(inst: Instance, info, at: dt.datetime, report: ReconcileReport) -> None:
    if inst.observed_state != info.power_state:
        instance_observe(inst, info.power_state, at=at)
        report.observed += 1
    if inst.status == InstanceStatus.ACTIVE and info.power_state == PowerState.SHUTOFF:
        with transaction.atomic():
            transition(inst, "sync_stopped", INSTANCE_TRANSITIONS)
            audit_record(actor=None, action="compute.reconcile.sync_stopped", target=inst,
                         after={"observed_state": str(info.power_state)})
        report.stopped += 1


def _reconcile_uri(uri: str, host_ids: list, report: ReconcileReport) -> None:
    try:
        domains = {d.uuid: d for d in driver_for_uri(uri).domain_list()}
    except DriverError as exc:
        report.unreachable.append(uri)
        log.warning("reconcile_unreachable", extra={"uri": uri, "error": str(exc)})
        return
    at = now()
    instances = {i.pk: i for i in Instance.objects.filter(host_id__in=host_ids)}
    busy = _busy_ids(list(instances))
    for pk, inst in instances.items():
        if pk in busy or inst.status == InstanceStatus.DELETED:
            continue
        info = domains.get(pk)
        if info is not None:
            _sync(inst, info, at, report)
        elif inst.status in NEEDS_DOMAIN:
            _vanished(inst, at, report)
    live = {pk for pk, i in instances.items() if i.status != InstanceStatus.DELETED}
    unknown = [u for u in domains if u not in live]
    moved = set(Instance.objects.filter(pk__in=unknown).exclude(status=InstanceStatus.DELETED)
                .exclude(host_id__in=host_ids).values_list("pk", flat=True))
    for domain_uuid in unknown:
        info = domains[domain_uuid]
        if domain_uuid in moved and _remove_stale(uri, host_ids, info):
            report.stale_removed.append(str(domain_uuid))
            continue
        report.unknown.append(str(domain_uuid))
        _report_unknown(uri, host_ids, info)


def _remove_stale(uri: str, host_ids: list, info) -> bool:
    """Remove the domain of an instance that was re-created on another host (True when removed)."""
    try:
        driver_for_uri(uri).domain_delete(info.uuid)
    except DriverError as exc:
        log.warning("reconcile_stale_domain_remove_failed", extra={"uri": uri, "domain": str(info.uuid),
                                                                    "error": str(exc)})
        return False
    audit_record(actor=None, action="compute.reconcile.stale_domain_removed", target_type="inventory.host",
                 target_id=str(host_ids[0]), after={"uri": uri, "domain_uuid": str(info.uuid),
                                                    "power_state": str(info.power_state)})
    return True


def instances_reconcile() -> ReconcileReport:
    """Reconcile every hypervisor's domains with the instance rows. Returns counts of what changed."""
    report = ReconcileReport(after_reboot=hosts_rebooted_reconcile())
    by_uri: dict[str, list] = defaultdict(list)
    for host_id, uri in Host.objects.filter(provisioning_kind=ProvisioningKind.HYPERVISOR).exclude(
            libvirt_uri="").exclude(state=HostState.RETIRED).values_list("id", "libvirt_uri"):
        by_uri[uri].append(host_id)
    for uri, host_ids in sorted(by_uri.items()):
        report.uris += 1
        _reconcile_uri(uri, host_ids, report)
    return report
